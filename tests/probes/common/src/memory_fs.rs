//! A deterministic in-memory `fs` world.
//!
//! It keeps files, directories and symlinks in a map and honours the
//! contract of `FsProvider` closely enough to exercise every method across
//! the ABI: `realpath -m` resolution with symlinks, strict UTF-8 and binary
//! detection, guarded writes with opaque versions (`v1`, `v2`, …), literal
//! edits with CRLF handling, `mkdir -p`, recursive remove and rename with
//! parent creation. Paths under `/.probe/` are magic (see [`crate::magic`]).
//! Streams are produced lazily in chunks of [`CHUNK`] bytes, so a consumer
//! that stops pulling stops the producer.

use std::collections::BTreeMap;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use dsh_plugin_api::fs::{
    BINARY_SAMPLE_LEN, DirEntry, Edit, EditOutcome, FileKind, FsProvider, Metadata, ReadStream,
    Resolved, TextFile, Version, WriteGuard,
};
use dsh_plugin_api::stream::{ByteStream, TextStream};
use dsh_plugin_api::{Bytes, Error, ErrorKind, Result, Text, async_trait};
use dsh_provider_kit::uri::file_uri;

use crate::magic::{self, Counters, Magic};

/// Chunk size of streamed reads.
pub const CHUNK: usize = 4096;

/// Chunk size of `/.probe/stream/<n>`.
pub const MAGIC_CHUNK: usize = 1024;

const MAX_LINK_DEPTH: usize = 40;

#[derive(Debug, Clone)]
enum Node {
    File {
        content: Bytes,
        mode: u32,
        version: u64,
        modified: SystemTime,
    },
    Dir {
        mode: u32,
        version: u64,
        modified: SystemTime,
    },
    Symlink {
        target: String,
        version: u64,
        modified: SystemTime,
    },
}

#[derive(Debug)]
struct Tree {
    nodes: BTreeMap<String, Node>,
    next_version: u64,
}

impl Tree {
    fn version(&mut self) -> u64 {
        self.next_version += 1;
        self.next_version
    }

    /// Deterministic time: the epoch plus one second per version.
    fn time(version: u64) -> SystemTime {
        UNIX_EPOCH + Duration::from_secs(1_700_000_000 + version)
    }
}

/// The in-memory world.
#[derive(Debug)]
pub struct MemoryFs {
    tree: Mutex<Tree>,
    cwd: String,
    counters: Arc<Counters>,
}

/// Lexically normalises an absolute path (`.`/`..` removed, no trailing `/`).
pub fn normalize(path: &str) -> String {
    let mut parts: Vec<&str> = Vec::new();
    for part in path.split('/') {
        match part {
            "" | "." => {}
            ".." => {
                parts.pop();
            }
            other => parts.push(other),
        }
    }
    format!("/{}", parts.join("/"))
}

fn join(base: &str, name: &str) -> String {
    if base == "/" {
        format!("/{name}")
    } else {
        format!("{base}/{name}")
    }
}

fn parent(path: &str) -> &str {
    match path.rfind('/') {
        Some(0) | None => "/",
        Some(at) => &path[..at],
    }
}

fn not_found(operation: &str, path: &str) -> Error {
    Error::not_found(format!("{operation}: no such file or directory")).with_subject(path)
}

impl MemoryFs {
    /// An empty world (just `/` and `cwd`, created as directories).
    pub fn new(cwd: &str, counters: Arc<Counters>) -> MemoryFs {
        let cwd = normalize(cwd);
        let fs = MemoryFs {
            tree: Mutex::new(Tree {
                nodes: BTreeMap::new(),
                next_version: 0,
            }),
            cwd: cwd.clone(),
            counters,
        };
        {
            let mut tree = fs.lock();
            let version = tree.version();
            tree.nodes.insert(
                "/".into(),
                Node::Dir {
                    mode: 0o755,
                    version,
                    modified: Tree::time(version),
                },
            );
        }
        fs.mkdir_p(&cwd)
            .expect("creating cwd in an empty tree cannot fail");
        fs
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Tree> {
        self.tree.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn absolute(&self, path: &str, cwd: Option<&str>) -> String {
        if path.starts_with('/') {
            normalize(path)
        } else {
            let base = cwd
                .map(|cwd| self.absolute(cwd, None))
                .unwrap_or_else(|| self.cwd.clone());
            normalize(&format!("{base}/{path}"))
        }
    }

    /// Resolves symlinks along `path` (absolute, normalised); the last
    /// component only if `follow_last`. Missing components are kept.
    fn resolve_in(tree: &Tree, path: &str, follow_last: bool, depth: usize) -> Result<String> {
        if depth > MAX_LINK_DEPTH {
            return Err(
                Error::invalid_input("resolve: too many levels of symbolic links")
                    .with_subject(path),
            );
        }
        let parts: Vec<&str> = path.split('/').filter(|part| !part.is_empty()).collect();
        let mut current = String::from("/");
        for (index, part) in parts.iter().enumerate() {
            let candidate = join(&current, part);
            let last = index + 1 == parts.len();
            match tree.nodes.get(&candidate) {
                Some(Node::Symlink { target, .. }) if !last || follow_last => {
                    let target = if target.starts_with('/') {
                        normalize(target)
                    } else {
                        normalize(&format!("{current}/{target}"))
                    };
                    current = Self::resolve_in(tree, &target, true, depth + 1)?;
                }
                _ => current = candidate,
            }
        }
        Ok(current)
    }

    fn metadata(node: &Node) -> Metadata {
        match node {
            Node::File {
                content,
                mode,
                version,
                modified,
            } => Metadata {
                kind: FileKind::File,
                size: content.len() as u64,
                mode: *mode,
                modified: *modified,
                symlink_target: None,
                version: Version(format!("v{version}")),
            },
            Node::Dir {
                mode,
                version,
                modified,
            } => Metadata {
                kind: FileKind::Directory,
                size: 0,
                mode: *mode,
                modified: *modified,
                symlink_target: None,
                version: Version(format!("v{version}")),
            },
            Node::Symlink {
                target,
                version,
                modified,
            } => Metadata {
                kind: FileKind::Symlink,
                size: target.len() as u64,
                mode: 0o777,
                modified: *modified,
                symlink_target: Some(target.clone()),
                version: Version(format!("v{version}")),
            },
        }
    }

    /// Metadata of `absolute`; errors name `shown` (the caller's path).
    fn stat_in(
        tree: &Tree,
        operation: &str,
        absolute: &str,
        shown: &str,
        follow: bool,
    ) -> Result<Metadata> {
        let resolved = Self::resolve_in(tree, absolute, follow, 0)?;
        tree.nodes
            .get(&resolved)
            .map(Self::metadata)
            .ok_or_else(|| not_found(operation, shown))
    }

    fn file_content(&self, operation: &str, path: &str) -> Result<(Bytes, u64)> {
        let tree = self.lock();
        let resolved = Self::resolve_in(&tree, &self.absolute(path, None), true, 0)?;
        match tree.nodes.get(&resolved) {
            Some(Node::File {
                content, version, ..
            }) => Ok((content.clone(), *version)),
            Some(Node::Dir { .. }) => Err(Error::new(
                ErrorKind::IsADirectory,
                format!("{operation}: is a directory"),
            )
            .with_subject(path)),
            Some(Node::Symlink { .. }) => Err(Error::invalid_input(format!(
                "{operation}: dangling symbolic link"
            ))
            .with_subject(path)),
            None => Err(not_found(operation, path)),
        }
    }

    /// The content as text, without copying it.
    fn text_of(operation: &str, path: &str, content: Bytes) -> Result<Text> {
        let sample = &content[..content.len().min(BINARY_SAMPLE_LEN)];
        if sample.contains(&0) {
            return Err(
                Error::new(ErrorKind::Binary, format!("{operation}: binary content"))
                    .with_subject(path),
            );
        }
        if let Err(err) = std::str::from_utf8(&content) {
            return Err(Error::new(
                ErrorKind::InvalidUtf8,
                format!("{operation}: invalid UTF-8 at byte {}", err.valid_up_to()),
            )
            .with_subject(path));
        }
        // Valid (checked above); `Text` checks again rather than trusting.
        Text::from_utf8(content).map_err(|err| err.context(operation).with_subject(path))
    }

    /// Creates `path` and missing parents as directories.
    fn mkdir_p(&self, path: &str) -> Result<()> {
        let mut tree = self.lock();
        Self::mkdir_in(&mut tree, "mkdir", path)
    }

    fn mkdir_in(tree: &mut Tree, operation: &str, path: &str) -> Result<()> {
        let resolved = Self::resolve_in(tree, path, true, 0)?;
        let mut current = String::from("/");
        for part in resolved.split('/').filter(|part| !part.is_empty()) {
            current = join(&current, part);
            match tree.nodes.get(&current) {
                Some(Node::Dir { .. }) => {}
                Some(_) if current == resolved => {
                    return Err(Error::new(
                        ErrorKind::AlreadyExists,
                        format!("{operation}: exists and is not a directory"),
                    )
                    .with_subject(path));
                }
                Some(_) => {
                    return Err(Error::new(
                        ErrorKind::NotADirectory,
                        format!("{operation}: a parent is not a directory"),
                    )
                    .with_subject(path));
                }
                None => {
                    let version = tree.version();
                    tree.nodes.insert(
                        current.clone(),
                        Node::Dir {
                            mode: 0o755,
                            version,
                            modified: Tree::time(version),
                        },
                    );
                }
            }
        }
        Ok(())
    }

    fn check_guard(
        tree: &Tree,
        operation: &str,
        path: &str,
        resolved: &str,
        guard: &WriteGuard,
    ) -> Result<()> {
        let existing = tree.nodes.get(resolved);
        match guard {
            WriteGuard::Overwrite => Ok(()),
            WriteGuard::CreateNew => match existing {
                Some(_) => Err(Error::new(
                    ErrorKind::AlreadyExists,
                    format!("{operation}: target exists"),
                )
                .with_subject(path)),
                None => Ok(()),
            },
            WriteGuard::IfVersion(expected) => match existing {
                None => Err(not_found(operation, path)),
                Some(node) => {
                    let current = Self::metadata(node).version;
                    if &current == expected {
                        Ok(())
                    } else {
                        Err(Error::new(
                            ErrorKind::Conflict,
                            format!("{operation}: stale version {expected} (current {current})"),
                        )
                        .with_subject(path))
                    }
                }
            },
        }
    }

    fn store(
        &self,
        operation: &str,
        path: &str,
        content: Bytes,
        guard: &WriteGuard,
    ) -> Result<Version> {
        let mut tree = self.lock();
        let resolved = Self::resolve_in(&tree, &self.absolute(path, None), true, 0)?;
        if let Some(Node::Dir { .. }) = tree.nodes.get(&resolved) {
            return Err(Error::new(
                ErrorKind::IsADirectory,
                format!("{operation}: is a directory"),
            )
            .with_subject(path));
        }
        Self::check_guard(&tree, operation, path, &resolved, guard)?;
        Self::mkdir_in(&mut tree, operation, parent(&resolved))?;
        let mode = match tree.nodes.get(&resolved) {
            Some(Node::File { mode, .. }) => *mode,
            _ => 0o644,
        };
        let version = tree.version();
        tree.nodes.insert(
            resolved,
            Node::File {
                content,
                mode,
                version,
                modified: Tree::time(version),
            },
        );
        Ok(Version(format!("v{version}")))
    }

    /// Handles the magic inputs that behave the same for every operation.
    async fn magic(&self, operation: &str, path: &str) -> Result<Option<Magic>> {
        self.counters.calls.fetch_add(1, Ordering::SeqCst);
        match magic::parse(path) {
            None => Ok(None),
            Some(Magic::Error(code)) => Err(magic::injected_error(code, operation, path)),
            Some(Magic::Panic) => panic!("{operation}: probe panic on {path}"),
            Some(Magic::Hang) => magic::hang(&self.counters).await,
            Some(other) => Ok(Some(other)),
        }
    }

    fn lazy_chunks(&self, content: Bytes, chunk: usize, panic_after: Option<usize>) -> ByteStream {
        let counters = self.counters.clone();
        Box::pin(futures::stream::unfold(
            (content, 0usize, 0usize),
            move |(content, at, index)| {
                let counters = counters.clone();
                async move {
                    if panic_after == Some(index) {
                        panic!("read_bytes: probe stream panic after {index} chunks");
                    }
                    if at >= content.len() {
                        return None;
                    }
                    let end = (at + chunk).min(content.len());
                    counters.chunks_produced.fetch_add(1, Ordering::SeqCst);
                    let piece = content.slice(at..end);
                    Some((Ok(piece), (content, end, index + 1)))
                }
            },
        ))
    }
}

/// Splits `text` into chunks of at most `max` bytes on character
/// boundaries.
fn text_chunks(text: &str, max: usize) -> Vec<String> {
    let mut chunks = Vec::new();
    let mut rest = text;
    while !rest.is_empty() {
        let mut end = rest.len().min(max);
        while !rest.is_char_boundary(end) {
            end -= 1;
        }
        if end == 0 {
            end = rest.chars().next().map_or(rest.len(), char::len_utf8);
        }
        chunks.push(rest[..end].to_owned());
        rest = &rest[end..];
    }
    chunks
}

/// Whether CRLF is the dominant line ending of `text`.
fn crlf_dominant(text: &str) -> bool {
    let crlf = text.matches("\r\n").count();
    let lf = text.matches('\n').count() - crlf;
    crlf > lf
}

#[async_trait]
impl FsProvider for MemoryFs {
    async fn resolve(&self, path: &str, cwd: Option<&str>) -> Result<Resolved> {
        self.magic("resolve", path).await?;
        let absolute = self.absolute(path, cwd);
        let resolved = Self::resolve_in(&self.lock(), &absolute, true, 0)?;
        Ok(Resolved {
            uri: file_uri(resolved.as_bytes()),
            path: resolved,
        })
    }

    async fn contains(&self, root: &str, target: &str) -> Result<bool> {
        self.magic("contains", target).await?;
        let tree = self.lock();
        let root = Self::resolve_in(&tree, &self.absolute(root, None), true, 0)?;
        let target = Self::resolve_in(&tree, &self.absolute(target, None), true, 0)?;
        Ok(target == root || root == "/" || target.starts_with(&format!("{root}/")))
    }

    async fn stat(&self, path: &str) -> Result<Metadata> {
        if let Some(Magic::Log(level)) = self.magic("stat", path).await? {
            magic::log(level, "stat", path);
            return Self::stat_in(&self.lock(), "stat", "/", path, true);
        }
        Self::stat_in(&self.lock(), "stat", &self.absolute(path, None), path, true)
    }

    async fn lstat(&self, path: &str) -> Result<Metadata> {
        self.magic("lstat", path).await?;
        Self::stat_in(
            &self.lock(),
            "lstat",
            &self.absolute(path, None),
            path,
            false,
        )
    }

    async fn list(&self, dir: &str) -> Result<Vec<DirEntry>> {
        self.magic("list", dir).await?;
        let tree = self.lock();
        let shown = self.absolute(dir, None);
        let resolved = Self::resolve_in(&tree, &shown, true, 0)?;
        match tree.nodes.get(&resolved) {
            Some(Node::Dir { .. }) => {}
            Some(_) => {
                return Err(
                    Error::new(ErrorKind::NotADirectory, "list: not a directory").with_subject(dir),
                );
            }
            None => return Err(not_found("list", dir)),
        }
        let prefix = if resolved == "/" {
            "/".to_owned()
        } else {
            format!("{resolved}/")
        };
        let mut entries = Vec::new();
        for (path, node) in tree.nodes.range(prefix.clone()..) {
            let Some(name) = path.strip_prefix(&prefix) else {
                break;
            };
            if name.is_empty() || name.contains('/') {
                continue;
            }
            let resolved_target = match node {
                Node::Symlink { .. } => Self::stat_in(&tree, "list", path, path, true).ok(),
                _ => None,
            };
            entries.push(DirEntry {
                name: name.to_owned(),
                path: join(&shown, name),
                metadata: Self::metadata(node),
                resolved: resolved_target,
            });
        }
        entries.sort_by(|a, b| a.name.as_bytes().cmp(b.name.as_bytes()));
        Ok(entries)
    }

    async fn read_text(&self, path: &str) -> Result<TextFile> {
        if let Some(Magic::State) = self.magic("read_text", path).await? {
            return Ok(TextFile {
                text: self.counters.snapshot().to_string().into(),
                version: Version("state".into()),
            });
        }
        let (content, version) = self.file_content("read_text", path)?;
        Ok(TextFile {
            text: Self::text_of("read_text", path, content)?,
            version: Version(format!("v{version}")),
        })
    }

    async fn stream_text(&self, path: &str) -> Result<ReadStream<TextStream>> {
        self.magic("stream_text", path).await?;
        let (content, version) = self.file_content("stream_text", path)?;
        let size = content.len() as u64;
        let text = Self::text_of("stream_text", path, content)?;
        let chunks = text_chunks(&text, CHUNK)
            .into_iter()
            .map(|chunk| Ok(Text::from(chunk)));
        Ok(ReadStream {
            version: Version(format!("v{version}")),
            size,
            chunks: Box::pin(futures::stream::iter(chunks)),
        })
    }

    async fn read_bytes(&self, path: &str) -> Result<ReadStream<ByteStream>> {
        match self.magic("read_bytes", path).await? {
            Some(Magic::Stream(count)) => {
                let content: Bytes = (0..count as usize)
                    .flat_map(|index| std::iter::repeat_n(index as u8, MAGIC_CHUNK))
                    .collect::<Vec<u8>>()
                    .into();
                return Ok(ReadStream {
                    version: Version("stream".into()),
                    size: content.len() as u64,
                    chunks: self.lazy_chunks(content, MAGIC_CHUNK, None),
                });
            }
            Some(Magic::PanicStream) => {
                return Ok(ReadStream {
                    version: Version("panic-stream".into()),
                    size: 2 * MAGIC_CHUNK as u64,
                    chunks: self.lazy_chunks(vec![7; 2 * MAGIC_CHUNK].into(), MAGIC_CHUNK, Some(1)),
                });
            }
            _ => {}
        }
        let (content, version) = self.file_content("read_bytes", path)?;
        Ok(ReadStream {
            version: Version(format!("v{version}")),
            size: content.len() as u64,
            chunks: self.lazy_chunks(content, CHUNK, None),
        })
    }

    async fn write(&self, path: &str, content: Bytes, guard: WriteGuard) -> Result<Version> {
        self.magic("write", path).await?;
        self.store("write", path, content, &guard)
    }

    /// The content is held in memory anyway: collected, then stored at
    /// once (the guard checked before and again at the store).
    async fn write_stream(
        &self,
        path: &str,
        content: ByteStream,
        guard: WriteGuard,
    ) -> Result<Version> {
        self.magic("write_stream", path).await?;
        {
            // The guard refuses before anything is pulled.
            let tree = self.lock();
            let resolved = Self::resolve_in(&tree, &self.absolute(path, None), true, 0)?;
            Self::check_guard(&tree, "write_stream", path, &resolved, &guard)?;
        }
        let content = dsh_plugin_api::stream::collect_bytes(content).await?;
        self.store("write_stream", path, Bytes::from(content), &guard)
    }

    async fn edit(&self, path: &str, edits: Vec<Edit>, guard: WriteGuard) -> Result<EditOutcome> {
        self.magic("edit", path).await?;
        let (content, _) = self.file_content("edit", path)?;
        let original = Self::text_of("edit", path, content)?;
        let crlf = crlf_dominant(&original);
        let mut text = original.replace("\r\n", "\n");
        let mut replacements = 0;
        for (index, edit) in edits.iter().enumerate() {
            let old = edit.old.replace("\r\n", "\n");
            if old.is_empty() {
                return Err(
                    Error::invalid_input(format!("edit: edit {index} has empty old text"))
                        .with_subject(path),
                );
            }
            let matches = text.matches(old.as_str()).count();
            if matches == 0 || (matches > 1 && !edit.replace_all) {
                return Err(Error::invalid_input(format!(
                    "edit: edit {index} matches {matches} times{}",
                    if matches > 1 {
                        " (set replace_all or add context)"
                    } else {
                        ""
                    }
                ))
                .with_subject(path));
            }
            text = text.replace(old.as_str(), &edit.new.replace("\r\n", "\n"));
            replacements += matches;
        }
        if crlf {
            text = text.replace('\n', "\r\n");
        }
        let version = self.store("edit", path, Bytes::from(text), &guard)?;
        Ok(EditOutcome {
            version,
            replacements,
        })
    }

    async fn mkdir(&self, path: &str) -> Result<()> {
        self.magic("mkdir", path).await?;
        let absolute = self.absolute(path, None);
        self.mkdir_p(&absolute).map_err(|err| match err.subject() {
            Some(_) => err,
            None => err.with_subject(path),
        })
    }

    async fn remove(&self, path: &str) -> Result<bool> {
        self.magic("remove", path).await?;
        let mut tree = self.lock();
        let resolved = Self::resolve_in(&tree, &self.absolute(path, None), false, 0)?;
        if resolved == "/" {
            return Err(
                Error::new(ErrorKind::PermissionDenied, "remove: refusing to remove /")
                    .with_subject(path),
            );
        }
        let existed = tree.nodes.remove(&resolved).is_some();
        let below = format!("{resolved}/");
        tree.nodes.retain(|key, _| !key.starts_with(&below));
        Ok(existed)
    }

    async fn rename(&self, from: &str, to: &str) -> Result<()> {
        self.magic("rename", from).await?;
        let mut tree = self.lock();
        let source = Self::resolve_in(&tree, &self.absolute(from, None), false, 0)?;
        let target = Self::resolve_in(&tree, &self.absolute(to, None), false, 0)?;
        let Some(node) = tree.nodes.get(&source).cloned() else {
            return Err(not_found("rename", from));
        };
        if target == source {
            return Ok(());
        }
        if target.starts_with(&format!("{source}/")) {
            return Err(
                Error::invalid_input("rename: cannot move a directory into itself")
                    .with_subject(to),
            );
        }
        if let (Some(Node::Dir { .. }), Node::File { .. } | Node::Symlink { .. }) =
            (tree.nodes.get(&target), &node)
        {
            return Err(
                Error::new(ErrorKind::IsADirectory, "rename: target is a directory")
                    .with_subject(to),
            );
        }
        Self::mkdir_in(&mut tree, "rename", parent(&target))?;
        let below = format!("{source}/");
        let moved: Vec<(String, Node)> = tree
            .nodes
            .iter()
            .filter(|(key, _)| key.starts_with(&below))
            .map(|(key, node)| (format!("{target}/{}", &key[below.len()..]), node.clone()))
            .collect();
        tree.nodes
            .retain(|key, _| key != &source && !key.starts_with(&below));
        let target_below = format!("{target}/");
        tree.nodes.retain(|key, _| !key.starts_with(&target_below));
        tree.nodes.insert(target, node);
        tree.nodes.extend(moved);
        Ok(())
    }
}

impl MemoryFs {
    /// Creates a symlink (test setup; the seam has no symlink operation).
    pub fn symlink(&self, path: &str, target: &str) -> Result<()> {
        let mut tree = self.lock();
        let path = normalize(path);
        Self::mkdir_in(&mut tree, "symlink", parent(&path))?;
        let version = tree.version();
        tree.nodes.insert(
            path,
            Node::Symlink {
                target: target.to_owned(),
                version,
                modified: Tree::time(version),
            },
        );
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use dsh_plugin_api::stream::collect_bytes;
    use futures::StreamExt;

    fn fs() -> MemoryFs {
        MemoryFs::new("/work", Arc::new(Counters::default()))
    }

    fn run<T>(future: impl std::future::Future<Output = T>) -> T {
        futures::executor::block_on(future)
    }

    #[test]
    fn writes_reads_and_guards() {
        let fs = fs();
        let v1 = run(fs.write(
            "a/b.txt",
            Bytes::from_static(b"hello"),
            WriteGuard::CreateNew,
        ))
        .unwrap();
        let text = run(fs.read_text("/work/a/b.txt")).unwrap();
        assert_eq!(text.text, "hello");
        assert_eq!(text.version, v1);
        let err =
            run(fs.write("a/b.txt", Bytes::from_static(b"x"), WriteGuard::CreateNew)).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::AlreadyExists);
        let v2 = run(fs.write(
            "a/b.txt",
            Bytes::from_static(b"bye"),
            WriteGuard::IfVersion(v1.clone()),
        ))
        .unwrap();
        let err = run(fs.write(
            "a/b.txt",
            Bytes::from_static(b"x"),
            WriteGuard::IfVersion(v1),
        ))
        .unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Conflict);
        assert_ne!(v2, Version("v0".into()));
        let err = run(fs.write("a", Bytes::from_static(b"x"), WriteGuard::Overwrite)).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::IsADirectory);
    }

    #[test]
    fn text_rules_binary_and_utf8() {
        let fs = fs();
        run(fs.write(
            "bin",
            Bytes::from(vec![b'a', 0, b'b']),
            WriteGuard::Overwrite,
        ))
        .unwrap();
        assert_eq!(
            run(fs.read_text("bin")).unwrap_err().kind(),
            ErrorKind::Binary
        );
        run(fs.write("bad", Bytes::from(vec![b'a', 0xff]), WriteGuard::Overwrite)).unwrap();
        assert_eq!(
            run(fs.read_text("bad")).unwrap_err().kind(),
            ErrorKind::InvalidUtf8
        );
        assert_eq!(
            run(fs.read_text("/")).unwrap_err().kind(),
            ErrorKind::IsADirectory
        );
        assert_eq!(
            run(fs.read_text("missing")).unwrap_err().kind(),
            ErrorKind::NotFound
        );
        let long = "ü".repeat(CHUNK);
        run(fs.write("long", Bytes::from(long.clone()), WriteGuard::Overwrite)).unwrap();
        let stream = run(fs.stream_text("long")).unwrap();
        let chunks: Vec<Text> = run(stream.chunks.map(|chunk| chunk.unwrap()).collect());
        assert!(chunks.len() > 1);
        assert_eq!(chunks.concat(), long);
        let bytes = run(fs.read_bytes("long")).unwrap();
        assert_eq!(run(collect_bytes(bytes.chunks)).unwrap(), long.into_bytes());
    }

    #[test]
    fn symlinks_resolve_and_contain() {
        let fs = fs();
        fs.symlink("/work/link", "/etc").unwrap();
        fs.symlink("/work/rel", "sub").unwrap();
        let resolved = run(fs.resolve("link/missing/../x", None)).unwrap();
        assert_eq!(resolved.path, "/etc/x");
        assert_eq!(run(fs.resolve("rel", None)).unwrap().path, "/work/sub");
        assert_eq!(
            run(fs.resolve("/a b\n", None)).unwrap().uri,
            "file:///a%20b%0A"
        );
        assert!(run(fs.contains("/work", "/work/sub/x")).unwrap());
        assert!(!run(fs.contains("/work", "/work/link/x")).unwrap());
        assert_eq!(run(fs.lstat("link")).unwrap().kind, FileKind::Symlink);
        assert_eq!(
            run(fs.stat("link")).unwrap_err().kind(),
            ErrorKind::NotFound
        );
        let entries = run(fs.list("/work")).unwrap();
        let names: Vec<&str> = entries.iter().map(|entry| entry.name.as_str()).collect();
        assert_eq!(names, ["link", "rel"]);
        assert!(entries[0].resolved.is_none());
    }

    #[test]
    fn edits_mkdir_remove_rename() {
        let fs = fs();
        run(fs.write(
            "e.txt",
            Bytes::from_static(b"one\r\ntwo\r\ntwo\r\n"),
            WriteGuard::Overwrite,
        ))
        .unwrap();
        let edit = |old: &str, new: &str, all| Edit {
            old: old.into(),
            new: new.into(),
            replace_all: all,
        };
        let err = run(fs.edit(
            "e.txt",
            vec![edit("two", "2", false)],
            WriteGuard::Overwrite,
        ))
        .unwrap_err();
        assert!(err.message().contains("matches 2 times"), "{err}");
        let err = run(fs.edit(
            "e.txt",
            vec![edit("zzz", "2", false)],
            WriteGuard::Overwrite,
        ))
        .unwrap_err();
        assert!(err.message().contains("matches 0 times"), "{err}");
        let outcome = run(fs.edit(
            "e.txt",
            vec![edit("one\ntwo", "1\n2", false), edit("two", "deux", true)],
            WriteGuard::Overwrite,
        ))
        .unwrap();
        assert_eq!(outcome.replacements, 2);
        assert_eq!(
            run(fs.read_text("e.txt")).unwrap().text,
            "1\r\n2\r\ndeux\r\n"
        );
        run(fs.mkdir("d/e/f")).unwrap();
        run(fs.mkdir("d/e/f")).unwrap();
        assert_eq!(
            run(fs.mkdir("e.txt")).unwrap_err().kind(),
            ErrorKind::AlreadyExists
        );
        run(fs.write("d/e/f/g", Bytes::from_static(b"g"), WriteGuard::Overwrite)).unwrap();
        run(fs.rename("d", "moved/here")).unwrap();
        assert_eq!(run(fs.read_text("moved/here/e/f/g")).unwrap().text, "g");
        assert!(run(fs.remove("moved")).unwrap());
        assert!(!run(fs.remove("moved")).unwrap());
        assert_eq!(
            run(fs.stat("moved/here")).unwrap_err().kind(),
            ErrorKind::NotFound
        );
    }

    #[test]
    fn magic_paths() {
        let counters = Arc::new(Counters::default());
        let fs = MemoryFs::new("/", counters.clone());
        let err = run(fs.stat("/.probe/error/5")).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::NotADirectory);
        assert_eq!(err.subject(), Some("/.probe/error/5"));
        let stream = run(fs.read_bytes("/.probe/stream/3")).unwrap();
        assert_eq!(counters.chunks_produced.load(Ordering::SeqCst), 0, "lazy");
        assert_eq!(
            run(collect_bytes(stream.chunks)).unwrap().len(),
            3 * MAGIC_CHUNK
        );
        assert_eq!(counters.chunks_produced.load(Ordering::SeqCst), 3);
        let state: serde_json::Value =
            serde_json::from_str(&run(fs.read_text("/.probe/state")).unwrap().text).unwrap();
        assert_eq!(state["chunksProduced"], 3);
    }
}
