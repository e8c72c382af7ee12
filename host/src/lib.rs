//! dsh-host (in progress)
pub mod graph;
pub mod lifecycle;
pub mod manifest;
pub mod resolve;
mod syntax;
#[cfg(test)]
mod test_support;
pub mod validation;
