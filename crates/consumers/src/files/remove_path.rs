//! `remove_path`: remove a file, a symlink, or (when asked) a directory
//! tree.

use dsh_plugin_api::fs::FileKind;
use dsh_plugin_api::{ErrorKind, Result};

use super::Files;
use super::errors::{from_seam, invalid, refuse};
use crate::Outcome;

const TOOL: &str = "remove_path";

/// Arguments of `remove_path`.
#[derive(Debug, Clone, serde::Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RemovePathRequest {
    /// What to remove: an absolute path, or one relative to the world's
    /// working directory. A symlink is removed itself, never its target.
    pub path: String,
    /// Needed to remove a non-empty directory and everything in it.
    /// Default false.
    #[serde(default)]
    pub recursive: Option<bool>,
}

/// What `remove_path` returns.
#[derive(Debug, Clone, serde::Serialize, schemars::JsonSchema)]
pub struct RemovePathResult {
    /// The path, as given.
    pub path: String,
    /// Whether anything was there to remove (a missing path is not an
    /// error).
    pub removed: bool,
}

impl Outcome for RemovePathResult {
    fn text(&self) -> String {
        if self.removed {
            format!("removed {}", self.path)
        } else {
            format!("nothing at {}; nothing removed", self.path)
        }
    }
}

impl Files {
    /// `remove_path`: removes `request.path` through the seam's `remove`.
    /// A non-empty directory needs `recursive` (`InvalidInput` saying how
    /// many entries it has otherwise); a directory holding the world's
    /// working directory is refused (`PermissionDenied`). Dropping the
    /// future while a tree is being removed may leave part of it.
    pub async fn remove_path(&self, request: RemovePathRequest) -> Result<RemovePathResult> {
        let path = request.path.as_str();
        let kind = match self.fs.lstat(path).await {
            Ok(metadata) => metadata.kind,
            Err(err) if err.kind() == ErrorKind::NotFound => {
                return Ok(RemovePathResult {
                    path: request.path,
                    removed: false,
                });
            }
            Err(err) => return Err(from_seam(TOOL, path, err)),
        };
        if kind == FileKind::Directory {
            self.check_directory_removal(path, request.recursive.unwrap_or(false))
                .await?;
        }
        let removed = self
            .fs
            .remove(path)
            .await
            .map_err(|err| from_seam(TOOL, path, err))?;
        Ok(RemovePathResult {
            path: request.path,
            removed,
        })
    }

    /// Refuses to remove the directory `path` when it holds the world's
    /// working directory, or when it is not empty and `recursive` is not
    /// set.
    async fn check_directory_removal(&self, path: &str, recursive: bool) -> Result<()> {
        let holds_cwd = self
            .fs
            .contains(path, ".")
            .await
            .map_err(|err| from_seam(TOOL, path, err))?;
        if holds_cwd {
            return Err(refuse(
                TOOL,
                ErrorKind::PermissionDenied,
                path,
                "refusing to remove a directory holding the world's working directory",
            ));
        }
        if recursive {
            return Ok(());
        }
        let entries = self
            .fs
            .list(path)
            .await
            .map_err(|err| from_seam(TOOL, path, err))?
            .len();
        if entries == 0 {
            return Ok(());
        }
        Err(invalid(
            TOOL,
            path,
            format!(
                "is a directory with {entries} entries; set recursive to remove it and \
                 everything in it"
            ),
        ))
    }
}
