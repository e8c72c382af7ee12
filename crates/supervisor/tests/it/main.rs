//! dsh-supervisor's integration tests, one binary: the real helper binary's
//! durable commands and its self-checking `probe`.

mod durable;
mod probe;
