//! Whole-file changes written all or nothing through the `fs` seam: a
//! multi-file `edit_file` and `lsp_rename` commit through [`commit`].

use std::sync::Arc;

use dsh_plugin_api::fs::{FsProvider, Version, WriteGuard};
use dsh_plugin_api::{Bytes, Error, ErrorKind};

/// One file's change: the version and text it was computed on, and its
/// new text.
pub(crate) struct FileChange {
    pub path: String,
    pub base: Version,
    pub original: String,
    pub text: String,
}

/// Why a commit failed: which change, the seam's error, and what became of
/// the files written before it.
pub(crate) struct Failed {
    pub index: usize,
    pub error: Error,
    /// File by file, what restoring did.
    notes: Vec<String>,
    all_restored: bool,
}

impl Failed {
    /// Whether computing the changes again may succeed: the file changed
    /// after it was read, and nothing this commit wrote is left.
    pub fn retry(&self) -> bool {
        self.error.kind() == ErrorKind::Conflict && self.all_restored
    }

    /// Whether nothing this commit wrote is left.
    pub fn all_restored(&self) -> bool {
        self.all_restored
    }

    /// The failure as the caller words it (`word` of the seam's error),
    /// saying what became of the files written before it.
    pub fn explain(self, word: impl FnOnce(Error) -> Error) -> Error {
        let error = word(self.error);
        if self.notes.is_empty() {
            return error;
        }
        let state = if self.all_restored {
            "no file is changed"
        } else {
            "some files are changed"
        };
        Error::new(
            error.kind(),
            format!(
                "{}; {state}: the files written before it were put back: {}",
                error.message(),
                self.notes.join(", ")
            ),
        )
        .with_subject(error.subject().unwrap_or_default())
    }
}

/// Writes `changes` one by one, each guarded by the version it was computed
/// on; when a write fails, writes back what the files written before it had,
/// each guarded by the version this commit left — a file changed by someone
/// else since is not overwritten, and the failure says so. Runs in a task of
/// its own, so it finishes (or undoes what it wrote) even if the caller's
/// future is dropped; returns the changes with the committed versions or the
/// failure.
pub(crate) async fn commit(
    fs: Arc<dyn FsProvider>,
    changes: Vec<FileChange>,
) -> (Vec<FileChange>, Result<Vec<Version>, Failed>) {
    let task = tokio::spawn(async move {
        let mut written: Vec<Version> = Vec::with_capacity(changes.len());
        for (index, change) in changes.iter().enumerate() {
            let guard = WriteGuard::IfVersion(change.base.clone());
            let content = Bytes::from(change.text.clone());
            match fs.write(&change.path, content, guard).await {
                Ok(version) => written.push(version),
                Err(error) => {
                    let failed = restore(fs.as_ref(), &changes[..index], written, error).await;
                    return (changes, Err(failed));
                }
            }
        }
        (changes, Ok(written))
    });
    match task.await {
        Ok(outcome) => outcome,
        // The task only awaits the seam; it ends early only by a panic,
        // which is the caller's to see.
        Err(err) => std::panic::resume_unwind(err.into_panic()),
    }
}

/// Writes back the content the `written` files had before the commit, each
/// guarded by the version the commit left (`versions`); `error` is the next
/// file's failure.
async fn restore(
    fs: &dyn FsProvider,
    written: &[FileChange],
    versions: Vec<Version>,
    error: Error,
) -> Failed {
    let mut notes = Vec::with_capacity(written.len());
    let mut all_restored = true;
    for (change, version) in written.iter().zip(versions) {
        let content = Bytes::from(change.original.clone());
        match fs
            .write(
                &change.path,
                content,
                WriteGuard::IfVersion(version.clone()),
            )
            .await
        {
            Ok(restored) => notes.push(format!("{} restored (version {restored})", change.path)),
            Err(restoring) => {
                all_restored = false;
                notes.push(format!(
                    "{} NOT restored ({restoring}): it keeps this call's edit (version {version})",
                    change.path
                ));
            }
        }
    }
    Failed {
        index: written.len(),
        error,
        notes,
        all_restored,
    }
}
