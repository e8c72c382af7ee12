//! [`FsLocal`]: the `fs` seam on the host filesystem.

use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use dsh_plugin_api::fs::{
    DirEntry, Edit, EditOutcome, FsProvider, Metadata, ReadManyItem, ReadManyLimits, ReadStream,
    Resolved, SearchSpec, SearchStream, TextFile, Version, WalkSpec, WalkStream, WriteGuard,
};
use dsh_plugin_api::stream::{ByteStream, TextStream};
use dsh_plugin_api::{Bytes, Error, Result, async_trait};
use dsh_provider_kit::content::WriteContent;
use dsh_provider_kit::paths::{check_cwd, cwd_problem};
use dsh_provider_kit::uri::file_uri;

use crate::errors::Op;
use crate::world::{Host, LocalTree};
use crate::{edit, list, meta, paths, read, tree, world, write};

/// The files of the host, as one execution world rooted at a cwd.
///
/// Every method runs on the calling tokio runtime (the plugin's own):
/// metadata calls, opens, renames and small reads and writes run inline;
/// reads and writes of more than 256 KiB, listings and tree removals run
/// in `block_in_place` on a multi-thread runtime (the blocking pool on a
/// current-thread one). Streams read each chunk when polled and need no
/// runtime context. Dropping a method's future cancels it:
/// reads and metadata calls then have no effect, `write`, `write_stream` and `edit` leave
/// the target as it was and remove their staged file (their rename is
/// the commit point and is never abandoned once issued), `remove` of a
/// directory tree may have removed part of it.
///
/// `write` and `edit` replace the target's inode (atomic for every reader,
/// never a partial file): hard links to the old inode keep the old
/// content, and extended attributes and ACLs are not carried over (mode,
/// and owner where permitted, are). Nothing is `fsync`ed, like
/// `std::fs::write`: the rename is atomic for observers and against
/// cancellation, not a durability barrier against power loss.
///
/// Mutations of one canonical target (`write`, `edit`, `remove`, `rename`)
/// are serialised across every `FsLocal` in the process; guards are exact
/// for mutations made through this process and best-effort against other
/// processes (`CreateNew` is exact against everyone, via
/// `RENAME_NOREPLACE`).
#[derive(Debug, Clone)]
pub struct FsLocal {
    cwd: PathBuf,
}

impl FsLocal {
    /// A world whose relative paths join `cwd`, which must be an absolute
    /// UTF-8 path without NUL bytes (`InvalidInput` otherwise). It need not
    /// exist yet; it is used as spelled.
    pub fn new(cwd: impl Into<String>) -> Result<FsLocal> {
        let cwd = cwd.into();
        if let Some(problem) = cwd_problem(&cwd) {
            return Err(Error::invalid_input(format!("cwd: {cwd:?} {problem}")));
        }
        Ok(FsLocal {
            cwd: PathBuf::from(cwd),
        })
    }

    /// A world rooted at this process's current directory.
    pub fn from_process_cwd() -> Result<FsLocal> {
        let cwd = std::env::current_dir()
            .map_err(|err| Error::from_io("cwd: reading the process's current directory", &err))?;
        let cwd = cwd.into_os_string().into_string().map_err(|raw| {
            Error::invalid_input(format!(
                "cwd: the process's current directory {raw:?} is not valid UTF-8"
            ))
        })?;
        FsLocal::new(cwd)
    }

    /// The world's cwd, as configured.
    pub fn cwd(&self) -> &Path {
        &self.cwd
    }

    fn absolute(&self, op: &'static str, path: &str) -> Result<PathBuf> {
        paths::absolute(op, &self.cwd, path)
    }
}

#[async_trait]
impl FsProvider for FsLocal {
    async fn resolve(&self, path: &str, cwd: Option<&str>) -> Result<Resolved> {
        let base = match cwd {
            None => self.cwd.as_path(),
            Some(cwd) => {
                check_cwd("resolve", cwd, path)?;
                Path::new(cwd)
            }
        };
        let absolute = paths::absolute("resolve", base, path)?;
        let op = Op::new("resolve", &absolute);
        let canonical = paths::canonicalize(op, &absolute)?;
        let uri = file_uri(canonical.as_os_str().as_bytes());
        Ok(Resolved {
            path: paths::into_string(op, canonical)?,
            uri,
        })
    }

    async fn contains(&self, root: &str, target: &str) -> Result<bool> {
        let root = self.absolute("contains", root)?;
        let target = self.absolute("contains", target)?;
        let root = paths::canonicalize(Op::new("contains", &root), &root)?;
        let target = paths::canonicalize(Op::new("contains", &target), &target)?;
        // Component-wise: `/a/bc` is not inside `/a/b`.
        Ok(target.starts_with(&root))
    }

    async fn stat(&self, path: &str) -> Result<Metadata> {
        let path = self.absolute("stat", path)?;
        meta::stat(Op::new("stat", &path), &path, true)
    }

    async fn lstat(&self, path: &str) -> Result<Metadata> {
        let path = self.absolute("lstat", path)?;
        meta::stat(Op::new("lstat", &path), &path, false)
    }

    async fn list(&self, dir: &str) -> Result<Vec<DirEntry>> {
        let dir = self.absolute("list", dir)?;
        list::list(Op::new("list", &dir), &dir).await
    }

    async fn read_text(&self, path: &str) -> Result<TextFile> {
        let path = self.absolute("read_text", path)?;
        read::read_text(Op::new("read_text", &path), &path).await
    }

    async fn stream_text(&self, path: &str) -> Result<ReadStream<TextStream>> {
        let path = self.absolute("stream_text", path)?;
        read::stream_text(Op::new("stream_text", &path), &path).await
    }

    async fn read_bytes(&self, path: &str) -> Result<ReadStream<ByteStream>> {
        let path = self.absolute("read_bytes", path)?;
        read::read_bytes(Op::new("read_bytes", &path), &path).await
    }

    async fn write(&self, path: &str, content: Bytes, guard: WriteGuard) -> Result<Version> {
        let path = self.absolute("write", path)?;
        let content = WriteContent::Whole(content);
        write::write(Op::new("write", &path), &path, content, guard).await
    }

    async fn write_stream(
        &self,
        path: &str,
        content: ByteStream,
        guard: WriteGuard,
    ) -> Result<Version> {
        let path = self.absolute("write_stream", path)?;
        let content = WriteContent::Stream(content);
        write::write(Op::new("write_stream", &path), &path, content, guard).await
    }

    async fn edit(&self, path: &str, edits: Vec<Edit>, guard: WriteGuard) -> Result<EditOutcome> {
        let path = self.absolute("edit", path)?;
        edit::edit(Op::new("edit", &path), &path, edits, guard).await
    }

    async fn mkdir(&self, path: &str) -> Result<()> {
        let path = self.absolute("mkdir", path)?;
        tree::mkdir(Op::new("mkdir", &path), &path)
    }

    async fn remove(&self, path: &str) -> Result<bool> {
        let path = self.absolute("remove", path)?;
        tree::remove(Op::new("remove", &path), &path).await
    }

    async fn rename(&self, from: &str, to: &str) -> Result<()> {
        let from = self.absolute("rename", from)?;
        let to = self.absolute("rename", to)?;
        tree::rename(Op::new("rename", &from), &from, &to).await
    }

    async fn walk(&self, root: &str, spec: WalkSpec) -> Result<WalkStream> {
        let tree = LocalTree::open(Host.into(), "walk", self.absolute("walk", root)?)?;
        dsh_provider_kit::world::walk_tree(tree, root, spec).await
    }

    async fn search(&self, root: &str, spec: SearchSpec) -> Result<SearchStream> {
        let tree = LocalTree::open(Host.into(), "search", self.absolute("search", root)?)?;
        dsh_provider_kit::world::search_tree(tree, root, spec).await
    }

    async fn read_many(
        &self,
        paths: Vec<String>,
        limits: ReadManyLimits,
    ) -> Result<Vec<ReadManyItem>> {
        world::read_many(&Host.into(), &self.cwd, paths, limits)
    }
}
