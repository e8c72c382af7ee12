//! `edit_file`: literal replacements in text files — one, or several as the
//! hunks of one patch across one or more files — planned on what the files
//! hold, committed all or nothing, each file guarded by the version it was
//! planned on, with a unified diff.

use std::collections::HashMap;
use std::sync::Arc;

use dsh_plugin_api::fs::{Edit, ReadStream, Version};
use dsh_plugin_api::stream::TextStream;
use dsh_plugin_api::{Error, ErrorKind, Result};
use dsh_provider_kit::literal::{self, EditFailure};
use futures::StreamExt;
use futures::future::try_join_all;

use super::commit::{FileChange, commit};
use super::errors::{from_seam, invalid, read_error, refuse};
use super::{Files, diff};
use crate::Outcome;

const TOOL: &str = "edit_file";

/// The largest file `edit_file` edits (16 MiB): the whole text is held to
/// plan the edit and diff it.
pub const EDIT_MAX_FILE_BYTES: u64 = 16 * 1024 * 1024;

/// The most bytes the files of one call may hold together (64 MiB).
pub const EDIT_MAX_TOTAL_BYTES: u64 = 64 * 1024 * 1024;

/// The most edits one call makes (in all its files).
pub const EDIT_MAX_EDITS: usize = 100;

/// How many times an edit is planned again when a file without an
/// `if_version` changes between planning and committing.
const EDIT_ATTEMPTS: usize = 3;

/// Arguments of `edit_file`: one replacement (`path`, `old_string`,
/// `new_string`), or several as `edits`, in one file or in several.
#[derive(Debug, Clone, serde::Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct EditFileRequest {
    /// The file to edit: an absolute path, or one relative to the world's
    /// working directory. With `edits`, the file of every edit that names
    /// none.
    #[serde(default)]
    pub path: Option<String>,
    /// The exact text to replace: literal (not a pattern), not empty.
    /// Line endings match loosely: LF here matches CRLF in the file. Not
    /// together with `edits`.
    #[serde(default)]
    pub old_string: Option<String>,
    /// The text to put in its place. The file keeps its line endings (a
    /// CRLF file stays CRLF).
    #[serde(default)]
    pub new_string: Option<String>,
    /// Replace every occurrence, and require exactly this many. Default:
    /// `old_string` must occur exactly once.
    #[serde(default)]
    pub expected_replacements: Option<u64>,
    /// Edit only if the file at `path` is still at this version (from
    /// `read_file`, `stat` or an earlier edit); a stale version fails with
    /// `Conflict` and changes nothing. With `edits`, it guards the edits
    /// that name no path.
    #[serde(default)]
    pub if_version: Option<String>,
    /// Several replacements (at most 100) made as one patch:
    /// each edit is matched in its file as the file is now (not in another
    /// edit's result), edits whose matches overlap are refused, and either
    /// every edit of every file is written or none is.
    #[serde(default)]
    pub edits: Option<Vec<FileEdit>>,
    /// Compute the new text and its diff without writing. Default false.
    #[serde(default)]
    pub dry_run: Option<bool>,
}

/// One replacement of `edit_file`'s `edits`: the fields of the request's
/// single replacement, and the file it is in.
#[derive(Debug, Clone, serde::Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct FileEdit {
    /// The file; default: the request's `path`, guarded by the request's
    /// `if_version`.
    #[serde(default)]
    pub path: Option<String>,
    /// The exact text to replace, as the request's `old_string`.
    pub old_string: String,
    /// The text to put in its place.
    pub new_string: String,
    /// Replace every occurrence, and require exactly this many.
    #[serde(default)]
    pub expected_replacements: Option<u64>,
    /// Edit only if this edit's file is still at this version; the edits
    /// of one file that give a version give the same one.
    #[serde(default)]
    pub if_version: Option<String>,
}

/// What `edit_file` returns.
#[derive(Debug, Clone, serde::Serialize, schemars::JsonSchema)]
pub struct EditFileResult {
    /// The files edited, in the order the request first names them.
    pub files: Vec<EditedFile>,
    /// How many occurrences were replaced in all (or would be, on a dry
    /// run).
    pub replacements: u64,
    /// The unified diff of the change, file after file (line endings shown
    /// as LF; at most 32 KiB of hunks in all, the rest left out with a
    /// marker).
    pub diff: String,
    /// Whether this was a dry run (nothing written).
    pub dry_run: bool,
}

/// One file of an `edit_file` result.
#[derive(Debug, Clone, serde::Serialize, schemars::JsonSchema)]
pub struct EditedFile {
    /// The path, as the request first gives it.
    pub path: String,
    /// The version of the edited file; absent on a dry run.
    pub version: Option<String>,
    /// The version the edit was planned on (pass it as `if_version` to
    /// apply a dry run's edit to exactly that state).
    pub base_version: String,
    /// How many occurrences were replaced in this file.
    pub replacements: u64,
}

impl Outcome for EditFileResult {
    fn text(&self) -> String {
        let files: Vec<String> = self
            .files
            .iter()
            .map(|file| {
                let version = file.version.as_deref().unwrap_or(&file.base_version);
                format!(
                    "{}: {} replacement(s) (version {version})",
                    file.path, file.replacements
                )
            })
            .collect();
        let head = if self.dry_run {
            "dry run, nothing written"
        } else {
            "edited"
        };
        format!("{head} {}\n{}", files.join(", "), self.diff)
    }
}

/// One replacement of a call, with where it came from (for errors).
struct Hunk {
    /// How errors name it: empty for the single replacement, `edit N: `
    /// for `edits[N-1]`.
    label: String,
    path: String,
    if_version: Option<String>,
    edit: Edit,
    expected: Option<u64>,
}

/// One file of a call: its replacements and the version it must be at.
struct Target {
    /// The path as the request first gives it.
    path: String,
    hunks: Vec<Hunk>,
    if_version: Option<Version>,
}

/// A file planned: the change and how many replacements make it.
struct Planned {
    change: FileChange,
    replacements: usize,
}

impl Files {
    /// `edit_file`: replaces `old_string` by `new_string` in the file at
    /// `path`, or makes every replacement of `edits`, in one file or in
    /// several.
    ///
    /// Reads each file (at most [`EDIT_MAX_FILE_BYTES`], and
    /// [`EDIT_MAX_TOTAL_BYTES`] together; paths naming the same file, e.g.
    /// `a.txt` and `./a.txt`, are one file) and plans its replacements as
    /// the hunks of one patch (`dsh_provider_kit::literal::patch`: each
    /// matched in the file as read, unique unless counted, none
    /// overlapping), so a refusal names the file and the edit, and nothing
    /// is written unless every edit of every file applies. Then writes the
    /// files one by one through the seam's atomic `write`, each guarded by
    /// the version it was planned on, so what is written is exactly what
    /// the diff shows.
    ///
    /// **All or nothing.** Should a file's write fail after earlier files
    /// were written (it changed in between, or the world refused the
    /// write), each file written before it is restored: its content before
    /// this call is written back, guarded by the version this call left,
    /// and the error names the file that failed and says, file by file,
    /// what was restored. A restored file has its old content and mode but
    /// a new version; one changed by someone else since this call wrote it
    /// is not overwritten — the error says it keeps this call's edit. The
    /// writes and any restoring run in a task of their own, so a call
    /// dropped once writing began still finishes or undoes it.
    ///
    /// A file with an `if_version` that changed is a `Conflict` and nothing
    /// is written; one without that changed between planning and writing is
    /// planned again (3 attempts in all). A dry run returns the diff and
    /// writes nothing.
    pub async fn edit_file(&self, request: EditFileRequest) -> Result<EditFileResult> {
        let dry_run = request.dry_run.unwrap_or(false);
        let targets = self.targets(hunks(request)?).await?;
        let mut attempt = 1;
        loop {
            let planned = self.plan(&targets).await?;
            let diff = diffs(&planned);
            let (changes, replacements): (Vec<_>, Vec<_>) = planned
                .into_iter()
                .map(|file| (file.change, file.replacements))
                .unzip();
            if dry_run {
                return Ok(result(&changes, &replacements, None, diff));
            }
            let (changes, committed) = commit(Arc::clone(&self.fs), changes).await;
            match committed {
                Ok(versions) => {
                    return Ok(result(&changes, &replacements, Some(versions), diff));
                }
                Err(failed)
                    if failed.retry()
                        && targets[failed.index].if_version.is_none()
                        && attempt < EDIT_ATTEMPTS =>
                {
                    attempt += 1;
                }
                Err(failed) => {
                    let path = changes[failed.index].path.clone();
                    return Err(failed.explain(|err| from_seam(TOOL, &path, err)));
                }
            }
        }
    }

    /// The files `hunks` edit, in the order first named, each with its
    /// hunks and the version they require. Paths are grouped as spelled,
    /// and when there are several, by the file they resolve to.
    async fn targets(&self, hunks: Vec<Hunk>) -> Result<Vec<Target>> {
        let mut spellings: Vec<&str> = Vec::new();
        for hunk in &hunks {
            if !spellings.contains(&hunk.path.as_str()) {
                spellings.push(&hunk.path);
            }
        }
        let identities: Vec<String> = if spellings.len() > 1 {
            try_join_all(spellings.iter().map(|path| async move {
                self.fs
                    .resolve(path, None)
                    .await
                    .map(|resolved| resolved.path)
                    .map_err(|err| from_seam(TOOL, path, err))
            }))
            .await?
        } else {
            spellings.iter().map(|path| (*path).to_owned()).collect()
        };
        let identity_of: HashMap<String, String> = spellings
            .iter()
            .map(|path| (*path).to_owned())
            .zip(identities)
            .collect();
        let mut targets: Vec<Target> = Vec::new();
        let mut index_of: HashMap<&str, usize> = HashMap::new();
        for hunk in hunks {
            let identity = identity_of[&hunk.path].as_str();
            let index = *index_of.entry(identity).or_insert_with(|| {
                targets.push(Target {
                    path: hunk.path.clone(),
                    hunks: Vec::new(),
                    if_version: None,
                });
                targets.len() - 1
            });
            let target = &mut targets[index];
            if let Some(version) = &hunk.if_version {
                match &target.if_version {
                    Some(known) if known.0 != *version => {
                        return Err(invalid(
                            TOOL,
                            &target.path,
                            format!(
                                "{}if_version {version} differs from the {known} an earlier \
                                 edit of this file gives; give one version per file",
                                hunk.label
                            ),
                        ));
                    }
                    _ => target.if_version = Some(Version(version.clone())),
                }
            }
            target.hunks.push(hunk);
        }
        Ok(targets)
    }

    /// Reads every target and plans its replacements; the first refusal
    /// (a stale `if_version`, an edit that does not apply) is the call's
    /// error, and nothing is written.
    async fn plan(&self, targets: &[Target]) -> Result<Vec<Planned>> {
        let opened = try_join_all(
            targets
                .iter()
                .map(|target| self.open_for_edit(&target.path)),
        )
        .await?;
        let total: u64 = opened.iter().map(|stream| stream.size).sum();
        if total > EDIT_MAX_TOTAL_BYTES {
            return Err(invalid(
                TOOL,
                &targets[0].path,
                format!(
                    "the {} files hold {total} bytes; one edit_file call edits at most \
                     {EDIT_MAX_TOTAL_BYTES} bytes of files (edit them in several calls)",
                    targets.len()
                ),
            ));
        }
        let read = try_join_all(
            targets
                .iter()
                .zip(opened)
                .map(|(target, stream)| read_whole(&target.path, stream)),
        )
        .await?;
        targets
            .iter()
            .zip(read)
            .map(|(target, (original, base))| plan_file(target, original, base))
            .collect()
    }

    /// `path` opened as text, refusing files over [`EDIT_MAX_FILE_BYTES`]
    /// before reading them.
    async fn open_for_edit(&self, path: &str) -> Result<ReadStream<TextStream>> {
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
        Ok(stream)
    }
}

/// The whole text of an opened file and its version.
async fn read_whole(path: &str, stream: ReadStream<TextStream>) -> Result<(String, Version)> {
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

/// The request's replacements, each checked on its own: the single one, or
/// `edits` with their paths and versions filled in from the request's.
fn hunks(request: EditFileRequest) -> Result<Vec<Hunk>> {
    let path = request.path.clone();
    // A refusal of the request as a whole: about its path, if it names one.
    let refused = |detail: String| match &path {
        Some(path) => invalid(TOOL, path, detail),
        None => Error::new(ErrorKind::InvalidInput, format!("{TOOL}: {detail}")),
    };
    let hunks = match request.edits {
        None => {
            let (Some(path), Some(old), Some(new)) =
                (request.path, request.old_string, request.new_string)
            else {
                return Err(refused(
                    "give path, old_string and new_string (or edits, for several replacements)"
                        .to_owned(),
                ));
            };
            vec![Hunk {
                label: String::new(),
                path,
                if_version: request.if_version,
                edit: Edit {
                    old,
                    new,
                    replace_all: request.expected_replacements.is_some(),
                },
                expected: request.expected_replacements,
            }]
        }
        Some(edits) => {
            if request.old_string.is_some()
                || request.new_string.is_some()
                || request.expected_replacements.is_some()
            {
                return Err(refused(
                    "with edits, old_string, new_string and expected_replacements go in each \
                     edit"
                        .to_owned(),
                ));
            }
            if edits.is_empty() || edits.len() > EDIT_MAX_EDITS {
                return Err(refused(format!(
                    "edits has {} entries; give 1 to {EDIT_MAX_EDITS}",
                    edits.len()
                )));
            }
            if request.if_version.is_some() && edits.iter().all(|edit| edit.path.is_some()) {
                return Err(refused(
                    "if_version guards the edits that name no path, and every edit names one; \
                     give each edit its if_version"
                        .to_owned(),
                ));
            }
            let mut hunks = Vec::with_capacity(edits.len());
            for (index, edit) in edits.into_iter().enumerate() {
                let label = format!("edit {}: ", index + 1);
                let (path, if_version) = match edit.path {
                    Some(path) => (path, edit.if_version),
                    None => match &request.path {
                        Some(path) => (
                            path.clone(),
                            edit.if_version.or_else(|| request.if_version.clone()),
                        ),
                        None => {
                            return Err(refused(format!(
                                "{label}no path, and the request gives none"
                            )));
                        }
                    },
                };
                hunks.push(Hunk {
                    label,
                    path,
                    if_version,
                    edit: Edit {
                        old: edit.old_string,
                        new: edit.new_string,
                        replace_all: edit.expected_replacements.is_some(),
                    },
                    expected: edit.expected_replacements,
                });
            }
            hunks
        }
    };
    for hunk in &hunks {
        check(hunk)?;
    }
    Ok(hunks)
}

/// Refuses a replacement that could never apply.
fn check(hunk: &Hunk) -> Result<()> {
    let (label, path) = (&hunk.label, hunk.path.as_str());
    if hunk.edit.old.is_empty() {
        return Err(invalid(
            TOOL,
            path,
            format!(
                "{label}old_string is empty; give the exact text to replace (to write a whole \
                 file, use write_file)"
            ),
        ));
    }
    if hunk.edit.old == hunk.edit.new {
        return Err(invalid(
            TOOL,
            path,
            format!("{label}old_string and new_string are the same; there is nothing to change"),
        ));
    }
    if hunk.expected == Some(0) {
        return Err(invalid(
            TOOL,
            path,
            format!("{label}expected_replacements must be at least 1"),
        ));
    }
    Ok(())
}

/// `target`'s new text, from `original` read at `base`: its replacements
/// as one patch, each count checked against its `expected_replacements`
/// (exactly one occurrence when none).
fn plan_file(target: &Target, original: String, base: Version) -> Result<Planned> {
    let path = target.path.as_str();
    if let Some(expected) = &target.if_version
        && *expected != base
    {
        return Err(refuse(
            TOOL,
            ErrorKind::Conflict,
            path,
            format!(
                "the file is at version {base}, not {expected}: it changed since that version \
                 was read; read it again"
            ),
        ));
    }
    let edits: Vec<Edit> = target.hunks.iter().map(|hunk| hunk.edit.clone()).collect();
    let label = |index: usize| target.hunks[index].label.as_str();
    let patched = literal::patch(&original, &edits).map_err(|failure| {
        let detail = match failure {
            EditFailure::NoMatch { index, .. } => format!(
                "{}old_string was not found (it matches 0 times); read the file again and copy \
                 the text exactly, whitespace included",
                label(index)
            ),
            EditFailure::Ambiguous { index, count, .. } => format!(
                "{}old_string matches {count} times; add surrounding context to make it unique, \
                 or set expected_replacements to {count} to replace every occurrence",
                label(index)
            ),
            EditFailure::Overlap { first, second, .. } => format!(
                "{} and {}: their old_string texts overlap in the file; make them one edit",
                label(first).trim_end_matches(": "),
                label(second).trim_end_matches(": ")
            ),
            other => other.to_string(),
        };
        invalid(TOOL, path, detail)
    })?;
    for (hunk, &count) in target.hunks.iter().zip(&patched.replacements) {
        if let Some(expected) = hunk.expected
            && count as u64 != expected
        {
            return Err(invalid(
                TOOL,
                path,
                format!(
                    "{}old_string matches {count} times, not the {expected} given as \
                     expected_replacements; nothing was changed",
                    hunk.label
                ),
            ));
        }
    }
    Ok(Planned {
        change: FileChange {
            path: target.path.clone(),
            base,
            original,
            text: patched.text,
        },
        replacements: patched.replacements.iter().sum(),
    })
}

/// The unified diffs of `planned`, file after file, within one budget.
fn diffs(planned: &[Planned]) -> String {
    let mut all = String::new();
    for file in planned {
        let room = diff::DIFF_MAX_BYTES.saturating_sub(all.len());
        let file = &file.change;
        all.push_str(&diff::unified(&file.path, &file.original, &file.text, room));
    }
    all
}

/// The call's result: the files `changes` made with `replacements` each;
/// `versions` are the committed ones (none on a dry run).
fn result(
    changes: &[FileChange],
    replacements: &[usize],
    versions: Option<Vec<Version>>,
    diff: String,
) -> EditFileResult {
    let mut versions = versions.map(Vec::into_iter);
    let files: Vec<EditedFile> = changes
        .iter()
        .zip(replacements)
        .map(|(change, &replacements)| EditedFile {
            path: change.path.clone(),
            version: versions
                .as_mut()
                .and_then(Iterator::next)
                .map(|version| version.0),
            base_version: change.base.0.clone(),
            replacements: replacements as u64,
        })
        .collect();
    EditFileResult {
        replacements: files.iter().map(|file| file.replacements).sum(),
        dry_run: versions.is_none(),
        files,
        diff,
    }
}
