//! The kit's scratch area in the world: `<scratch_root>/dsh-conformance-<random>`,
//! one subdirectory per case, removed at the end of the run.
//!
//! It is made through `fs` when `fs` is writable, else through a command,
//! and its canonical path (symlinks in the root resolved) is what cases
//! compare against.

use std::hash::{BuildHasher, Hasher, RandomState};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use dsh_plugin_api::ErrorKind;
use dsh_plugin_api::fs::{FileKind, FsProvider};
use dsh_plugin_api::subprocess::SubprocessProvider;

use crate::check::{Failure, expect_err, expect_ok};
use crate::context::Cx;
use crate::options::{KitOptions, World};

/// The prefix of every scratch directory (so a leftover is recognisable).
pub const SCRATCH_PREFIX: &str = "dsh-conformance-";

/// The run's scratch directory.
pub(crate) struct Scratch {
    fs: Option<Arc<dyn FsProvider>>,
    subprocess: Option<Arc<dyn SubprocessProvider>>,
    fs_writable: bool,
    /// Canonical absolute path.
    path: String,
    /// Whether the directory exists (it cannot be made in a world with only
    /// a read-only `fs`; then only path-computation cases run).
    created: bool,
    limit: Duration,
}

impl Scratch {
    /// Makes a fresh, uniquely named scratch directory under the root.
    pub(crate) async fn create(
        world: &World,
        options: &KitOptions,
        limit: Duration,
    ) -> Result<Scratch, String> {
        let root = options.scratch_root.trim_end_matches('/');
        if !options.scratch_root.starts_with('/') || options.scratch_root.contains('\0') {
            return Err(format!(
                "scratch_root {:?} must be an absolute path without NUL",
                options.scratch_root
            ));
        }
        let root = if root.is_empty() { "/" } else { root };
        let path = format!(
            "{}/{SCRATCH_PREFIX}{}",
            root.trim_end_matches('/'),
            random_suffix()
        );
        let fs_writable = world.fs.is_some() && !options.read_only_fs;
        let mut scratch = Scratch {
            fs: world.fs.clone(),
            subprocess: world.subprocess.clone(),
            fs_writable,
            path: path.clone(),
            created: false,
            limit,
        };
        let made = if let (true, Some(fs)) = (fs_writable, &world.fs) {
            scratch.make_with_fs(fs.as_ref(), root, &path).await
        } else if world.subprocess.is_some() {
            scratch.make_with_command(&path).await
        } else {
            // A read-only fs alone cannot make anything: path cases only.
            Ok(())
        };
        made.map_err(|failure| failure.message)?;
        scratch.created = fs_writable || world.subprocess.is_some();
        scratch.path = scratch
            .canonical(&path)
            .await
            .map_err(|failure| failure.message)?;
        Ok(scratch)
    }

    async fn make_with_fs(
        &self,
        fs: &dyn FsProvider,
        root: &str,
        path: &str,
    ) -> Result<(), Failure> {
        // The kit creates one directory, never the root's missing parents.
        let what = format!("scratch: resolve {root} (scratch_root)");
        let canonical = expect_ok(self.limit, &what, fs.resolve(root, None))
            .await?
            .path;
        let what = format!("scratch: lstat {canonical} (scratch_root)");
        let meta = expect_ok(self.limit, &what, fs.lstat(&canonical)).await?;
        if meta.kind != FileKind::Directory {
            return Err(Failure::new(format!(
                "{what}: scratch_root must be a directory, it is a {:?}",
                meta.kind
            )));
        }
        expect_err(
            self.limit,
            &format!("scratch: lstat {path} (must not exist yet)"),
            ErrorKind::NotFound,
            fs.lstat(path),
        )
        .await?;
        expect_ok(
            self.limit,
            &format!("scratch: mkdir {path}"),
            fs.mkdir(path),
        )
        .await
    }

    async fn make_with_command(&self, path: &str) -> Result<(), Failure> {
        // `mkdir` without -p fails if the name is taken: the directory is ours.
        self.command(
            &format!("scratch: mkdir {path}"),
            r#"mkdir -- "$1""#,
            &[path],
        )
        .await
        .map(drop)
    }

    async fn canonical(&self, path: &str) -> Result<String, Failure> {
        match (&self.fs, self.created) {
            (Some(fs), _) => Ok(expect_ok(
                self.limit,
                &format!("scratch: resolve {path}"),
                fs.resolve(path, None),
            )
            .await?
            .path),
            (None, true) => {
                let out = self
                    .command(
                        &format!("scratch: pwd -P in {path}"),
                        r#"cd -- "$1" && pwd -P"#,
                        &[path],
                    )
                    .await?;
                let text = String::from_utf8(out)
                    .map_err(|_| Failure::new(format!("scratch: pwd -P in {path}: not UTF-8")))?;
                Ok(text.trim_end_matches('\n').to_owned())
            }
            (None, false) => Ok(path.to_owned()),
        }
    }

    /// Runs a helper script through a throwaway context (no case is running).
    async fn command(&self, what: &str, script: &str, args: &[&str]) -> Result<Vec<u8>, Failure> {
        let cx = self.helper_cx();
        let result = cx.sh_ok(what, script, args).await;
        if let Err(error) = cx.release().await {
            return Err(Failure::new(format!("{what}: cleanup: {error}")));
        }
        result
    }

    fn helper_cx(&self) -> Cx {
        Cx::new(
            self.fs.clone(),
            self.subprocess.clone(),
            self.fs_writable,
            "/".to_owned(),
            self.limit,
        )
    }

    /// The canonical path of the scratch directory.
    pub(crate) fn path(&self) -> &str {
        &self.path
    }

    pub(crate) fn fs_writable(&self) -> bool {
        self.fs_writable
    }

    /// The directory for case `name` (created when `create` is set).
    pub(crate) async fn case_dir(&self, name: &str, create: bool) -> Result<String, String> {
        let dir = format!("{}/{name}", self.path);
        if !create {
            return Ok(dir);
        }
        if !self.created {
            return Err(format!(
                "cannot create {dir}: the world has neither a writable fs nor a subprocess provider"
            ));
        }
        let made = match (&self.fs, self.fs_writable) {
            (Some(fs), true) => {
                expect_ok(self.limit, &format!("mkdir {dir}"), fs.mkdir(&dir)).await
            }
            _ => self
                .command(&format!("mkdir {dir}"), r#"mkdir -p -- "$1""#, &[&dir])
                .await
                .map(drop),
        };
        made.map(|()| dir).map_err(|failure| failure.message)
    }

    /// Removes the scratch directory and everything in it.
    pub(crate) async fn remove(self) -> Result<(), String> {
        if !self.created {
            return Ok(());
        }
        let path = self.path.clone();
        let removed = match (&self.fs, self.fs_writable) {
            (Some(fs), true) => expect_ok(
                self.limit,
                &format!("remove scratch directory {path}"),
                fs.remove(&path),
            )
            .await
            .map(drop),
            _ => self
                .command(
                    &format!("rm -rf scratch directory {path}"),
                    r#"rm -rf -- "$1""#,
                    &[&path],
                )
                .await
                .map(drop),
        };
        removed.map_err(|failure| failure.message)
    }
}

/// 64 random bits as hex, from the standard library's per-process random
/// hash keys mixed with the clock (no extra dependency for a name).
fn random_suffix() -> String {
    let mut hasher = RandomState::new().build_hasher();
    let nanos = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map(|elapsed| elapsed.as_nanos())
        .unwrap_or_default();
    hasher.write_u128(nanos);
    hasher.write_u32(std::process::id());
    format!("{:016x}", hasher.finish())
}
