//! `dsh-fs-e2b` against the official E2B SDKs on the same e2b-local, in the
//! same run: stat latency, read and write of 1 KiB and 64 MiB, and the
//! peak RSS of a process that streams a file of 64 MiB and of 512 MiB.
//! The 64 MiB transfers are interleaved: each round every client reads and
//! writes once (the order rotating), and their ratios are paired per round.
//!
//! Ours is the shipped composition — `dsh-e2b-owner` + `dsh-fs-e2b` loaded as
//! plugins through `dsh-host`, every call crossing the plugin ABI and the
//! owner's gateway. The peers are `tests/sdk-peers/bench/fs.mjs` (npm `e2b`
//! 2.51.0) and `tests/sdk-peers/bench/fs.py` (PyPI `e2b` 2.63.0) on the same
//! sandbox. Each figure is printed with its ratio against each peer.
//!
//! Run: `scripts/install-sdk-peers.sh && cargo build -p e2b-local && cargo
//! bench -p dsh-fs-e2b --bench fs_vs_sdks` (as root: e2b-local needs it).
//! Knobs: `DSH_BENCH_ITERATIONS` (latency samples, default 200),
//! `DSH_BENCH_RUNS` (rounds of 64 MiB transfers, default 11), `DSH_BENCH_RSS_MIB`
//! (the large streamed file, default 512).

mod child;
mod ours;
mod peers;
mod report;

use std::time::Duration;

use anyhow::{Context, Result};
use e2b_local::harness::LocalServer;

/// Size of the small file.
const SMALL: usize = 1024;
/// Size of the large file (the bench's row names say 64 MiB).
const LARGE: usize = 64 << 20;

/// What one client measured.
#[derive(Debug, Clone, Default)]
pub struct Figures {
    pub stat: Vec<Duration>,
    pub read_small: Vec<Duration>,
    /// `read_text` of a 1 KiB text while the world helper's process runs
    /// (ours only; one of its round trips instead of envd's two).
    pub read_text_native: Vec<Duration>,
    pub write_small: Vec<Duration>,
    /// One character of the small file changed: `edit` for dsh, read +
    /// write for the SDKs.
    pub edit_small: Vec<Duration>,
    /// The same writes while the world helper's process runs (ours only;
    /// one of its round trips).
    pub write_native: Vec<Duration>,
    /// The same edits while the world helper's process runs (ours only;
    /// one of its round trips).
    pub edit_native: Vec<Duration>,
    pub read_large: Vec<Duration>,
    pub write_large: Vec<Duration>,
    /// Peak RSS (bytes) of a process streaming the large file, and the
    /// RSS-sized one.
    pub rss_large: u64,
    pub rss_huge: u64,
}

/// Where the files live in the sandbox and how much to measure.
#[derive(Debug, Clone)]
pub struct Plan {
    pub small: String,
    pub large: String,
    pub huge: String,
    pub huge_len: usize,
    pub iterations: usize,
    pub runs: usize,
}

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
    let server = LocalServer::try_start().map_err(|err| anyhow::anyhow!("{err}"))?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    runtime.block_on(run(&server))
}

async fn run(server: &LocalServer) -> Result<()> {
    let plan_base = |cwd: &str| -> Result<Plan> {
        Ok(Plan {
            small: format!("{cwd}/bench-small"),
            large: format!("{cwd}/bench-large"),
            huge: format!("{cwd}/bench-huge"),
            huge_len: knob("DSH_BENCH_RSS_MIB", 512)? << 20,
            iterations: knob("DSH_BENCH_ITERATIONS", 200)?,
            runs: knob("DSH_BENCH_RUNS", 11)?,
        })
    };
    let world = ours::World::start(server).await?;
    let plan = plan_base(&world.cwd)?;
    eprintln!("fixtures in sandbox {}", world.sandbox_id);
    world.fixtures(&plan).await?;
    // The fixtures (and whatever was built before the bench) written back
    // now: a disk busy writing back hundreds of MiB slows the transfers
    // that follow (a rename and a new file's first blocks most), unevenly.
    let synced = std::process::Command::new("sync").status()?;
    anyhow::ensure!(synced.success(), "sync: {synced}");
    eprintln!("measuring dsh-fs-e2b");
    let mut dsh = world.measure(&plan).await?;
    eprintln!("measuring the JS SDK");
    let mut js = peers::measure(&peers::js(), server, &world.sandbox_id, &plan)?;
    eprintln!("measuring the Python SDK");
    let mut python = peers::measure(&peers::python(), server, &world.sandbox_id, &plan)?;
    eprintln!("measuring 64 MiB transfers, interleaved");
    let mut js_steps = peers::transfers(&peers::js(), server, &world.sandbox_id, &plan)?;
    let mut python_steps = peers::transfers(&peers::python(), server, &world.sandbox_id, &plan)?;
    let content = world.warm_large(&plan).await?;
    // Each round every client reads and writes once; who goes first rotates.
    for round in 0..plan.runs {
        for turn in 0..3 {
            match (round + turn) % 3 {
                0 => {
                    dsh.read_large.push(world.read_large(&plan).await?);
                    dsh.write_large
                        .push(world.write_large(&plan, &content).await?);
                }
                1 => {
                    js.read_large.push(js_steps.step("read")?);
                    js.write_large.push(js_steps.step("write")?);
                }
                _ => {
                    python.read_large.push(python_steps.step("read")?);
                    python.write_large.push(python_steps.step("write")?);
                }
            }
        }
    }
    js_steps.finish()?;
    python_steps.finish()?;
    world.remove_large_copy(&plan).await?;
    eprintln!("measuring peak RSS while streaming");
    for (figures, client) in [
        (&mut dsh, child::Client::Dsh),
        (&mut js, child::Client::Js),
        (&mut python, child::Client::Python),
    ] {
        figures.rss_large = child::peak_rss(client, server, &world.sandbox_id, &plan.large)?;
        figures.rss_huge = child::peak_rss(client, server, &world.sandbox_id, &plan.huge)?;
    }
    world.dispose().await?;
    report::print(&plan, &dsh, &js, &python);
    Ok(())
}
