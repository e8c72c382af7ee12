//! `make_dir`: create a directory and its missing parents.

use dsh_plugin_api::Result;

use super::Files;
use super::errors::from_seam;
use crate::Outcome;

const TOOL: &str = "make_dir";

/// Arguments of `make_dir`.
#[derive(Debug, Clone, serde::Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct MakeDirRequest {
    /// The directory to create (with its missing parents, like
    /// `mkdir -p`): an absolute path, or one relative to the world's
    /// working directory. An existing directory is success.
    pub path: String,
}

/// What `make_dir` returns.
#[derive(Debug, Clone, serde::Serialize, schemars::JsonSchema)]
pub struct MakeDirResult {
    /// The directory, as given.
    pub path: String,
}

impl Outcome for MakeDirResult {
    fn text(&self) -> String {
        format!("directory {} exists", self.path)
    }
}

impl Files {
    /// `make_dir`: `mkdir -p request.path` through the seam. An existing
    /// non-directory there is `AlreadyExists`.
    pub async fn make_dir(&self, request: MakeDirRequest) -> Result<MakeDirResult> {
        self.fs
            .mkdir(&request.path)
            .await
            .map_err(|err| from_seam(TOOL, &request.path, err))?;
        Ok(MakeDirResult { path: request.path })
    }
}
