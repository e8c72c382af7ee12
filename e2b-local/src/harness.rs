//! A real e2b-local server for tests: [`LocalServer::start`] runs the built `e2b-local` binary on
//! ephemeral loopback ports with a private temporary state dir and a random API key, waits until
//! it serves, and SIGTERMs it (which kills every sandbox) when dropped.
//!
//! ```no_run
//! let server = e2b_local::harness::LocalServer::start();
//! let status = std::process::Command::new("node")
//!     .envs(server.env())
//!     .arg("my-e2b-test.mjs")
//!     .status()
//!     .unwrap();
//! assert!(status.success());
//! ```
//!
//! The binary is `$E2B_LOCAL_BIN` if set, else `e2b-local` in the target profile dir of the
//! running test executable (e.g. `target/debug/e2b-local` for `target/debug/deps/foo-…`). Build
//! it first with `cargo build -p e2b-local` (cargo does that by itself for this crate's own
//! integration tests). The server needs root, like e2b-local itself.

mod sdk_driver;

pub use sdk_driver::{SdkDriver, Steps, millis, millisecond_samples, quantile};

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex, mpsc};
use std::time::{Duration, Instant};

/// Line prefix the server prints on stdout once both ports serve.
pub const READY_MARKER: &str = "# e2b-local ready";
/// How long [`LocalServer::start`] waits for readiness.
const START_TIMEOUT: Duration = Duration::from_secs(30);
/// How long drop waits after SIGTERM before SIGKILL.
const STOP_TIMEOUT: Duration = Duration::from_secs(30);
/// Bytes of the server's log kept for [`LocalServer::log`] (later lines are only passed on).
const LOG_KEPT: usize = 4 << 20;

/// A running e2b-local server owned by a test.
#[derive(Debug)]
pub struct LocalServer {
    child: Child,
    api_url: String,
    sandbox_url: String,
    api_key: String,
    state_dir: tempfile::TempDir,
    log: Arc<Mutex<String>>,
}

/// Why a server could not be started.
#[derive(Debug, thiserror::Error)]
#[error("start e2b-local test server: {0}")]
pub struct HarnessError(pub String);

impl LocalServer {
    /// Starts a server and waits until it serves. Panics with the reason (missing binary — with
    /// the `cargo build -p e2b-local` hint —, no root, a startup error) if it cannot.
    pub fn start() -> Self {
        Self::try_start().unwrap_or_else(|err| panic!("{err}"))
    }

    /// Like [`Self::start`], with extra `serve` arguments (e.g. `["--freezer", "v2"]`).
    pub fn start_with_args(args: &[&str]) -> Self {
        Self::try_start_with_args(args).unwrap_or_else(|err| panic!("{err}"))
    }

    /// Like [`Self::start`], returning the error instead of panicking.
    pub fn try_start() -> Result<Self, HarnessError> {
        Self::try_start_with_args(&[])
    }

    /// Like [`Self::start_with_args`], returning the error instead of panicking.
    pub fn try_start_with_args(args: &[&str]) -> Result<Self, HarnessError> {
        Self::try_start_in(&std::env::temp_dir(), args)
    }

    /// Like [`Self::start_with_args`], with the temporary state dir created in `parent` rather
    /// than the system's temporary dir (which sandboxes never see: their `/tmp` is their own).
    pub fn start_in(parent: &Path, args: &[&str]) -> Self {
        Self::try_start_in(parent, args).unwrap_or_else(|err| panic!("{err}"))
    }

    /// Like [`Self::start_in`], returning the error instead of panicking.
    pub fn try_start_in(parent: &Path, args: &[&str]) -> Result<Self, HarnessError> {
        let bin = binary_path()?;
        let state_dir = tempfile::Builder::new()
            .prefix("e2b-local-test-")
            .tempdir_in(parent)
            .map_err(|e| {
                HarnessError(format!(
                    "create temporary state dir in {}: {e}",
                    parent.display()
                ))
            })?;
        let api_key = crate::ids::api_key();
        let mut child = Command::new(&bin)
            .args([
                "serve",
                "--host",
                "127.0.0.1",
                "--api-port",
                "0",
                "--envd-port",
                "0",
                "--api-key",
                &api_key,
            ])
            .arg("--state-dir")
            .arg(state_dir.path())
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| HarnessError(format!("run {}: {e}", bin.display())))?;
        let stdout = child.stdout.take().expect("stdout is piped");
        let log = Arc::new(Mutex::new(String::new()));
        let stderr = child.stderr.take().expect("stderr is piped");
        let kept = log.clone();
        // Passes the server's log on to the test's stderr as it comes and keeps the first
        // LOG_KEPT bytes for `log()`.
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines() {
                let Ok(line) = line else { break };
                let _ = writeln!(std::io::stderr(), "{line}");
                let mut kept = kept.lock().expect("server log lock");
                if kept.len() + line.len() < LOG_KEPT {
                    kept.push_str(&line);
                    kept.push('\n');
                }
            }
        });
        let (tx, rx) = mpsc::channel();
        // Reads the environment lines, then keeps draining stdout so the server never blocks.
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    // Nobody listens any more; keep draining.
                }
            }
        });
        let mut api_url = None;
        let mut sandbox_url = None;
        let deadline = Instant::now() + START_TIMEOUT;
        let failed = |child: &mut Child, why: String| {
            let _ = child.kill();
            let status = child.wait().map(|s| s.to_string()).unwrap_or_default();
            HarnessError(format!(
                "{} {why} ({status}; its stderr is above)",
                bin.display()
            ))
        };
        loop {
            let remaining = deadline.saturating_duration_since(Instant::now());
            match rx.recv_timeout(remaining) {
                Ok(line) if line.starts_with(READY_MARKER) => break,
                Ok(line) => {
                    if let Some(url) = line.strip_prefix("export E2B_API_URL=") {
                        api_url = Some(url.to_owned());
                    } else if let Some(url) = line.strip_prefix("export E2B_SANDBOX_URL=") {
                        sandbox_url = Some(url.to_owned());
                    }
                }
                Err(mpsc::RecvTimeoutError::Timeout) => {
                    return Err(failed(
                        &mut child,
                        format!("was not ready within {} s", START_TIMEOUT.as_secs()),
                    ));
                }
                Err(mpsc::RecvTimeoutError::Disconnected) => {
                    return Err(failed(&mut child, "exited before it was ready".to_owned()));
                }
            }
        }
        let (Some(api_url), Some(sandbox_url)) = (api_url, sandbox_url) else {
            return Err(failed(
                &mut child,
                "printed no E2B_API_URL/E2B_SANDBOX_URL before ready".to_owned(),
            ));
        };
        Ok(Self {
            child,
            api_url,
            sandbox_url,
            api_key,
            state_dir,
            log,
        })
    }

    /// Control-plane base URL, e.g. `http://127.0.0.1:41234`.
    pub fn api_url(&self) -> &str {
        &self.api_url
    }

    /// envd front base URL (`E2B_SANDBOX_URL`).
    pub fn sandbox_url(&self) -> &str {
        &self.sandbox_url
    }

    /// The API key the server requires.
    pub fn api_key(&self) -> &str {
        &self.api_key
    }

    /// The server's state dir (removed on drop).
    pub fn state_dir(&self) -> &Path {
        self.state_dir.path()
    }

    /// What the server has logged on stderr so far (its first 4 MiB; every line is also passed
    /// on to the test's stderr).
    pub fn log(&self) -> String {
        self.log.lock().expect("server log lock").clone()
    }

    /// Host pid of the server process.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// `E2B_API_URL`, `E2B_SANDBOX_URL`, `E2B_API_KEY`, `E2B_VOLUME_API_URL`: what the SDKs
    /// need to use this server.
    pub fn env(&self) -> Vec<(String, String)> {
        vec![
            ("E2B_API_URL".to_owned(), self.api_url.clone()),
            ("E2B_SANDBOX_URL".to_owned(), self.sandbox_url.clone()),
            ("E2B_API_KEY".to_owned(), self.api_key.clone()),
            ("E2B_VOLUME_API_URL".to_owned(), self.api_url.clone()),
        ]
    }

    /// SIGTERMs the server and waits for it (every sandbox is killed first). Returns its exit
    /// status; SIGKILLs it if it has not exited within 30 s.
    pub fn stop(mut self) -> std::process::ExitStatus {
        self.terminate()
    }

    fn terminate(&mut self) -> std::process::ExitStatus {
        if let Ok(Some(status)) = self.child.try_wait() {
            return status;
        }
        // SAFETY: kill(2) on our own child's pid.
        unsafe { libc::kill(self.child.id() as libc::pid_t, libc::SIGTERM) };
        let deadline = Instant::now() + STOP_TIMEOUT;
        loop {
            match self.child.try_wait() {
                Ok(Some(status)) => return status,
                Ok(None) if Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(10))
                }
                _ => {
                    let _ = self.child.kill();
                    return self.child.wait().expect("wait for killed e2b-local");
                }
            }
        }
    }
}

impl Drop for LocalServer {
    fn drop(&mut self) {
        self.terminate();
    }
}

/// `$E2B_LOCAL_BIN`, else `e2b-local` built next to the running executable: in its own
/// directory or profile directory first, then in the target directory's `release` and
/// `debug` profiles (a benchmark built in release may use a debug server and vice versa).
fn binary_path() -> Result<PathBuf, HarnessError> {
    if let Some(bin) = std::env::var_os("E2B_LOCAL_BIN") {
        let bin = PathBuf::from(bin);
        return if bin.is_file() {
            Ok(bin)
        } else {
            Err(HarnessError(format!(
                "E2B_LOCAL_BIN={} is not a file",
                bin.display()
            )))
        };
    }
    let exe = std::env::current_exe()
        .map_err(|e| HarnessError(format!("locate the test executable: {e}")))?;
    let candidates = binary_candidates(&exe);
    candidates
        .iter()
        .find(|candidate| candidate.is_file())
        .cloned()
        .ok_or_else(|| {
            let looked: Vec<String> = candidates.iter().map(|c| c.display().to_string()).collect();
            HarnessError(format!(
                "no e2b-local binary for {} (looked at {}); run `cargo build -p e2b-local` \
                 first, or set E2B_LOCAL_BIN",
                exe.display(),
                looked.join(", ")
            ))
        })
}

/// Where [`binary_path`] looks for `exe` (`target/<profile>/deps/<test>` or
/// `target/<profile>/<bin>`), in order.
fn binary_candidates(exe: &Path) -> Vec<PathBuf> {
    let Some(dir) = exe.parent() else {
        return Vec::new();
    };
    let profile = if dir.file_name().is_some_and(|name| name == "deps") {
        dir.parent()
    } else {
        Some(dir)
    };
    let mut candidates = vec![dir.join("e2b-local")];
    if let Some(profile) = profile {
        if profile != dir {
            candidates.push(profile.join("e2b-local"));
        }
        if let Some(target) = profile.parent() {
            for other in ["release", "debug"] {
                let candidate = target.join(other).join("e2b-local");
                if !candidates.contains(&candidate) {
                    candidates.push(candidate);
                }
            }
        }
    }
    candidates
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_server_is_looked_for_in_the_own_profile_first_then_the_others() {
        let from_test = binary_candidates(Path::new("/t/release/deps/bench-1a2b"));
        assert_eq!(
            from_test,
            [
                "/t/release/deps/e2b-local",
                "/t/release/e2b-local",
                "/t/debug/e2b-local"
            ]
            .map(PathBuf::from)
        );
        let from_bin = binary_candidates(Path::new("/t/debug/dsh"));
        assert_eq!(
            from_bin,
            ["/t/debug/e2b-local", "/t/release/e2b-local"].map(PathBuf::from)
        );
    }
}
