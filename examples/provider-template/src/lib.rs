//! A dsh provider to start from: a `subprocess` decorator that passes
//! everything through to the provider it wraps and logs each start. Replace
//! the hooks with what your provider changes (`dsh_plugin_api::decorate`),
//! or implement `FsProvider` / `SubprocessProvider` yourself for a provider
//! of your own world.

#![forbid(unsafe_code)]

use std::sync::Arc;

use dsh_plugin_api::decorate::{DecoratedSubprocess, SubprocessHooks};
use dsh_plugin_api::subprocess::SpawnSpec;
use dsh_plugin_api::{
    CreateContext, Descriptor, Plugin, Result, Service, ServiceKind, async_trait,
};
use schemars::JsonSchema;
use serde::Deserialize;

/// The entry's `config`: strict (unknown fields are errors, reported by
/// `dsh check` with every other problem).
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Config {
    /// A label for the log events (default: the entry id).
    pub label: Option<String>,
}

/// What this decorator changes: it logs each start.
pub struct Hooks {
    label: String,
}

#[async_trait]
impl SubprocessHooks for Hooks {
    async fn on_spawn(&self, spec: SpawnSpec) -> Result<SpawnSpec> {
        tracing::info!(label = %self.label, argv = ?spec.argv, "spawn");
        Ok(spec)
    }
}

/// The plugin: injects `subprocess`, provides the decorated one.
pub struct TemplateProvider(Arc<DecoratedSubprocess<Hooks>>);

#[async_trait]
impl Plugin for TemplateProvider {
    type Config = Config;
    const DESCRIPTOR: Descriptor = Descriptor {
        name: "dsh-template-provider", // must equal the package name
        version: env!("CARGO_PKG_VERSION"),
        provides: &[ServiceKind::Subprocess],
        inject: &[ServiceKind::Subprocess],
    };

    async fn create(ctx: CreateContext) -> Result<Self> {
        let config: Config = ctx.config()?;
        let hooks = Hooks {
            label: config.label.unwrap_or_else(|| ctx.id.clone()),
        };
        let inner = ctx.services.subprocess()?;
        Ok(TemplateProvider(Arc::new(DecoratedSubprocess::new(
            inner, hooks,
        ))))
    }

    fn services(&self) -> Vec<Service> {
        vec![Service::Subprocess(self.0.clone())]
    }

    async fn dispose(&self) -> Result<()> {
        Ok(())
    }
}

dsh_plugin_api::export_plugin!(TemplateProvider);
