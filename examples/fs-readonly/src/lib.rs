//! A third-party-style dsh provider: a read-only `fs`.
//!
//! `dsh-example-fs-readonly` injects an `fs` service and provides an `fs`
//! service that passes every read (`resolve`, `contains`, `stat`, `lstat`,
//! `list`, `read_text`, `stream_text`, `read_bytes`) through to it and
//! refuses every mutation (`write`, `edit`, `mkdir`, `remove`, `rename`)
//! with `PermissionDenied`, naming the operation, the instance and the path
//! — before the wrapped provider is touched.
//!
//! It is built only against `dsh-plugin-api`: [`ReadOnlyFs`] is plain async
//! Rust over the plain `FsProvider` trait, [`FsReadonly`] is a plain
//! [`Plugin`], and one `export_plugin!` line makes the crate loadable.
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

use dsh_plugin_api::Bytes;
use dsh_plugin_api::fs::{
    DirEntry, Edit, EditOutcome, FsProvider, Metadata, ReadStream, Resolved, TextFile, Version,
    WriteGuard,
};
use dsh_plugin_api::stream::{ByteStream, TextStream};
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

/// An `fs` that reads through `inner` and refuses to change anything.
pub struct ReadOnlyFs {
    inner: Arc<dyn FsProvider>,
    /// The instance id, for error messages.
    id: String,
}

impl ReadOnlyFs {
    /// Wraps `inner`; `id` names this instance in refusals.
    pub fn new(inner: Arc<dyn FsProvider>, id: impl Into<String>) -> ReadOnlyFs {
        ReadOnlyFs {
            inner,
            id: id.into(),
        }
    }

    fn refuse<T>(&self, operation: &str, path: &str) -> Result<T> {
        Err(Error::new(
            ErrorKind::PermissionDenied,
            format!("{operation}: `{}` is a read-only fs", self.id),
        )
        .with_subject(path))
    }
}

#[async_trait]
impl FsProvider for ReadOnlyFs {
    async fn resolve(&self, path: &str, cwd: Option<&str>) -> Result<Resolved> {
        self.inner.resolve(path, cwd).await
    }

    async fn contains(&self, root: &str, target: &str) -> Result<bool> {
        self.inner.contains(root, target).await
    }

    async fn stat(&self, path: &str) -> Result<Metadata> {
        self.inner.stat(path).await
    }

    async fn lstat(&self, path: &str) -> Result<Metadata> {
        self.inner.lstat(path).await
    }

    async fn list(&self, dir: &str) -> Result<Vec<DirEntry>> {
        self.inner.list(dir).await
    }

    async fn read_text(&self, path: &str) -> Result<TextFile> {
        self.inner.read_text(path).await
    }

    async fn stream_text(&self, path: &str) -> Result<ReadStream<TextStream>> {
        self.inner.stream_text(path).await
    }

    async fn read_bytes(&self, path: &str) -> Result<ReadStream<ByteStream>> {
        self.inner.read_bytes(path).await
    }

    async fn write(&self, path: &str, _content: Bytes, _guard: WriteGuard) -> Result<Version> {
        self.refuse("write", path)
    }

    async fn write_stream(
        &self,
        path: &str,
        _content: ByteStream,
        _guard: WriteGuard,
    ) -> Result<Version> {
        self.refuse("write_stream", path)
    }

    async fn edit(&self, path: &str, _edits: Vec<Edit>, _guard: WriteGuard) -> Result<EditOutcome> {
        self.refuse("edit", path)
    }

    async fn mkdir(&self, path: &str) -> Result<()> {
        self.refuse("mkdir", path)
    }

    async fn remove(&self, path: &str) -> Result<bool> {
        self.refuse("remove", path)
    }

    async fn rename(&self, from: &str, _to: &str) -> Result<()> {
        self.refuse("rename", from)
    }
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
            fs: Arc::new(ReadOnlyFs::new(inner, ctx.id)),
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
