//! Test-only probe plugin `dsh-probe-subprocess`: provides a fake
//! `subprocess` world (see `dsh_probe_common::fake_subprocess`) whose `fs`
//! and `e2b` programs call the injected `fs` and `e2b` services.

#![forbid(unsafe_code)]

use std::sync::Arc;

use dsh_plugin_api::OwnerKind;
use dsh_plugin_api::{
    CreateContext, Descriptor, Plugin, Result, Service, ServiceKind, async_trait,
};
use dsh_probe_common::fake_process::World;
use dsh_probe_common::fake_subprocess::FakeSubprocess;
use dsh_probe_common::{Counters, Lifecycle};

/// The probe.
pub struct ProbeSubprocess {
    lifecycle: Lifecycle,
    subprocess: Arc<FakeSubprocess>,
}

#[async_trait]
impl Plugin for ProbeSubprocess {
    type Config = dsh_probe_common::config::ProbeConfig;

    const DESCRIPTOR: Descriptor = Descriptor {
        name: "dsh-probe-subprocess",
        version: env!("CARGO_PKG_VERSION"),
        provides: &[ServiceKind::Subprocess],
        inject: &[ServiceKind::Owner(OwnerKind::E2B), ServiceKind::Fs],
    };

    async fn create(ctx: CreateContext) -> Result<Self> {
        let world = World {
            counters: Arc::new(Counters::default()),
            fs: Some(ctx.services.fs()?),
            e2b: Some(ctx.services.owner(OwnerKind::E2B)?),
        };
        let lifecycle = Lifecycle::start(&ctx, Self::DESCRIPTOR.name).await?;
        Ok(ProbeSubprocess {
            lifecycle,
            subprocess: Arc::new(FakeSubprocess::new(world)),
        })
    }

    fn services(&self) -> Vec<Service> {
        vec![Service::Subprocess(self.subprocess.clone())]
    }

    async fn dispose(&self) -> Result<()> {
        self.subprocess.close();
        self.lifecycle.dispose().await
    }
}

dsh_plugin_api::export_plugin!(ProbeSubprocess);
