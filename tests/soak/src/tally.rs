//! What happened during the run: operations by kind (completed and checked, killed on purpose,
//! failed), their durations, named counters, and the failures themselves — the first few kept in
//! full, every one announced on stderr as it happens. Shared by every worker.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

/// Failures kept in full for the final report.
const FAILURES_KEPT: usize = 20;
/// Characters of one failure's detail kept.
const DETAIL_KEPT: usize = 4000;

/// Named counters.
pub mod counter {
    /// Commands SIGKILLed inside sandboxes (and seen to die of it), by how.
    pub const KILL_SELF: &str = "command SIGKILLed by itself";
    pub const KILL_CHILD: &str = "child SIGKILLed by its command";
    pub const KILL_PKILL: &str = "command SIGKILLed by a concurrent exec";
    pub const KILL_TERMINAL: &str = "job SIGKILLed in a terminal";
    /// Sandboxes created by workers and by one-run `dsh`s.
    pub const CREATED_WORKER: &str = "worker sandboxes created";
    pub const CREATED_EPHEMERAL: &str = "one-run sandboxes created and killed by dsh";
    pub const RETIRED: &str = "worker sandboxes retired by dsh (onDispose kill)";
    /// Sandboxes a killed `dsh` may have left to their timeout.
    pub const ABANDONED: &str = "sandboxes abandoned to their timeout by a killed dsh";
    /// Commands whose `dsh` was killed while they ran, and those found still running afterwards.
    pub const ORPHANED: &str = "commands whose dsh was SIGKILLed while they ran";
    pub const STILL_RUNNING: &str = "  ... of which still ran afterwards (then killed)";
    /// Staging directories (`.dsh-stage-*`) left beside targets of killed writes.
    pub const STAGING_LEFT: &str = "staging dirs left by killed writes (removed)";
    /// Found in sandboxes when they were retired: the soak's marked commands (`sleep N.M`) and
    /// interactive shells still running (terminals of SIGKILLed `dsh`s), and spill dirs.
    pub const RETIRE_SLEEPS: &str = "marked commands still running at retirement";
    pub const RETIRE_SHELLS: &str = "bash shells still running at retirement";
    pub const RETIRE_SPILL: &str = "spill dirs at retirement (the retiring dsh's included)";

    /// The order of the report.
    pub const ORDER: [&str; 14] = [
        CREATED_WORKER,
        RETIRED,
        CREATED_EPHEMERAL,
        ABANDONED,
        KILL_SELF,
        KILL_CHILD,
        KILL_PKILL,
        KILL_TERMINAL,
        ORPHANED,
        STILL_RUNNING,
        STAGING_LEFT,
        RETIRE_SLEEPS,
        RETIRE_SHELLS,
        RETIRE_SPILL,
    ];
}

/// One operation kind's figures.
#[derive(Debug, Default, Clone)]
pub struct KindFigures {
    pub ok: u64,
    pub killed: u64,
    pub failed: u64,
    /// Durations of completed (ok or failed) runs, in milliseconds.
    pub millis: Vec<u32>,
}

/// One failure.
#[derive(Debug, Clone)]
pub struct Failure {
    pub worker: u32,
    pub kind: &'static str,
    pub detail: String,
}

#[derive(Debug, Default)]
struct Inner {
    kinds: BTreeMap<&'static str, KindFigures>,
    counters: BTreeMap<&'static str, u64>,
    failures: Vec<Failure>,
    failure_count: u64,
}

/// The shared record.
#[derive(Debug, Default)]
pub struct Tally {
    inner: Mutex<Inner>,
}

impl Tally {
    fn with<T>(&self, f: impl FnOnce(&mut Inner) -> T) -> T {
        f(&mut self.inner.lock().unwrap_or_else(PoisonError::into_inner))
    }

    /// An operation of `kind` completed and its result checked out.
    pub fn ok(&self, kind: &'static str, took: Duration) {
        self.with(|inner| {
            let figures = inner.kinds.entry(kind).or_default();
            figures.ok += 1;
            figures.millis.push(millis(took));
        });
    }

    /// An operation of `kind` had its `dsh` SIGKILLed by the soak.
    pub fn killed(&self, kind: &'static str) {
        self.with(|inner| inner.kinds.entry(kind).or_default().killed += 1);
    }

    /// An operation of `kind` failed; announced on stderr at once.
    pub fn failed(&self, worker: u32, kind: &'static str, took: Duration, detail: String) {
        let first_line = detail.lines().next().unwrap_or("").to_owned();
        let number = self.with(|inner| {
            let figures = inner.kinds.entry(kind).or_default();
            figures.failed += 1;
            figures.millis.push(millis(took));
            inner.failure_count += 1;
            if inner.failures.len() < FAILURES_KEPT {
                inner.failures.push(Failure {
                    worker,
                    kind,
                    detail: detail.chars().take(DETAIL_KEPT).collect(),
                });
            }
            inner.failure_count
        });
        eprintln!("dsh-soak: FAILURE #{number} worker {worker} {kind}: {first_line}");
    }

    /// Adds `n` to counter `name`.
    pub fn count(&self, name: &'static str, n: u64) {
        self.with(|inner| *inner.counters.entry(name).or_default() += n);
    }

    /// Operations so far: (completed ok, killed, failed).
    pub fn totals(&self) -> (u64, u64, u64) {
        self.with(|inner| {
            inner.kinds.values().fold((0, 0, 0), |(o, k, f), fig| {
                (o + fig.ok, k + fig.killed, f + fig.failed)
            })
        })
    }

    pub fn failure_count(&self) -> u64 {
        self.with(|inner| inner.failure_count)
    }

    /// The table of kinds, the counters and the failures, as the final report prints them.
    pub fn report(&self) -> String {
        self.with(|inner| {
            let mut out = String::new();
            let _ = writeln!(
                out,
                "{:<18} {:>7} {:>7} {:>7} {:>8} {:>8} {:>8}",
                "operation", "ok", "killed", "failed", "p50 ms", "p99 ms", "max ms"
            );
            let mut total = KindFigures::default();
            for (kind, figures) in &inner.kinds {
                let _ = writeln!(out, "{}", row(kind, figures));
                total.ok += figures.ok;
                total.killed += figures.killed;
                total.failed += figures.failed;
                total.millis.extend(&figures.millis);
            }
            let _ = writeln!(out, "{}", row("all", &total));
            let ordered = counter::ORDER.iter();
            let others = inner
                .counters
                .keys()
                .filter(|name| !counter::ORDER.contains(name));
            for name in ordered.chain(others) {
                let value = inner.counters.get(name).copied().unwrap_or(0);
                let _ = writeln!(out, "{name}: {value}");
            }
            if inner.failure_count > 0 {
                let _ = writeln!(
                    out,
                    "failures: {} (the first {} in full)",
                    inner.failure_count,
                    inner.failures.len().min(5)
                );
                for (i, failure) in inner.failures.iter().enumerate() {
                    let detail = if i < 5 {
                        failure.detail.clone()
                    } else {
                        failure.detail.lines().next().unwrap_or("").to_owned()
                    };
                    let _ = writeln!(
                        out,
                        "  #{} worker {} {}: {detail}",
                        i + 1,
                        failure.worker,
                        failure.kind
                    );
                }
            }
            out
        })
    }
}

fn row(kind: &str, figures: &KindFigures) -> String {
    let mut sorted = figures.millis.clone();
    sorted.sort_unstable();
    let at = |q: f64| -> String {
        if sorted.is_empty() {
            "-".to_owned()
        } else {
            let i = ((sorted.len() - 1) as f64 * q).round() as usize;
            sorted[i].to_string()
        }
    };
    format!(
        "{kind:<18} {:>7} {:>7} {:>7} {:>8} {:>8} {:>8}",
        figures.ok,
        figures.killed,
        figures.failed,
        at(0.5),
        at(0.99),
        at(1.0)
    )
}

fn millis(took: Duration) -> u32 {
    u32::try_from(took.as_millis()).unwrap_or(u32::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_report_counts_kinds_quantiles_counters_and_failures() {
        let tally = Tally::default();
        for ms in [10, 20, 30, 40] {
            tally.ok("exec", Duration::from_millis(ms));
        }
        tally.killed("exec");
        tally.failed(
            2,
            "fs-cat",
            Duration::from_millis(5),
            "wrong\nsecond line".to_owned(),
        );
        tally.count(counter::KILL_SELF, 3);
        assert_eq!(tally.totals(), (4, 1, 1));
        assert_eq!(tally.failure_count(), 1);
        let report = tally.report();
        assert!(report.contains(&row(
            "exec",
            &KindFigures {
                ok: 4,
                killed: 1,
                failed: 0,
                millis: vec![10, 20, 30, 40]
            }
        )));
        assert!(
            report.contains("command SIGKILLed by itself: 3"),
            "{report}"
        );
        assert!(
            report.contains("#1 worker 2 fs-cat: wrong\nsecond line"),
            "{report}"
        );
        let all = report.lines().find(|l| l.starts_with("all")).unwrap();
        assert!(
            all.split_whitespace().take(4).eq(["all", "4", "1", "1"]),
            "{all}"
        );
    }
}
