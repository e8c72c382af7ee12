//! `edit_file`: a literal replacement in a text file — one unique match, or
//! exactly `expected_replacements` — committed through the seam's `edit`
//! against the version it was planned on, with a unified diff.

use dsh_plugin_api::fs::{Edit, Version, WriteGuard};
use dsh_plugin_api::{ErrorKind, Result};
use dsh_provider_kit::literal::{self, Applied, EditFailure};
use futures::StreamExt;

use super::errors::{from_seam, invalid, read_error, refuse};
use super::{Files, diff};
use crate::Outcome;

const TOOL: &str = "edit_file";

/// The largest file `edit_file` edits (16 MiB): the whole text is held to
/// plan the edit and diff it.
pub const EDIT_MAX_FILE_BYTES: u64 = 16 * 1024 * 1024;

/// How many times an edit without `if_version` is planned again when the
/// file changes between planning and committing.
const EDIT_ATTEMPTS: usize = 3;

/// Arguments of `edit_file`.
#[derive(Debug, Clone, serde::Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct EditFileRequest {
    /// The file to edit: an absolute path, or one relative to the world's
    /// working directory.
    pub path: String,
    /// The exact text to replace: literal (not a pattern), not empty.
    /// Line endings match loosely: LF here matches CRLF in the file.
    pub old_string: String,
    /// The text to put in its place. The file keeps its line endings (a
    /// CRLF file stays CRLF).
    pub new_string: String,
    /// Replace every occurrence, and require exactly this many. Default:
    /// `old_string` must occur exactly once.
    #[serde(default)]
    pub expected_replacements: Option<u64>,
    /// Edit only if the file is still at this version (from `read_file`,
    /// `stat` or an earlier edit); a stale version fails with `Conflict`
    /// and changes nothing.
    #[serde(default)]
    pub if_version: Option<String>,
    /// Compute the new text and its diff without writing. Default false.
    #[serde(default)]
    pub dry_run: Option<bool>,
}

/// What `edit_file` returns.
#[derive(Debug, Clone, serde::Serialize, schemars::JsonSchema)]
pub struct EditFileResult {
    /// The path, as given.
    pub path: String,
    /// The version of the edited file; absent on a dry run.
    pub version: Option<String>,
    /// The version the edit was planned on (pass it as `if_version` to
    /// apply a dry run's edit to exactly that state).
    pub base_version: String,
    /// How many occurrences were replaced (or would be, on a dry run).
    pub replacements: u64,
    /// The unified diff of the change (line endings shown as LF; at most
    /// 32 KiB, the rest left out with a marker).
    pub diff: String,
    /// Whether this was a dry run (nothing written).
    pub dry_run: bool,
}

impl Outcome for EditFileResult {
    fn text(&self) -> String {
        let head = match &self.version {
            Some(version) => format!(
                "edited {}: {} replacement(s) (version {version})",
                self.path, self.replacements
            ),
            None => format!(
                "dry run, nothing written: {} replacement(s) in {} (version {})",
                self.replacements, self.path, self.base_version
            ),
        };
        format!("{head}\n{}", self.diff)
    }
}

impl Files {
    /// `edit_file`: replaces `old_string` by `new_string` in the file at
    /// `request.path`.
    ///
    /// Reads the file (at most [`EDIT_MAX_FILE_BYTES`]), plans the edit
    /// with the seam's literal matching rules (`dsh_provider_kit::literal`)
    /// and counts the occurrences, so a refusal says how many there are;
    /// then commits it through the seam's atomic `edit`, guarded by the
    /// version it was planned on, so what is written is exactly what the
    /// diff shows. Without `if_version`, a file changed in between is
    /// planned again (up to 3 times); with it, the change is a `Conflict`.
    /// A dry run returns the diff and writes nothing. Dropping the future
    /// leaves the old file or the edited one, never a partial file.
    pub async fn edit_file(&self, request: EditFileRequest) -> Result<EditFileResult> {
        let path = request.path.as_str();
        check(&request)?;
        let expected_version = request.if_version.clone().map(Version);
        let edit = Edit {
            old: request.old_string.clone(),
            new: request.new_string.clone(),
            replace_all: request.expected_replacements.is_some(),
        };
        let mut attempt = 1;
        loop {
            let (original, base) = self.read_for_edit(path).await?;
            if let Some(expected) = &expected_version
                && *expected != base
            {
                return Err(refuse(
                    TOOL,
                    ErrorKind::Conflict,
                    path,
                    format!(
                        "the file is at version {base}, not {expected}: it changed since that \
                         version was read; read it again"
                    ),
                ));
            }
            let planned = plan(path, &original, &edit, request.expected_replacements)?;
            let diff = diff::unified(path, &original, &planned.text);
            if request.dry_run.unwrap_or(false) {
                return Ok(EditFileResult {
                    path: request.path,
                    version: None,
                    base_version: base.0,
                    replacements: planned.replacements as u64,
                    diff,
                    dry_run: true,
                });
            }
            let guard = WriteGuard::IfVersion(base.clone());
            match self.fs.edit(path, vec![edit.clone()], guard).await {
                Ok(outcome) => {
                    return Ok(EditFileResult {
                        path: request.path,
                        version: Some(outcome.version.0),
                        base_version: base.0,
                        replacements: outcome.replacements as u64,
                        diff,
                        dry_run: false,
                    });
                }
                Err(err)
                    if err.kind() == ErrorKind::Conflict
                        && expected_version.is_none()
                        && attempt < EDIT_ATTEMPTS =>
                {
                    attempt += 1;
                }
                Err(err) => return Err(from_seam(TOOL, path, err)),
            }
        }
    }

    /// The whole text of `path` and its version, refusing files over
    /// [`EDIT_MAX_FILE_BYTES`] before reading them.
    async fn read_for_edit(&self, path: &str) -> Result<(String, Version)> {
        let stream = self
            .fs
            .stream_text(path)
            .await
            .map_err(|err| read_error(TOOL, path, err))?;
        if stream.size > EDIT_MAX_FILE_BYTES {
            return Err(invalid(
                TOOL,
                path,
                format!(
                    "the file is {} bytes; edit_file edits files of at most {EDIT_MAX_FILE_BYTES} \
                     bytes (use a command such as sed, or write_file)",
                    stream.size
                ),
            ));
        }
        let mut text = String::with_capacity(usize::try_from(stream.size).unwrap_or(0));
        let mut chunks = stream.chunks;
        while let Some(chunk) = chunks.next().await {
            let chunk = chunk.map_err(|err| read_error(TOOL, path, err))?;
            if (text.len() + chunk.len()) as u64 > EDIT_MAX_FILE_BYTES {
                // The file grew past the bound while being read.
                return Err(invalid(
                    TOOL,
                    path,
                    format!("the file grew past {EDIT_MAX_FILE_BYTES} bytes while being read"),
                ));
            }
            text.push_str(&chunk);
        }
        Ok((text, stream.version))
    }
}

/// Refuses requests that could never apply.
fn check(request: &EditFileRequest) -> Result<()> {
    let path = request.path.as_str();
    if request.old_string.is_empty() {
        return Err(invalid(
            TOOL,
            path,
            "old_string is empty; give the exact text to replace (to write a whole file, use \
             write_file)",
        ));
    }
    if request.old_string == request.new_string {
        return Err(invalid(
            TOOL,
            path,
            "old_string and new_string are the same; there is nothing to change",
        ));
    }
    if request.expected_replacements == Some(0) {
        return Err(invalid(
            TOOL,
            path,
            "expected_replacements must be at least 1",
        ));
    }
    Ok(())
}

/// The edited text, by the seam's literal rules, and the replacement count
/// checked against `expected` (exactly one occurrence when `None`).
fn plan(path: &str, original: &str, edit: &Edit, expected: Option<u64>) -> Result<Applied> {
    let applied = literal::apply(original, std::slice::from_ref(edit)).map_err(|failure| {
        let detail = match failure {
            EditFailure::NoMatch { .. } => "old_string was not found (it matches 0 times); \
                 read the file again and copy the text exactly, whitespace included"
                .to_owned(),
            EditFailure::Ambiguous { count, .. } => format!(
                "old_string matches {count} times; add surrounding context to make it unique, \
                 or set expected_replacements to {count} to replace every occurrence"
            ),
            other => other.to_string(),
        };
        invalid(TOOL, path, detail)
    })?;
    match expected {
        Some(expected) if applied.replacements as u64 != expected => Err(invalid(
            TOOL,
            path,
            format!(
                "old_string matches {} times, not the {expected} given as expected_replacements; \
                 nothing was changed",
                applied.replacements
            ),
        )),
        _ => Ok(applied),
    }
}
