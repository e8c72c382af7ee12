//! `stat`: what a path names, following symlinks (and saying where they
//! point).

use dsh_plugin_api::Result;
use dsh_plugin_api::fs::{FileKind, Metadata};

use super::Files;
use super::errors::from_seam;
use super::kind::EntryKind;
use crate::Outcome;

const TOOL: &str = "stat";

/// Arguments of `stat`.
#[derive(Debug, Clone, serde::Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct StatRequest {
    /// The path: absolute, or relative to the world's working directory.
    pub path: String,
}

/// What `stat` returns.
#[derive(Debug, Clone, serde::Serialize, schemars::JsonSchema)]
pub struct StatResult {
    /// The path, as given.
    pub path: String,
    /// What the path names, symlinks followed (`symlink` only for a link
    /// that cannot be followed: dangling, a loop, no permission).
    pub kind: EntryKind,
    /// Size in bytes.
    pub size: u64,
    /// Permission bits in octal (`0644`).
    pub mode: String,
    /// Last modification time, RFC 3339 in UTC.
    pub modified: String,
    /// The version of this state; `write_file` and `edit_file` take it as
    /// `if_version`.
    pub version: String,
    /// When the path itself is a symlink: where it points, as stored in
    /// the link.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub symlink_target: Option<String>,
}

impl Outcome for StatResult {
    fn text(&self) -> String {
        let kind = match self.kind {
            EntryKind::File => "file",
            EntryKind::Directory => "directory",
            EntryKind::Symlink => "dangling symlink",
            EntryKind::Other => "special file",
        };
        let link = match &self.symlink_target {
            Some(target) => format!(" (symlink -> {target})"),
            None => String::new(),
        };
        format!(
            "{}: {kind}{link}, {} bytes, mode {}, modified {}, version {}",
            self.path, self.size, self.mode, self.modified, self.version
        )
    }
}

impl Files {
    /// `stat`: the metadata of `request.path`. A symlink is followed (so
    /// `version` is the one writes through the link are guarded by) and
    /// reported in `symlink_target`; one that cannot be followed is
    /// reported as itself. `NotFound` when nothing is there.
    pub async fn stat(&self, request: StatRequest) -> Result<StatResult> {
        let path = request.path.as_str();
        let link = self
            .fs
            .lstat(path)
            .await
            .map_err(|err| from_seam(TOOL, path, err))?;
        let (metadata, symlink_target) = if link.kind == FileKind::Symlink {
            let target = link.symlink_target.clone();
            match self.fs.stat(path).await {
                Ok(followed) => (followed, target),
                Err(err) => {
                    tracing::debug!(path, %err, "stat: reporting a symlink that cannot be followed");
                    (link, target)
                }
            }
        } else {
            (link, None)
        };
        Ok(stat_result(request.path, metadata, symlink_target))
    }
}

fn stat_result(path: String, metadata: Metadata, symlink_target: Option<String>) -> StatResult {
    let modified = jiff::Timestamp::try_from(metadata.modified)
        .map_or_else(|_| "unknown".to_owned(), |at| at.to_string());
    StatResult {
        path,
        kind: EntryKind::from(metadata.kind),
        size: metadata.size,
        mode: format!("{:04o}", metadata.mode),
        modified,
        version: metadata.version.0,
        symlink_target,
    }
}
