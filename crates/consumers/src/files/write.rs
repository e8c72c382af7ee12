//! `write_file`: replace or create a file atomically, optionally guarded.

use dsh_plugin_api::fs::{Version, WriteGuard};
use dsh_plugin_api::{Bytes, Result};

use super::Files;
use super::errors::{from_seam, invalid};
use crate::Outcome;

const TOOL: &str = "write_file";

/// The largest content one call writes (16 MiB).
pub const WRITE_MAX_BYTES: usize = 16 * 1024 * 1024;

/// Arguments of `write_file`.
#[derive(Debug, Clone, serde::Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct WriteFileRequest {
    /// The file to write: an absolute path, or one relative to the world's
    /// working directory. Missing parent directories are created.
    pub path: String,
    /// The whole new content (UTF-8 text, at most 16 MiB).
    pub content: String,
    /// Fail with `AlreadyExists` if the file exists. Default false.
    #[serde(default)]
    pub create_new: Option<bool>,
    /// Write only if the file is still at this version (from `read_file`,
    /// `stat` or an earlier write); a stale version fails with `Conflict`
    /// and writes nothing. Not together with `create_new`.
    #[serde(default)]
    pub if_version: Option<String>,
}

/// What `write_file` returns.
#[derive(Debug, Clone, serde::Serialize, schemars::JsonSchema)]
pub struct WriteFileResult {
    /// The path, as given.
    pub path: String,
    /// The version of the written file.
    pub version: String,
    /// How many bytes were written.
    pub bytes: u64,
}

impl Outcome for WriteFileResult {
    fn text(&self) -> String {
        format!(
            "wrote {} bytes to {} (version {})",
            self.bytes, self.path, self.version
        )
    }
}

impl Files {
    /// `write_file`: replaces (or creates) `request.path` with
    /// `request.content` through the seam's atomic `write`, checking the
    /// guard (`create_new` → `AlreadyExists`, `if_version` → `Conflict`)
    /// immediately before the commit. Dropping the future before the commit
    /// leaves the old file as it was.
    pub async fn write_file(&self, request: WriteFileRequest) -> Result<WriteFileResult> {
        let path = request.path.as_str();
        let guard = match (request.create_new.unwrap_or(false), request.if_version) {
            (true, Some(_)) => {
                return Err(invalid(
                    TOOL,
                    path,
                    "create_new and if_version exclude each other (a new file has no version)",
                ));
            }
            (true, None) => WriteGuard::CreateNew,
            (false, Some(version)) => WriteGuard::IfVersion(Version(version)),
            (false, None) => WriteGuard::Overwrite,
        };
        let bytes = request.content.len();
        if bytes > WRITE_MAX_BYTES {
            return Err(invalid(
                TOOL,
                path,
                format!("content is {bytes} bytes; one write takes at most {WRITE_MAX_BYTES}"),
            ));
        }
        let version = self
            .fs
            .write(path, Bytes::from(request.content), guard)
            .await
            .map_err(|err| from_seam(TOOL, path, err))?;
        Ok(WriteFileResult {
            path: request.path,
            version: version.0,
            bytes: bytes as u64,
        })
    }
}
