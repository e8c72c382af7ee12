//! dsh-host (in progress)
pub mod manifest;
pub mod resolve;
mod syntax;
