//! Durable commands: started by `durable-start`, they outlive the process
//! that started them (a detached supervisor owns them), their output is
//! retained in a state directory, and a later caller lists them, follows
//! their output from any retained offset, learns their true end,
//! terminates and forgets them. The same subcommands serve the E2B
//! provider (the helper as root, the state directory root's) and the
//! local one (the helper as the user): the state directory is always an
//! argument, and must be private to the helper's effective uid.

pub mod follow;
pub mod hold;
pub mod manage;
pub mod retain;
pub mod start;
pub mod store;
pub mod supervise;
