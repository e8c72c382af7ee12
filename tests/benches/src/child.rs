//! Measurements in a fresh process: the benchmark re-executes itself with
//! `--child TASK…`; the child performs one measurement and prints one
//! report line, which the parent parses.
//!
//! Used where the parent's own state would distort the figure: a cold
//! host start (the parent has already loaded the libraries) and peak RSS
//! (the parent's high-water mark includes every earlier benchmark).

use std::process::{Command, Stdio};
use std::time::Duration;

use anyhow::{Context, Result, bail};
use serde::{Deserialize, Serialize};

/// Marks the report line in a child's standard output.
const REPORT_PREFIX: &str = "dsh-bench-report ";

/// One measurement a child performs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChildTask {
    /// Start the local composition from its manifest file (timed), then
    /// dispose it.
    HostStart,
    /// The peer of a cold start: `dlopen` both plugin libraries (timed).
    DlopenPeer,
    /// `bytes` of output through collect mode with a 1 MiB tail, via the
    /// host; reports the peak RSS.
    Collect { bytes: u64 },
    /// The peer: the same output read through `tokio::process` into a
    /// 1 MiB tail.
    CollectPeer { bytes: u64 },
}

impl ChildTask {
    /// The words after `--child` that select this task.
    pub fn args(&self) -> Vec<String> {
        match *self {
            ChildTask::HostStart => vec!["host-start".into()],
            ChildTask::DlopenPeer => vec!["dlopen-peer".into()],
            ChildTask::Collect { bytes } => vec!["collect".into(), bytes.to_string()],
            ChildTask::CollectPeer { bytes } => vec!["collect-peer".into(), bytes.to_string()],
        }
    }

    /// Parses the words after `--child`.
    pub fn parse(words: &[String]) -> Result<ChildTask> {
        let words: Vec<&str> = words
            .iter()
            .map(String::as_str)
            .filter(|word| *word != "--bench")
            .collect();
        let bytes = |word: &str| -> Result<u64> {
            word.parse()
                .with_context(|| format!("--child: {word:?} is not a byte count"))
        };
        Ok(match words.as_slice() {
            ["host-start"] => ChildTask::HostStart,
            ["dlopen-peer"] => ChildTask::DlopenPeer,
            ["collect", count] => ChildTask::Collect {
                bytes: bytes(count)?,
            },
            ["collect-peer", count] => ChildTask::CollectPeer {
                bytes: bytes(count)?,
            },
            other => bail!(
                "--child: unknown task {other:?} (expected host-start, dlopen-peer, collect BYTES or collect-peer BYTES)"
            ),
        })
    }
}

/// What a child measured.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChildReport {
    /// Duration of the measured operation.
    pub elapsed_ns: u64,
    /// Resident bytes just before the operation (0 if not measured).
    pub baseline_rss: u64,
    /// Peak resident bytes during the operation (0 if not measured).
    pub peak_rss: u64,
    /// Bytes the operation moved (0 if none).
    pub bytes: u64,
}

impl ChildReport {
    /// A report of an operation that took `elapsed`, moved `bytes`, and
    /// raised the resident size from `baseline_rss` to a peak of `peak_rss`.
    pub fn new(elapsed: Duration, baseline_rss: u64, peak_rss: u64, bytes: u64) -> ChildReport {
        ChildReport {
            elapsed_ns: u64::try_from(elapsed.as_nanos()).unwrap_or(u64::MAX),
            baseline_rss,
            peak_rss,
            bytes,
        }
    }

    /// A report of a timed operation only.
    pub fn timed(elapsed: Duration) -> ChildReport {
        ChildReport::new(elapsed, 0, 0, 0)
    }

    /// How long the operation took.
    pub fn elapsed(&self) -> Duration {
        Duration::from_nanos(self.elapsed_ns)
    }
}

/// Prints `report` as the child's report line.
pub fn emit(report: &ChildReport) -> Result<()> {
    let line = serde_json::to_string(report).context("encode the child report")?;
    println!("{REPORT_PREFIX}{line}");
    Ok(())
}

/// Runs `task` in a fresh copy of this program and returns its report. The
/// child's stderr is passed through; a failed child or a missing report is
/// an error naming the task.
pub fn run(task: ChildTask) -> Result<ChildReport> {
    let exe = std::env::current_exe().context("locate the running benchmark")?;
    let args = task.args();
    let output = Command::new(&exe)
        .arg("--child")
        .args(&args)
        .stdin(Stdio::null())
        .stderr(Stdio::inherit())
        .output()
        .with_context(|| format!("child {}: start {}", args.join(" "), exe.display()))?;
    if !output.status.success() {
        bail!("child {}: {}", args.join(" "), output.status);
    }
    let stdout = String::from_utf8_lossy(&output.stdout);
    parse_report(&stdout).with_context(|| format!("child {}", args.join(" ")))
}

/// Finds and decodes the report line in a child's standard output.
pub fn parse_report(stdout: &str) -> Result<ChildReport> {
    let Some(line) = stdout
        .lines()
        .rev()
        .find_map(|line| line.strip_prefix(REPORT_PREFIX))
    else {
        bail!("no report line in its output {stdout:?}");
    };
    serde_json::from_str(line).with_context(|| format!("malformed report {line:?}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(words: &[&str]) -> Vec<String> {
        words.iter().map(|word| (*word).to_owned()).collect()
    }

    #[test]
    fn tasks_round_trip_through_their_arguments() {
        for task in [
            ChildTask::HostStart,
            ChildTask::DlopenPeer,
            ChildTask::Collect { bytes: 1 << 30 },
            ChildTask::CollectPeer { bytes: 7 },
        ] {
            assert_eq!(ChildTask::parse(&task.args()).expect("parse"), task);
        }
    }

    #[test]
    fn bad_tasks_are_refused_with_the_reason() {
        let err = ChildTask::parse(&words(&["collect", "lots"])).expect_err("count");
        assert_eq!(err.to_string(), "--child: \"lots\" is not a byte count");
        let err = ChildTask::parse(&words(&["warm-start"])).expect_err("task");
        assert!(
            err.to_string()
                .starts_with("--child: unknown task [\"warm-start\"]"),
            "{err}"
        );
        let err = ChildTask::parse(&[]).expect_err("nothing");
        assert!(
            err.to_string().starts_with("--child: unknown task []"),
            "{err}"
        );
    }

    #[test]
    fn the_report_line_is_found_among_other_output() {
        let report = ChildReport {
            elapsed_ns: 5,
            baseline_rss: 6,
            peak_rss: 7,
            bytes: 8,
        };
        let stdout = format!(
            "noise\n{REPORT_PREFIX}{}\n",
            serde_json::to_string(&report).expect("encode")
        );
        assert_eq!(parse_report(&stdout).expect("parse"), report);
    }

    #[test]
    fn a_missing_or_malformed_report_is_an_error() {
        let err = parse_report("just noise\n").expect_err("missing");
        assert_eq!(
            err.to_string(),
            "no report line in its output \"just noise\\n\""
        );
        let err =
            parse_report(&format!("{REPORT_PREFIX}{{\"elapsed_ns\":1}}\n")).expect_err("fields");
        assert!(err.to_string().starts_with("malformed report"), "{err}");
    }
}
