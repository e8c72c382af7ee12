//! A created plugin instance, as the host holds it.

use crate::error::Result;
use crate::ffi::error::lift;
use crate::ffi::instance::FfiInstanceObject;
use crate::plugin::Service;

/// What [`super::PluginLibrary::create`] needs.
#[derive(Debug, Clone)]
pub struct CreateRequest {
    /// The manifest entry's id; also names the instance's runtime threads
    /// and labels its log records.
    pub id: String,
    /// The entry's config subtree (`null` when absent).
    pub config: serde_json::Value,
    /// Exactly the services the descriptor injects, one per kind. Proxies
    /// obtained from other instances are handed on as the FFI objects they
    /// stand for (no double wrapping).
    pub services: Vec<Service>,
}

/// A live plugin instance.
///
/// Its services are plain-trait proxies; calls on them run on the plugin's
/// side with its runtime entered and may be made from any thread. After
/// [`PluginInstance::dispose`], calls on services still held fail with
/// [`crate::ErrorKind::Closed`]. Dropping an instance without disposing it
/// skips the plugin's dispose and stops its runtime in the background.
pub struct PluginInstance {
    id: String,
    services: Vec<Service>,
    object: FfiInstanceObject,
}

impl std::fmt::Debug for PluginInstance {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PluginInstance")
            .field("id", &self.id)
            .field("services", &self.services)
            .finish_non_exhaustive()
    }
}

impl PluginInstance {
    pub(super) fn new(
        id: String,
        services: Vec<Service>,
        object: FfiInstanceObject,
    ) -> PluginInstance {
        PluginInstance {
            id,
            services,
            object,
        }
    }

    /// The manifest entry's id.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// The services the instance provides, one per kind in its descriptor's
    /// `provides`, as plain-trait proxies.
    pub fn services(&self) -> &[Service] {
        &self.services
    }

    /// Disposes the instance (runs the plugin's dispose on its runtime),
    /// then stops its runtime; resolves once both are done, with the
    /// dispose's result. Consumes the instance: it is disposed exactly
    /// once. Dropping the future stops waiting only: disposal completes on
    /// the plugin's side regardless.
    pub async fn dispose(self) -> Result<()> {
        let PluginInstance {
            services, object, ..
        } = self;
        // The host's own handles go first, so the plugin's objects are
        // released as far as this side is concerned.
        drop(services);
        lift(object.dispose().await)
    }
}
