//! Shared helpers for the fs-local integration tests.

use std::fmt::Debug;
use std::path::{Path, PathBuf};

use dsh_fs_local::{FsLocal, STAGING_PREFIX};
use dsh_plugin_api::{Error, ErrorKind, Result};

/// A fresh world: a private temporary directory as the cwd.
pub struct World {
    _dir: tempfile::TempDir,
    root: PathBuf,
    pub fs: FsLocal,
}

impl World {
    pub fn new() -> World {
        let dir = tempfile::tempdir().expect("tempdir");
        let root = std::fs::canonicalize(dir.path()).expect("canonical tempdir");
        let fs = FsLocal::new(root.to_str().expect("utf-8 tempdir")).expect("fs");
        World {
            _dir: dir,
            root,
            fs,
        }
    }

    /// The world's (canonical) root, which is its cwd.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// A host path under the root.
    pub fn path(&self, rel: &str) -> PathBuf {
        self.root.join(rel)
    }

    /// The same, as the absolute string a caller passes.
    pub fn abs(&self, rel: &str) -> String {
        self.path(rel).to_str().expect("utf-8").to_owned()
    }

    /// Writes a host file directly (test setup, not through the provider).
    pub fn put(&self, rel: &str, content: impl AsRef<[u8]>) -> PathBuf {
        let path = self.path(rel);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).expect("mkdir");
        }
        std::fs::write(&path, content).expect("write");
        path
    }

    /// Reads a host file directly.
    pub fn get(&self, rel: &str) -> Vec<u8> {
        std::fs::read(self.path(rel)).expect("read")
    }
}

/// Names of staged files left in `dir`.
pub fn staged_files(dir: &Path) -> Vec<String> {
    std::fs::read_dir(dir)
        .expect("read_dir")
        .map(|entry| {
            entry
                .expect("entry")
                .file_name()
                .to_string_lossy()
                .into_owned()
        })
        .filter(|name| name.starts_with(STAGING_PREFIX))
        .collect()
}

/// Unwraps an error of `kind` (panicking with the value otherwise).
#[track_caller]
pub fn expect_err<T: Debug>(result: Result<T>, kind: ErrorKind) -> Error {
    match result {
        Ok(value) => panic!("expected a {kind} error, got Ok({value:?})"),
        Err(err) => {
            assert_eq!(err.kind(), kind, "wrong kind: {err}");
            err
        }
    }
}

/// Asserts an error's rendering names the operation and the subject.
#[track_caller]
pub fn assert_names(err: &Error, op: &str, subject: &str) {
    assert!(
        err.message().starts_with(&format!("{op}: ")),
        "message should start with the operation `{op}`: {err}"
    );
    assert_eq!(err.subject(), Some(subject), "subject of {err}");
}

/// The process umask, read without changing it.
pub fn umask() -> u32 {
    let status = std::fs::read_to_string("/proc/self/status").expect("status");
    let line = status
        .lines()
        .find(|line| line.starts_with("Umask:"))
        .expect("Umask line");
    u32::from_str_radix(line["Umask:".len()..].trim(), 8).expect("octal umask")
}

/// Runs `work` with this thread's filesystem identity set to an
/// unprivileged user, so permission checks apply even when the tests run as
/// root (fsuid is per thread; the capabilities that bypass checks are
/// dropped with it and restored after).
pub fn as_unprivileged<T>(work: impl FnOnce() -> T) -> T {
    const NOBODY: u32 = 65534;
    // SAFETY: setfsuid/setfsgid only change this thread's filesystem ids.
    let (old_uid, old_gid) = unsafe { (libc::setfsuid(NOBODY), libc::setfsgid(NOBODY)) };
    let restore = Restore(old_uid as u32, old_gid as u32);
    let out = work();
    drop(restore);
    out
}

struct Restore(u32, u32);

impl Drop for Restore {
    fn drop(&mut self) {
        // SAFETY: as above, restoring the previous ids.
        unsafe {
            libc::setfsuid(self.0);
            libc::setfsgid(self.1);
        }
    }
}

/// A current-thread runtime, so every inline syscall of the provider runs
/// on the calling thread (needed by [`as_unprivileged`]).
pub fn block_on<F: std::future::Future>(future: F) -> F::Output {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime")
        .block_on(future)
}
