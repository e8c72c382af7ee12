//! Providers that are not broken in one contract but faulty in a way the
//! runner itself must handle: read-only, hanging, panicking; and an `fs`
//! confined to a directory.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use dsh_fs_local::FsLocal;
use dsh_plugin_api::decorate::{DecoratedFs, FsCall, FsHooks};
use dsh_plugin_api::fs::{DirEntry, FsProvider};
use dsh_plugin_api::stream::{ByteStream, ByteWriter};
use dsh_plugin_api::subprocess::{
    ExitStatus, OutputSnapshot, OutputStream, Process, SpawnSpec, SubprocessProvider, Terminal,
    TerminalSpec,
};
use dsh_plugin_api::{Error, ErrorKind, Result};
use dsh_subprocess_local::LocalSubprocess;

/// How a [`faulty_fs`] misbehaves.
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

/// `fs-local` that misbehaves as its [`FsFault`] says (hooks over it).
pub struct Faults(pub FsFault);

impl Faults {
    async fn gate(&self, operation: &str, mutation: bool) -> Result<()> {
        match self.0 {
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
impl FsHooks for Faults {
    async fn on_read(&self, call: FsCall<'_>) -> Result<()> {
        self.gate(call.operation, false).await
    }

    async fn on_write(&self, call: FsCall<'_>) -> Result<()> {
        self.gate(call.operation, true).await
    }
}

/// `fs-local` with `fault`.
pub fn faulty_fs(inner: Arc<FsLocal>, fault: FsFault) -> Arc<DecoratedFs<Faults>> {
    Arc::new(DecoratedFs::new(inner, Faults(fault)))
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

/// An `fs` confined to `root` (canonical, absolute) with the hooks alone:
/// every path is checked with the wrapped fs's `contains` (symlinks
/// resolved), `resolve` against its cwd too, and — unless `leaky` — a
/// listing drops the target metadata of links that lead out.
pub struct Confine {
    pub inner: Arc<dyn FsProvider>,
    pub root: String,
    pub leaky: bool,
}

impl Confine {
    async fn check(&self, operation: &str, path: &str) -> Result<()> {
        // Malformed input is the wrapped fs's to refuse, with its own kind.
        if path.contains('\0') || self.inner.contains(&self.root, path).await? {
            return Ok(());
        }
        Err(Error::new(
            ErrorKind::PermissionDenied,
            format!("{operation}: outside {}", self.root),
        )
        .with_subject(path))
    }
}

#[async_trait]
impl FsHooks for Confine {
    async fn on_resolve(&self, path: &str, cwd: Option<&str>) -> Result<()> {
        match cwd {
            Some(cwd) if !path.starts_with('/') && !cwd.contains('\0') => {
                self.check("resolve", &format!("{cwd}/{path}")).await
            }
            _ => self.check("resolve", path).await,
        }
    }

    async fn on_read(&self, call: FsCall<'_>) -> Result<()> {
        self.check(call.operation, call.path).await
    }

    async fn on_write(&self, call: FsCall<'_>) -> Result<()> {
        self.check(call.operation, call.path).await?;
        match call.to {
            Some(to) => self.check(call.operation, to).await,
            None => Ok(()),
        }
    }

    async fn filter_list(&self, _dir: &str, entries: Vec<DirEntry>) -> Result<Vec<DirEntry>> {
        if self.leaky {
            return Ok(entries);
        }
        let mut shown = Vec::with_capacity(entries.len());
        for mut entry in entries {
            if entry.resolved.is_some() && !self.inner.contains(&self.root, &entry.path).await? {
                entry.resolved = None;
            }
            shown.push(entry);
        }
        Ok(shown)
    }
}
