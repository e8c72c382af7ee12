//! The world-side operations composed from a provider's primitives: what a
//! provider without native versions gets (`list` and `read_bytes` for walks
//! and searches, `stat` and `read_text` for batched reads), with the same
//! engines as every native path. Path-based calls cannot confine race-free,
//! so `beneath` is `Unsupported` here.

use std::path::PathBuf;
use std::sync::Arc;

use async_trait::async_trait;
use bytes::{Bytes, BytesMut};
use dsh_plugin_api::fs::{
    DirEntry, FileKind, FsProvider, ReadManyItem, ReadManyLimits, SearchSpec, SearchStream,
    WalkSpec, WalkStream,
};
use dsh_plugin_api::{Error, ErrorKind, Result};
use futures::StreamExt;

use super::gitignore::GITIGNORE_MAX_BYTES;
use super::walker::{Tree, below};
use super::{search_tree, walk_tree};

/// How many files a composed `read_many` reads at once.
const READ_MANY_CONCURRENCY: usize = 8;

/// [`FsProvider::walk`] composed from `resolve`, `stat`, `list` (and
/// `read_bytes` for `.gitignore` files).
pub async fn walk(fs: Arc<dyn FsProvider>, root: &str, spec: WalkSpec) -> Result<WalkStream> {
    let tree = FsTree::new(fs, "walk", root, spec.beneath)?;
    walk_tree(tree, root, spec).await
}

/// [`FsProvider::search`] composed from `resolve`, `stat`, `list` and
/// `read_bytes`.
pub async fn search(fs: Arc<dyn FsProvider>, root: &str, spec: SearchSpec) -> Result<SearchStream> {
    let tree = FsTree::new(fs, "search", root, spec.beneath)?;
    search_tree(tree, root, spec).await
}

/// [`FsProvider::read_many`] composed from `stat` and `read_text`, eight
/// files at a time, the total bound applied in request order.
pub async fn read_many(
    fs: Arc<dyn FsProvider>,
    paths: Vec<String>,
    limits: ReadManyLimits,
) -> Result<Vec<ReadManyItem>> {
    if limits.beneath.is_some() {
        return Err(unconfinable("read_many", ""));
    }
    let max_file = limits.max_file_bytes;
    let reads = futures::stream::iter(paths.into_iter().map(|path| {
        let fs = fs.clone();
        async move {
            let result = match fs.stat(&path).await {
                Ok(meta) if meta.kind == FileKind::File && meta.size > max_file => {
                    Err(file_too_big(&path, meta.size, max_file))
                }
                Ok(_) => fs.read_text(&path).await,
                Err(err) => Err(err),
            };
            ReadManyItem { path, result }
        }
    }))
    .buffered(READ_MANY_CONCURRENCY)
    .collect::<Vec<_>>()
    .await;
    Ok(read_many_bounds(reads, &limits))
}

/// Applies `limits`' per-file bound (to what was read: a file may grow
/// between `stat` and the read) and total bound, in request order: what a
/// native `read_many` applies too.
pub fn read_many_bounds(reads: Vec<ReadManyItem>, limits: &ReadManyLimits) -> Vec<ReadManyItem> {
    let mut total = 0u64;
    reads
        .into_iter()
        .map(|mut item| {
            if let Ok(file) = &item.result {
                let len = file.text.len() as u64;
                if len > limits.max_file_bytes {
                    item.result = Err(file_too_big(&item.path, len, limits.max_file_bytes));
                } else if total + len > limits.max_total_bytes {
                    item.result = Err(Error::invalid_input(format!(
                        "read_many: {len} bytes would pass the call's total of {} bytes",
                        limits.max_total_bytes
                    ))
                    .with_subject(item.path.clone()));
                } else {
                    total += len;
                }
            }
            item
        })
        .collect()
}

/// The error of a file over `read_many`'s per-file bound.
pub fn file_too_big(path: &str, size: u64, max: u64) -> Error {
    Error::invalid_input(format!(
        "read_many: the file has {size} bytes, over the bound of {max}"
    ))
    .with_subject(path)
}

/// `Unsupported` for a confined call: a composition of path-based calls
/// cannot keep a root race-free.
fn unconfinable(operation: &str, root: &str) -> Error {
    Error::new(
        ErrorKind::Unsupported,
        format!(
            "{operation}: this provider cannot confine an operation beneath a root (no native \
             {operation}; a composition of path-based calls would be racy)"
        ),
    )
    .with_subject(root)
}

/// A tree reached through the seam, by path.
struct FsTree {
    fs: Arc<dyn FsProvider>,
    operation: &'static str,
    root: String,
}

impl FsTree {
    fn new(
        fs: Arc<dyn FsProvider>,
        operation: &'static str,
        root: &str,
        beneath: bool,
    ) -> Result<FsTree> {
        if beneath {
            return Err(unconfinable(operation, root));
        }
        Ok(FsTree {
            fs,
            operation,
            root: root.to_owned(),
        })
    }
}

#[async_trait]
impl Tree for FsTree {
    async fn root(&mut self) -> Result<(PathBuf, bool)> {
        let named = |err: Error| err.context(self.operation);
        let resolved = self.fs.resolve(&self.root, None).await.map_err(named)?;
        let meta = self.fs.stat(&self.root).await.map_err(named)?;
        Ok((
            PathBuf::from(resolved.path),
            meta.kind == FileKind::Directory,
        ))
    }

    async fn list(&mut self, relative: &str) -> Result<Vec<DirEntry>> {
        self.fs.list(&below(&self.root, relative)).await
    }

    async fn read(&mut self, relative: &str, max: u64) -> Result<(Bytes, u64)> {
        read_prefix(self.fs.as_ref(), &below(&self.root, relative), max).await
    }

    async fn ancestors(&mut self, dirs: &[PathBuf]) -> Vec<(bool, Option<String>)> {
        let fs = self.fs.as_ref();
        let probes = dirs.iter().map(|dir| async move {
            let git = dir.join(".git").to_string_lossy().into_owned();
            let gitignore = dir.join(".gitignore").to_string_lossy().into_owned();
            let (git, gitignore) = futures::future::join(
                fs.lstat(&git),
                read_prefix(fs, &gitignore, GITIGNORE_MAX_BYTES),
            )
            .await;
            let is_repo_root =
                git.is_ok_and(|meta| matches!(meta.kind, FileKind::Directory | FileKind::File));
            let text = gitignore.ok().and_then(|(bytes, size)| {
                (size <= GITIGNORE_MAX_BYTES)
                    .then(|| String::from_utf8(bytes.to_vec()).ok())
                    .flatten()
            });
            (is_repo_root, text)
        });
        futures::future::join_all(probes).await
    }
}

/// At most `max` bytes from the start of the file at `path` through
/// `read_bytes`, and its size at open.
async fn read_prefix(fs: &dyn FsProvider, path: &str, max: u64) -> Result<(Bytes, u64)> {
    let read = fs.read_bytes(path).await?;
    let limit = usize::try_from(max.min(read.size)).unwrap_or(usize::MAX);
    let mut chunks = read.chunks;
    let mut first: Option<Bytes> = None;
    let mut joined = BytesMut::new();
    while let Some(chunk) = chunks.next().await {
        let chunk = chunk?;
        let held = first.as_ref().map_or(0, Bytes::len) + joined.len();
        let take = chunk.len().min(limit.saturating_sub(held));
        match &first {
            // The common case, one chunk, is kept without a copy.
            None if joined.is_empty() => first = Some(chunk.slice(..take)),
            _ => {
                if let Some(first) = first.take() {
                    joined.extend_from_slice(&first);
                }
                joined.extend_from_slice(&chunk[..take]);
            }
        }
        if held + take >= limit {
            break;
        }
    }
    let bytes = match first {
        Some(first) => first,
        None => joined.freeze(),
    };
    Ok((bytes, read.size))
}
