//! The dsh host: turns a manifest into a running execution world.
//!
//! A composition is a manifest ([`manifest`], TOML or YAML) naming plugin
//! libraries ([`resolve`] finds them). Before anything is created the host
//! opens every library, reads its descriptor and validates the whole graph
//! ([`validation`]) — unknown keys, duplicate ids, missing or
//! ambiguous providers, bad bindings, cycles, libraries that are not dsh
//! plugins or were built against another API — reporting every problem
//! with its entry and line. A valid [`Composition`] then starts
//! ([`Composition::start`]): plugins are created in dependency order, each receiving
//! exactly the services it declared; a failed create rolls back what was
//! created; disposal runs in exact reverse order and aggregates failures.
//!
//! ```no_run
//! # async fn demo() -> Result<(), dsh_host::HostError> {
//! let host = dsh_host::Host::embedded_local().await?;
//! let fs = host.fs()?;
//! let meta = fs.stat("/etc/hostname").await;
//! # let _ = meta;
//! host.dispose().await?;
//! # Ok(()) }
//! ```
//!
//! [`signals`] runs the same orderly disposal on SIGINT/SIGTERM/SIGHUP/SIGQUIT for
//! embedders who opt in. The `dsh` program (the `dsh-cli` crate) is the
//! command-line face of the same API.
//!
//! Runtime: the async API runs on the caller's tokio runtime (the signal
//! helpers need its I/O driver); each plugin runs its own work on its own
//! runtime, so plugin futures may be awaited from any runtime.

#![forbid(unsafe_code)]

pub mod composition;
mod dlopen;
pub mod embedded;
pub mod error;
mod graph;
pub mod host;
mod lifecycle;
mod loader;
pub mod manifest;
pub mod resolve;
pub mod signals;
#[cfg(test)]
mod test_support;
pub mod validation;

pub use composition::{Composition, InjectedFrom, PluginInfo, Started};
pub use error::HostError;
pub use host::Host;
pub use lifecycle::{CreateError, DisposeError, DisposeFailure};
pub use loader::PluginDescriptor;
pub use manifest::{Entry, EntryLabel, Manifest, ManifestError, ManifestFormat};
pub use resolve::SearchPath;
pub use signals::{ShutdownSignal, ShutdownSignals, dispose_on_signal};
pub use validation::{IdList, ValidationError, ValidationErrors};
