//! The host side of the plugin ABI: loading plugin libraries, reading their
//! descriptors and creating and disposing instances, with no abi_stable type
//! in sight.
//!
//! ```no_run
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! use dsh_plugin_api::host::{CreateRequest, PluginLibrary};
//!
//! let library = PluginLibrary::load("target/debug/libdsh_fs_local.so".as_ref())?;
//! println!("{} provides {:?}", library.descriptor().name, library.descriptor().provides);
//! let instance = library
//!     .create(CreateRequest {
//!         id: "fs".into(),
//!         config: serde_json::Value::Null,
//!         services: Vec::new(),
//!     })
//!     .await?;
//! // … use instance.services() …
//! instance.dispose().await?;
//! # Ok(()) }
//! ```
//!
//! Log records of loaded plugins arrive in the host's `tracing` as events
//! with the plugin's own target and level plus a `dsh.plugin` field naming
//! the instance; the host's subscriber filters them like its own. Install
//! the host subscriber before loading libraries, or call
//! [`refresh_log_filters`] afterwards.

mod elf;
mod error;
mod instance;
mod library;

pub use crate::API_VERSION;
pub use crate::ffi::log_sink::PLUGIN_FIELD as LOG_PLUGIN_FIELD;
pub use error::LoadError;
pub use instance::{CreateRequest, PluginInstance};
pub use library::{LoadedDescriptor, PluginLibrary, library_file_name, refresh_log_filters};
