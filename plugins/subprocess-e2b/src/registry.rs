//! What a provider still owns — process groups and terminal sessions not
//! yet proven empty — so disposal reaches them even after every handle was
//! dropped (the kit's [`dsh_provider_kit::registry`], holding
//! [`Owned`] things).

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

/// The registry of one provider. Cheap to clone.
pub type Registry = dsh_provider_kit::registry::Registry<Arc<dyn Owned>>;

/// An owned thing's place in the registry.
pub type Membership = dsh_provider_kit::registry::Membership<Arc<dyn Owned>>;
