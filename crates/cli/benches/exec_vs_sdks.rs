//! A whole cold `dsh --config config/e2b-local.yaml exec -- true` — a fresh
//! `dsh` process: start, plugin loading, sandbox create, owner setup, helper
//! install, the command, kill — against the official E2B SDKs doing create,
//! `commands.run('true')` and kill from an already-warm process
//! (`tests/sdk-peers/bench/lifecycle.{mjs,py}`), on the same e2b-local, in
//! interleaved rounds (the order rotates each round).
//!
//! Run (as root: e2b-local needs it; the SDK peers from
//! `scripts/install-sdk-peers.sh`):
//!
//! ```sh
//! cargo build --release -p e2b-local -p dsh-e2b-owner -p dsh-fs-e2b -p dsh-subprocess-e2b
//! cargo bench -p dsh-cli --bench exec_vs_sdks
//! ```
//!
//! `DSH_BENCH_ROUNDS` (default 40) sets the rounds. Prints each contender's
//! median and quartiles, and dsh's median over each peer's (paired per
//! round: < 1 favours dsh).
//!
//! Two more contenders measure the floor under any cold start: a cold
//! `dsh --config config/e2b-local.yaml plugins` (process start, loading and
//! checking the same three libraries, exit; no sandbox) and the JS SDK doing
//! create and kill only. Their sum, per round, is what a cold `dsh exec` costs
//! if everything it adds in the sandbox (owner setup, helper install, the
//! command) took no time; it is printed over the JS SDK's whole create → run →
//! kill.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, ensure};
use e2b_local::harness::{LocalServer, SdkDriver, Steps, millis, quantile};

/// The plugin libraries the manifest loads, next to `dsh`.
const PLUGINS: [&str; 3] = ["dsh_e2b_owner", "dsh_fs_e2b", "dsh_subprocess_e2b"];

fn main() -> Result<()> {
    let rounds: usize = match std::env::var("DSH_BENCH_ROUNDS") {
        Ok(value) => value.parse().context("DSH_BENCH_ROUNDS")?,
        Err(_) => 40,
    };
    let dsh = PathBuf::from(env!("CARGO_BIN_EXE_dsh"));
    let dir = dsh.parent().context("dsh has a directory")?;
    for plugin in PLUGINS {
        let library = dir.join(format!("lib{plugin}.so"));
        ensure!(
            library.is_file(),
            "{} is missing: cargo build --release -p dsh-e2b-owner -p dsh-fs-e2b -p dsh-subprocess-e2b",
            library.display()
        );
    }
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../config/e2b-local.yaml");
    let server = LocalServer::start();
    let cold = |args: &[&str]| ColdDsh {
        dsh: dsh.clone(),
        manifest: manifest.clone(),
        args: args.iter().map(|arg| (*arg).to_owned()).collect(),
        env: server.env(),
    };
    let js = SdkDriver::js("lifecycle");
    // In the order of the row indices below.
    let mut contenders = vec![
        Contender::Cold(cold(&["exec", "--", "true"])),
        Contender::Warm(js.steps(&server, &[])?, ""),
        Contender::Warm(SdkDriver::python("lifecycle").steps(&server, &[])?, ""),
        Contender::Cold(cold(&["plugins"])),
        Contender::Warm(
            js.steps(&server, &["--without-command"])?,
            ", create + kill only",
        ),
    ];
    // One untimed round: the page cache, e2b-local's first worlds.
    for contender in &mut contenders {
        contender.once()?;
    }
    let mut samples = vec![Vec::with_capacity(rounds); contenders.len()];
    for round in 0..rounds {
        for offset in 0..contenders.len() {
            let index = (round + offset) % contenders.len();
            samples[index].push(contenders[index].once()?);
        }
    }
    println!(
        "\n{rounds} interleaved rounds; a fresh dsh process per round, the SDKs warm in one process each\n"
    );
    println!(
        "{:<44} {:>10} {:>18} {:>12}",
        "contender", "median ms", "p25-p75 ms", "dsh / it"
    );
    for (contender, times) in contenders.iter().zip(&samples) {
        let ratios: Vec<f64> = samples[DSH_EXEC]
            .iter()
            .zip(times)
            .map(|(ours, theirs)| ours.as_secs_f64() / theirs.as_secs_f64())
            .collect();
        println!(
            "{:<44} {:>10.1} {:>8.1}-{:<9.1} {:>11.2}x",
            contender.name(),
            millis(quantile(times, 0.5)),
            millis(quantile(times, 0.25)),
            millis(quantile(times, 0.75)),
            median_f64(ratios),
        );
    }
    let floor: Vec<f64> = (0..rounds)
        .map(|round| {
            (samples[DSH_PLUGINS][round] + samples[JS_BARE][round]).as_secs_f64()
                / samples[JS][round].as_secs_f64()
        })
        .collect();
    println!(
        "\nfloor of a cold start (dsh plugins + JS create + kill) / the JS SDK's whole run: {:.2}x",
        median_f64(floor)
    );
    println!("target: dsh median <= 50 ms and <= the JS SDK's (dsh / it <= 1)");
    Ok(())
}

// Rows of the contenders (and their samples): the cold `dsh exec`, the JS SDK's whole run, the
// cold `dsh plugins` and the JS SDK's create + kill (Python's whole run is row 2).
const DSH_EXEC: usize = 0;
const JS: usize = 1;
const DSH_PLUGINS: usize = 3;
const JS_BARE: usize = 4;

enum Contender {
    Cold(ColdDsh),
    /// A warm SDK driver and what its iterations leave out (empty: nothing).
    Warm(Steps, &'static str),
}

impl Contender {
    fn name(&self) -> String {
        match self {
            Contender::Cold(cold) => format!("dsh {} (cold, release)", cold.args.join(" ")),
            Contender::Warm(warm, scope) => format!("{} (warm{scope})", warm.name()),
        }
    }

    fn once(&mut self) -> Result<Duration> {
        match self {
            Contender::Cold(cold) => cold.once(),
            Contender::Warm(warm, _) => Ok(warm.once()?),
        }
    }
}

/// A fresh `dsh --config <manifest> <args>` process per iteration, timed from spawn to
/// exit, its output discarded.
struct ColdDsh {
    dsh: PathBuf,
    manifest: PathBuf,
    args: Vec<String>,
    env: Vec<(String, String)>,
}

impl ColdDsh {
    fn once(&self) -> Result<Duration> {
        let start = Instant::now();
        let status = Command::new(&self.dsh)
            .arg("--config")
            .arg(&self.manifest)
            .args(&self.args)
            .envs(self.env.iter().map(|(name, value)| (name, value)))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .status()
            .context("run dsh")?;
        let took = start.elapsed();
        ensure!(status.success(), "dsh {}: {status}", self.args.join(" "));
        Ok(took)
    }
}

fn median_f64(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}
