//! `move_path`: rename a file or directory.

use dsh_plugin_api::Result;

use super::Files;
use super::errors::from_seam;
use crate::Outcome;

const TOOL: &str = "move_path";

/// Arguments of `move_path`.
#[derive(Debug, Clone, serde::Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct MovePathRequest {
    /// What to move: an absolute path, or one relative to the world's
    /// working directory.
    pub from: String,
    /// Where to: missing parent directories are created; an existing file
    /// there is replaced (as `mv` does), an existing non-empty directory
    /// is an error.
    pub to: String,
}

/// What `move_path` returns.
#[derive(Debug, Clone, serde::Serialize, schemars::JsonSchema)]
pub struct MovePathResult {
    /// The source, as given.
    pub from: String,
    /// The destination, as given.
    pub to: String,
}

impl Outcome for MovePathResult {
    fn text(&self) -> String {
        format!("moved {} to {}", self.from, self.to)
    }
}

impl Files {
    /// `move_path`: renames `from` to `to` through the seam's `rename`
    /// (POSIX `rename` semantics, parents of `to` created). Dropping the
    /// future leaves the path at `from` or at `to`.
    pub async fn move_path(&self, request: MovePathRequest) -> Result<MovePathResult> {
        self.fs
            .rename(&request.from, &request.to)
            .await
            .map_err(|err| from_seam(TOOL, &request.from, err))?;
        Ok(MovePathResult {
            from: request.from,
            to: request.to,
        })
    }
}
