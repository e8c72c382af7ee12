//! dsh-host (in progress)
pub mod graph;
pub mod manifest;
pub mod resolve;
mod syntax;
pub mod validation;
