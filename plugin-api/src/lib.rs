//! The dsh plugin API.
//!
//! An agent's mutable world — files, commands, terminals — lives behind two
//! seams, [`fs::FsProvider`] and [`subprocess::SubprocessProvider`], served by
//! plugins that a host loads from a manifest. This crate is the contract
//! between them:
//!
//! - the seam traits and their types, as plain async Rust ([`fs`],
//!   [`subprocess`], [`e2b`] for the E2B owner service);
//! - one error type with an open kind set ([`Error`], [`ErrorKind`]);
//! - pull-based byte and text streams ([`stream`]);
//! - the plugin model: [`Plugin`], [`Descriptor`], [`Service`].
//!
//! Plugin authors implement [`Plugin`] and the seam traits and never touch
//! FFI types; the export layer wraps them into the stable ABI.

pub mod e2b;
pub mod error;
pub mod fs;
pub mod plugin;
pub mod stream;
pub mod subprocess;

pub use async_trait::async_trait;
pub use error::{Error, ErrorKind, Result};
pub use plugin::{CreateContext, Descriptor, Injected, Plugin, Service, ServiceKind};
