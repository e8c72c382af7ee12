//! A third-party-style dsh provider: a read-only `fs`.
//!
//! `dsh-example-fs-readonly` injects an `fs` service and provides an `fs`
//! service that passes every read (`resolve`, `contains`, `stat`, `lstat`,
//! `list`, `read_text`, `stream_text`, `read_bytes`) through to it and
//! refuses every mutation (`write`, `edit`, `mkdir`, `remove`, `rename`)
//! with `PermissionDenied`, naming the operation, the instance and the path
//! — before the wrapped provider is touched.
//!
//! It is built only against `dsh-plugin-api`: [`ReadOnly`] implements the
//! one hook it changes (`on_write`; [`DecoratedFs`] forwards everything
//! else), [`FsReadonly`] is a plain [`Plugin`], and one `export_plugin!`
//! line makes the crate loadable.
//!
//! ```yaml
//! plugins:
//!   - id: local
//!     name: dsh-fs-local
//!   - id: fs
//!     name: dsh-example-fs-readonly
//!     inject: { fs: local }
//! ```

#![forbid(unsafe_code)]

use std::sync::Arc;

use dsh_plugin_api::decorate::{DecoratedFs, FsCall, FsHooks};
use dsh_plugin_api::fs::FsProvider;
use dsh_plugin_api::{
    CreateContext, Descriptor, Error, ErrorKind, Plugin, Result, Service, ServiceKind, async_trait,
};
use schemars::JsonSchema;
use serde::Deserialize;

/// The plugin's config: none. An empty (or absent) `config` is the only
/// valid one; any field is refused, naming it.
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Config {}

/// The hooks of a read-only `fs`: reads pass, every change is refused.
pub struct ReadOnly {
    /// The instance id, for error messages.
    id: String,
}

#[async_trait]
impl FsHooks for ReadOnly {
    async fn on_write(&self, call: FsCall<'_>) -> Result<()> {
        Err(Error::new(
            ErrorKind::PermissionDenied,
            format!("{}: `{}` is a read-only fs", call.operation, self.id),
        )
        .with_subject(call.path))
    }
}

/// An `fs` that reads through `inner` and refuses to change anything.
pub type ReadOnlyFs = DecoratedFs<ReadOnly>;

/// Wraps `inner`; `id` names this instance in refusals.
pub fn read_only(inner: Arc<dyn FsProvider>, id: impl Into<String>) -> ReadOnlyFs {
    DecoratedFs::new(inner, ReadOnly { id: id.into() })
}

/// The plugin: one [`ReadOnlyFs`] over the injected `fs`.
pub struct FsReadonly {
    fs: Arc<ReadOnlyFs>,
}

#[async_trait]
impl Plugin for FsReadonly {
    type Config = Config;

    const DESCRIPTOR: Descriptor = Descriptor {
        name: "dsh-example-fs-readonly",
        version: env!("CARGO_PKG_VERSION"),
        provides: &[ServiceKind::Fs],
        inject: &[ServiceKind::Fs],
    };

    async fn create(ctx: CreateContext) -> Result<Self> {
        let Config {} = ctx.config()?;
        let inner = ctx.services.fs()?;
        Ok(FsReadonly {
            fs: Arc::new(read_only(inner, ctx.id)),
        })
    }

    fn services(&self) -> Vec<Service> {
        vec![Service::Fs(self.fs.clone())]
    }

    async fn dispose(&self) -> Result<()> {
        // Nothing of its own to release: the wrapped fs belongs to its
        // provider, which the host disposes after this plugin.
        Ok(())
    }
}

dsh_plugin_api::export_plugin!(FsReadonly);
