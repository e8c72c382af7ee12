//! `dsh-subprocess-e2b` against the official E2B SDKs on the same
//! e2b-local, in the same run:
//!
//! - the round trip of `true` (spawn, run, exit observed);
//! - the throughput of 256 MiB of stdout;
//! - the peak RSS of a process while 1 GiB passes through collect mode
//!   with a 1 MiB tail (the SDKs keep every byte);
//! - the wall time of 64 concurrent commands;
//! - and, for the wrapper choice (docs/design.md §6), the same `true` started
//!   by a minimal shell wrapper (option a) next to the helper (option b).
//!
//! Ours is the shipped composition — `dsh-e2b-owner` + `dsh-subprocess-e2b`
//! loaded as plugins through `dsh-host`, every call crossing the plugin ABI
//! and the owner's gateway. The peers are `tests/sdk-peers/bench/commands.mjs`
//! (npm `e2b` 2.51.0) and `tests/sdk-peers/bench/commands.py` (PyPI `e2b`
//! 2.63.0) on the same sandbox. Each figure is printed with its ratio
//! against each peer and the target.
//!
//! Run (as root: e2b-local needs it): `scripts/install-sdk-peers.sh &&
//! cargo build --release -p e2b-local -p dsh-e2b-owner -p dsh-subprocess-e2b &&
//! cargo bench -p dsh-subprocess-e2b --bench commands_vs_sdks`. Knobs:
//! `DSH_BENCH_ITERATIONS` (round trips, default 200), `DSH_BENCH_RUNS`
//! (throughput runs, default 3), `DSH_BENCH_THROUGHPUT_MIB` (default 256),
//! `DSH_BENCH_COLLECT_MIB` (default 1024), `DSH_BENCH_CONCURRENT` (default
//! 64), `DSH_BENCH_ROUNDS` (concurrent rounds, default 5).

mod child;
mod ours;
mod peers;
mod report;

use std::time::Duration;

use anyhow::{Context, Result};
use e2b_local::harness::LocalServer;

/// What one client measured.
#[derive(Debug, Clone, Default)]
pub struct Figures {
    pub round_trip: Vec<Duration>,
    pub throughput: Vec<Duration>,
    pub concurrent: Vec<Duration>,
    /// Peak RSS (bytes) while the collect run passed through, and whether
    /// that run completed (the error otherwise).
    pub collect_rss: u64,
    pub collect_error: Option<String>,
}

/// How much to measure.
#[derive(Debug, Clone)]
pub struct Plan {
    pub iterations: usize,
    pub runs: usize,
    pub throughput_bytes: u64,
    pub collect_bytes: u64,
    pub concurrent: usize,
    pub rounds: usize,
}

/// The collect tail our side keeps.
pub const TAIL: usize = 1 << 20;

fn knob(name: &str, default: usize) -> Result<usize> {
    match std::env::var(name) {
        Ok(value) => value
            .parse()
            .with_context(|| format!("{name}={value:?} is not a count")),
        Err(_) => Ok(default),
    }
}

fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.first().map(String::as_str) == Some(child::FLAG) {
        return child::main(&args[1..]);
    }
    if args.iter().any(|arg| arg == "--list") {
        // `cargo bench -- --list` and friends: nothing to enumerate.
        return Ok(());
    }
    let plan = Plan {
        iterations: knob("DSH_BENCH_ITERATIONS", 200)?,
        runs: knob("DSH_BENCH_RUNS", 3)?,
        throughput_bytes: (knob("DSH_BENCH_THROUGHPUT_MIB", 256)? as u64) << 20,
        collect_bytes: (knob("DSH_BENCH_COLLECT_MIB", 1024)? as u64) << 20,
        concurrent: knob("DSH_BENCH_CONCURRENT", 64)?,
        rounds: knob("DSH_BENCH_ROUNDS", 5)?,
    };
    let server = LocalServer::try_start().map_err(|err| anyhow::anyhow!("{err}"))?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    runtime.block_on(run(&server, &plan))
}

async fn run(server: &LocalServer, plan: &Plan) -> Result<()> {
    let world = ours::World::start(server).await?;
    eprintln!("sandbox {}", world.sandbox_id);
    eprintln!("measuring dsh-subprocess-e2b");
    let mut dsh = world.measure(plan).await?;
    eprintln!("measuring the wrapper choice (shell vs helper)");
    let wrappers = world.wrappers(server, plan).await?;
    eprintln!("measuring the JS SDK");
    let mut js = peers::measure(&peers::js(), server, &world.sandbox_id, plan)?;
    eprintln!("measuring the Python SDK");
    let mut python = peers::measure(&peers::python(), server, &world.sandbox_id, plan)?;
    eprintln!("measuring peak RSS through collect mode");
    for (figures, client) in [
        (&mut dsh, child::Client::Dsh),
        (&mut js, child::Client::Js),
        (&mut python, child::Client::Python),
    ] {
        let (rss, error) = child::peak_rss(client, server, &world.sandbox_id, plan.collect_bytes)?;
        figures.collect_rss = rss;
        figures.collect_error = error;
    }
    world.dispose().await?;
    report::print(plan, &dsh, &js, &python, &wrappers);
    Ok(())
}
