//! The official SDKs' benchmark drivers in `tests/sdk-peers/bench/` (`<name>.mjs` on npm `e2b`,
//! `<name>.py` on PyPI `e2b` in the peer's venv), run as child processes against a
//! [`LocalServer`]. Each driver takes a mode and arguments and prints one JSON object;
//! `scripts/install-sdk-peers.sh` installs the SDKs they need.

use std::io::{self, BufRead, BufReader, Write};
use std::path::PathBuf;
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::time::Duration;

use serde_json::Value;

use super::LocalServer;

/// `tests/sdk-peers/`, from this crate's manifest directory.
fn sdk_peers() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../tests/sdk-peers")
}

/// One SDK's driver script.
#[derive(Debug, Clone)]
pub struct SdkDriver {
    /// The SDK and its pinned version, for reports.
    pub name: &'static str,
    program: PathBuf,
    script: PathBuf,
}

impl SdkDriver {
    /// `node tests/sdk-peers/bench/<driver>.mjs` (npm `e2b` 2.51.0).
    pub fn js(driver: &str) -> SdkDriver {
        SdkDriver {
            name: "js e2b@2.51.0",
            program: PathBuf::from("node"),
            script: sdk_peers().join(format!("bench/{driver}.mjs")),
        }
    }

    /// `tests/sdk-peers/python/.venv/bin/python tests/sdk-peers/bench/<driver>.py` (PyPI `e2b` 2.63.0).
    pub fn python(driver: &str) -> SdkDriver {
        SdkDriver {
            name: "python e2b==2.63.0",
            program: sdk_peers().join("python/.venv/bin/python"),
            script: sdk_peers().join(format!("bench/{driver}.py")),
        }
    }

    /// The driver for `mode` with `args`, given `server`'s environment, stdin null and
    /// stderr inherited; the caller chooses stdout and runs it.
    pub fn command(&self, server: &LocalServer, mode: &str, args: &[&str]) -> Command {
        let mut command = Command::new(&self.program);
        command
            .arg(&self.script)
            .arg(mode)
            .args(args)
            .envs(server.env())
            .stdin(Stdio::null())
            .stderr(Stdio::inherit());
        command
    }

    /// Runs the driver for `mode` to its end and parses the JSON object it printed. Errors
    /// name the driver and mode (and hint at the installer when it cannot start).
    pub fn run_json(&self, server: &LocalServer, mode: &str, args: &[&str]) -> io::Result<Value> {
        let output = self.command(server, mode, args).output().map_err(|err| {
            io::Error::new(
                err.kind(),
                format!(
                    "run {} {} (is the peer installed? scripts/install-sdk-peers.sh): {err}",
                    self.program.display(),
                    self.script.display()
                ),
            )
        })?;
        if !output.status.success() {
            return Err(io::Error::other(format!(
                "{} {mode} failed: {}",
                self.name, output.status
            )));
        }
        serde_json::from_slice(&output.stdout)
            .map_err(|err| io::Error::other(format!("{} {mode} printed no JSON: {err}", self.name)))
    }
}

/// The `q` quantile (0 to 1) of `samples` (not empty), the nearest sample.
pub fn quantile(samples: &[Duration], q: f64) -> Duration {
    let mut sorted = samples.to_vec();
    sorted.sort();
    sorted[((sorted.len() - 1) as f64 * q).round() as usize]
}

/// `duration` in milliseconds.
pub fn millis(duration: Duration) -> f64 {
    duration.as_secs_f64() * 1000.0
}

/// The millisecond samples under `key` of a driver's report, as durations.
pub fn millisecond_samples(report: &Value, key: &str) -> io::Result<Vec<Duration>> {
    report[key]
        .as_array()
        .ok_or_else(|| io::Error::other(format!("the report has no {key} samples: {report}")))?
        .iter()
        .map(|sample| {
            sample
                .as_f64()
                .filter(|ms| ms.is_finite() && *ms >= 0.0)
                .map(|ms| Duration::from_secs_f64(ms / 1000.0))
                .ok_or_else(|| io::Error::other(format!("{key}: {sample} is not milliseconds")))
        })
        .collect()
}

impl SdkDriver {
    /// The driver in its `steps` mode with `args`, warmed and ready: each [`Steps::once`] is
    /// one timed iteration (the driver prints `ready` once warm, then one line of milliseconds
    /// per line it reads).
    pub fn steps(&self, server: &LocalServer, args: &[&str]) -> io::Result<Steps> {
        let mut child = self
            .command(server, "steps", args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .map_err(|e| {
                io::Error::new(
                    e.kind(),
                    format!(
                        "start the {} driver (scripts/install-sdk-peers.sh): {e}",
                        self.name
                    ),
                )
            })?;
        let input = child.stdin.take().expect("stdin is piped");
        let mut output = BufReader::new(child.stdout.take().expect("stdout is piped"));
        let mut line = String::new();
        output.read_line(&mut line)?;
        if line.trim() != "ready" {
            return Err(io::Error::other(format!(
                "{}: expected `ready`, got {line:?}",
                self.name
            )));
        }
        Ok(Steps {
            name: self.name,
            child,
            input,
            output,
        })
    }
}

/// A driver kept running in its `steps` mode ([`SdkDriver::steps`]).
#[derive(Debug)]
pub struct Steps {
    name: &'static str,
    child: Child,
    input: ChildStdin,
    output: BufReader<ChildStdout>,
}

impl Steps {
    /// The SDK and its version.
    pub fn name(&self) -> &'static str {
        self.name
    }

    /// One iteration, as long as the driver measured it.
    pub fn once(&mut self) -> io::Result<Duration> {
        self.step("go")
    }

    /// Ends the driver (its input closed, as its end of steps) and waits
    /// for it; an error unless it exits successfully.
    pub fn finish(mut self) -> io::Result<()> {
        drop(self.input);
        let status = self.child.wait()?;
        if status.success() {
            Ok(())
        } else {
            Err(io::Error::other(format!("{} ended: {status}", self.name)))
        }
    }

    /// One iteration of the kind `word` names (for a driver whose steps
    /// differ), as long as the driver measured it.
    pub fn step(&mut self, word: &str) -> io::Result<Duration> {
        writeln!(self.input, "{word}")?;
        self.input.flush()?;
        let mut line = String::new();
        if self.output.read_line(&mut line)? == 0 {
            return Err(io::Error::other(format!(
                "{} ended: {:?}",
                self.name,
                self.child.wait()?
            )));
        }
        let ms: f64 = line.trim().parse().map_err(|_| {
            io::Error::other(format!("{}: {line:?} is not milliseconds", self.name))
        })?;
        Ok(Duration::from_secs_f64(ms / 1000.0))
    }
}
