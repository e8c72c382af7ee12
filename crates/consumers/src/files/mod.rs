//! File tools over the `fs` seam: read, write, edit, list, stat, move,
//! remove, mkdir, find and grep (docs/design.md §11).
//!
//! **Paths** are the world's: a relative path is passed to the seam as
//! given, which joins it to the world's cwd; results echo paths as the
//! caller spelled them (a walk's paths are the given root joined with the
//! entry's path below it, e.g. `src` → `src/main.rs`; `.` → `main.rs`).
//!
//! **Bounds.** Every tool bounds what it reads and returns (the consts of
//! each tool's module): reads stream through the seam and stop once their
//! window is filled, walks stop after a number of entries, results are
//! capped in count and bytes, and long lines are cut with a marker saying
//! how much was left out. A result says when it is incomplete and, where
//! possible, how to continue.
//!
//! **`.gitignore`.** `list_dir`, `find_files` and `grep` skip what
//! `.gitignore` files ignore, as git would: the rules of each directory's
//! `.gitignore` (read through the seam as the walk descends) apply below
//! it, deeper files override shallower ones, `!` re-includes, and rules of
//! `.gitignore` files above the walked directory apply up to the enclosing
//! repository's root (the nearest ancestor holding `.git`; none outside a
//! repository). A directory holding `.git` starts afresh (a nested
//! repository). `.git` itself is always skipped. Not read:
//! `.git/info/exclude`, the global excludes file, `.ignore` files. Hidden
//! files (dot files) are not skipped for being hidden, and symlinks are
//! listed but never followed.
//!
//! **Cancellation.** Dropping a tool's future cancels it. Reads, listings
//! and walks then have no effect; `write_file` and `edit_file` commit by the
//! seam's atomic rename, so a dropped call leaves the old file or the new
//! one, never a partial file (an `edit_file` of several files writes them in
//! a task of its own, which finishes or undoes the whole patch once begun);
//! `remove_path` of a tree may have removed part of it (as the seam's
//! `remove` does).

pub(crate) mod commit;
mod diff;
mod edit;
mod errors;
mod find;
mod grep;
mod image;
mod kind;
mod list;
mod make_dir;
mod move_path;
mod read;
mod remove_path;
mod stat;
mod text_cursor;
mod walk;
mod write;

use std::sync::Arc;

use dsh_plugin_api::fs::FsProvider;

pub use diff::DIFF_MAX_BYTES;
pub use edit::{
    EDIT_MAX_EDITS, EDIT_MAX_FILE_BYTES, EDIT_MAX_TOTAL_BYTES, EditFileRequest, EditFileResult,
    EditedFile, FileEdit,
};
pub use find::{
    FIND_DEFAULT_MAX_RESULTS, FIND_MAX_RESULTS, FindFilesRequest, FindFilesResult, FoundPath,
};
pub use grep::{
    GREP_DEFAULT_MAX_MATCHES, GREP_MAX_BYTES_SCANNED, GREP_MAX_CONTEXT, GREP_MAX_FILES,
    GREP_MAX_LINE_CHARS, GREP_MAX_MATCHES, GREP_MAX_OUTPUT_BYTES, GrepFile, GrepLimit, GrepLine,
    GrepMode, GrepRequest, GrepResult,
};
pub use image::READ_MAX_IMAGE_BYTES;
pub use kind::EntryKind;
pub use list::{
    LIST_DEFAULT_DEPTH, LIST_DEFAULT_MAX_ENTRIES, LIST_MAX_DEPTH, LIST_MAX_ENTRIES,
    LIST_MAX_VISITED, ListDirRequest, ListDirResult, ListedEntry,
};
pub use make_dir::{MakeDirRequest, MakeDirResult};
pub use move_path::{MovePathRequest, MovePathResult};
pub use read::{
    READ_COUNT_AHEAD_BYTES, READ_DEFAULT_LIMIT, READ_DEFAULT_MAX_BYTES, READ_MAX_BYTES,
    READ_MAX_LINE_CHARS, ReadFileRequest, ReadFileResult,
};
pub use remove_path::{RemovePathRequest, RemovePathResult};
pub use stat::{StatRequest, StatResult};
pub use walk::{WALK_MAX_DEPTH, WALK_MAX_VISITED};
pub use write::{WRITE_MAX_BYTES, WriteFileRequest, WriteFileResult};

/// The file tools of one world. Each tool is one method (its name is the
/// tool's name); every method may be called concurrently.
pub struct Files {
    fs: Arc<dyn FsProvider>,
}

impl Files {
    /// The file tools of the world `fs` serves.
    pub fn new(fs: Arc<dyn FsProvider>) -> Files {
        Files { fs }
    }
}

/// A count from the seam (`u64`) as the tools report it.
fn count(value: u64) -> usize {
    usize::try_from(value).unwrap_or(usize::MAX)
}
