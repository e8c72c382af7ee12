//! [`FsE2b`]: the `fs` seam over one E2B sandbox.

use std::sync::Arc;
use std::time::Duration;

use dsh_e2b_gateway::{ControlShell, envd_options};
use dsh_plugin_api::fs::{
    DirEntry, Edit, EditOutcome, FsProvider, Metadata, ReadManyItem, ReadManyLimits, ReadStream,
    Resolved, SearchSpec, SearchStream, TextFile, Version, WalkSpec, WalkStream, WriteGuard,
};
use dsh_plugin_api::owner::SandboxInfo;
use dsh_plugin_api::stream::{ByteStream, TextStream};
use dsh_plugin_api::{Bytes, Error, Result, async_trait};
use dsh_provider_kit::content::WriteContent;
use dsh_provider_kit::{paths, uri};
use e2b_client::{CallOptions, Envd};
use tokio_util::task::TaskTracker;

use crate::errors::Op;
use crate::meta::project;
use crate::world::{EnvdTransport, World};
use crate::{edit, write};

/// The files of one E2B sandbox, as one execution world rooted at the
/// sandbox's cwd, reached through envd with transport `T` (the `e2b`
/// owner's `OwnerTransport` in dsh; a direct `SandboxTransport` in tests
/// and embeddings).
///
/// **Where things happen.** Metadata comes from envd's `Stat` and
/// `ListDir`; content moves through streamed `/files` downloads and
/// uploads; renames, removals and directory creation are envd's `Move`,
/// `Remove` and `MakeDir`. What envd cannot say is asked of the sandbox
/// with small internal commands (no login shell, a fresh `HOME`):
/// canonical paths (bash builtins, `realpath -m` for a path through a
/// symlink), symlink texts (`readlink`, `find`), staging (`mkdir -m 0700`,
/// `cp --attributes-only`) and restoring set-user-ID / set-group-ID bits
/// (`chmod`). The sandbox therefore needs GNU coreutils,
/// findutils and bash, which E2B's base image has.
///
/// **Identity.** Every operation — envd calls and internal commands alike
/// — acts as the world's user (envd's default user; `user` below envd
/// 0.4.0), the user `dsh-subprocess-e2b` runs commands as, so `fs` reaches
/// exactly the files a command could (docs/design.md §5.1): a root-only
/// file is `PermissionDenied`, and nothing is run as root but the
/// install of the supervisor answering walks, searches and batched reads,
/// and that supervisor, which takes on the user's identity before it opens
/// anything (see `crate::native`). Against an envd
/// that performs file operations as root whatever user it is told (E2B's
/// own), content and names never go through envd's file operations: reads,
/// staged writes and their publishing, listings' names, `mkdir`, `remove`
/// and `rename` are performed by processes as the user, fed and read
/// through envd's process API (see the crate docs, "one identity").
///
/// **Runtime.** Every method runs on the tokio runtime that polls it (the
/// plugin's own under dsh) and must be polled inside one. Work that must
/// outlive a dropped operation — a started rename, the removal of a staging
/// directory — runs as tasks on that runtime, tracked so that
/// [`FsE2b::quiesce`] can wait for them.
///
/// **Cancellation.** Dropping a method's future cancels it: reads and
/// metadata calls then have no effect (a dropped stream aborts its
/// download); `write` and `edit` leave the target as it was and remove
/// their staging directory unless their rename was already issued, which
/// then completes; `remove` of a directory tree may have removed part of
/// it.
///
/// **Atomicity and versions.** `write` and `edit` replace the target's
/// inode by a rename, atomic for every reader. Versions hash envd's
/// metadata plus a random token each write stores as an extended attribute
/// (see [`crate::WRITE_TOKEN_KEY`]); mutations of one canonical target are
/// serialised across every provider of the same sandbox in this process.
/// Guards are exact for mutations made through this process and
/// best-effort against others (envd's rename always replaces, so a file
/// created in the sandbox between a `CreateNew` check and its rename is
/// replaced).
///
/// **Failures.** A sandbox that is gone (killed, expired, paused) makes
/// every operation fail promptly with `Unavailable`, streams included.
pub struct FsE2b<T: EnvdTransport> {
    world: Arc<World<T>>,
    cwd: String,
}

impl<T: EnvdTransport> std::fmt::Debug for FsE2b<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FsE2b")
            .field("sandbox_id", &self.world.sandbox_id)
            .field("cwd", &self.cwd)
            .finish_non_exhaustive()
    }
}

/// The world's user for the sandbox `info` describes: envd's default user
/// (`None`), or `user` for an envd below 0.4.0 (which has none),
/// independent of the default the given `Envd` was built with.
fn world_user(info: &SandboxInfo) -> Option<String> {
    envd_options(info).default_user
}

impl<T: EnvdTransport> FsE2b<T> {
    /// The files of the sandbox `info` describes, reached through `envd`:
    /// relative paths join `info.cwd` (absolute, no NUL, else
    /// `InvalidInput`), and internal commands get a `HOME` under
    /// `info.runtime_root` that never exists (the `e2b` owner keeps it a
    /// root-owned directory). Every call and command acts as envd's default
    /// user, or as `user` for an `info.daemon_version` below 0.4.0 (which has
    /// none), whatever default `envd` itself was built with.
    pub fn new(envd: Envd<T>, info: &SandboxInfo) -> Result<FsE2b<T>> {
        if let Some(problem) = paths::cwd_problem(&info.cwd) {
            return Err(Error::invalid_input(format!(
                "fs-e2b: the sandbox cwd {:?} {problem}",
                info.cwd
            )));
        }
        if let Some(problem) = paths::cwd_problem(&info.runtime_root) {
            return Err(Error::invalid_input(format!(
                "fs-e2b: the runtime root {:?} {problem}",
                info.runtime_root
            )));
        }
        let user = world_user(info);
        Ok(FsE2b {
            world: Arc::new(World {
                fs_options: match &user {
                    Some(user) => CallOptions::default().user(user),
                    None => CallOptions::default(),
                },
                shell: ControlShell::for_sandbox(info).acting_for(user.as_deref()),
                user,
                envd,
                sandbox_id: Arc::from(info.sandbox_id.as_str()),
                runtime_root: info.runtime_root.clone(),
                file_access: tokio::sync::OnceCell::new(),
                upload_attrs: std::sync::OnceLock::new(),
                tasks: TaskTracker::new(),
                native: tokio::sync::OnceCell::new(),
                resident: tokio::sync::Mutex::new(None),
                holds: std::sync::atomic::AtomicU64::new(0),
                native_reads: std::sync::atomic::AtomicU64::new(0),
                native_edits: std::sync::atomic::AtomicU64::new(0),
                native_writes: std::sync::atomic::AtomicU64::new(0),
                input_route: e2b_client::InputRouteCell::new(),
            }),
            cwd: info.cwd.clone(),
        })
    }

    /// The world's cwd.
    pub fn cwd(&self) -> &str {
        &self.cwd
    }

    /// Waits, at most `limit`, until the detached work of operations that
    /// were dropped (renames already issued, staging clean-up) is done.
    /// Returns whether it is; operations started afterwards are not waited
    /// for. Runs on the caller's runtime.
    pub async fn quiesce(&self, limit: Duration) -> bool {
        let tasks = &self.world.tasks;
        tasks.close();
        let done = tokio::time::timeout(limit, tasks.wait()).await.is_ok();
        tasks.reopen();
        done
    }

    /// How many replaced files the sandbox helper held over a write's
    /// rename (docs/design.md §6.1): what a test or a diagnosis checks.
    pub fn holds(&self) -> u64 {
        self.world.holds.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// How many texts the sandbox helper read (docs/design.md §6.3): what a
    /// test or a diagnosis checks.
    pub fn native_reads(&self) -> u64 {
        self.world
            .native_reads
            .load(std::sync::atomic::Ordering::Relaxed)
    }

    /// How many edits the sandbox helper stored (docs/design.md §6.3): what
    /// a test or a diagnosis checks.
    pub fn native_edits(&self) -> u64 {
        self.world
            .native_edits
            .load(std::sync::atomic::Ordering::Relaxed)
    }

    /// How many writes the sandbox helper stored (docs/design.md §6.3): what
    /// a test or a diagnosis checks.
    pub fn native_writes(&self) -> u64 {
        self.world
            .native_writes
            .load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Removes what the provider installed in the sandbox (the supervisor
    /// answering world-side operations, if it was installed). For the
    /// plugin's disposal, after [`FsE2b::quiesce`].
    pub async fn remove_installed(&self) -> Result<()> {
        self.world.remove_native().await
    }

    fn absolute(&self, op: &'static str, path: &str) -> Result<String> {
        paths::absolute(op, &self.cwd, path)
    }
}

#[async_trait]
impl<T: EnvdTransport> FsProvider for FsE2b<T> {
    async fn resolve(&self, path: &str, cwd: Option<&str>) -> Result<Resolved> {
        let base = match cwd {
            None => self.cwd.as_str(),
            Some(cwd) => {
                paths::check_cwd("resolve", cwd, path)?;
                cwd
            }
        };
        let absolute = paths::absolute("resolve", base, path)?;
        let canonical = self
            .world
            .canonical(Op::new("resolve", &absolute), &absolute)
            .await?;
        Ok(Resolved {
            uri: uri::file_uri(canonical.as_bytes()),
            path: canonical,
        })
    }

    async fn contains(&self, root: &str, target: &str) -> Result<bool> {
        let root = self.absolute("contains", root)?;
        let target = self.absolute("contains", target)?;
        let op = Op::new("contains", &target);
        let canonical = self.world.canonicalize(op, &[&root, &target]).await?;
        Ok(paths::is_within(&canonical[0], &canonical[1]))
    }

    async fn stat(&self, path: &str) -> Result<Metadata> {
        let path = self.absolute("stat", path)?;
        let followed = self
            .world
            .stat_followed(Op::new("stat", &path), &path)
            .await?;
        Ok(project(&followed.entry, None))
    }

    async fn lstat(&self, path: &str) -> Result<Metadata> {
        let path = self.absolute("lstat", path)?;
        self.world.lstat(Op::new("lstat", &path), &path).await
    }

    async fn list(&self, dir: &str) -> Result<Vec<DirEntry>> {
        let dir = self.absolute("list", dir)?;
        self.world.list(Op::new("list", &dir), &dir).await
    }

    async fn read_text(&self, path: &str) -> Result<TextFile> {
        let path = self.absolute("read_text", path)?;
        self.world
            .read_text(Op::new("read_text", &path), &path)
            .await
    }

    async fn stream_text(&self, path: &str) -> Result<ReadStream<TextStream>> {
        let path = self.absolute("stream_text", path)?;
        self.world
            .stream_text(Op::new("stream_text", &path), &path)
            .await
    }

    async fn read_bytes(&self, path: &str) -> Result<ReadStream<ByteStream>> {
        let path = self.absolute("read_bytes", path)?;
        self.world
            .read_bytes(Op::new("read_bytes", &path), &path)
            .await
    }

    async fn write(&self, path: &str, content: Bytes, guard: WriteGuard) -> Result<Version> {
        let path = self.absolute("write", path)?;
        let content = WriteContent::Whole(content);
        write::write(&self.world, Op::new("write", &path), &path, content, guard).await
    }

    async fn write_stream(
        &self,
        path: &str,
        content: ByteStream,
        guard: WriteGuard,
    ) -> Result<Version> {
        let path = self.absolute("write_stream", path)?;
        let content = WriteContent::Stream(content);
        let op = Op::new("write_stream", &path);
        write::write(&self.world, op, &path, content, guard).await
    }

    async fn edit(&self, path: &str, edits: Vec<Edit>, guard: WriteGuard) -> Result<EditOutcome> {
        let path = self.absolute("edit", path)?;
        edit::edit(&self.world, Op::new("edit", &path), &path, edits, guard).await
    }

    async fn mkdir(&self, path: &str) -> Result<()> {
        let path = self.absolute("mkdir", path)?;
        self.world.mkdir(Op::new("mkdir", &path), &path).await
    }

    async fn remove(&self, path: &str) -> Result<bool> {
        let path = self.absolute("remove", path)?;
        self.world.remove(Op::new("remove", &path), &path).await
    }

    async fn rename(&self, from: &str, to: &str) -> Result<()> {
        let from = self.absolute("rename", from)?;
        let to = self.absolute("rename", to)?;
        self.world
            .rename(Op::new("rename", &from), &from, &to)
            .await
    }

    async fn walk(&self, root: &str, spec: WalkSpec) -> Result<WalkStream> {
        self.world.walk_native(&self.cwd, root, spec).await
    }

    async fn search(&self, root: &str, spec: SearchSpec) -> Result<SearchStream> {
        self.world.search_native(&self.cwd, root, spec).await
    }

    async fn read_many(
        &self,
        paths: Vec<String>,
        limits: ReadManyLimits,
    ) -> Result<Vec<ReadManyItem>> {
        self.world.read_many_native(&self.cwd, paths, limits).await
    }
}
