//! The plugin: descriptor, creation from config, the one service, disposal.

use std::sync::Arc;

use async_trait::async_trait;
use dsh_plugin_api::{CreateContext, Descriptor, Plugin, Result, Service, ServiceKind};

use crate::config::Config;
use crate::provider::LocalSubprocess;

/// `dsh-subprocess-local`: provides `subprocess`, injects nothing.
///
/// Config (strict, every field optional): `cwd` (absolute existing
/// directory, default the host's cwd), `spillDir` (absolute existing
/// directory, default the system temp dir), `killGraceMs` (default 1000).
pub struct SubprocessLocalPlugin {
    provider: LocalSubprocess,
}

impl SubprocessLocalPlugin {
    /// The provider this instance serves.
    pub fn provider(&self) -> &LocalSubprocess {
        &self.provider
    }
}

#[async_trait]
impl Plugin for SubprocessLocalPlugin {
    type Config = Config;

    const DESCRIPTOR: Descriptor = Descriptor {
        name: "dsh-subprocess-local",
        version: env!("CARGO_PKG_VERSION"),
        provides: &[ServiceKind::Subprocess],
        inject: &[],
    };

    async fn create(ctx: CreateContext) -> Result<Self> {
        let config: Config = ctx.config()?;
        let provider =
            LocalSubprocess::new(&config).map_err(|err| err.with_subject(ctx.id.clone()))?;
        Ok(SubprocessLocalPlugin { provider })
    }

    fn services(&self) -> Vec<Service> {
        vec![Service::Subprocess(Arc::new(self.provider.clone()))]
    }

    /// See [`LocalSubprocess::dispose`].
    async fn dispose(&self) -> Result<()> {
        self.provider.dispose().await
    }
}
