//! Test-only probe plugin `dsh-probe-e2b`: provides a fake `e2b` owner
//! (see `dsh_probe_common::fake_owner`), injects nothing.

#![forbid(unsafe_code)]

use std::sync::Arc;

use dsh_plugin_api::OwnerKind;
use dsh_plugin_api::{
    CreateContext, Descriptor, Plugin, Result, Service, ServiceKind, async_trait,
};
use dsh_probe_common::fake_owner::FakeOwner;
use dsh_probe_common::{Counters, Lifecycle};

/// The probe.
pub struct ProbeE2b {
    lifecycle: Lifecycle,
    owner: Arc<FakeOwner>,
}

#[async_trait]
impl Plugin for ProbeE2b {
    type Config = dsh_probe_common::config::ProbeConfig;

    const DESCRIPTOR: Descriptor = Descriptor {
        name: "dsh-probe-e2b",
        version: env!("CARGO_PKG_VERSION"),
        provides: &[ServiceKind::Owner(OwnerKind::E2B)],
        inject: &[],
    };

    async fn create(ctx: CreateContext) -> Result<Self> {
        let lifecycle = Lifecycle::start(&ctx, Self::DESCRIPTOR.name).await?;
        let owner = Arc::new(FakeOwner::new(&ctx.id, Arc::new(Counters::default())));
        Ok(ProbeE2b { lifecycle, owner })
    }

    fn services(&self) -> Vec<Service> {
        vec![Service::Owner(OwnerKind::E2B, self.owner.clone())]
    }

    async fn dispose(&self) -> Result<()> {
        self.owner.close();
        self.lifecycle.dispose().await
    }
}

dsh_plugin_api::export_plugin!(ProbeE2b);
