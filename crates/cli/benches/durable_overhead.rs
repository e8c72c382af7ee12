//! What a durable command costs over a plain one (issue 11): `true`
//! (start, wait) and 256 MiB of stdout read to its end, each as a plain
//! `spawn` and as `spawn_durable` (supervised in the world, output retained
//! there and relayed by a follower), through the host, on the local
//! composition and on the E2B composition against e2b-local, in
//! interleaved rounds.
//!
//! Run (as root: e2b-local needs it):
//!
//! ```sh
//! cargo build --release --workspace
//! cargo bench -p dsh-cli --bench durable_overhead
//! ```
//!
//! `DSH_BENCH_ROUNDS` (default 30; the 256 MiB figure takes a third of
//! them) sets the rounds; `DSH_BENCH_WORLDS` (`local`, `e2b-local`, or both
//! comma-separated, the default) the compositions. Prints each contender's median and the durable /
//! plain ratio of medians.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, ensure};
use dsh_host::Host;
use dsh_plugin_api::durable::DurableSpec;
use dsh_plugin_api::subprocess::{OutputMode, Process, SpawnSpec, SubprocessProvider};
use e2b_local::harness::LocalServer;
use futures::StreamExt;

const BULK: u64 = 256 << 20;

fn main() -> Result<()> {
    let rounds: usize = match std::env::var("DSH_BENCH_ROUNDS") {
        Ok(value) => value.parse().context("DSH_BENCH_ROUNDS")?,
        Err(_) => 30,
    };
    let worlds = std::env::var("DSH_BENCH_WORLDS").ok();
    let dsh = PathBuf::from(env!("CARGO_BIN_EXE_dsh"));
    let plugins = dsh.parent().context("dsh has a directory")?.to_owned();
    let state = tempfile::tempdir()?;
    let server = LocalServer::start();
    // SAFETY: single-threaded here; no runtime or host exists yet.
    unsafe {
        std::env::set_var("DSH_PLUGIN_PATH", &plugins);
        std::env::set_var("XDG_STATE_HOME", state.path());
        for (name, value) in server.env() {
            std::env::set_var(name, value);
        }
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    let config = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../config");
    println!(
        "{rounds} interleaved rounds (256 MiB: {})\n",
        rounds.div_ceil(3)
    );
    println!(
        "{:<12} {:<34} {:>12} {:>12} {:>16}",
        "world", "figure", "plain ms", "durable ms", "durable / plain"
    );
    for (world, manifest) in [("local", "local.yaml"), ("e2b-local", "e2b-local.yaml")] {
        if worlds
            .as_ref()
            .is_some_and(|only| !only.split(',').any(|w| w == world))
        {
            continue;
        }
        runtime.block_on(async {
            let host = Host::load(&config.join(manifest))
                .await
                .with_context(|| format!("start the {world} composition"))?;
            let subprocess = host.subprocess()?;
            let result = measure(world, &subprocess, rounds).await;
            host.dispose().await?;
            result
        })?;
    }
    Ok(())
}

async fn measure(world: &str, sp: &Arc<dyn SubprocessProvider>, rounds: usize) -> Result<()> {
    let figures: [(&str, usize, Vec<&str>); 2] = [
        ("start + wait `true`", rounds, vec!["true"]),
        (
            "256 MiB of stdout read to the end",
            rounds.div_ceil(3),
            vec!["head", "-c", "268435456", "/dev/zero"],
        ),
    ];
    for (label, rounds, argv) in figures {
        let bulk = argv[0] == "head";
        // One untimed round each: the page cache, the helper's install.
        once(sp, &argv, false, bulk).await?;
        once(sp, &argv, true, bulk).await?;
        let mut plain = Vec::with_capacity(rounds);
        let mut durable = Vec::with_capacity(rounds);
        for round in 0..rounds {
            for durable_first in [round % 2 == 0, round % 2 == 1] {
                let time = once(sp, &argv, durable_first, bulk).await?;
                if durable_first {
                    durable.push(time);
                } else {
                    plain.push(time);
                }
            }
        }
        let (plain, durable) = (median(&mut plain), median(&mut durable));
        println!(
            "{world:<12} {label:<34} {:>12.2} {:>12.2} {:>15.2}x",
            plain.as_secs_f64() * 1e3,
            durable.as_secs_f64() * 1e3,
            durable.as_secs_f64() / plain.as_secs_f64()
        );
    }
    Ok(())
}

/// One start to end; a durable command is forgotten afterwards, untimed.
async fn once(
    sp: &Arc<dyn SubprocessProvider>,
    argv: &[&str],
    durable: bool,
    bulk: bool,
) -> Result<Duration> {
    let mut spec = SpawnSpec::new(argv.iter().copied());
    spec.stdout = if bulk {
        OutputMode::Pipe
    } else {
        OutputMode::Null
    };
    spec.stderr = OutputMode::Null;
    let started = Instant::now();
    let (process, id): (Arc<dyn Process>, Option<String>) = if durable {
        let attached = sp.spawn_durable(spec, DurableSpec::default()).await?;
        (attached.process, Some(attached.id))
    } else {
        (sp.spawn(spec).await?, None)
    };
    if bulk {
        let mut stream = process.take_stdout().context("stdout")?;
        let mut total = 0u64;
        while let Some(chunk) = stream.next().await {
            total += chunk?.len() as u64;
        }
        ensure!(total == BULK, "read {total} bytes");
    }
    let status = process.wait().await?;
    let elapsed = started.elapsed();
    ensure!(status.success(), "{argv:?}: {status:?}");
    if let Some(id) = id {
        sp.forget(&id).await?;
    }
    Ok(elapsed)
}

fn median(times: &mut [Duration]) -> Duration {
    times.sort();
    times[times.len() / 2]
}
