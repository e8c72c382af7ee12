//! Breadth-first walks of a directory tree through the seam's `list`,
//! skipping `.git` and what `.gitignore` ignores (see the module docs of
//! [`super`]), bounded in depth and in entries visited.
//!
//! Order is stable: the root's entries by name (the seam sorts listings by
//! byte order), then those of each subdirectory in the order the
//! subdirectories were met. Symlinks are reported, never followed (so a
//! link cannot loop a walk or lead it out of the tree).

use std::collections::VecDeque;
use std::path::PathBuf;

use dsh_plugin_api::fs::{DirEntry, FileKind, FsProvider};
use dsh_plugin_api::{ErrorKind, Result};

use super::errors::from_seam;
use super::ignore_rules::{self, Rules};

/// The deepest a `find_files` or `grep` walk descends below its root.
pub const WALK_MAX_DEPTH: usize = 64;

/// The most entries a `find_files` or `grep` walk visits (50,000); the
/// result then says it is incomplete.
pub const WALK_MAX_VISITED: usize = 50_000;

/// One entry met by a walk.
pub(super) struct WalkEntry {
    /// The path below the walk's root (`a/b.rs`).
    pub relative: String,
    /// The path as the caller would name it: the root as given joined with
    /// `relative` (what the seam is called with, and what results show).
    pub path: String,
    pub entry: DirEntry,
}

/// A directory the walk has yet to list.
struct PendingDir {
    relative: String,
    path: String,
    /// Canonical absolute path, for `.gitignore` matching.
    absolute: PathBuf,
    /// Depth of the directory itself (the root is 0).
    depth: usize,
    /// The rules in force in it, from above.
    rules: Rules,
}

/// A walk in progress (see the module docs). Dropping it ends it.
pub(super) struct Walk<'a> {
    fs: &'a dyn FsProvider,
    tool: &'static str,
    max_depth: usize,
    max_visited: usize,
    visited: usize,
    dirs: VecDeque<PendingDir>,
    ready: VecDeque<WalkEntry>,
    ignored: usize,
    unreadable: usize,
    stopped: bool,
}

impl<'a> Walk<'a> {
    /// Starts a walk of `root` (as the caller gave it) that lists
    /// directories down to `max_depth` (1: the root's entries only) and
    /// yields at most `max_visited` entries. Errors listing the root are
    /// the tool's (`NotFound`, `NotADirectory`, …), named after `tool`.
    pub(super) async fn open(
        fs: &'a dyn FsProvider,
        tool: &'static str,
        root: &str,
        max_depth: usize,
        max_visited: usize,
    ) -> Result<Walk<'a>> {
        let resolved = fs
            .resolve(root, None)
            .await
            .map_err(|err| from_seam(tool, root, err))?;
        let absolute = PathBuf::from(resolved.path);
        let (listing, inherited) =
            futures::future::join(fs.list(root), ignore_rules::inherited(fs, &absolute)).await;
        let listing = listing.map_err(|err| from_seam(tool, root, err))?;
        let mut walk = Walk {
            fs,
            tool,
            max_depth,
            max_visited,
            visited: 0,
            dirs: VecDeque::new(),
            ready: VecDeque::new(),
            ignored: 0,
            unreadable: 0,
            stopped: false,
        };
        let root = PendingDir {
            relative: String::new(),
            path: root.to_owned(),
            absolute,
            depth: 0,
            rules: inherited,
        };
        walk.accept(root, listing).await;
        Ok(walk)
    }

    /// The next entry, or `None` when the tree is done or the walk reached
    /// `max_visited` (then [`Walk::complete`] is false). Subdirectories that
    /// cannot be listed (gone, no permission) are skipped and counted;
    /// other seam errors (the world gone, …) end the walk with an error.
    pub(super) async fn next(&mut self) -> Result<Option<WalkEntry>> {
        loop {
            if self.visited >= self.max_visited {
                self.stopped = !self.ready.is_empty() || !self.dirs.is_empty();
                return Ok(None);
            }
            if let Some(entry) = self.ready.pop_front() {
                self.visited += 1;
                return Ok(Some(entry));
            }
            let Some(dir) = self.dirs.pop_front() else {
                return Ok(None);
            };
            match self.fs.list(&dir.path).await {
                Ok(listing) => self.accept(dir, listing).await,
                Err(err) if skippable(err.kind()) => {
                    tracing::debug!(path = dir.path, %err, "{}: skipping a directory", self.tool);
                    self.unreadable += 1;
                }
                Err(err) => return Err(from_seam(self.tool, &dir.path, err)),
            }
        }
    }

    /// Whether the walk covered the whole tree (false once it stopped at
    /// `max_visited` with entries left).
    pub(super) fn complete(&self) -> bool {
        !self.stopped
    }

    /// Entries skipped because `.gitignore` ignores them (an ignored
    /// directory counts once, its contents not at all).
    pub(super) fn ignored(&self) -> usize {
        self.ignored
    }

    /// Subdirectories that could not be listed.
    pub(super) fn unreadable(&self) -> usize {
        self.unreadable
    }

    /// Queues the entries of `dir` that are not ignored, and its
    /// subdirectories within `max_depth`.
    async fn accept(&mut self, dir: PendingDir, listing: Vec<DirEntry>) {
        // A directory holding `.git` is a repository's root: rules from
        // above it do not apply inside (as for a nested repository).
        let inherited = if listing.iter().any(|entry| entry.name == ".git") {
            None
        } else {
            dir.rules
        };
        let rules = match listing.iter().find(|entry| is_gitignore(entry)) {
            Some(_) => {
                let path = join(&dir.path, ".gitignore");
                match ignore_rules::read_gitignore(self.fs, &path).await {
                    Some(text) => ignore_rules::with_gitignore(inherited, &dir.absolute, &text),
                    None => inherited,
                }
            }
            None => inherited,
        };
        for entry in listing {
            if entry.name == ".git" {
                continue;
            }
            let absolute = dir.absolute.join(&entry.name);
            let is_dir = entry.metadata.kind == FileKind::Directory;
            if ignore_rules::ignored(&rules, &absolute, is_dir) {
                self.ignored += 1;
                continue;
            }
            let relative = join(&dir.relative, &entry.name);
            let path = join(&dir.path, &entry.name);
            if is_dir && dir.depth + 1 < self.max_depth {
                self.dirs.push_back(PendingDir {
                    relative: relative.clone(),
                    path: path.clone(),
                    absolute,
                    depth: dir.depth + 1,
                    rules: rules.clone(),
                });
            }
            self.ready.push_back(WalkEntry {
                relative,
                path,
                entry,
            });
        }
    }
}

/// Whether `entry` is a `.gitignore` file (or a link to one).
fn is_gitignore(entry: &DirEntry) -> bool {
    let kind = entry.resolved.as_ref().unwrap_or(&entry.metadata).kind;
    entry.name == ".gitignore" && kind == FileKind::File
}

/// Listing errors that skip one directory rather than end the walk.
fn skippable(kind: ErrorKind) -> bool {
    matches!(
        kind,
        ErrorKind::NotFound
            | ErrorKind::PermissionDenied
            | ErrorKind::NotADirectory
            | ErrorKind::InvalidInput
    )
}

/// `name` below `base`, as the caller spells `base`: the world's cwd
/// (`""`, `.`) adds nothing, so `.` → `a.rs` rather than `./a.rs`.
pub(super) fn join(base: &str, name: &str) -> String {
    match base {
        "" | "." | "./" => name.to_owned(),
        base if base.ends_with('/') => format!("{base}{name}"),
        base => format!("{base}/{name}"),
    }
}

#[cfg(test)]
mod tests {
    use super::join;

    #[test]
    fn joined_paths_keep_the_callers_spelling() {
        assert_eq!(join(".", "a.rs"), "a.rs");
        assert_eq!(join("", "a.rs"), "a.rs");
        assert_eq!(join("src", "a.rs"), "src/a.rs");
        assert_eq!(join("src/", "a.rs"), "src/a.rs");
        assert_eq!(join("/", "etc"), "/etc");
        assert_eq!(join("../x", "y"), "../x/y");
    }
}
