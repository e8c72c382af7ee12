//! Spill files: a lossless copy of a command's output on the host's disk.
//!
//! All spill files of one provider live in one private directory, created on
//! first use under the configured parent with a random name and mode 0700,
//! and removed with everything in it at disposal. Each file is created
//! exclusively with mode 0600. Writes go straight to the page cache from the
//! output task: a regular-file write does not wait on the reader, so no
//! extra thread hop is paid per chunk.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::PathBuf;
use std::sync::Mutex;

use dsh_plugin_api::subprocess::SpillInfo;
use dsh_plugin_api::{Error, Result};

/// The provider's private spill directory.
#[derive(Debug)]
pub struct SpillDir {
    parent: PathBuf,
    state: Mutex<DirState>,
}

#[derive(Debug)]
enum DirState {
    /// No spill asked for yet.
    Unborn,
    Live(PathBuf),
    /// Disposal began: no new files; `Some` while removal has not
    /// succeeded (a later `remove` retries it).
    Closed(Option<PathBuf>),
}

impl SpillDir {
    pub fn new(parent: PathBuf) -> SpillDir {
        SpillDir {
            parent,
            state: Mutex::new(DirState::Unborn),
        }
    }

    /// Creates `<dir>/<name>` (mode 0600, must not exist), creating the
    /// private directory first if needed.
    pub fn create(&self, name: &str, limit: u64) -> Result<SpillFile> {
        let dir = self.dir()?;
        let path = dir.join(name);
        let file = OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
            .open(&path)
            .map_err(|err| {
                Error::from_io("spawn: create spill file", &err)
                    .with_subject(path.display().to_string())
            })?;
        Ok(SpillFile::new(path, file, limit))
    }

    fn dir(&self) -> Result<PathBuf> {
        let mut state = self.state.lock().expect("spill dir lock");
        match &*state {
            DirState::Live(dir) => return Ok(dir.clone()),
            DirState::Closed(_) => {
                return Err(Error::closed(
                    "spawn: the subprocess provider is disposed (no new spill files)",
                ));
            }
            DirState::Unborn => {}
        }
        let name = format!("dsh-subprocess-local-{:016x}", rand::random::<u64>());
        let dir = self.parent.join(name);
        // mkdir fails if anything (a file, a planted symlink) is there.
        std::fs::DirBuilder::new()
            .mode(0o700)
            .create(&dir)
            .map_err(|err| {
                Error::from_io("spawn: create private spill directory", &err)
                    .with_subject(dir.display().to_string())
            })?;
        *state = DirState::Live(dir.clone());
        Ok(dir)
    }

    /// The private directory, if one was created and not yet removed.
    pub fn path(&self) -> Option<PathBuf> {
        match &*self.state.lock().expect("spill dir lock") {
            DirState::Live(dir) | DirState::Closed(Some(dir)) => Some(dir.clone()),
            DirState::Unborn | DirState::Closed(None) => None,
        }
    }

    /// Refuses new spill files from now on and removes the private
    /// directory with everything in it. A failed removal is retried by the
    /// next call.
    pub fn remove(&self) -> Result<()> {
        let mut state = self.state.lock().expect("spill dir lock");
        let dir = match std::mem::replace(&mut *state, DirState::Closed(None)) {
            DirState::Live(dir) | DirState::Closed(Some(dir)) => dir,
            DirState::Unborn | DirState::Closed(None) => return Ok(()),
        };
        match std::fs::remove_dir_all(&dir) {
            Ok(()) => Ok(()),
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(err) => {
                let error = Error::from_io("dispose: remove spill directory", &err)
                    .with_subject(dir.display().to_string());
                *state = DirState::Closed(Some(dir));
                Err(error)
            }
        }
    }
}

impl Drop for SpillDir {
    /// A provider dropped without its disposal (a panicking test, an
    /// embedder that forgot it) removes its directory as its disposal
    /// would: the files (and the paths `SpillInfo` gave out) are gone with
    /// it, instead of staying on the host's disk until removed by hand.
    fn drop(&mut self) {
        if let Err(err) = self.remove() {
            tracing::warn!("{err}");
        }
    }
}

/// One spill file being written.
#[derive(Debug)]
pub struct SpillFile {
    display: String,
    file: Option<File>,
    limit: u64,
    len: u64,
    complete: bool,
}

impl SpillFile {
    fn new(path: PathBuf, file: File, limit: u64) -> SpillFile {
        SpillFile {
            display: path.display().to_string(),
            file: Some(file),
            limit,
            len: 0,
            complete: true,
        }
    }

    /// Appends `bytes` up to the limit; beyond it (or after a write error,
    /// which is logged) the copy is marked incomplete and closed.
    pub fn write(&mut self, bytes: &[u8]) {
        let Some(file) = self.file.as_mut() else {
            if !bytes.is_empty() {
                self.complete = false;
            }
            return;
        };
        let room = self.limit - self.len;
        let take = room.min(bytes.len() as u64) as usize;
        if let Err(err) = file.write_all(&bytes[..take]) {
            tracing::warn!(path = %self.display, %err, "spill write failed; the copy is incomplete");
            self.complete = false;
            self.file = None;
            return;
        }
        self.len += take as u64;
        if take < bytes.len() {
            self.complete = false;
            self.file = None;
        }
    }

    pub fn info(&self) -> SpillInfo {
        SpillInfo {
            path: self.display.clone(),
            len: self.len,
            complete: self.complete,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;
    use std::path::Path;

    #[test]
    fn files_are_private_cut_at_the_limit_and_removed() {
        let parent = tempfile::tempdir().expect("tempdir");
        let spills = SpillDir::new(parent.path().to_path_buf());
        let mut file = spills.create("a.stdout", 5).expect("create");
        let dir = spills.path().expect("created");
        assert_eq!(
            std::fs::metadata(&dir).expect("dir").permissions().mode() & 0o777,
            0o700
        );
        assert_eq!(
            std::fs::metadata(Path::new(&file.info().path))
                .expect("file")
                .permissions()
                .mode()
                & 0o777,
            0o600
        );

        file.write(b"abc");
        assert!(file.info().complete);
        file.write(b"de");
        assert_eq!(file.info().len, 5);
        assert!(file.info().complete, "exactly at the limit is complete");
        file.write(b"f");
        assert!(!file.info().complete);
        assert_eq!(
            std::fs::read(Path::new(&file.info().path)).expect("read"),
            b"abcde"
        );

        let err = spills.create("a.stdout", 5).expect_err("exclusive");
        assert_eq!(err.kind(), dsh_plugin_api::ErrorKind::AlreadyExists);
        spills.remove().expect("remove");
        assert!(!dir.exists());
        assert_eq!(spills.path(), None);
        spills.remove().expect("idempotent");
        let err = spills.create("b.stdout", 5).expect_err("closed");
        assert_eq!(err.kind(), dsh_plugin_api::ErrorKind::Closed);
        assert!(!dir.exists(), "no directory comes back after disposal");
    }

    #[test]
    fn a_directory_dropped_without_removal_is_removed() {
        let parent = tempfile::tempdir().expect("tempdir");
        let spills = SpillDir::new(parent.path().to_path_buf());
        let mut file = spills.create("a.stdout", 5).expect("create");
        file.write(b"abc");
        let dir = spills.path().expect("created");
        drop(spills);
        assert!(!dir.exists(), "{} outlived its provider", dir.display());
    }
}
