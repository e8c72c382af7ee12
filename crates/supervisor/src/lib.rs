//! The wire between `dsh-subprocess-e2b` (on the host) and `dsh-supervisor`
//! (its helper in the sandbox, this crate's binary): one library both sides
//! compile, so they cannot disagree about it. See [`wire`].

pub mod ambient;
pub mod envd_entry;
pub mod wire;
pub mod world;
