//! The `fs` seam: files of one execution world (docs/design.md §5.1).
//!
//! Paths are strings in the world's own syntax (POSIX for every provider in
//! this project). Every operation accepts an absolute path or a relative one,
//! which is joined to the world's cwd; callers with their own cwd call
//! [`FsProvider::resolve`] first. Errors use the shared vocabulary
//! ([`crate::ErrorKind`]): `NotFound`, `PermissionDenied`, `AlreadyExists`,
//! `Conflict` (stale version), `NotADirectory`, `IsADirectory`, `InvalidUtf8`,
//! `Binary`, `InvalidInput`, `Cancelled`, `Unavailable` (world gone), `Io`.
//!
//! Cancellation: dropping an operation's future cancels it. Reads and
//! metadata calls then have no effect. `write` and `edit` are atomic: the
//! publishing rename is the commit point, so a future dropped before the
//! commit leaves the old file intact (never a partial one), and a provider
//! never abandons a rename it has started.
//!
//! # World-side operations
//!
//! [`FsProvider::walk`], [`FsProvider::search`] and
//! [`FsProvider::read_many`] do in one call what a caller would otherwise
//! do file by file; their types and the `beneath` confinement are
//! described in [`WalkSpec`], [`SearchSpec`] and [`ReadManyLimits`]. With
//! `beneath` set nothing outside the root is read or listed, whatever the
//! tree does meanwhile: no symlink is followed below the root and no `..`
//! leaves it, decided by the kernel on every open
//! (`openat2(RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS)` or a no-follow
//! descriptor walk). A provider without native versions keeps the
//! defaults (`Unsupported`), and `dsh_provider_kit::world` composes them
//! from the primitives with identical results — except confinement, which
//! a composition of path-based calls cannot make race-free, so it stays
//! `Unsupported` there.

use std::pin::Pin;
use std::time::SystemTime;

use async_trait::async_trait;
use futures::Stream;

use crate::error::{Error, ErrorKind, Result};
use crate::stream::{ByteStream, TextStream};
use crate::text::Text;
use bytes::Bytes;

mod world;

pub use world::{
    ReadManyItem, ReadManyLimits, SearchEvent, SearchLimit, SearchLimits, SearchLine, SearchMode,
    SearchSpec, SearchSummary, WalkEntry, WalkEvent, WalkSpec, WalkSummary,
};

/// A walk's entries in order, then its summary (see [`FsProvider::walk`]).
/// The stream ends after `End` or after the first error; dropping it stops
/// the walk.
pub type WalkStream = Pin<Box<dyn Stream<Item = Result<WalkEvent>> + Send + 'static>>;

/// A search's results in order, then its summary (see
/// [`FsProvider::search`]). The stream ends after `End` or after the first
/// error; dropping it stops the search.
pub type SearchStream = Pin<Box<dyn Stream<Item = Result<SearchEvent>> + Send + 'static>>;

/// How many leading bytes are sampled for NUL to classify content as binary.
pub const BINARY_SAMPLE_LEN: usize = 8192;

/// An opaque token identifying one state of a file's content and metadata.
/// Two versions compare equal only if nothing observable changed in between
/// (for a given provider); callers never parse it.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Version(pub String);

impl std::fmt::Display for Version {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// The canonical identity of a path in the world.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Resolved {
    /// Absolute, canonical path (symlinks resolved, `.`/`..` removed; the
    /// final components need not exist — `realpath -m` semantics) as a
    /// process in the world would name it.
    pub path: String,
    /// The same path as a `file://` URI, percent-encoded (RFC 8089), so
    /// newline and multibyte names round-trip.
    pub uri: String,
}

/// What kind of object a path names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FileKind {
    File,
    Directory,
    Symlink,
    /// Sockets, FIFOs, devices.
    Other,
}

/// Metadata of one path (from `stat` or `lstat`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Metadata {
    pub kind: FileKind,
    /// Size in bytes (for a symlink from `lstat`: the link's own size).
    pub size: u64,
    /// Permission bits (`0o7777` mask), e.g. `0o644`.
    pub mode: u32,
    /// Last modification time.
    pub modified: SystemTime,
    /// For a symlink (`lstat`), where it points, as stored in the link.
    pub symlink_target: Option<String>,
    /// Opaque version of this state (see [`Version`]).
    pub version: Version,
}

/// One entry of a directory listing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DirEntry {
    /// The entry's name within the directory (no separators).
    pub name: String,
    /// Absolute path of the entry (the listed directory's path joined with
    /// `name`; not canonicalised).
    pub path: String,
    /// The entry itself, not followed (`lstat`).
    pub metadata: Metadata,
    /// For a symlink entry: the metadata of what it points to (`stat`),
    /// `None` when it cannot be followed (dangling, a loop, no permission).
    /// `None` for every other entry.
    pub resolved: Option<Metadata>,
}

/// A whole UTF-8 file and the version it was read at.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TextFile {
    pub text: Text,
    pub version: Version,
}

/// A streamed read: the version the stream was opened at and its chunks.
pub struct ReadStream<S> {
    pub version: Version,
    /// Total size in bytes at open time.
    pub size: u64,
    pub chunks: S,
}

impl<S> std::fmt::Debug for ReadStream<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReadStream")
            .field("version", &self.version)
            .field("size", &self.size)
            .finish_non_exhaustive()
    }
}

/// A condition a mutation checks against the target's current state,
/// atomically with respect to other mutations through the same provider.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum WriteGuard {
    /// No condition: create or replace.
    #[default]
    Overwrite,
    /// The target must not exist (else `AlreadyExists`).
    CreateNew,
    /// The target must exist at exactly this version (else `Conflict`, or
    /// `NotFound` if it is gone).
    IfVersion(Version),
}

/// One literal replacement inside a text file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Edit {
    /// Text to find, matched literally after normalising CRLF to LF on both
    /// sides. Must not be empty.
    pub old: String,
    /// Replacement text (LF line endings; the file's dominant line ending is
    /// restored on store).
    pub new: String,
    /// Replace every occurrence; otherwise exactly one occurrence must exist.
    pub replace_all: bool,
}

/// The result of an edit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EditOutcome {
    /// The committed version.
    pub version: Version,
    /// How many replacements were made in total.
    pub replacements: usize,
}

/// Files of one execution world.
///
/// Implementations are shared (`Arc`) and called concurrently; mutations on
/// one canonical target are serialised by the provider.
#[async_trait]
pub trait FsProvider: Send + Sync + 'static {
    /// Canonical identity of `path`: relative paths join `cwd` if given,
    /// else the world's cwd; `realpath -m` semantics (symlinks resolved where
    /// they exist; missing final components allowed).
    async fn resolve(&self, path: &str, cwd: Option<&str>) -> Result<Resolved>;

    /// Whether `target` lies inside `root` (or is `root`), decided on
    /// canonical paths with symlinks resolved — a symlink inside `root` that
    /// points outside it is *not* contained.
    async fn contains(&self, root: &str, target: &str) -> Result<bool>;

    /// Metadata of `path`, following symlinks.
    async fn stat(&self, path: &str) -> Result<Metadata>;

    /// Metadata of `path` itself (a symlink is reported as a symlink).
    async fn lstat(&self, path: &str) -> Result<Metadata>;

    /// One level of `dir`, sorted by name (byte order), without `.`/`..`;
    /// symlink entries carry their resolved target metadata.
    async fn list(&self, dir: &str) -> Result<Vec<DirEntry>>;

    /// The whole file as strict UTF-8 (`InvalidUtf8` on any invalid
    /// sequence, `Binary` when a NUL occurs in the first
    /// [`BINARY_SAMPLE_LEN`] bytes, `IsADirectory` for a directory).
    async fn read_text(&self, path: &str) -> Result<TextFile>;

    /// The file as a stream of UTF-8 text chunks, decoded across chunk
    /// boundaries. The binary check runs before the stream is returned; an
    /// invalid sequence later in the file ends the stream with
    /// `InvalidUtf8`. An empty file is an empty stream.
    async fn stream_text(&self, path: &str) -> Result<ReadStream<TextStream>>;

    /// The file as raw byte chunks (any content). An empty file is an empty
    /// stream.
    async fn read_bytes(&self, path: &str) -> Result<ReadStream<ByteStream>>;

    /// Atomically replaces (or creates) `path` with `content`: stages in a
    /// random sibling directory (mode 0700), preserves an existing file's
    /// mode, creates missing parents, publishes by same-filesystem rename,
    /// and returns the committed version. `guard` is checked against the
    /// state immediately before the commit.
    async fn write(&self, path: &str, content: Bytes, guard: WriteGuard) -> Result<Version>;

    /// Atomically replaces (or creates) `path` with the bytes `content`
    /// yields, as [`FsProvider::write`] does, without ever holding the whole
    /// content: chunks are staged as they arrive, so the stream is pulled at
    /// the pace the world accepts it and content of any size takes bounded
    /// memory. The guard is checked before the first chunk is pulled (a
    /// write that cannot commit consumes nothing) and again immediately
    /// before the commit. If `content` yields an error, the write fails with
    /// that error and nothing is published; dropping the future before the
    /// commit leaves the target untouched. Either way the staging is
    /// removed.
    async fn write_stream(
        &self,
        path: &str,
        content: ByteStream,
        guard: WriteGuard,
    ) -> Result<Version>;

    /// Applies `edits` in order to the UTF-8 file at `path` and stores the
    /// result atomically, as [`FsProvider::write`] does. Matching is literal
    /// on LF-normalised text; the file's dominant line ending (CRLF or LF)
    /// is restored on store. An edit that matches zero times — or several
    /// times without `replace_all` — fails with `InvalidInput` saying which
    /// edit and how many matches, and nothing is stored. (An edit needs an
    /// existing file, so `WriteGuard::CreateNew` always fails.)
    async fn edit(&self, path: &str, edits: Vec<Edit>, guard: WriteGuard) -> Result<EditOutcome>;

    /// Creates `path` and missing parents (`mkdir -p`). An existing
    /// directory is success; an existing non-directory is `AlreadyExists`.
    async fn mkdir(&self, path: &str) -> Result<()>;

    /// Removes `path` recursively (a symlink itself, never its target).
    /// Returns whether anything existed; a missing path is not an error.
    async fn remove(&self, path: &str) -> Result<bool>;

    /// Renames `from` to `to`, creating `to`'s missing parents; replaces an
    /// existing file at `to` as POSIX `rename` does.
    async fn rename(&self, from: &str, to: &str) -> Result<()>;

    /// The tree below the directory `root`, breadth-first (the root's
    /// entries by name in byte order, then each subdirectory's in the order
    /// the subdirectories were met), each entry with its own (`lstat`)
    /// metadata; symlinks are yielded, never followed. Bounded by `spec`
    /// (depth, entries, globs, `.gitignore`); confined beneath `root` when
    /// `spec.beneath` (see the [module docs](self#world-side-operations)).
    /// Errors opening the root are the call's; a subdirectory that cannot
    /// be listed is skipped and counted. Dropping the stream stops the
    /// walk.
    ///
    /// The default answers `Unsupported`: a provider without a native walk
    /// is walked by `dsh_provider_kit::world::walk`, composed from `list`.
    async fn walk(&self, root: &str, spec: WalkSpec) -> Result<WalkStream> {
        let _ = spec;
        Err(not_native("walk", root))
    }

    /// A regex search of the file or tree at `root`: the files a walk with
    /// the same globs, `.gitignore` and depth bounds yields, filtered by
    /// type, in the walk's order; binary files (a NUL in the first
    /// [`BINARY_SAMPLE_LEN`] bytes) are skipped and counted, symlinks are
    /// not searched. Results stream in order and the search stops at the
    /// first bound of `spec.limits` it meets, saying which. An invalid
    /// pattern, glob or type is `InvalidInput`. Dropping the stream stops
    /// the search.
    ///
    /// The default answers `Unsupported` (see [`FsProvider::walk`]):
    /// `dsh_provider_kit::world::search` composes it from `list` and
    /// `read_bytes`.
    async fn search(&self, root: &str, spec: SearchSpec) -> Result<SearchStream> {
        let _ = spec;
        Err(not_native("search", root))
    }

    /// Several small text files in one call, in request order: each item
    /// is what [`FsProvider::read_text`] answers for it, or the error of a
    /// bound of `limits`; only a failure of the call itself (the world
    /// gone) is the call's error.
    ///
    /// The default answers `Unsupported`: `dsh_provider_kit::world::read_many`
    /// composes it from `read_text`.
    async fn read_many(
        &self,
        paths: Vec<String>,
        limits: ReadManyLimits,
    ) -> Result<Vec<ReadManyItem>> {
        let _ = (paths, limits);
        Err(not_native("read_many", ""))
    }
}

/// The default world-side operation's answer: `Unsupported`, naming it.
fn not_native(operation: &str, subject: &str) -> Error {
    Error::new(
        ErrorKind::Unsupported,
        format!("{operation}: this provider has no native {operation}"),
    )
    .with_subject(subject)
}
