//! [`World`]: the state every handle of one provider shares — the world's
//! cwd and ambient environment, the spill directory, the registry of owned
//! groups and sessions, and the tasks that outlive an operation. The
//! provider facade creates it; the workers (`command`, `prepare`,
//! `terminal`) use it.

use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use dsh_plugin_api::{Error, ErrorKind, Result};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::env::Environment;
use crate::registry::Registry;
use crate::spill::SpillDir;

/// The shared state every handle of one provider refers to.
pub struct World {
    cwd: PathBuf,
    env: Environment,
    spills: SpillDir,
    kill_grace: Duration,
    registry: Registry,
    tracker: TaskTracker,
    disconnect: CancellationToken,
    abandon: CancellationToken,
    seq: AtomicU64,
}

impl World {
    /// A world with nothing started yet.
    pub fn new(cwd: PathBuf, env: Environment, spills: SpillDir, kill_grace: Duration) -> World {
        World {
            cwd,
            env,
            spills,
            kill_grace,
            registry: Registry::new("the subprocess provider"),
            tracker: TaskTracker::new(),
            disconnect: CancellationToken::new(),
            abandon: CancellationToken::new(),
            seq: AtomicU64::new(0),
        }
    }

    /// The world's cwd.
    pub fn cwd(&self) -> &std::path::Path {
        &self.cwd
    }

    pub fn check_open(&self, operation: &str) -> Result<()> {
        self.registry.check_open(operation)
    }

    /// The directory a command runs in: `requested` (relative paths join the
    /// world's cwd) or the world's cwd; it must be an existing directory.
    pub fn working_dir(&self, operation: &str, requested: Option<&str>) -> Result<PathBuf> {
        let dir = match requested {
            Some("") => {
                return Err(Error::invalid_input(format!(
                    "{operation}: cwd is empty (omit it for the world's cwd)"
                )));
            }
            Some(dir) => self.cwd.join(dir),
            None => self.cwd.clone(),
        };
        match std::fs::metadata(&dir) {
            Ok(meta) if meta.is_dir() => Ok(dir),
            Ok(_) => Err(Error::new(
                ErrorKind::NotADirectory,
                format!("{operation}: cwd is not a directory"),
            )
            .with_subject(dir.display().to_string())),
            Err(err) => Err(Error::from_io(&format!("{operation}: cwd"), &err)
                .with_subject(dir.display().to_string())),
        }
    }

    pub fn env(&self) -> &Environment {
        &self.env
    }

    pub fn spills(&self) -> &SpillDir {
        &self.spills
    }

    pub fn kill_grace(&self) -> Duration {
        self.kill_grace
    }

    pub fn registry(&self) -> &Registry {
        &self.registry
    }

    pub fn tracker(&self) -> &TaskTracker {
        &self.tracker
    }

    pub fn disconnect_token(&self) -> CancellationToken {
        self.disconnect.clone()
    }

    pub fn abandon_token(&self) -> CancellationToken {
        self.abandon.clone()
    }

    pub fn next_seq(&self) -> u64 {
        self.seq.fetch_add(1, Ordering::Relaxed)
    }
}
