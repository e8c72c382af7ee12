//! dsh-supervisor's integration tests, one binary: the real helper binary's
//! durable commands, its self-checking `probe` and its resident `world`.

mod durable;
mod probe;
mod world;
