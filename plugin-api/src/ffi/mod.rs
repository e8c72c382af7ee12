#![allow(non_local_definitions)] // abi_stable 0.11's #[sabi_trait] expands impls inside a const.
pub mod context;
pub mod e2b;
pub mod error;
pub mod export;
pub mod fs;
pub mod future;
pub mod instance;
pub mod log;
pub mod log_forward;
pub mod log_sink;
pub mod module;
pub mod panic;
pub mod registry;
pub mod runtime;
pub mod service;
pub mod stream;
pub mod subprocess;
