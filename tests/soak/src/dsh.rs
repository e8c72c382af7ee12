//! Running the built `dsh` as a user would: one process per operation, with a manifest, piped
//! output, optional input (all at once, or typed line by line), a SIGKILL at a chosen moment,
//! and a bound after which a `dsh` that has not ended counts as hung (and is killed).
//!
//! Every `dsh` gets a clean environment: the server's `E2B_*` variables, `DSH_PLUGIN_PATH`, a
//! `TERM`, and [`RUN_MARKER_ENV`] — which its descendants inherit, so a scan of `/proc` finds
//! anything the soak started that outlived it.

use std::ffi::OsString;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{ExitStatus, Stdio};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};
use tokio::process::{Child, Command};
use tokio::task::JoinHandle;

/// The variable marking every process the soak started (value: the run's token).
pub const RUN_MARKER_ENV: &str = "DSH_SOAK_RUN";
/// How long the output readers may lag behind an ended `dsh`.
const DRAIN_LIMIT: Duration = Duration::from_secs(10);
/// How often waits re-check output and exit.
const POLL: Duration = Duration::from_millis(20);
/// Characters of stderr kept in a description.
const STDERR_SHOWN: usize = 800;

/// How to start `dsh` for this soak.
#[derive(Debug, Clone)]
pub struct Dsh {
    program: PathBuf,
    env: Vec<(OsString, OsString)>,
    op_timeout: Duration,
}

/// What a `dsh` reads on stdin.
#[derive(Debug, Clone)]
pub enum Input {
    /// `/dev/null`.
    Null,
    /// These bytes, then end of input.
    Bytes(Vec<u8>),
    /// Each chunk after its delay, as a user types; then end of input if `close`, else stdin
    /// stays open until `dsh` ends.
    Typed {
        chunks: Vec<(Duration, Vec<u8>)>,
        close: bool,
    },
}

/// How one `dsh` ended.
#[derive(Debug)]
pub struct Outcome {
    pub status: ExitStatus,
    pub stdout: Vec<u8>,
    pub stderr: Vec<u8>,
    pub elapsed: Duration,
    /// It outlived the operation bound and was killed for it.
    pub hung: bool,
}

impl Outcome {
    /// Whether it died of SIGKILL that the soak sent on purpose (not for hanging).
    pub fn killed(&self) -> bool {
        !self.hung && self.status.signal() == Some(9)
    }

    /// Its exit code (`None` when a signal ended it).
    pub fn code(&self) -> Option<i32> {
        self.status.code()
    }

    /// stdout as text (lossy).
    pub fn stdout_text(&self) -> String {
        String::from_utf8_lossy(&self.stdout).into_owned()
    }

    /// How it ended, with the start of its stderr: for failure reports.
    pub fn describe(&self) -> String {
        let ended = if self.hung {
            format!("hung (killed after {:.1} s)", self.elapsed.as_secs_f64())
        } else if let Some(code) = self.status.code() {
            format!("exit {code} after {:.2} s", self.elapsed.as_secs_f64())
        } else {
            format!(
                "signal {} after {:.2} s",
                self.status.signal().unwrap_or(0),
                self.elapsed.as_secs_f64()
            )
        };
        let stderr = String::from_utf8_lossy(&self.stderr);
        let stderr = stderr.trim();
        if stderr.is_empty() {
            ended
        } else {
            let shown: String = stderr.chars().take(STDERR_SHOWN).collect();
            let more = if shown.len() < stderr.len() {
                "…"
            } else {
                ""
            };
            format!("{ended}; stderr: {shown}{more}")
        }
    }
}

impl Dsh {
    /// `program` with plugins from `plugin_dir`, talking to the server described by
    /// `server_env`, marked with run token `run`; each invocation is bounded by `op_timeout`.
    pub fn new(
        program: &Path,
        plugin_dir: &Path,
        server_env: &[(String, String)],
        run: &str,
        op_timeout: Duration,
    ) -> Self {
        let mut env: Vec<(OsString, OsString)> = vec![
            (
                "PATH".into(),
                std::env::var_os("PATH").unwrap_or_else(|| "/usr/bin:/bin".into()),
            ),
            ("LANG".into(), "C.UTF-8".into()),
            ("TERM".into(), "xterm".into()),
            ("DSH_PLUGIN_PATH".into(), plugin_dir.into()),
            (RUN_MARKER_ENV.into(), run.into()),
        ];
        env.extend(
            server_env
                .iter()
                .map(|(name, value)| (name.into(), value.into())),
        );
        Self {
            program: program.to_path_buf(),
            env,
            op_timeout,
        }
    }

    /// Starts `dsh --config MANIFEST ARGS…`.
    pub fn spawn(&self, manifest: &Path, args: &[&str], input: Input) -> Result<Running> {
        let mut command = Command::new(&self.program);
        command
            .arg("--config")
            .arg(manifest)
            .args(args)
            .env_clear()
            .envs(self.env.iter().map(|(n, v)| (n, v)))
            .stdin(match input {
                Input::Null => Stdio::null(),
                _ => Stdio::piped(),
            })
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        let mut child = command
            .spawn()
            .with_context(|| format!("run {} {}", self.program.display(), args.join(" ")))?;
        let stdout = Arc::new(Mutex::new(Vec::new()));
        let stdout_task = {
            let pipe = child.stdout.take().context("dsh stdout")?;
            let buffer = Arc::clone(&stdout);
            tokio::spawn(async move {
                drain(pipe, |chunk| lock(&buffer).extend_from_slice(chunk)).await
            })
        };
        let stderr_task = {
            let pipe = child.stderr.take().context("dsh stderr")?;
            tokio::spawn(async move {
                let mut all = Vec::new();
                drain(pipe, |chunk| all.extend_from_slice(chunk)).await;
                all
            })
        };
        let stdin_task = match (input, child.stdin.take()) {
            (Input::Bytes(bytes), Some(mut stdin)) => Some(tokio::spawn(async move {
                // A dsh that stops reading (killed, failed) makes this fail: not our concern.
                let _ = stdin.write_all(&bytes).await;
                drop(stdin);
            })),
            (Input::Typed { chunks, close }, Some(mut stdin)) => Some(tokio::spawn(async move {
                for (delay, chunk) in chunks {
                    tokio::time::sleep(delay).await;
                    if stdin.write_all(&chunk).await.is_err() || stdin.flush().await.is_err() {
                        return;
                    }
                }
                if close {
                    drop(stdin);
                } else {
                    // Held open until `finish` aborts this task, after dsh ended.
                    std::future::pending::<()>().await;
                }
            })),
            _ => None,
        };
        Ok(Running {
            child,
            stdout,
            stdout_task,
            stderr_task,
            stdin_task,
            started: Instant::now(),
            limit: self.op_timeout,
        })
    }

    /// Runs `dsh` to its end; with `kill_after`, SIGKILLs it at that moment if it still runs.
    pub async fn run(
        &self,
        manifest: &Path,
        args: &[&str],
        input: Input,
        kill_after: Option<Duration>,
    ) -> Result<Outcome> {
        let mut running = self.spawn(manifest, args, input)?;
        if let Some(delay) = kill_after {
            running.kill_after(delay).await;
        }
        running.finish().await
    }
}

/// A started `dsh`. Dropping it SIGKILLs the process.
#[derive(Debug)]
pub struct Running {
    child: Child,
    stdout: Arc<Mutex<Vec<u8>>>,
    stdout_task: JoinHandle<()>,
    stderr_task: JoinHandle<Vec<u8>>,
    stdin_task: Option<JoinHandle<()>>,
    started: Instant,
    limit: Duration,
}

impl Running {
    /// Waits until stdout contains `needle`; false if `dsh` ended or `limit` passed first.
    pub async fn wait_for_stdout(&mut self, needle: &[u8], limit: Duration) -> bool {
        let deadline = Instant::now() + limit;
        loop {
            if contains(&lock(&self.stdout), needle) {
                return true;
            }
            if !matches!(self.child.try_wait(), Ok(None)) || Instant::now() >= deadline {
                return false;
            }
            tokio::time::sleep(POLL).await;
        }
    }

    /// SIGKILLs `dsh` after `delay` unless it ended before.
    pub async fn kill_after(&mut self, delay: Duration) {
        if tokio::time::timeout(delay, self.child.wait())
            .await
            .is_err()
        {
            self.kill();
        }
    }

    /// SIGKILLs `dsh` now (nothing if it already ended).
    pub fn kill(&mut self) {
        let _ = self.child.start_kill();
    }

    /// Waits for the end of `dsh` (killing it once the operation bound has passed) and of its
    /// output.
    pub async fn finish(mut self) -> Result<Outcome> {
        let remaining = self.limit.saturating_sub(self.started.elapsed());
        let (status, hung) = match tokio::time::timeout(remaining, self.child.wait()).await {
            Ok(status) => (status.context("wait for dsh")?, false),
            Err(_) => {
                self.kill();
                (
                    self.child.wait().await.context("wait for killed dsh")?,
                    true,
                )
            }
        };
        let elapsed = self.started.elapsed();
        if let Some(task) = self.stdin_task.take() {
            task.abort();
        }
        let _ = tokio::time::timeout(DRAIN_LIMIT, &mut self.stdout_task).await;
        self.stdout_task.abort();
        let stderr = match tokio::time::timeout(DRAIN_LIMIT, &mut self.stderr_task).await {
            Ok(Ok(stderr)) => stderr,
            _ => b"(stderr not readable)".to_vec(),
        };
        let stdout = std::mem::take(&mut *lock(&self.stdout));
        Ok(Outcome {
            status,
            stdout,
            stderr,
            elapsed,
            hung,
        })
    }
}

async fn drain(mut pipe: impl AsyncRead + Unpin, mut sink: impl FnMut(&[u8])) {
    let mut buffer = vec![0; 64 * 1024];
    while let Ok(n) = pipe.read(&mut buffer).await {
        if n == 0 {
            break;
        }
        sink(&buffer[..n]);
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Whether `needle` occurs in `haystack`.
pub fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    needle.is_empty()
        || haystack
            .windows(needle.len())
            .any(|window| window == needle)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn needles_are_found_anywhere() {
        assert!(contains(b"abc-42\r\n", b"-42"));
        assert!(!contains(b"abc", b"abcd"));
        assert!(contains(b"", b""));
    }
}
