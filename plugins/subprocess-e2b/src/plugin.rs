//! The plugin: descriptor, creation over the injected owner, the one
//! service, disposal.

use std::sync::Arc;

use async_trait::async_trait;
use dsh_e2b_gateway::{OwnerTransport, envd_client};
use dsh_plugin_api::OwnerKind;
use dsh_plugin_api::{CreateContext, Descriptor, Plugin, Result, Service, ServiceKind};

use crate::config::Config;
use crate::liveness::OwnerLiveness;
use crate::provider::E2bSubprocess;

/// `dsh-subprocess-e2b`: provides `subprocess`, injects `e2b`.
///
/// Config (strict, every field optional): `killGraceMs` (default 1000),
/// `user` (the sandbox user, default `user`), `spillDir` (default `/tmp`).
pub struct SubprocessE2bPlugin {
    provider: E2bSubprocess<OwnerTransport>,
}

impl SubprocessE2bPlugin {
    /// The provider this instance serves.
    pub fn provider(&self) -> &E2bSubprocess<OwnerTransport> {
        &self.provider
    }
}

#[async_trait]
impl Plugin for SubprocessE2bPlugin {
    type Config = Config;

    const DESCRIPTOR: Descriptor = Descriptor {
        name: "dsh-subprocess-e2b",
        version: env!("CARGO_PKG_VERSION"),
        provides: &[ServiceKind::Subprocess],
        inject: &[ServiceKind::Owner(OwnerKind::E2B)],
    };

    /// Binds to the owner's sandbox; nothing is sent to it until the first
    /// command.
    async fn create(ctx: CreateContext) -> Result<Self> {
        let config: Config = ctx.config()?;
        let owner = ctx.services.owner(OwnerKind::E2B)?;
        let info = owner.info();
        let provider = E2bSubprocess::new(
            envd_client(Arc::clone(&owner)),
            &info,
            Arc::new(OwnerLiveness::new(owner)),
            &config,
        )
        .map_err(|err| err.with_subject(ctx.id.clone()))?;
        Ok(SubprocessE2bPlugin { provider })
    }

    fn services(&self) -> Vec<Service> {
        vec![Service::Subprocess(Arc::new(self.provider.clone()))]
    }

    /// See [`E2bSubprocess::dispose`]; runs before the owner disposes.
    async fn dispose(&self) -> Result<()> {
        self.provider.dispose().await
    }
}
