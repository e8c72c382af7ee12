//! `find_files`: paths below a directory matching a glob, `.gitignore`-aware
//! and bounded.

use dsh_plugin_api::Result;

use super::kind::EntryKind;
use super::walk::{WALK_MAX_DEPTH, WALK_MAX_VISITED, Walk};
use super::{Files, count};
use crate::Outcome;

const TOOL: &str = "find_files";

/// Paths returned when `max_results` is not given.
pub const FIND_DEFAULT_MAX_RESULTS: u64 = 200;
/// The most paths returned (2,000); larger `max_results` are lowered to it.
pub const FIND_MAX_RESULTS: u64 = 2000;

/// Arguments of `find_files`.
#[derive(Debug, Clone, serde::Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct FindFilesRequest {
    /// The directory to search: an absolute path, or one relative to the
    /// world's working directory. Default `.` (the working directory).
    #[serde(default)]
    pub path: Option<String>,
    /// A glob: `*` and `?` within one path component, `**` across any
    /// number, `{a,b}`, `[ab]`. Without a `/` it matches names at any depth
    /// (`*.rs`); with one, the path below `path` (`src/**/*.rs`).
    pub pattern: String,
    /// The most paths to return. Default 200, at most 2000; the rest are
    /// counted in `more`.
    #[serde(default)]
    pub max_results: Option<u64>,
}

/// One path found.
#[derive(Debug, Clone, serde::Serialize, schemars::JsonSchema)]
pub struct FoundPath {
    /// The path: `path` as given joined with the path below it.
    pub path: String,
    pub kind: EntryKind,
}

/// What `find_files` returns.
#[derive(Debug, Clone, serde::Serialize, schemars::JsonSchema)]
pub struct FindFilesResult {
    /// Matching paths, shallowest first (breadth-first, by name within a
    /// directory).
    pub matches: Vec<FoundPath>,
    /// How many more paths matched but were not returned (at least this
    /// many when not `complete`).
    pub more: usize,
    /// Whether the whole tree was searched (false when the walk stopped at
    /// 50,000 entries).
    pub complete: bool,
    /// Entries skipped because `.gitignore` ignores them.
    pub ignored: usize,
    /// Subdirectories that could not be listed (no permission, gone).
    pub unreadable: usize,
}

impl Outcome for FindFilesResult {
    fn text(&self) -> String {
        let mut text = String::new();
        for found in &self.matches {
            let slash = if found.kind == EntryKind::Directory {
                "/"
            } else {
                ""
            };
            text.push_str(&format!("{}{slash}\n", found.path));
        }
        text.push_str(&format!("[{} matches", self.matches.len()));
        if self.more > 0 {
            text.push_str(&format!(
                "; {} more not shown (raise max_results or narrow the pattern)",
                self.more
            ));
        }
        if !self.complete {
            text.push_str(&format!(
                "; search stopped after {WALK_MAX_VISITED} entries: search a subdirectory"
            ));
        }
        if self.ignored > 0 {
            text.push_str(&format!("; {} ignored by .gitignore", self.ignored));
        }
        text.push(']');
        text
    }
}

impl Files {
    /// `find_files`: the paths below `request.path` that match
    /// `request.pattern`, walking through the seam's `list` (breadth-first,
    /// skipping what `.gitignore` ignores, symlinks not followed) over at
    /// most [`WALK_MAX_VISITED`] entries. Dropping the future stops the
    /// walk.
    pub async fn find_files(&self, request: FindFilesRequest) -> Result<FindFilesResult> {
        let path = request.path.unwrap_or_else(|| ".".to_owned());
        let max_results = request
            .max_results
            .unwrap_or(FIND_DEFAULT_MAX_RESULTS)
            .min(FIND_MAX_RESULTS);
        let max_results = usize::try_from(max_results).unwrap_or(0);
        let globs = vec![request.pattern];
        let mut walk = Walk::open(
            &self.fs,
            TOOL,
            &path,
            WALK_MAX_DEPTH,
            WALK_MAX_VISITED,
            globs,
        )
        .await?;
        let mut matches = Vec::new();
        let mut more = 0;
        while let Some(found) = walk.next().await? {
            if matches.len() == max_results {
                more += 1;
                continue;
            }
            matches.push(FoundPath {
                path: found.path,
                kind: EntryKind::from(found.metadata.kind),
            });
        }
        let summary = walk.summary();
        Ok(FindFilesResult {
            matches,
            more,
            complete: summary.complete,
            ignored: count(summary.ignored),
            unreadable: count(summary.unreadable),
        })
    }
}
