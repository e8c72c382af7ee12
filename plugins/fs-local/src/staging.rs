//! Staging: new content is written into a private directory beside its
//! target, so publishing it is one same-filesystem rename.

use std::ffi::OsStr;
use std::fs::{self, DirBuilder, File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};

use dsh_plugin_api::stream::ByteStream;
use dsh_plugin_api::{Bytes, ErrorKind, Result};
use futures::StreamExt;

use crate::blocking::{self, INLINE_LIMIT};
use crate::errors::Op;

/// Name prefix of staging directories (`.dsh-stage-<16 hex digits>`).
pub const STAGING_PREFIX: &str = ".dsh-stage-";

/// How many random names are tried before giving up on a staging directory.
const NAME_ATTEMPTS: usize = 16;

/// Content staged beside its target, ready to be published.
///
/// Dropping it unpublished — on an error, or because the operation's future
/// was dropped — removes the staged file and the staging directory at once,
/// synchronously. (A blocking write still filling the file then writes into
/// an unlinked inode that disappears when it finishes.)
#[derive(Debug)]
pub(crate) struct Staged {
    dir: StagingDir,
    file: File,
}

impl Staged {
    /// Creates a staging directory (mode 0700, random name) in `parent`
    /// and, in it, an empty file `name` (mode 0666 less the umask, as any
    /// new file). A missing `parent` is `NotFound`.
    pub(crate) fn create(op: Op<'_>, parent: &Path, name: &OsStr) -> Result<Staged> {
        let dir = StagingDir::create(op, parent, name)?;
        let file = OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&dir.staged)
            .map_err(|err| op.io_at(format_args!("create {}", dir.staged.display()), &err))?;
        Ok(Staged { dir, file })
    }

    /// Writes `content` into the staged file — inline when small, through
    /// [`blocking::run`] when large.
    pub(crate) async fn fill(self, op: Op<'_>, content: Bytes) -> Result<Staged> {
        let Staged { dir, file } = self;
        let file = if content.len() as u64 <= INLINE_LIMIT {
            (&file).write_all(&content).map(|()| file)
        } else {
            blocking::run(op, move || (&file).write_all(&content).map(|()| file)).await?
        }
        .map_err(|err| op.io_at(format_args!("write {}", dir.staged.display()), &err))?;
        Ok(Staged { dir, file })
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
    pub(crate) fn file(&self) -> &File {
        &self.file
    }

    /// Where the staged file is.
    pub(crate) fn staged_path(&self) -> &Path {
        &self.dir.staged
    }

    /// After the staged file was renamed onto its target: removes the (now
    /// empty) staging directory and returns the published file, still open.
    pub(crate) fn published(self) -> File {
        let Staged { mut dir, file } = self;
        dir.published = true;
        if let Err(err) = fs::remove_dir(&dir.path) {
            // The commit happened; a leftover directory is worth a warning,
            // not a failed write.
            tracing::warn!(dir = %dir.path.display(), %err, "could not remove a staging directory after publishing");
            let _ = fs::remove_dir_all(&dir.path);
        }
        file
    }
}

/// The staging directory and the staged file's path in it; removes both on
/// drop unless the file was published.
#[derive(Debug)]
struct StagingDir {
    path: PathBuf,
    staged: PathBuf,
    published: bool,
}

impl StagingDir {
    fn create(op: Op<'_>, parent: &Path, name: &OsStr) -> Result<StagingDir> {
        let mut builder = DirBuilder::new();
        builder.mode(0o700);
        for _ in 0..NAME_ATTEMPTS {
            let path = parent.join(format!("{STAGING_PREFIX}{:016x}", rand::random::<u64>()));
            match builder.create(&path) {
                Ok(()) => {
                    let staged = path.join(name);
                    return Ok(StagingDir {
                        path,
                        staged,
                        published: false,
                    });
                }
                Err(err) if err.kind() == io::ErrorKind::AlreadyExists => continue,
                Err(err) => {
                    return Err(op.io_at(
                        format_args!("create staging directory in {}", parent.display()),
                        &err,
                    ));
                }
            }
        }
        Err(op.error(
            ErrorKind::Io,
            format_args!(
                "create staging directory in {}: {NAME_ATTEMPTS} random names were all taken",
                parent.display()
            ),
        ))
    }
}

impl Drop for StagingDir {
    fn drop(&mut self) {
        if self.published {
            return;
        }
        let _ = fs::remove_file(&self.staged);
        match fs::remove_dir(&self.path) {
            Ok(()) => {}
            Err(err) if err.kind() == io::ErrorKind::NotFound => {}
            Err(_) => {
                if let Err(err) = fs::remove_dir_all(&self.path) {
                    tracing::warn!(dir = %self.path.display(), %err, "could not remove an abandoned staging directory");
                }
            }
        }
    }
}
