//! dsh-host (in progress)
pub mod composition;
mod dlopen;
pub mod embedded;
pub mod error;
pub mod graph;
pub mod host;
pub mod lifecycle;
pub mod loader;
pub mod manifest;
pub mod resolve;
pub mod signals;
mod syntax;
#[cfg(test)]
mod test_support;
pub mod validation;
