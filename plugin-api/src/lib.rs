//! The dsh plugin API.
//!
//! An agent's mutable world — files, commands, terminals — lives behind two
//! seams, [`fs::FsProvider`] and [`subprocess::SubprocessProvider`], served by
//! plugins that a host loads from a manifest. This crate is the contract
//! between them:
//!
//! - the seam traits and their types, as plain async Rust ([`fs`],
//!   [`subprocess`], and [`owner`] for the owner services that hold a
//!   vendor's sandbox — one trait, kinds by name, E2B's among them);
//! - one error type with an open kind set ([`Error`], [`ErrorKind`]);
//! - pull-based byte and text streams ([`stream`]) whose payloads —
//!   [`Bytes`] and [`Text`] — cross the plugin boundary without copies;
//! - the plugin model: [`Plugin`], [`Descriptor`], [`Service`];
//! - [`export_plugin!`], which turns a [`Plugin`] into a loadable library;
//! - [`host`], which loads such libraries and creates instances.
//!
//! Plugin authors implement [`Plugin`] and the seam traits and never touch
//! FFI types; the export layer wraps them into the stable ABI (abi_stable),
//! which stays private to this crate.

pub mod config;
pub mod decorate;
pub mod durable;
pub mod error;
#[cfg(feature = "abi")]
mod ffi;
pub mod fs;
#[cfg(feature = "abi")]
pub mod host;
pub mod owner;
pub mod plugin;
pub mod stream;
pub mod subprocess;
pub mod text;

pub use async_trait::async_trait;
/// The byte payload of the seams (streams, writes, snapshots): re-exported
/// so plugins need not depend on `bytes` themselves. `Bytes` itself never
/// crosses the ABI (its glue does), so host and plugins need not agree on a
/// `bytes` version.
pub use bytes::Bytes;
pub use config::{FieldError, NoConfig};
pub use error::{Error, ErrorKind, Result};
pub use owner::OwnerKind;
pub use plugin::{CreateContext, Descriptor, Injected, Plugin, Service, ServiceKind};
/// The derive every config type needs (`#[derive(Deserialize, JsonSchema)]`):
/// [`Plugin::Config`] is validated against the schema derived from it.
pub use schemars::JsonSchema;
pub use text::Text;

/// The plugin API version. A host loads only libraries built against the
/// same version. Bump it with every change to the ABI layer that an older
/// host or plugin cannot handle (a changed type layout, a new required
/// method, a changed meaning); abi_stable's layout check backs it up for
/// layout changes that were missed.
pub const API_VERSION: u32 = 6;

/// Exports a [`Plugin`] from a `cdylib` so a dsh host can load it.
///
/// ```no_run
/// use std::sync::Arc;
///
/// use dsh_plugin_api::owner::{DaemonRequest, DaemonResponse, Owner, SandboxInfo};
/// use dsh_plugin_api::{
///     CreateContext, Descriptor, Error, OwnerKind, Plugin, Result, Service, ServiceKind, async_trait,
/// };
///
/// struct NoSandbox;
///
/// #[async_trait]
/// impl Owner for NoSandbox {
///     fn info(&self) -> SandboxInfo {
///         SandboxInfo {
///             sandbox_id: "none".into(),
///             template_id: "none".into(),
///             daemon_version: "0".into(),
///             cwd: "/".into(),
///             runtime_root: "/.dsh-e2b".into(),
///         }
///     }
///     async fn daemon(&self, _: DaemonRequest) -> Result<DaemonResponse> {
///         Err(Error::unavailable("daemon: this owner has no sandbox"))
///     }
///     async fn alive(&self) -> Result<bool> {
///         Ok(false)
///     }
/// }
///
/// struct MyPlugin(Arc<NoSandbox>);
///
/// #[async_trait]
/// impl Plugin for MyPlugin {
///     type Config = dsh_plugin_api::NoConfig;
///     const DESCRIPTOR: Descriptor = Descriptor {
///         name: "my-owner",
///         version: "0.1.0",
///         provides: &[ServiceKind::Owner(OwnerKind::E2B)],
///         inject: &[],
///     };
///     async fn create(_ctx: CreateContext) -> Result<Self> {
///         Ok(MyPlugin(Arc::new(NoSandbox)))
///     }
///     fn services(&self) -> Vec<Service> {
///         vec![Service::Owner(OwnerKind::E2B, self.0.clone())]
///     }
///     async fn dispose(&self) -> Result<()> {
///         Ok(())
///     }
/// }
///
/// dsh_plugin_api::export_plugin!(MyPlugin);
/// # fn main() {}
/// ```
///
/// Use it once, at the crate root of a crate with
/// `crate-type = ["cdylib", "rlib"]` and an explicit `[lib] name`. It emits
/// two symbols named after the crate (so several plugin crates can still be
/// linked into one program as rlibs): the plugin API version and the
/// library header through which the host finds the root module. The root
/// module creates each instance on a tokio runtime of its own and wraps the
/// plugin's services, futures and streams for the ABI, with every entry
/// point guarded against panics.
///
/// Without the crate's `abi` feature (on by default) there is no ABI to
/// export through and it expands to nothing: a crate that is a plugin and
/// also a library of engines (dsh-fs-local, linked into the sandbox helper)
/// builds as the latter alone.
#[cfg(feature = "abi")]
#[macro_export]
macro_rules! export_plugin {
    ($plugin:ty $(,)?) => {
        // The literals match `API_VERSION_SYMBOL_PREFIX` and
        // `HEADER_SYMBOL_PREFIX` in the crate's `ffi::export`.
        #[doc(hidden)]
        #[unsafe(export_name = concat!("dsh_plugin_api_version__", env!("CARGO_CRATE_NAME")))]
        pub static __DSH_PLUGIN_API_VERSION: u32 = $crate::API_VERSION;

        #[doc(hidden)]
        #[unsafe(export_name = concat!("dsh_plugin_header__", env!("CARGO_CRATE_NAME")))]
        pub static __DSH_PLUGIN_HEADER: $crate::__export::LibHeader =
            $crate::__export::lib_header::<$plugin>();
    };
}

/// Without the `abi` feature there is no ABI to export a plugin through:
/// expands to nothing.
#[cfg(not(feature = "abi"))]
#[macro_export]
macro_rules! export_plugin {
    ($plugin:ty $(,)?) => {};
}

/// What [`export_plugin!`] expands to refers to. Not public API.
#[cfg(feature = "abi")]
#[doc(hidden)]
pub mod __export {
    pub use crate::ffi::export::lib_header;
    pub use abi_stable::library::LibHeader;
}
