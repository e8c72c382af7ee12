//! [`FsHooks`] and [`DecoratedFs`]: an `fs` decorator's points of action.
//!
//! - [`FsHooks::on_read`] sees every call that reads the world (`resolve`,
//!   `contains`, `stat`, `lstat`, `list`, `read_text`, `stream_text`,
//!   `read_bytes`) before the wrapped provider does — `resolve` through
//!   [`FsHooks::on_resolve`], which also sees the caller's `cwd` and by
//!   default hands the call on to `on_read`;
//! - [`FsHooks::on_write`] sees every call that changes it (`write`,
//!   `write_stream`, `edit`, `mkdir`, `remove`, `rename`);
//!
//! either may refuse the call: its error reaches the caller and the wrapped
//! provider is not called. [`FsHooks::after_write`] sees how each change
//! ended, and [`FsHooks::filter_list`] what a `list` answered, before the
//! caller does (a confining decorator drops entries it hides). Everything
//! else passes through unchanged.

use std::sync::Arc;

use async_trait::async_trait;
use bytes::Bytes;

use crate::error::{Error, Result};
use crate::fs::{
    DirEntry, Edit, EditOutcome, FsProvider, Metadata, ReadStream, Resolved, TextFile, Version,
    WriteGuard,
};
use crate::stream::{ByteStream, TextStream};

/// One call as the hooks see it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FsCall<'a> {
    /// The seam method (`"read_text"`, `"write"`, …).
    pub operation: &'static str,
    /// The path it is about (`resolve`'s path, `contains`'s target,
    /// `rename`'s source).
    pub path: &'a str,
    /// `rename`'s destination.
    pub to: Option<&'a str>,
}

/// The points an `fs` decorator acts at. Every hook defaults to changing
/// nothing, so a decorator implements only what it changes.
///
/// Hooks run inside the caller's call, on the decorator's runtime; dropping
/// the call's future drops the hook's.
#[async_trait]
pub trait FsHooks: Send + Sync + 'static {
    /// Before a reading call: an `Err` refuses it.
    async fn on_read(&self, call: FsCall<'_>) -> Result<()> {
        let _ = call;
        Ok(())
    }

    /// Before `resolve(path, cwd)`, with the caller's `cwd` (which a
    /// relative `path` joins): an `Err` refuses it. The default hands the
    /// call on to [`FsHooks::on_read`] (operation `"resolve"`, `path`), so
    /// a decorator that does not care about `cwd` implements `on_read`
    /// only.
    async fn on_resolve(&self, path: &str, cwd: Option<&str>) -> Result<()> {
        let _ = cwd;
        self.on_read(call("resolve", path)).await
    }

    /// After `list` of `dir` succeeded in the wrapped provider, before the
    /// caller sees the answer: returns the entries the caller gets (keep,
    /// drop or change them; keep them sorted by name, as the seam
    /// promises), or an `Err` the call fails with. Not called when
    /// `on_read` refused the call or the wrapped provider failed. The
    /// default returns `entries` unchanged.
    async fn filter_list(&self, dir: &str, entries: Vec<DirEntry>) -> Result<Vec<DirEntry>> {
        let _ = dir;
        Ok(entries)
    }

    /// Before a changing call: an `Err` refuses it.
    async fn on_write(&self, call: FsCall<'_>) -> Result<()> {
        let _ = call;
        Ok(())
    }

    /// After a changing call the wrapped provider ran: `Ok` if it
    /// succeeded, else its error. Not called for calls `on_write` refused.
    /// Must not block.
    fn after_write(&self, call: FsCall<'_>, outcome: std::result::Result<(), &Error>) {
        let _ = (call, outcome);
    }
}

/// The provider `inner` with `hooks` applied (see the module docs).
pub struct DecoratedFs<H> {
    inner: Arc<dyn FsProvider>,
    hooks: H,
}

impl<H: FsHooks> DecoratedFs<H> {
    /// Wraps `inner` (usually the injected `fs` service).
    pub fn new(inner: Arc<dyn FsProvider>, hooks: H) -> DecoratedFs<H> {
        DecoratedFs { inner, hooks }
    }

    /// The hooks, for a decorator that keeps state in them.
    pub fn hooks(&self) -> &H {
        &self.hooks
    }

    async fn read(&self, operation: &'static str, path: &str) -> Result<()> {
        self.hooks.on_read(call(operation, path)).await
    }

    /// Runs the change `call` through `on_write`, the wrapped provider
    /// (`run`) and `after_write`.
    async fn change<T>(&self, call: FsCall<'_>, run: impl Future<Output = Result<T>>) -> Result<T> {
        self.hooks.on_write(call).await?;
        let outcome = run.await;
        self.hooks.after_write(call, outcome.as_ref().map(|_| ()));
        outcome
    }
}

fn call<'a>(operation: &'static str, path: &'a str) -> FsCall<'a> {
    FsCall {
        operation,
        path,
        to: None,
    }
}

#[async_trait]
impl<H: FsHooks> FsProvider for DecoratedFs<H> {
    async fn resolve(&self, path: &str, cwd: Option<&str>) -> Result<Resolved> {
        self.hooks.on_resolve(path, cwd).await?;
        self.inner.resolve(path, cwd).await
    }

    async fn contains(&self, root: &str, target: &str) -> Result<bool> {
        self.read("contains", target).await?;
        self.inner.contains(root, target).await
    }

    async fn stat(&self, path: &str) -> Result<Metadata> {
        self.read("stat", path).await?;
        self.inner.stat(path).await
    }

    async fn lstat(&self, path: &str) -> Result<Metadata> {
        self.read("lstat", path).await?;
        self.inner.lstat(path).await
    }

    async fn list(&self, dir: &str) -> Result<Vec<DirEntry>> {
        self.read("list", dir).await?;
        let entries = self.inner.list(dir).await?;
        self.hooks.filter_list(dir, entries).await
    }

    async fn read_text(&self, path: &str) -> Result<TextFile> {
        self.read("read_text", path).await?;
        self.inner.read_text(path).await
    }

    async fn stream_text(&self, path: &str) -> Result<ReadStream<TextStream>> {
        self.read("stream_text", path).await?;
        self.inner.stream_text(path).await
    }

    async fn read_bytes(&self, path: &str) -> Result<ReadStream<ByteStream>> {
        self.read("read_bytes", path).await?;
        self.inner.read_bytes(path).await
    }

    async fn write(&self, path: &str, content: Bytes, guard: WriteGuard) -> Result<Version> {
        self.change(call("write", path), self.inner.write(path, content, guard))
            .await
    }

    async fn write_stream(
        &self,
        path: &str,
        content: ByteStream,
        guard: WriteGuard,
    ) -> Result<Version> {
        self.change(
            call("write_stream", path),
            self.inner.write_stream(path, content, guard),
        )
        .await
    }

    async fn edit(&self, path: &str, edits: Vec<Edit>, guard: WriteGuard) -> Result<EditOutcome> {
        self.change(call("edit", path), self.inner.edit(path, edits, guard))
            .await
    }

    async fn mkdir(&self, path: &str) -> Result<()> {
        self.change(call("mkdir", path), self.inner.mkdir(path))
            .await
    }

    async fn remove(&self, path: &str) -> Result<bool> {
        self.change(call("remove", path), self.inner.remove(path))
            .await
    }

    async fn rename(&self, from: &str, to: &str) -> Result<()> {
        let call = FsCall {
            operation: "rename",
            path: from,
            to: Some(to),
        };
        self.change(call, self.inner.rename(from, to)).await
    }
}
