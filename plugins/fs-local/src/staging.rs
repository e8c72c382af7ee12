//! Staging: new content is written into a private file beside its target,
//! so publishing it is one same-filesystem rename.
//!
//! The staged file is created with mode 0600 — private from its creation,
//! before any content exists — and given its final mode (the replaced
//! file's, or a new file's umask-derived one) just before the rename. One
//! file, not a private directory around it: a directory's `mkdir` and
//! `rmdir` cost more than the 1 KiB write itself on a journaling
//! filesystem (docs/design.md §5.1, `write`).

use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use dsh_plugin_api::stream::ByteStream;
use dsh_plugin_api::{Bytes, ErrorKind, Result};
use futures::StreamExt;

use crate::blocking::{self, INLINE_LIMIT};
use crate::errors::Op;

/// Name prefix of staged files (`.dsh-stage-<16 hex digits>`).
pub const STAGING_PREFIX: &str = ".dsh-stage-";

/// How many random names are tried before giving up on a staged file.
const NAME_ATTEMPTS: usize = 16;

/// Content staged beside its target, ready to be published.
///
/// Dropping it unpublished — on an error, or because the operation's future
/// was dropped — removes the staged file at once, synchronously. (A
/// blocking write still filling the file then writes into an unlinked
/// inode that disappears when it finishes.)
#[derive(Debug)]
pub struct Staged {
    path: StagedPath,
    file: File,
}

impl Staged {
    /// Creates an empty staged file (mode 0600, random name) in `parent`.
    /// A missing `parent` is `NotFound`.
    pub fn create(op: Op<'_>, parent: &Path) -> Result<Staged> {
        let mut options = OpenOptions::new();
        options.write(true).create_new(true).mode(0o600);
        for _ in 0..NAME_ATTEMPTS {
            let path = parent.join(format!("{STAGING_PREFIX}{:016x}", rand::random::<u64>()));
            match options.open(&path) {
                Ok(file) => {
                    return Ok(Staged {
                        path: StagedPath {
                            path,
                            published: false,
                        },
                        file,
                    });
                }
                Err(err) if err.kind() == io::ErrorKind::AlreadyExists => continue,
                Err(err) => {
                    return Err(op.io_at(
                        format_args!("create a staged file in {}", parent.display()),
                        &err,
                    ));
                }
            }
        }
        Err(op.error(
            ErrorKind::Io,
            format_args!(
                "create a staged file in {}: {NAME_ATTEMPTS} random names were all taken",
                parent.display()
            ),
        ))
    }

    /// Writes `content` into the staged file — inline when small, through
    /// [`blocking::run`] when large.
    pub(crate) async fn fill(self, op: Op<'_>, content: Bytes) -> Result<Staged> {
        let Staged { path, file } = self;
        let file = if content.len() as u64 <= INLINE_LIMIT {
            (&file).write_all(&content).map(|()| file)
        } else {
            blocking::run(op, move || (&file).write_all(&content).map(|()| file)).await?
        }
        .map_err(|err| op.io_at(format_args!("write {}", path.path.display()), &err))?;
        Ok(Staged { path, file })
    }

    /// Appends each chunk of `content` to the staged file as it arrives
    /// (each as [`Staged::fill`] writes it). An error of the stream is the
    /// operation's error; the staging is then removed.
    pub(crate) async fn fill_stream(self, op: Op<'_>, mut content: ByteStream) -> Result<Staged> {
        let mut staged = self;
        while let Some(chunk) = content.next().await {
            staged = staged.fill(op, chunk?).await?;
        }
        Ok(staged)
    }

    /// The staged file, open.
    pub fn file(&self) -> &File {
        &self.file
    }

    /// Where the staged file is.
    pub fn staged_path(&self) -> &Path {
        &self.path.path
    }

    /// Gives a staged file that will be a new file the mode any new file
    /// gets: 0666 less the process's umask.
    pub(crate) fn set_new_file_mode(&self, op: Op<'_>) -> Result<()> {
        let mode = 0o666 & !umask();
        self.file
            .set_permissions(fs::Permissions::from_mode(mode))
            .map_err(|err| op.io_at(format_args!("chmod {}", self.staged_path().display()), &err))
    }

    /// After the staged file was renamed onto its target: the published
    /// file, still open.
    pub fn published(self) -> File {
        let Staged { mut path, file } = self;
        path.published = true;
        file
    }
}

/// The staged file's path; removes the file on drop unless it was
/// published.
#[derive(Debug)]
struct StagedPath {
    path: PathBuf,
    published: bool,
}

impl Drop for StagedPath {
    fn drop(&mut self) {
        if self.published {
            return;
        }
        match fs::remove_file(&self.path) {
            Ok(()) => {}
            Err(err) if err.kind() == io::ErrorKind::NotFound => {}
            Err(err) => {
                tracing::warn!(file = %self.path.display(), %err, "could not remove an abandoned staged file");
            }
        }
    }
}

/// The process's file-mode creation mask, read once from
/// `/proc/self/status` (`umask(2)` can only be read by setting it, which
/// races with every other thread creating files). Without `/proc`, the
/// common 022.
fn umask() -> u32 {
    static UMASK: OnceLock<u32> = OnceLock::new();
    *UMASK.get_or_init(|| {
        fs::read_to_string("/proc/self/status")
            .ok()
            .and_then(|status| {
                status
                    .lines()
                    .find_map(|line| line.strip_prefix("Umask:"))
                    .and_then(|value| u32::from_str_radix(value.trim(), 8).ok())
            })
            .unwrap_or(0o022)
    })
}
