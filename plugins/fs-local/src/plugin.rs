//! [`FsLocalPlugin`]: the `dsh-fs-local` plugin that provides [`FsLocal`].

use std::path::Path;
use std::sync::Arc;

use dsh_plugin_api::{
    CreateContext, Descriptor, Error, Plugin, Result, Service, ServiceKind, async_trait,
};
use schemars::JsonSchema;
use serde::Deserialize;

use crate::provider::FsLocal;

/// The plugin's configuration (its manifest entry's `config`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct FsLocalConfig {
    /// The world's cwd: an absolute path to an existing directory. Default:
    /// the host process's current directory.
    #[serde(default)]
    pub cwd: Option<String>,
}

/// Provides `fs` on the host; injects nothing. Holds no resources beyond
/// the provider itself, so disposal only drops it.
#[derive(Debug)]
pub struct FsLocalPlugin {
    fs: Arc<FsLocal>,
}

impl FsLocalPlugin {
    /// Builds the plugin from a parsed configuration (`Config` errors name
    /// the field and the plugin id).
    pub fn from_config(id: &str, config: FsLocalConfig) -> Result<FsLocalPlugin> {
        let fs = match config.cwd {
            None => FsLocal::from_process_cwd(),
            Some(cwd) => {
                check_cwd(&cwd).map_err(|why| {
                    Error::config(format!("config.cwd: {cwd:?} {why}")).with_subject(id)
                })?;
                FsLocal::new(cwd)
            }
        }
        .map_err(|err| Error::config(format!("config.cwd: {}", err.message())).with_subject(id))?;
        Ok(FsLocalPlugin { fs: Arc::new(fs) })
    }

    /// The provider this instance serves.
    pub fn fs(&self) -> Arc<FsLocal> {
        self.fs.clone()
    }
}

/// Why `cwd` cannot be the world's cwd, if it cannot.
fn check_cwd(cwd: &str) -> std::result::Result<(), String> {
    if let Some(problem) = dsh_provider_kit::paths::cwd_problem(cwd) {
        return Err(problem.into());
    }
    match std::fs::metadata(Path::new(cwd)) {
        Ok(meta) if meta.is_dir() => Ok(()),
        Ok(_) => Err("is not a directory".into()),
        Err(err) => Err(format!("cannot be used: {err}")),
    }
}

#[async_trait]
impl Plugin for FsLocalPlugin {
    type Config = FsLocalConfig;

    const DESCRIPTOR: Descriptor = Descriptor {
        name: "dsh-fs-local",
        version: env!("CARGO_PKG_VERSION"),
        provides: &[ServiceKind::Fs],
        inject: &[],
    };

    async fn create(ctx: CreateContext) -> Result<Self> {
        let config: FsLocalConfig = ctx.config()?;
        FsLocalPlugin::from_config(&ctx.id, config)
    }

    fn services(&self) -> Vec<Service> {
        vec![Service::Fs(self.fs.clone())]
    }

    async fn dispose(&self) -> Result<()> {
        Ok(())
    }
}
