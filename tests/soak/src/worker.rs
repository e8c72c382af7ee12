//! One worker: owns one sandbox at a time (created through `dsh`, used by reconnecting with
//! `onDispose: leave`, retired through `dsh` with `onDispose: kill` after a random lifetime) and
//! runs a random mix of operations on it until the run's end, then retires it. Every operation is
//! one `dsh` process; some are SIGKILLed midway on purpose. An operation whose `dsh` was not
//! killed must succeed with the right result, or it is a failure.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use rand::Rng;
use rand::rngs::StdRng;

use crate::control::Control;
use crate::dsh::{Dsh, Input, Outcome};
use crate::manifest::Manifests;
use crate::model::Model;
use crate::tally::Tally;

/// What every worker shares.
#[derive(Debug)]
pub struct Shared {
    pub dsh: Dsh,
    pub manifests: Manifests,
    pub control: Control,
    pub tally: Tally,
    /// Chance that an operation's `dsh` is SIGKILLed.
    pub kill_rate: f64,
    /// No operation starts after this.
    pub end: Instant,
    /// Bounds of a worker sandbox's lifetime.
    pub lifetime: (Duration, Duration),
    /// The manifest of one-run sandboxes (created, killed on disposal).
    pub ephemeral: PathBuf,
    /// Whether the mix includes `dsh`s started at the same moment on one sandbox.
    pub concurrent_starts: bool,
}

/// The sandbox a worker owns now.
#[derive(Debug)]
pub struct Sandbox {
    pub id: String,
    /// Connects with `onDispose: leave`.
    pub leave: PathBuf,
    /// Connects with `onDispose: kill`.
    pub kill: PathBuf,
    /// What [`crate::model::ROOT`] should hold.
    pub model: Model,
    pub retire_at: Instant,
    /// Directories beside whose files a write was killed: staging dirs may be left there.
    pub staging_suspects: BTreeSet<String>,
}

/// How an operation's `dsh` ended, as far as the tally is concerned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Settled {
    Ok,
    Killed,
    Failed,
}

/// One worker.
#[derive(Debug)]
pub struct Worker {
    pub id: u32,
    pub shared: Arc<Shared>,
    pub rng: StdRng,
    pub sandbox: Option<Sandbox>,
    /// Number of the next sandbox this worker creates.
    pub generation: u32,
    serial: u64,
}

/// Operation kinds and their weights when the worker has a sandbox (`exec-concurrent` only with
/// `--concurrent-starts`).
const MIX: [(&str, u32); 21] = [
    ("fs-write", 14),
    ("fs-cat", 8),
    ("fs-ls", 6),
    ("fs-stat", 4),
    ("fs-mkdir", 4),
    ("fs-mv", 5),
    ("fs-rm", 4),
    ("fs-edit", 3),
    ("fs-hash", 2),
    ("fs-negative", 2),
    ("exec", 8),
    ("exec-output", 4),
    ("exec-stdin", 4),
    ("exec-kill-self", 3),
    ("exec-kill-child", 3),
    ("exec-pkill", 3),
    ("exec-abandon", 3),
    ("terminal", 11),
    ("terminal-kill", 3),
    ("ephemeral", 3),
    ("exec-concurrent", 4),
];

impl Worker {
    pub fn new(id: u32, shared: Arc<Shared>, rng: StdRng) -> Self {
        Self {
            id,
            shared,
            rng,
            sandbox: None,
            generation: 0,
            serial: 0,
        }
    }

    /// Runs operations until the run's end, then retires the sandbox it holds.
    pub async fn run(mut self) {
        while Instant::now() < self.shared.end {
            let retire = self
                .sandbox
                .as_ref()
                .map(|sandbox| Instant::now() >= sandbox.retire_at);
            match retire {
                None => {
                    if !self.create().await {
                        tokio::time::sleep(Duration::from_millis(500)).await;
                    }
                }
                Some(true) => self.retire(true).await,
                Some(false) => {
                    if !self.step().await {
                        self.check_sandbox().await;
                    }
                }
            }
            let think = self.rng.random_range(0..150);
            tokio::time::sleep(Duration::from_millis(think)).await;
        }
        if self.sandbox.is_some() {
            self.retire(false).await;
        }
    }

    /// One operation of the mix on the sandbox; false if it failed.
    async fn step(&mut self) -> bool {
        let concurrent = self.shared.concurrent_starts;
        let mix: Vec<(&str, u32)> = MIX
            .into_iter()
            .filter(|(kind, _)| concurrent || *kind != "exec-concurrent")
            .collect();
        let total: u32 = mix.iter().map(|(_, weight)| weight).sum();
        let mut pick = self.rng.random_range(0..total);
        let kind = mix
            .iter()
            .find(|(_, weight)| {
                if pick < *weight {
                    true
                } else {
                    pick -= weight;
                    false
                }
            })
            .map_or("exec", |(kind, _)| *kind);
        match kind {
            "fs-write" => self.fs_write().await,
            "fs-cat" => self.fs_cat().await,
            "fs-ls" => self.fs_ls().await,
            "fs-stat" => self.fs_stat().await,
            "fs-mkdir" => self.fs_mkdir().await,
            "fs-mv" => self.fs_mv().await,
            "fs-rm" => self.fs_rm().await,
            "fs-edit" => self.fs_edit().await,
            "fs-hash" => self.fs_hash().await,
            "fs-negative" => self.fs_negative().await,
            "exec-output" => self.exec_output().await,
            "exec-stdin" => self.exec_stdin().await,
            "exec-kill-self" => self.exec_kill_self().await,
            "exec-kill-child" => self.exec_kill_child().await,
            "exec-pkill" => self.exec_pkill().await,
            "exec-abandon" => self.exec_abandon().await,
            "terminal" => self.terminal(false).await,
            "terminal-kill" => self.terminal(true).await,
            "ephemeral" => self.ephemeral().await,
            "exec-concurrent" => self.exec_concurrent().await,
            _ => self.exec().await,
        }
    }

    /// After a failure: if the sandbox is gone (it must not be), say so and start another.
    async fn check_sandbox(&mut self) {
        let Some(id) = self.sandbox.as_ref().map(|sandbox| sandbox.id.clone()) else {
            return;
        };
        match self.shared.control.exists(&id).await {
            Ok(true) => {}
            Ok(false) => {
                self.fail(
                    "sandbox",
                    Duration::ZERO,
                    format!("sandbox {id} vanished while the worker owned it"),
                );
                self.sandbox = None;
            }
            Err(err) => self.fail("sandbox", Duration::ZERO, format!("{err:#}")),
        }
    }

    /// A number unique in this run (markers of commands, files, terminal lines).
    pub fn serial(&mut self) -> u64 {
        self.serial += 1;
        u64::from(self.id) * 1_000_000_000 + self.serial
    }

    /// With the configured chance, a moment within `max_ms` to SIGKILL the operation's `dsh`.
    pub fn kill_plan(&mut self, max_ms: u64) -> Option<Duration> {
        self.rng
            .random_bool(self.shared.kill_rate)
            .then(|| Duration::from_millis(self.rng.random_range(0..=max_ms)))
    }

    /// The sandbox's connect-and-leave manifest (the worker must hold a sandbox).
    pub fn leave_manifest(&self) -> PathBuf {
        self.sandbox
            .as_ref()
            .map(|sandbox| sandbox.leave.clone())
            .unwrap_or_default()
    }

    pub fn tally(&self) -> &Tally {
        &self.shared.tally
    }

    /// Records a failure of `kind`.
    pub fn fail(&self, kind: &'static str, took: Duration, detail: String) {
        self.shared.tally.failed(self.id, kind, took, detail);
    }

    /// Runs one `dsh` for an operation of `kind`; a `dsh` that cannot even start is a failure
    /// (`None`).
    pub async fn dsh(
        &mut self,
        kind: &'static str,
        manifest: &Path,
        args: &[&str],
        input: Input,
        kill_after: Option<Duration>,
    ) -> Option<Outcome> {
        match self.shared.dsh.run(manifest, args, input, kill_after).await {
            Ok(outcome) => Some(outcome),
            Err(err) => {
                self.fail(kind, Duration::ZERO, format!("{err:#}"));
                None
            }
        }
    }

    /// Settles an operation: SIGKILLed → killed; else `check` decides ok or failed (the
    /// failure names the command line and how `dsh` ended).
    pub fn settle(
        &self,
        kind: &'static str,
        args: &[&str],
        outcome: &Outcome,
        check: impl FnOnce(&Outcome) -> Result<(), String>,
    ) -> Settled {
        if outcome.killed() {
            self.tally().killed(kind);
            return Settled::Killed;
        }
        let verdict = if outcome.hung {
            Err("dsh did not end in time".to_owned())
        } else {
            check(outcome)
        };
        match verdict {
            Ok(()) => {
                self.tally().ok(kind, outcome.elapsed);
                Settled::Ok
            }
            Err(why) => {
                let sandbox = self
                    .sandbox
                    .as_ref()
                    .map_or(String::new(), |s| format!(" (sandbox {})", s.id));
                let shown: Vec<String> = args
                    .iter()
                    .map(|arg| {
                        if arg.len() > 200 {
                            format!("{}…", &arg[..arg.floor_char_boundary(200)])
                        } else {
                            (*arg).to_owned()
                        }
                    })
                    .collect();
                self.fail(
                    kind,
                    outcome.elapsed,
                    format!(
                        "{why}{sandbox}\n    dsh {}\n    {}",
                        shown.join(" "),
                        outcome.describe()
                    ),
                );
                Settled::Failed
            }
        }
    }
}

/// `Err(why)` unless `dsh` exited with `code`.
pub fn expect_code(outcome: &Outcome, code: i32) -> Result<(), String> {
    if outcome.code() == Some(code) {
        Ok(())
    } else {
        Err(format!("expected exit {code}"))
    }
}
