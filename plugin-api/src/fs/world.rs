//! The types of the `fs` seam's world-side operations (see the module docs
//! of [`crate::fs`], "World-side operations").

use crate::error::Result;
use crate::fs::{Metadata, TextFile};

/// How a walk descends (see [`crate::fs::FsProvider::walk`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WalkSpec {
    /// Directories are listed down to this depth: 1 yields the root's
    /// entries only. At least 1.
    pub max_depth: u32,
    /// The most entries yielded; the walk then ends incomplete.
    pub max_entries: u64,
    /// Globs in `rg -g` syntax, matched against the path below the root
    /// (without a `/` a glob matches the name at any depth): an entry is
    /// yielded when it matches some include glob (or there is none) and no
    /// `!`-prefixed exclude glob; a directory an exclude glob matches is not
    /// descended into. Include globs never stop descent.
    pub globs: Vec<String>,
    /// Skip what `.gitignore` files ignore (and `.git` itself), as git does.
    pub gitignore: bool,
    /// Confine the walk beneath its root (see the module docs).
    pub beneath: bool,
}

/// One entry met by a walk.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WalkEntry {
    /// The path below the root (`src/main.rs`).
    pub relative: String,
    /// The root as the caller spelled it joined with `relative` (`.` adds
    /// nothing: `.` → `main.rs`).
    pub path: String,
    /// 1 for the root's entries.
    pub depth: u32,
    /// The entry itself, not followed (`lstat`): kind, size, mode, mtime,
    /// symlink target, version.
    pub metadata: Metadata,
}

/// How a walk ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct WalkSummary {
    /// Whether every entry within the bounds was yielded (false when the
    /// walk stopped at `max_entries` with entries left).
    pub complete: bool,
    /// Entries skipped because `.gitignore` ignores them (an ignored
    /// directory counts once, its contents not at all).
    pub ignored: u64,
    /// Subdirectories that could not be listed (gone, no permission, or —
    /// confined — replaced by a symlink).
    pub unreadable: u64,
}

/// One item of a walk's stream: entries in order, then exactly one `End`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WalkEvent {
    Entry(WalkEntry),
    End(WalkSummary),
}

/// What a search reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SearchMode {
    /// Matching lines, with `context` lines before and after each.
    Lines { context: u32 },
    /// The files with at least one match (searching each stops at its
    /// first match).
    FilesWithMatches,
    /// The files with matches and how many lines match in each.
    Count,
}

/// The bounds of one search: it stops at the first it meets and says which.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SearchLimits {
    /// Matching lines returned (in `Lines` mode), or files reported
    /// (`FilesWithMatches`, `Count`). At least 1.
    pub max_matches: u64,
    /// Bytes of file content read in all.
    pub max_bytes_scanned: u64,
    /// Files searched (binary ones included).
    pub max_files: u64,
    /// Bytes of paths and line text returned.
    pub max_output_bytes: u64,
    /// Entries the walk visits.
    pub max_entries: u64,
    /// Characters of a line returned: a longer line is cut to a window
    /// from its start or, when the first match lies beyond, from a little
    /// before the match.
    pub max_line_chars: u32,
}

/// A search: a regex over a file or a tree (see
/// [`crate::fs::FsProvider::search`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SearchSpec {
    /// A regular expression in ripgrep's syntax (Rust `regex`), matched
    /// against each line on its own.
    pub pattern: String,
    pub case_insensitive: bool,
    pub mode: SearchMode,
    /// Globs as in [`WalkSpec::globs`]; only files they admit are searched.
    pub globs: Vec<String>,
    /// ripgrep's file type names (`rust`, `py`, `js` …): only files of one
    /// of them are searched. An unknown name is `InvalidInput`.
    pub types: Vec<String>,
    /// Skip what `.gitignore` ignores.
    pub gitignore: bool,
    /// Directories are searched down to this depth (1: the root's files).
    pub max_depth: u32,
    /// Confine the search beneath its root (see the module docs).
    pub beneath: bool,
    pub limits: SearchLimits,
}

/// One line returned by a `Lines` search: a match, or context around one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SearchLine {
    /// The file, as [`WalkEntry::path`] names it (the root itself when the
    /// root is a file).
    pub path: String,
    /// 1-based line number.
    pub line: u64,
    /// The line without its terminator, or the window of it that is
    /// returned (see [`SearchLimits::max_line_chars`]); invalid UTF-8 is
    /// shown as U+FFFD.
    pub text: String,
    /// Bytes of the line before `text`.
    pub offset: u64,
    /// The whole line's length in bytes (without its terminator).
    pub len: u64,
    /// A context line rather than a match.
    pub context: bool,
}

/// The bound that ended a search early.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SearchLimit {
    /// `max_matches` were returned and at least one more exists.
    Matches,
    OutputBytes,
    BytesScanned,
    Files,
    Entries,
}

/// How a search ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct SearchSummary {
    /// Text files searched.
    pub files_searched: u64,
    /// Files skipped: binary (a NUL in the first 8192 bytes) or
    /// unreadable.
    pub files_skipped: u64,
    /// Entries `.gitignore` ignored.
    pub ignored: u64,
    /// The bound that stopped the search, if one did.
    pub stopped_by: Option<SearchLimit>,
}

/// One item of a search's stream, in file order (the walk's) and line
/// order, then exactly one `End`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SearchEvent {
    Line(SearchLine),
    /// A file with matches (`FilesWithMatches`: `matches` is 1).
    File {
        path: String,
        matches: u64,
    },
    End(SearchSummary),
}

/// The bounds of one [`crate::fs::FsProvider::read_many`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReadManyLimits {
    /// The largest file read; a larger one fails alone (`InvalidInput`).
    pub max_file_bytes: u64,
    /// Bytes read in all; a file that would pass it fails alone
    /// (`InvalidInput`), later smaller ones are still read.
    pub max_total_bytes: u64,
    /// Confine every read beneath this directory (see the module docs):
    /// relative paths join it.
    pub beneath: Option<String>,
}

/// One file of a [`crate::fs::FsProvider::read_many`], in request order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReadManyItem {
    /// The path as requested.
    pub path: String,
    /// What `read_text` of it answers (or the bound's error).
    pub result: Result<TextFile>,
}
