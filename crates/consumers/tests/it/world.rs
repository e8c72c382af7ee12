//! The local world the command and terminal tests run in: `dsh-fs-local`
//! and `dsh-subprocess-local` in-process, with a private cwd and spill
//! directory, and a marker that finds every process a test started.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use dsh_consumers::commands::Commands;
use dsh_consumers::terminals::Terminals;
use dsh_fs_local::FsLocal;
use dsh_subprocess_local::{Config, LocalSubprocess};

/// The environment variable that marks a test's processes.
const MARK: &str = "TOOLS_IT_MARK";

pub struct LocalWorld {
    pub dir: tempfile::TempDir,
    pub fs: Arc<FsLocal>,
    pub subprocess: Arc<LocalSubprocess>,
    config: Config,
    marker: String,
}

impl LocalWorld {
    pub fn new() -> LocalWorld {
        let dir = tempfile::tempdir().expect("temp dir");
        let cwd = dir.path().join("cwd");
        let spill = dir.path().join("spill");
        std::fs::create_dir(&cwd).expect("cwd");
        std::fs::create_dir(&spill).expect("spill dir");
        let utf8 = |path: &std::path::Path| path.to_str().expect("UTF-8 temp path").to_owned();
        let config = Config {
            cwd: Some(utf8(&cwd)),
            spill_dir: Some(utf8(&spill)),
            kill_grace_ms: Some(300),
            durable_dir: Some(utf8(&dir.path().join("durable"))),
            ..Config::default()
        };
        LocalWorld {
            fs: Arc::new(FsLocal::new(utf8(&cwd)).expect("fs-local")),
            subprocess: Arc::new(LocalSubprocess::new(&config).expect("subprocess-local")),
            config,
            marker: format!("{:016x}", rand::random::<u64>()),
            dir,
        }
    }

    /// A new provider instance of the same world (same cwd, spill and
    /// durable directories), as a later process would build it.
    pub fn new_subprocess(&self) -> Arc<LocalSubprocess> {
        Arc::new(LocalSubprocess::new(&self.config).expect("subprocess-local"))
    }

    pub fn commands(&self) -> Commands {
        Commands::new(self.subprocess.clone(), self.fs.clone())
    }

    pub fn terminals(&self) -> Terminals {
        Terminals::new(self.subprocess.clone())
    }

    /// The environment that marks a process as this test's.
    pub fn marked_env(&self) -> BTreeMap<String, String> {
        BTreeMap::from([(MARK.to_owned(), self.marker.clone())])
    }

    /// Pids of live processes carrying this test's marker (a zombie's
    /// environment reads empty: zombies count as gone).
    pub fn marked_processes(&self) -> Vec<u32> {
        let needle = format!("{MARK}={}", self.marker);
        let Ok(entries) = std::fs::read_dir("/proc") else {
            return Vec::new();
        };
        entries
            .filter_map(|entry| entry.ok()?.file_name().to_str()?.parse::<u32>().ok())
            .filter(|pid| {
                std::fs::read(format!("/proc/{pid}/environ")).is_ok_and(|environ| {
                    environ
                        .split(|byte| *byte == 0)
                        .any(|var| var == needle.as_bytes())
                })
            })
            .collect()
    }

    /// How many marked processes run the program `name` (by
    /// `/proc/<pid>/comm`: after its exec, not while a shell's fork of
    /// itself is still setting it up).
    pub fn marked_running(&self, name: &str) -> usize {
        self.marked_processes()
            .into_iter()
            .filter(|pid| {
                std::fs::read_to_string(format!("/proc/{pid}/comm"))
                    .is_ok_and(|comm| comm.trim_end() == name)
            })
            .count()
    }

    /// Waits up to 10 s until `count` marked processes run `name`.
    pub async fn until_running(&self, name: &str, count: usize) {
        let deadline = Instant::now() + Duration::from_secs(10);
        while self.marked_running(name) < count && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        assert_eq!(self.marked_running(name), count, "{name} is not running");
    }

    /// Waits up to `limit` for every marked process to be gone; returns
    /// those still there.
    pub async fn marked_processes_after(&self, limit: Duration) -> Vec<u32> {
        let deadline = Instant::now() + limit;
        loop {
            let left = self.marked_processes();
            if left.is_empty() || Instant::now() >= deadline {
                return left;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Disposes the provider and checks it owns nothing afterwards.
    pub async fn dispose(&self) {
        self.subprocess.dispose().await.expect("dispose");
        assert_eq!(self.subprocess.owned(), 0, "groups still owned");
    }
}

impl Drop for LocalWorld {
    /// A failed test must not leave its processes behind (they run in
    /// sessions of their own and would outlive the test process).
    fn drop(&mut self) {
        for pid in self.marked_processes() {
            let _ = std::process::Command::new("kill")
                .args(["-KILL", &pid.to_string()])
                .status();
        }
    }
}
