//! The walk engine: breadth-first over a [`Tree`], `.gitignore`-aware,
//! bounded in depth and entries, filtered by globs. One engine serves the
//! composition over the seam and every native path, so their results are
//! the same by construction.

use std::collections::VecDeque;
use std::path::{Path, PathBuf};

use async_trait::async_trait;
use bytes::Bytes;
use dsh_plugin_api::fs::{
    DirEntry, FileKind, WalkEntry, WalkEvent, WalkSpec, WalkStream, WalkSummary,
};
use dsh_plugin_api::{Error, ErrorKind, Result};

use super::gitignore::{self, GITIGNORE_MAX_BYTES, MAX_ANCESTORS, Rules};
use super::glob::Globs;

/// Where a walk or search reads: the tree below one root, as a provider
/// reaches it. Paths are relative to the root (`""` is the root itself,
/// `a/b` below it) and never contain `.` or `..` components. A confined
/// tree answers nothing from outside the root: it follows no symlink below
/// it.
#[async_trait]
pub trait Tree: Send {
    /// The root's canonical absolute path (what `.gitignore` rules are
    /// matched against) and whether it is a directory. Errors are the
    /// call's (`NotFound` …), named after the operation.
    async fn root(&mut self) -> Result<(PathBuf, bool)>;

    /// One level of the directory at `relative`, sorted by name in byte
    /// order; each entry with its `lstat` metadata (`resolved` unused).
    async fn list(&mut self, relative: &str) -> Result<Vec<DirEntry>>;

    /// At most `max` bytes from the start of the regular file at
    /// `relative`, and the file's whole size.
    async fn read(&mut self, relative: &str, max: u64) -> Result<(Bytes, u64)>;

    /// For each directory of `dirs` above the root (absolute, canonical):
    /// whether it holds `.git` (a directory, or a file in a worktree — a
    /// repository's root) and the text of its `.gitignore` (UTF-8, at most
    /// 1 MiB, else `None`). Not called when confined.
    async fn ancestors(&mut self, dirs: &[PathBuf]) -> Vec<(bool, Option<String>)>;
}

/// A directory the walk has yet to list.
struct PendingDir {
    relative: String,
    /// Canonical absolute path, for `.gitignore` matching.
    absolute: PathBuf,
    /// Depth of the directory itself (the root is 0).
    depth: u32,
    /// The rules in force in it, from above.
    rules: Rules,
}

/// A walk in progress over some [`Tree`]. Dropping it ends it.
pub struct Walker {
    operation: &'static str,
    /// The root as the caller spelled it.
    root: String,
    globs: Globs,
    gitignore: bool,
    max_depth: u32,
    max_entries: u64,
    visited: u64,
    dirs: VecDeque<PendingDir>,
    ready: VecDeque<WalkEntry>,
    summary: WalkSummary,
    stopped: bool,
}

/// What a walk is asked: the seam's [`WalkSpec`] minus confinement (the
/// tree's business), checked.
pub(crate) struct WalkPlan {
    pub globs: Globs,
    pub gitignore: bool,
    pub max_depth: u32,
    pub max_entries: u64,
    pub beneath: bool,
}

impl WalkPlan {
    /// Checks `spec` for `operation`: a depth of 0 is `InvalidInput`, as is
    /// a bad glob.
    pub(crate) fn new(operation: &str, spec: &WalkSpec) -> Result<WalkPlan> {
        if spec.max_depth == 0 {
            return Err(Error::invalid_input(format!(
                "{operation}: max_depth must be at least 1"
            )));
        }
        Ok(WalkPlan {
            globs: Globs::new(operation, &spec.globs)?,
            gitignore: spec.gitignore,
            max_depth: spec.max_depth,
            max_entries: spec.max_entries,
            beneath: spec.beneath,
        })
    }
}

impl Walker {
    /// Starts a walk of the directory `tree` reaches as `root` (the caller's
    /// spelling, for the paths yielded), listing the root at once: its
    /// errors are the call's (`NotADirectory`, `NotFound` …).
    pub(crate) async fn open(
        tree: &mut dyn Tree,
        operation: &'static str,
        root: &str,
        absolute: PathBuf,
        plan: WalkPlan,
    ) -> Result<Walker> {
        let inherited = if plan.gitignore && !plan.beneath {
            inherited(tree, &absolute).await
        } else {
            None
        };
        let listing = tree.list("").await?;
        let mut walker = Walker {
            operation,
            root: root.to_owned(),
            globs: plan.globs,
            gitignore: plan.gitignore,
            max_depth: plan.max_depth,
            max_entries: plan.max_entries,
            visited: 0,
            dirs: VecDeque::new(),
            ready: VecDeque::new(),
            summary: WalkSummary {
                complete: true,
                ..WalkSummary::default()
            },
            stopped: false,
        };
        let root = PendingDir {
            relative: String::new(),
            absolute,
            depth: 0,
            rules: inherited,
        };
        walker.accept(tree, root, listing).await;
        Ok(walker)
    }

    /// The next entry the globs admit, or `None` when the tree is done or
    /// the walk visited `max_entries` (then the summary is incomplete).
    /// Subdirectories that cannot be listed are skipped and counted; other
    /// errors (the world gone …) end the walk.
    pub(crate) async fn next(&mut self, tree: &mut dyn Tree) -> Result<Option<WalkEntry>> {
        loop {
            if let Some(entry) = self.ready.pop_front() {
                if self.visited >= self.max_entries {
                    self.summary.complete = false;
                    self.stop();
                    return Ok(None);
                }
                self.visited += 1;
                if self.globs.admits(&entry.relative) {
                    return Ok(Some(entry));
                }
                continue;
            }
            let Some(dir) = self.dirs.pop_front() else {
                return Ok(None);
            };
            match tree.list(&dir.relative).await {
                Ok(listing) => self.accept(tree, dir, listing).await,
                Err(err) if skippable(err.kind()) => {
                    tracing::debug!(relative = dir.relative.as_str(), %err, "{}: skipping a directory", self.operation);
                    self.summary.unreadable += 1;
                }
                Err(err) => return Err(err),
            }
        }
    }

    /// How the walk went so far (final once `next` answered `None`).
    pub(crate) fn summary(&self) -> WalkSummary {
        self.summary
    }

    fn stop(&mut self) {
        self.stopped = true;
        self.ready.clear();
        self.dirs.clear();
    }

    /// Queues the entries of `dir` that are not ignored or excluded, and
    /// its subdirectories within `max_depth`.
    async fn accept(&mut self, tree: &mut dyn Tree, dir: PendingDir, listing: Vec<DirEntry>) {
        if self.stopped {
            return;
        }
        let rules = if self.gitignore {
            // A directory holding `.git` is a repository's root: rules from
            // above it do not apply inside (as for a nested repository).
            let inherited = if listing.iter().any(|entry| entry.name == ".git") {
                None
            } else {
                dir.rules
            };
            let gitignore = listing
                .iter()
                .any(|entry| entry.name == ".gitignore" && entry.metadata.kind == FileKind::File);
            if gitignore {
                match read_text(tree, &join(&dir.relative, ".gitignore")).await {
                    Some(text) => gitignore::with_gitignore(inherited, &dir.absolute, &text),
                    None => inherited,
                }
            } else {
                inherited
            }
        } else {
            None
        };
        for entry in listing {
            if self.gitignore && entry.name == ".git" {
                continue;
            }
            let absolute = dir.absolute.join(&entry.name);
            let is_dir = entry.metadata.kind == FileKind::Directory;
            if gitignore::ignored(&rules, &absolute, is_dir) {
                self.summary.ignored += 1;
                continue;
            }
            let relative = join(&dir.relative, &entry.name);
            if is_dir && self.globs.excludes(&relative) {
                continue;
            }
            let depth = dir.depth + 1;
            if is_dir && depth < self.max_depth {
                self.dirs.push_back(PendingDir {
                    relative: relative.clone(),
                    absolute,
                    depth,
                    rules: rules.clone(),
                });
            }
            self.ready.push_back(WalkEntry {
                path: join(&self.root, &relative),
                relative,
                depth,
                metadata: entry.metadata,
            });
        }
    }
}

/// The walk of `walker` over `tree` as the seam's stream: entries, then
/// `End`.
pub(crate) fn walk_stream<T: Tree + 'static>(tree: T, walker: Walker) -> WalkStream {
    let state = Some((tree, walker));
    Box::pin(futures::stream::unfold(state, |state| async move {
        let (mut tree, mut walker) = state?;
        match walker.next(&mut tree).await {
            Ok(Some(entry)) => Some((Ok(WalkEvent::Entry(entry)), Some((tree, walker)))),
            Ok(None) => Some((Ok(WalkEvent::End(walker.summary())), None)),
            Err(err) => Some((Err(err), None)),
        }
    }))
}

/// The text of a small file (`.gitignore`), or `None` when it is missing,
/// unreadable, not UTF-8 or over 1 MiB — a walk goes on without it.
async fn read_text(tree: &mut dyn Tree, relative: &str) -> Option<String> {
    let (bytes, size) = tree.read(relative, GITIGNORE_MAX_BYTES).await.ok()?;
    if size > GITIGNORE_MAX_BYTES {
        return None;
    }
    String::from_utf8(bytes.to_vec()).ok()
}

/// The rules that apply at `root` (absolute, canonical) from above it: the
/// `.gitignore` files of its ancestors up to the nearest one holding `.git`
/// (the repository root); none when no ancestor within [`MAX_ANCESTORS`]
/// does.
async fn inherited(tree: &mut dyn Tree, root: &Path) -> Rules {
    let dirs: Vec<PathBuf> = root
        .ancestors()
        .skip(1)
        .take(MAX_ANCESTORS)
        .map(Path::to_path_buf)
        .collect();
    let probed = tree.ancestors(&dirs).await;
    let repo_root = probed.iter().position(|(is_repo_root, _)| *is_repo_root)?;
    // From the repository root down to the walk's parent directory.
    let mut rules = None;
    for (dir, (_, gitignore)) in dirs.iter().zip(&probed).take(repo_root + 1).rev() {
        if let Some(text) = gitignore {
            rules = gitignore::with_gitignore(rules, dir, text);
        }
    }
    rules
}

/// The path of `relative` (below the root) as the caller names it: the
/// root itself for `""`.
pub fn below(root: &str, relative: &str) -> String {
    if relative.is_empty() {
        root.to_owned()
    } else {
        join(root, relative)
    }
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
pub fn join(base: &str, name: &str) -> String {
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
