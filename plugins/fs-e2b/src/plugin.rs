//! [`FsE2bPlugin`]: the `dsh-fs-e2b` plugin that provides [`FsE2b`] over
//! the injected `e2b` owner's sandbox.

use std::sync::Arc;
use std::time::Duration;

use dsh_e2b_gateway::{OwnerTransport, envd_client};
use dsh_plugin_api::OwnerKind;
use dsh_plugin_api::owner::Owner;
use dsh_plugin_api::{
    CreateContext, Descriptor, Error, ErrorKind, Plugin, Result, Service, ServiceKind, async_trait,
};
use schemars::JsonSchema;
use serde::Deserialize;

use crate::provider::FsE2b;

/// How long disposal waits for detached work (an issued rename, staging
/// clean-up) before reporting it unfinished.
const DISPOSE_WAIT: Duration = Duration::from_secs(30);

/// The plugin's configuration: none. Any key is an error naming it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct FsE2bConfig {}

/// Provides `fs` over the sandbox of the injected `e2b` owner, whose
/// connection pool every request goes through. Owns no sandbox: disposal
/// waits for this provider's detached work and leaves the sandbox to the
/// owner, which is disposed after it.
#[derive(Debug)]
pub struct FsE2bPlugin {
    fs: Arc<FsE2b<OwnerTransport>>,
}

impl FsE2bPlugin {
    /// Builds the provider over `owner`'s sandbox. `id` names the manifest
    /// entry in errors.
    pub fn from_owner(id: &str, owner: Arc<dyn Owner>) -> Result<FsE2bPlugin> {
        let info = owner.info();
        let fs = FsE2b::new(envd_client(owner), &info)
            .map_err(|err| Error::config(err.message().to_owned()).with_subject(id))?;
        Ok(FsE2bPlugin { fs: Arc::new(fs) })
    }

    /// The provider this instance serves.
    pub fn fs(&self) -> Arc<FsE2b<OwnerTransport>> {
        self.fs.clone()
    }
}

#[async_trait]
impl Plugin for FsE2bPlugin {
    type Config = FsE2bConfig;

    const DESCRIPTOR: Descriptor = Descriptor {
        name: "dsh-fs-e2b",
        version: env!("CARGO_PKG_VERSION"),
        provides: &[ServiceKind::Fs],
        inject: &[ServiceKind::Owner(OwnerKind::E2B)],
    };

    async fn create(ctx: CreateContext) -> Result<Self> {
        let FsE2bConfig {} = ctx.config()?;
        let owner = ctx.services.owner(OwnerKind::E2B)?;
        FsE2bPlugin::from_owner(&ctx.id, owner)
    }

    fn services(&self) -> Vec<Service> {
        vec![Service::Fs(self.fs.clone())]
    }

    async fn dispose(&self) -> Result<()> {
        if self.fs.quiesce(DISPOSE_WAIT).await {
            self.fs.remove_installed().await
        } else {
            Err(Error::new(
                ErrorKind::Busy,
                format!(
                    "dispose: detached work (a rename or a staging clean-up) did not finish within {} s",
                    DISPOSE_WAIT.as_secs()
                ),
            ))
        }
    }
}
