//! One soak, start to verdict: a private e2b-local on loopback (the `e2b-local` harness), the
//! workers for `--duration`, e2b-local's memory sampled throughout, then the teardown — every
//! worker retires its sandbox, sandboxes abandoned by killed `dsh`s must expire on their
//! timeout — the count of leftovers while the server runs and after it stopped, and the report.

use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use e2b_local::harness::LocalServer;
use rand::SeedableRng;
use rand::rngs::StdRng;
use tokio::sync::watch;

use crate::args::{Args, show};
use crate::binaries::Binaries;
use crate::control::Control;
use crate::dsh::Dsh;
use crate::leaks::{self, Leaks, Scope};
use crate::manifest::{Acquire, Manifests, OnDispose};
use crate::report::Findings;
use crate::rss::{self, mib};
use crate::tally::Tally;
use crate::worker::{Shared, Worker};

/// How long past the latest `endAt` an abandoned sandbox may still be listed.
const EXPIRY_GRACE: Duration = Duration::from_secs(15);
/// How long leftovers may take to disappear once no sandbox is listed (teardown is async).
const SETTLE_LIMIT: Duration = Duration::from_secs(30);

/// Runs the soak; `Some(true)` if it passed, `None` if interrupted (`interrupts` counts
/// SIGINT and SIGTERM): during the load the workers are stopped — their `dsh`s killed — and then
/// the server; during the teardown the server is stopped at once. Errors are failures to set it
/// up.
pub async fn soak(
    args: &Args,
    binaries: &Binaries,
    seed: u64,
    interrupts: watch::Receiver<u32>,
) -> Result<Option<bool>> {
    println!(
        "dsh-soak: {} with {} sandboxes (warm-up {}, sandbox timeout {}, kill rate {}), seed {seed}",
        show(args.duration),
        args.sandboxes,
        show(args.warm_up),
        show(args.sandbox_timeout),
        args.kill_rate
    );
    let server = tokio::task::spawn_blocking(LocalServer::try_start)
        .await
        .context("start e2b-local")??;
    let server_env = server.env();
    let run = format!("{:016x}", rand::random::<u64>());
    let scope = Scope {
        server_pid: server.pid(),
        state_dir: server.state_dir().to_path_buf(),
        run: run.clone(),
    };
    println!(
        "dsh-soak: e2b-local pid {} at {}, state dir {}, run {run}",
        server.pid(),
        server.api_url(),
        server.state_dir().display()
    );
    let control = Control::new(&server_env)?;
    let manifests = Manifests::new(&run, args.sandbox_timeout)?;
    let ephemeral = manifests.write("ephemeral", &Acquire::Ephemeral, OnDispose::Kill)?;
    let start = Instant::now();
    let shared = Arc::new(Shared {
        dsh: Dsh::new(
            &binaries.dsh,
            &binaries.plugin_dir,
            &server_env,
            &run,
            args.op_timeout,
        ),
        manifests,
        control: control.clone(),
        tally: Tally::default(),
        kill_rate: args.kill_rate,
        end: start + args.duration,
        lifetime: (
            (args.duration.mul_f64(0.15)).max(Duration::from_secs(5)),
            (args.duration.mul_f64(0.5)).max(Duration::from_secs(5)),
        ),
        ephemeral,
        concurrent_starts: !args.no_concurrent_starts,
    });

    let counted = Arc::clone(&shared);
    let (samples, sampler) = rss::spawn_sampler(server.pid(), start, move || {
        let (ok, killed, failed) = counted.tally.totals();
        ok + killed + failed
    });
    let progress = tokio::spawn(progress(
        Arc::clone(&shared),
        control.clone(),
        Arc::clone(&samples),
        start,
        (args.duration / 15).clamp(Duration::from_secs(10), Duration::from_secs(120)),
    ));
    let mut workers = Vec::new();
    for id in 0..args.sandboxes {
        let rng = StdRng::seed_from_u64(seed ^ u64::from(id).wrapping_mul(0x9E37_79B9_7F4A_7C15));
        let worker = Worker::new(id, Arc::clone(&shared), rng);
        workers.push(tokio::spawn(async move {
            // Staggered a little, as agents arrive.
            tokio::time::sleep(Duration::from_millis(u64::from(id) * 50)).await;
            worker.run().await;
        }));
    }
    let joined = tokio::select! {
        joined = futures::future::join_all(workers.iter_mut()) => Some(joined),
        () = interrupted(interrupts.clone()) => None,
    };
    progress.abort();
    sampler.abort();
    let Some(joined) = joined else {
        for worker in &workers {
            worker.abort();
        }
        let _ = futures::future::join_all(workers).await;
        let stopped = tokio::task::spawn_blocking(move || server.stop()).await;
        eprintln!("dsh-soak: interrupted; e2b-local stopped ({stopped:?})");
        return Ok(None);
    };
    let mut panicked = 0;
    for err in joined.into_iter().filter_map(Result::err) {
        eprintln!("dsh-soak: a worker panicked: {err}");
        panicked += 1;
    }
    // The teardown and the report; an interruption abandons them (dropping the server stops
    // it).
    let finish = async move {
        let load_ended = start.elapsed();
        println!(
            "dsh-soak: load ended after {:.0} s; waiting for abandoned sandboxes to expire",
            load_ended.as_secs_f64()
        );
        let expiry = wait_for_expiry(&control, args.sandbox_timeout).await;
        let serving = settle(|| leaks::while_serving(&scope, &control)).await;
        let after_teardown = crate::procs::rss_kib(server.pid());
        let log = server.log();
        let stopped = tokio::task::spawn_blocking(move || server.stop())
            .await
            .context("stop e2b-local")?;
        let stopped_leaks = settle(|| {
            let scope = scope.clone();
            async move {
                tokio::task::spawn_blocking(move || leaks::after_stop(&scope))
                    .await
                    .unwrap_or_default()
            }
        })
        .await;

        let findings = Findings {
            args,
            tally: &shared.tally,
            panicked,
            abandoned: expiry.listed_at_start,
            expiry_wait: expiry.waited,
            log,
            serving,
            stopped: stopped_leaks,
            exit: stopped,
            samples: &samples,
            after_teardown,
            took: start.elapsed(),
        };
        Ok(Some(findings.report()))
    };
    tokio::select! {
        verdict = finish => verdict,
        () = interrupted(interrupts) => {
            eprintln!("dsh-soak: interrupted during the teardown; abandoned");
            Ok(None)
        }
    }
}

/// Resolves once an interruption was counted.
async fn interrupted(mut interrupts: watch::Receiver<u32>) {
    if interrupts.wait_for(|count| *count > 0).await.is_err() {
        // The counting task is gone: no interruption can come.
        std::future::pending::<()>().await;
    }
}

/// Prints a line now and then while the load runs.
async fn progress(
    shared: Arc<Shared>,
    control: Control,
    samples: Arc<rss::Samples>,
    start: Instant,
    every: Duration,
) {
    let mut ticker = tokio::time::interval(every);
    ticker.tick().await;
    loop {
        ticker.tick().await;
        let (ok, killed, failed) = shared.tally.totals();
        let sandboxes = control.list(&[]).await.map_or_else(
            |err| format!("? ({err:#})"),
            |listed| listed.len().to_string(),
        );
        println!(
            "[{:>5.0} s] operations: {ok} ok, {killed} killed, {failed} failed; sandboxes {sandboxes}; \
             e2b-local {}",
            start.elapsed().as_secs_f64(),
            samples.latest().map_or("?".to_owned(), mib)
        );
    }
}

/// How the abandoned sandboxes expired.
struct Expiry {
    listed_at_start: usize,
    waited: Duration,
}

/// Waits until the API lists no sandbox, at most until [`EXPIRY_GRACE`] past the latest `endAt`
/// listed (and never beyond the sandbox timeout plus a minute).
async fn wait_for_expiry(control: &Control, timeout: Duration) -> Expiry {
    let started = Instant::now();
    let hard_limit = timeout + Duration::from_secs(60);
    let mut listed_at_start = None;
    loop {
        let listed = control.list(&[]).await.unwrap_or_default();
        let count = listed.len();
        listed_at_start.get_or_insert(count);
        if count == 0 || started.elapsed() >= hard_limit {
            break;
        }
        let latest = listed.iter().map(|l| l.end_at).max();
        let past_due = latest.is_some_and(|latest| {
            jiff::Timestamp::now().duration_since(latest).as_millis()
                > EXPIRY_GRACE.as_millis() as i128
        });
        if past_due {
            break;
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    Expiry {
        listed_at_start: listed_at_start.unwrap_or(0),
        waited: started.elapsed(),
    }
}

/// Counts leftovers until there are none or [`SETTLE_LIMIT`] passed; the last count.
async fn settle<F, Fut>(mut count: F) -> Leaks
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Leaks>,
{
    let started = Instant::now();
    loop {
        let leaks = count().await;
        if leaks.total() == 0 || started.elapsed() >= SETTLE_LIMIT {
            return leaks;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}
