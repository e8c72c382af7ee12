//! Providers that are not broken in one contract but faulty in a way the
//! runner itself must handle: read-only, hanging, panicking.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use dsh_fs_local::FsLocal;
use dsh_plugin_api::fs::{
    DirEntry, Edit, EditOutcome, FsProvider, Metadata, ReadStream, Resolved, TextFile, Version,
    WriteGuard,
};
use dsh_plugin_api::stream::{ByteStream, ByteWriter, TextStream};
use dsh_plugin_api::subprocess::{
    ExitStatus, OutputSnapshot, OutputStream, Process, SpawnSpec, SubprocessProvider, Terminal,
    TerminalSpec,
};
use dsh_plugin_api::{Bytes, Error, ErrorKind, Result};
use dsh_subprocess_local::LocalSubprocess;

/// How a [`FaultyFs`] misbehaves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FsFault {
    /// Mutations fail with `PermissionDenied` (a legitimate read-only fs).
    ReadOnly,
    /// `stat` never answers.
    HangingStat,
    /// Every operation never answers.
    HangingEverything,
    /// `stat` panics.
    PanickingStat,
}

pub struct FaultyFs {
    pub inner: Arc<FsLocal>,
    pub fault: FsFault,
}

impl FaultyFs {
    async fn gate(&self, operation: &str, mutation: bool) -> Result<()> {
        match self.fault {
            FsFault::ReadOnly if mutation => Err(Error::new(
                ErrorKind::PermissionDenied,
                format!("{operation}: this fs is read-only"),
            )),
            FsFault::HangingEverything => futures::future::pending().await,
            FsFault::HangingStat if operation == "stat" => futures::future::pending().await,
            FsFault::PanickingStat if operation == "stat" => panic!("stat: deliberate panic"),
            _ => Ok(()),
        }
    }
}

#[async_trait]
impl FsProvider for FaultyFs {
    async fn resolve(&self, path: &str, cwd: Option<&str>) -> Result<Resolved> {
        self.gate("resolve", false).await?;
        self.inner.resolve(path, cwd).await
    }

    async fn contains(&self, root: &str, target: &str) -> Result<bool> {
        self.gate("contains", false).await?;
        self.inner.contains(root, target).await
    }

    async fn stat(&self, path: &str) -> Result<Metadata> {
        self.gate("stat", false).await?;
        self.inner.stat(path).await
    }

    async fn lstat(&self, path: &str) -> Result<Metadata> {
        self.gate("lstat", false).await?;
        self.inner.lstat(path).await
    }

    async fn list(&self, dir: &str) -> Result<Vec<DirEntry>> {
        self.gate("list", false).await?;
        self.inner.list(dir).await
    }

    async fn read_text(&self, path: &str) -> Result<TextFile> {
        self.gate("read_text", false).await?;
        self.inner.read_text(path).await
    }

    async fn stream_text(&self, path: &str) -> Result<ReadStream<TextStream>> {
        self.gate("stream_text", false).await?;
        self.inner.stream_text(path).await
    }

    async fn read_bytes(&self, path: &str) -> Result<ReadStream<ByteStream>> {
        self.gate("read_bytes", false).await?;
        self.inner.read_bytes(path).await
    }

    async fn write(&self, path: &str, content: Bytes, guard: WriteGuard) -> Result<Version> {
        self.gate("write", true).await?;
        self.inner.write(path, content, guard).await
    }

    async fn write_stream(
        &self,
        path: &str,
        content: ByteStream,
        guard: WriteGuard,
    ) -> Result<Version> {
        self.gate("write_stream", true).await?;
        self.inner.write_stream(path, content, guard).await
    }

    async fn edit(&self, path: &str, edits: Vec<Edit>, guard: WriteGuard) -> Result<EditOutcome> {
        self.gate("edit", true).await?;
        self.inner.edit(path, edits, guard).await
    }

    async fn mkdir(&self, path: &str) -> Result<()> {
        self.gate("mkdir", true).await?;
        self.inner.mkdir(path).await
    }

    async fn remove(&self, path: &str) -> Result<bool> {
        self.gate("remove", true).await?;
        self.inner.remove(path).await
    }

    async fn rename(&self, from: &str, to: &str) -> Result<()> {
        self.gate("rename", true).await?;
        self.inner.rename(from, to).await
    }
}

/// `subprocess-local` whose process handles never answer `wait`: every
/// case that waits runs out of time, and the runner must still stop what
/// the case started.
pub struct HangingWait {
    pub inner: Arc<LocalSubprocess>,
}

#[async_trait]
impl SubprocessProvider for HangingWait {
    async fn resolve_executable(&self, name: &str, extra_path: &[String]) -> Result<String> {
        self.inner.resolve_executable(name, extra_path).await
    }

    async fn spawn(&self, spec: SpawnSpec) -> Result<Arc<dyn Process>> {
        let inner = self.inner.spawn(spec).await?;
        Ok(Arc::new(NeverExits { inner }))
    }

    async fn spawn_terminal(&self, spec: TerminalSpec) -> Result<Arc<dyn Terminal>> {
        self.inner.spawn_terminal(spec).await
    }
}

struct NeverExits {
    inner: Arc<dyn Process>,
}

#[async_trait]
impl Process for NeverExits {
    fn pid(&self) -> u32 {
        self.inner.pid()
    }

    fn take_stdin(&self) -> Option<Box<dyn ByteWriter>> {
        self.inner.take_stdin()
    }

    fn take_stdout(&self) -> Option<ByteStream> {
        self.inner.take_stdout()
    }

    fn take_stderr(&self) -> Option<ByteStream> {
        self.inner.take_stderr()
    }

    async fn wait(&self) -> Result<ExitStatus> {
        futures::future::pending().await
    }

    async fn read_output(
        &self,
        stream: OutputStream,
        offset: u64,
        max_len: usize,
    ) -> Result<OutputSnapshot> {
        self.inner.read_output(stream, offset, max_len).await
    }

    async fn terminate(&self, grace: Duration) -> Result<()> {
        self.inner.terminate(grace).await
    }
}
