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
//! The binary is [`ServerOptions::binary`], else `$E2B_LOCAL_BIN` if set, else `e2b-local` in the
//! target profile dir of the running test executable (e.g. `target/debug/e2b-local` for
//! `target/debug/deps/foo-…`); when there is none, it is built there first ([`build_binary`]),
//! so a test crate outside this workspace needs no build step of its own. The server needs
//! root, like e2b-local itself.

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

/// How [`LocalServer::start_with`] runs the server. The default is what [`LocalServer::start`]
/// does: the binary found (or built) next to the test, free loopback ports, a private state dir
/// in the system's temporary dir, the server's default sandbox network, no other argument.
#[derive(Debug, Clone, Default)]
pub struct ServerOptions {
    binary: Option<PathBuf>,
    api_port: u16,
    envd_port: u16,
    state_parent: Option<PathBuf>,
    sandbox_network: Option<String>,
    args: Vec<String>,
}

impl ServerOptions {
    /// The defaults (see the type's docs).
    pub fn new() -> Self {
        Self::default()
    }

    /// Runs this `e2b-local` binary rather than finding one.
    pub fn binary(mut self, path: impl Into<PathBuf>) -> Self {
        self.binary = Some(path.into());
        self
    }

    /// The control-plane port (`--api-port`; 0, the default, picks a free one).
    pub fn api_port(mut self, port: u16) -> Self {
        self.api_port = port;
        self
    }

    /// The envd front port (`--envd-port`; 0, the default, picks a free one).
    pub fn envd_port(mut self, port: u16) -> Self {
        self.envd_port = port;
        self
    }

    /// Creates the private state dir (removed with the server) in `parent` rather than the
    /// system's temporary dir, which sandboxes never see (their `/tmp` is their own).
    pub fn state_dir_in(mut self, parent: impl Into<PathBuf>) -> Self {
        self.state_parent = Some(parent.into());
        self
    }

    /// The sandboxes' address range (`--sandbox-network`: an IPv4 range, or `none` for
    /// loopback only).
    pub fn sandbox_network(mut self, range: impl Into<String>) -> Self {
        self.sandbox_network = Some(range.into());
        self
    }

    /// One more `serve` argument (e.g. `--freezer`, then `v2`).
    pub fn arg(mut self, arg: impl Into<String>) -> Self {
        self.args.push(arg.into());
        self
    }

    /// More `serve` arguments.
    pub fn args<I: IntoIterator<Item = S>, S: Into<String>>(mut self, args: I) -> Self {
        self.args.extend(args.into_iter().map(Into::into));
        self
    }
}

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
        Self::try_start_with(
            &ServerOptions::new()
                .state_dir_in(parent)
                .args(args.iter().copied()),
        )
    }

    /// Starts a server as `options` say and waits until it serves. Panics with the reason if it
    /// cannot.
    pub fn start_with(options: &ServerOptions) -> Self {
        Self::try_start_with(options).unwrap_or_else(|err| panic!("{err}"))
    }

    /// Like [`Self::start_with`], returning the error instead of panicking.
    pub fn try_start_with(options: &ServerOptions) -> Result<Self, HarnessError> {
        let bin = match &options.binary {
            Some(bin) => bin.clone(),
            None => binary_path()?,
        };
        let parent = options
            .state_parent
            .clone()
            .unwrap_or_else(std::env::temp_dir);
        let state_dir = tempfile::Builder::new()
            .prefix("e2b-local-test-")
            .tempdir_in(&parent)
            .map_err(|e| {
                HarnessError(format!(
                    "create temporary state dir in {}: {e}",
                    parent.display()
                ))
            })?;
        let api_key = crate::ids::api_key();
        let mut command = Command::new(&bin);
        command
            .args(["serve", "--host", "127.0.0.1", "--api-key", &api_key])
            .args(["--api-port", &options.api_port.to_string()])
            .args(["--envd-port", &options.envd_port.to_string()])
            .arg("--state-dir")
            .arg(state_dir.path());
        if let Some(range) = &options.sandbox_network {
            command.args(["--sandbox-network", range]);
        }
        let mut child = command
            .args(&options.args)
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
/// `debug` profiles (a benchmark built in release may use a debug server and vice versa);
/// else the one [`build_binary`] builds in the executable's target and profile directories.
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
    if let Some(found) = candidates.iter().find(|candidate| candidate.is_file()) {
        return Ok(found.clone());
    }
    let looked: Vec<String> = candidates.iter().map(|c| c.display().to_string()).collect();
    let (target, profile) = target_of(&exe).ok_or_else(|| {
        HarnessError(format!(
            "no e2b-local binary for {} (looked at {}), and no target directory to build one \
             in; set E2B_LOCAL_BIN",
            exe.display(),
            looked.join(", ")
        ))
    })?;
    build_binary(&target, &profile)
}

/// Builds `e2b-local` from the sources of this crate — the checkout the running test depends
/// on — into `target`'s `profile` directory and returns the binary's path: `cargo build --bin
/// e2b-local --manifest-path <this crate>/Cargo.toml --target-dir <target> --profile <profile>`
/// (`debug` is the `dev` profile), in this crate's own workspace and lock. Never `cargo build -p
/// e2b-local` in the test's workspace: when e2b-local is a dependency of a dev-dependency only
/// (a crate testing with `dsh-testkit`), cargo cannot build it by name ("did not find features
/// for e2b-local"). Cargo is `$CARGO` (set for tests cargo runs), else `cargo` on the `PATH`;
/// its progress goes to stderr. One build at a time per process; concurrent processes wait
/// for cargo's lock on the target directory, and find the binary fresh.
pub fn build_binary(target: &Path, profile: &str) -> Result<PathBuf, HarnessError> {
    static BUILDING: Mutex<()> = Mutex::new(());
    let _one = BUILDING
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let crate_dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    let manifest = crate_dir.join("Cargo.toml");
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let cargo_profile = if profile == "debug" { "dev" } else { profile };
    let status = Command::new(&cargo)
        .args(["build", "--bin", "e2b-local", "--manifest-path"])
        .arg(&manifest)
        .arg("--target-dir")
        .arg(target)
        .args(["--profile", cargo_profile])
        // The checkout's toolchain (rust-toolchain.toml), whatever the test's cwd.
        .current_dir(crate_dir)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .status()
        .map_err(|e| HarnessError(format!("run {}: {e}", Path::new(&cargo).display())))?;
    let built = target.join(profile).join("e2b-local");
    if !status.success() {
        return Err(HarnessError(format!(
            "`{} build --bin e2b-local --manifest-path {}` into {} failed ({status}; its output \
             is above); set E2B_LOCAL_BIN to use a built server",
            Path::new(&cargo).display(),
            manifest.display(),
            target.display()
        )));
    }
    if built.is_file() {
        Ok(built)
    } else {
        Err(HarnessError(format!(
            "cargo built e2b-local, but {} is not a file",
            built.display()
        )))
    }
}

/// The target directory and profile directory name of `exe` (`target/<profile>/deps/<test>`
/// or `target/<profile>/<bin>`).
fn target_of(exe: &Path) -> Option<(PathBuf, String)> {
    let dir = exe.parent()?;
    let profile = if dir.file_name()? == "deps" {
        dir.parent()?
    } else {
        dir
    };
    let name = profile.file_name()?.to_str()?.to_owned();
    Some((profile.parent()?.to_path_buf(), name))
}

/// Where [`binary_path`] looks for `exe` (`target/<profile>/deps/<test>` or
/// `target/<profile>/<bin>`), in order.
fn binary_candidates(exe: &Path) -> Vec<PathBuf> {
    let Some(dir) = exe.parent() else {
        return Vec::new();
    };
    let mut candidates = vec![dir.join("e2b-local")];
    if let Some((target, profile)) = target_of(exe) {
        for profile in [profile.as_str(), "release", "debug"] {
            let candidate = target.join(profile).join("e2b-local");
            if !candidates.contains(&candidate) {
                candidates.push(candidate);
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

    #[test]
    fn a_missing_server_is_built_in_the_target_and_profile_of_the_executable() {
        assert_eq!(
            target_of(Path::new("/t/release/deps/bench-1a2b")),
            Some((PathBuf::from("/t"), "release".to_owned()))
        );
        assert_eq!(
            target_of(Path::new("/x/target/debug/dsh")),
            Some((PathBuf::from("/x/target"), "debug".to_owned()))
        );
        assert_eq!(target_of(Path::new("dsh")), None);
    }
}
