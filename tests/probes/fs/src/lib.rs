//! Test-only probe plugin `dsh-probe-fs`: provides an in-memory `fs` (see
//! `dsh_probe_common::memory_fs`) whose cwd is the injected `e2b` owner's
//! cwd, created at create.

#![forbid(unsafe_code)]

use std::sync::Arc;

use dsh_plugin_api::OwnerKind;
use dsh_plugin_api::{
    CreateContext, Descriptor, Plugin, Result, Service, ServiceKind, async_trait,
};
use dsh_probe_common::memory_fs::MemoryFs;
use dsh_probe_common::{Counters, Lifecycle};

/// The probe.
pub struct ProbeFs {
    lifecycle: Lifecycle,
    fs: Arc<MemoryFs>,
}

#[async_trait]
impl Plugin for ProbeFs {
    type Config = dsh_probe_common::config::ProbeConfig;

    const DESCRIPTOR: Descriptor = Descriptor {
        name: "dsh-probe-fs",
        version: env!("CARGO_PKG_VERSION"),
        provides: &[ServiceKind::Fs],
        inject: &[ServiceKind::Owner(OwnerKind::E2B)],
    };

    async fn create(ctx: CreateContext) -> Result<Self> {
        let cwd = ctx.services.owner(OwnerKind::E2B)?.info().cwd;
        let lifecycle = Lifecycle::start(&ctx, Self::DESCRIPTOR.name).await?;
        let fs = Arc::new(MemoryFs::new(&cwd, Arc::new(Counters::default())));
        Ok(ProbeFs { lifecycle, fs })
    }

    fn services(&self) -> Vec<Service> {
        vec![Service::Fs(self.fs.clone())]
    }

    async fn dispose(&self) -> Result<()> {
        self.lifecycle.dispose().await
    }
}

dsh_plugin_api::export_plugin!(ProbeFs);
