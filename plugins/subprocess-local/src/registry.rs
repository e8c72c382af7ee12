//! What the provider still owns: live process groups and terminal sessions,
//! so disposal can terminate them even when every handle was dropped (the
//! kit's [`dsh_provider_kit::registry`], holding [`Owned`] things). The
//! registry knows only the trait: groups and terminals implement it, so
//! the [`crate::world::World`] that holds the registry depends on neither.

use std::sync::Arc;

use async_trait::async_trait;
use dsh_plugin_api::Result;

/// Something disposal must stop.
#[async_trait]
pub trait Owned: Send + Sync + 'static {
    /// Ends it (with the provider's kill grace between the polite signal
    /// and SIGKILL) and proves it empty, or fails with `Busy`.
    async fn stop(&self) -> Result<()>;
}

/// The provider's registry. Cheap to clone.
pub type Registry = dsh_provider_kit::registry::Registry<Arc<dyn Owned>>;

/// Where an owned thing keeps its registration, so it can leave the
/// registry once it is proven quiescent.
pub type Membership = dsh_provider_kit::registry::Membership<Arc<dyn Owned>>;
