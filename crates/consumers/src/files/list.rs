//! `list_dir`: the entries of a directory, optionally a few levels deep,
//! `.gitignore`-aware and bounded.

use dsh_plugin_api::Result;

use super::errors::invalid;
use super::kind::EntryKind;
use super::walk::Walk;
use super::{Files, count};
use crate::Outcome;

const TOOL: &str = "list_dir";

/// Levels listed when `depth` is not given (the directory's own entries).
pub const LIST_DEFAULT_DEPTH: u64 = 1;
/// The deepest listing (5 levels); larger `depth`s are lowered to it.
pub const LIST_MAX_DEPTH: u64 = 5;
/// Entries shown when `max_entries` is not given.
pub const LIST_DEFAULT_MAX_ENTRIES: u64 = 500;
/// The most entries shown (5,000); larger `max_entries` are lowered to it.
pub const LIST_MAX_ENTRIES: u64 = 5000;
/// The most entries a listing visits, counting those not shown (20,000);
/// beyond it `more` is a lower bound and `complete` is false.
pub const LIST_MAX_VISITED: u64 = 20_000;

/// Arguments of `list_dir`.
#[derive(Debug, Clone, serde::Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ListDirRequest {
    /// The directory to list: an absolute path, or one relative to the
    /// world's working directory. Default `.` (the working directory).
    #[serde(default)]
    pub path: Option<String>,
    /// How many levels to list: 1 (default) lists the directory's own
    /// entries, 2 adds those of its subdirectories, … at most 5.
    #[serde(default)]
    pub depth: Option<u64>,
    /// The most entries to show. Default 500, at most 5000; the rest are
    /// counted in `more`.
    #[serde(default)]
    pub max_entries: Option<u64>,
}

/// One listed entry.
#[derive(Debug, Clone, serde::Serialize, schemars::JsonSchema)]
pub struct ListedEntry {
    /// The path relative to the listed directory (`src/main.rs`).
    pub path: String,
    pub kind: EntryKind,
    /// Size in bytes (absent for directories).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub size: Option<u64>,
    /// For a symlink, where it points (as stored in the link).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub symlink_target: Option<String>,
}

/// What `list_dir` returns.
#[derive(Debug, Clone, serde::Serialize, schemars::JsonSchema)]
pub struct ListDirResult {
    /// The listed directory, as given.
    pub path: String,
    /// Breadth-first: the directory's entries by name, then each
    /// subdirectory's, in a stable order.
    pub entries: Vec<ListedEntry>,
    /// How many entries were found but not shown (at least this many when
    /// not `complete`).
    pub more: usize,
    /// Whether every entry within `depth` was visited (false when the
    /// listing stopped at 20,000 entries).
    pub complete: bool,
    /// Entries skipped because `.gitignore` ignores them (`.git` is always
    /// skipped and not counted).
    pub ignored: usize,
    /// Subdirectories that could not be listed (no permission, gone).
    pub unreadable: usize,
}

impl Outcome for ListDirResult {
    fn text(&self) -> String {
        let mut text = String::new();
        for entry in &self.entries {
            match (entry.kind, &entry.symlink_target, entry.size) {
                (EntryKind::Directory, _, _) => text.push_str(&format!("{}/\n", entry.path)),
                (_, Some(target), _) => {
                    text.push_str(&format!("{} -> {target}\n", entry.path));
                }
                (EntryKind::Other, _, _) => text.push_str(&format!("{} (special)\n", entry.path)),
                (_, None, Some(size)) => {
                    text.push_str(&format!("{} ({size} bytes)\n", entry.path));
                }
                (_, None, None) => text.push_str(&format!("{}\n", entry.path)),
            }
        }
        text.push_str(&format!("[{}: {} entries", self.path, self.entries.len()));
        if self.more > 0 {
            let at_least = if self.complete { "" } else { "at least " };
            text.push_str(&format!(
                "; {at_least}{} more not shown (raise max_entries, or list a subdirectory)",
                self.more
            ));
        }
        if self.ignored > 0 {
            text.push_str(&format!("; {} ignored by .gitignore", self.ignored));
        }
        if self.unreadable > 0 {
            text.push_str(&format!("; {} directories unreadable", self.unreadable));
        }
        text.push(']');
        text
    }
}

impl Files {
    /// `list_dir`: the entries of `request.path` down to `depth` levels,
    /// skipping what `.gitignore` ignores (see [`super`]), at most
    /// `max_entries` shown and [`LIST_MAX_VISITED`] visited. Symlinks are
    /// listed, not followed. Dropping the future stops the listing.
    pub async fn list_dir(&self, request: ListDirRequest) -> Result<ListDirResult> {
        let path = request.path.unwrap_or_else(|| ".".to_owned());
        let depth = request.depth.unwrap_or(LIST_DEFAULT_DEPTH);
        if depth == 0 {
            return Err(invalid(TOOL, &path, "depth must be at least 1"));
        }
        let depth = u32::try_from(depth.min(LIST_MAX_DEPTH)).unwrap_or(1);
        let max_entries = request
            .max_entries
            .unwrap_or(LIST_DEFAULT_MAX_ENTRIES)
            .min(LIST_MAX_ENTRIES);
        let max_entries = usize::try_from(max_entries).unwrap_or(0);
        let mut walk =
            Walk::open(&self.fs, TOOL, &path, depth, LIST_MAX_VISITED, Vec::new()).await?;
        let mut entries = Vec::new();
        let mut more = 0;
        while let Some(found) = walk.next().await? {
            if entries.len() == max_entries {
                more += 1;
                continue;
            }
            let metadata = found.metadata;
            let kind = EntryKind::from(metadata.kind);
            entries.push(ListedEntry {
                path: found.relative,
                kind,
                size: (kind != EntryKind::Directory).then_some(metadata.size),
                symlink_target: metadata.symlink_target,
            });
        }
        let summary = walk.summary();
        Ok(ListDirResult {
            path,
            entries,
            more,
            complete: summary.complete,
            ignored: count(summary.ignored),
            unreadable: count(summary.unreadable),
        })
    }
}
