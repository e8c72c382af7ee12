//! The host's error type.

use dsh_plugin_api::ServiceKind;

use crate::lifecycle::{CreateError, DisposeError};
use crate::manifest::ManifestError;
use crate::validation::ValidationErrors;

/// Everything the host can fail with. Each variant names the operation and
/// its subject (manifest, entry id, service).
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum HostError {
    /// The manifest could not be read or parsed (every problem listed).
    #[error(transparent)]
    Manifest(#[from] ManifestError),
    /// The composition is invalid (every problem listed); nothing was
    /// created.
    #[error(transparent)]
    Invalid(#[from] ValidationErrors),
    /// A plugin failed to create; the ones created before it were disposed.
    /// (Boxed: it is much larger than the other variants.)
    #[error(transparent)]
    Create(Box<CreateError>),
    /// One or more plugins failed to dispose (all were attempted).
    #[error(transparent)]
    Dispose(#[from] DisposeError),
    /// No running plugin provides the service.
    #[error("{operation}: no plugin in this composition provides {service}")]
    ServiceMissing {
        operation: &'static str,
        service: ServiceKind,
    },
    /// Plugins provide the service, but only to other entries (validation
    /// refuses a composition where the served one would be a guess).
    #[error(
        "{operation}: no entry serves {service} ({} provide it to other entries); choose one with `serve: [{service}]` on its entry",
        crate::validation::quote_ids(providers)
    )]
    ServiceNotServed {
        operation: &'static str,
        service: ServiceKind,
        providers: Vec<String>,
    },
    /// No plugin has this id, or it does not provide the service.
    #[error("{operation}: plugin {id:?} does not provide {service}")]
    NotProvidedBy {
        operation: &'static str,
        id: String,
        service: ServiceKind,
    },
    /// The host was disposed.
    #[error("{operation}: the host has been disposed")]
    Disposed { operation: &'static str },
}

impl From<CreateError> for HostError {
    fn from(err: CreateError) -> HostError {
        HostError::Create(Box::new(err))
    }
}

impl HostError {
    /// Whether the error is the configuration's fault (manifest or
    /// composition) rather than a plugin's at run time — the `dsh` program
    /// exits 2 for these.
    pub fn is_config_error(&self) -> bool {
        matches!(self, HostError::Manifest(_) | HostError::Invalid(_))
    }
}
