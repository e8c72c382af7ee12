//! Measures HTTP/1.1 against h2c (prior knowledge) for plain `http://`
//! envd traffic on a real e2b-local: many concurrent process streams, and
//! unary calls while long streams hold connections open.
//!
//! ```text
//! cargo build --release -p e2b-local
//! cargo run --release -p e2b-client --example plain_http_versions [-- ROUNDS]
//! ```
//!
//! Needs root (e2b-local does). Prints one line per scenario and version.

use std::time::{Duration, Instant};

use e2b_client::{
    Api, CallOptions, Command, ConnectionOptions, NewSandbox, PlainHttp, Sandbox, StreamOptions,
};
use e2b_local::harness::LocalServer;
use futures::future::join_all;

const CONCURRENT_STREAMS: usize = 64;
const HELD_STREAMS: usize = 32;
const UNARY_CALLS: usize = 256;

fn api(server: &LocalServer, plain: PlainHttp) -> Api {
    Api::new(
        ConnectionOptions::default()
            .with_api_key(server.api_key())
            .with_api_url(server.api_url())
            .with_sandbox_url(server.sandbox_url())
            .with_plain_http(plain)
            .resolve_with(|_| None)
            .expect("harness settings are valid"),
    )
}

/// Wall time of `CONCURRENT_STREAMS` concurrent short processes.
async fn concurrent_streams(sandbox: &Sandbox) -> Duration {
    let started = Instant::now();
    let runs = (0..CONCURRENT_STREAMS).map(|i| async move {
        let stream = sandbox
            .envd()
            .start(
                &Command::new("/bin/echo").arg(i.to_string()),
                &StreamOptions::default(),
            )
            .await
            .expect("start");
        assert!(stream.wait().await.expect("wait").success());
    });
    join_all(runs).await;
    started.elapsed()
}

/// Wall time of `UNARY_CALLS` concurrent stats while `HELD_STREAMS`
/// streams stay open.
async fn unary_under_held_streams(sandbox: &Sandbox) -> Duration {
    let envd = sandbox.envd();
    let held = join_all((0..HELD_STREAMS).map(|_| async {
        envd.start(
            &Command::new("/bin/sleep").arg("60"),
            &StreamOptions::default(),
        )
        .await
        .expect("start sleeper")
    }))
    .await;
    let started = Instant::now();
    join_all((0..UNARY_CALLS).map(|_| async {
        envd.stat("/home/user", &CallOptions::default())
            .await
            .expect("stat");
    }))
    .await;
    let elapsed = started.elapsed();
    drop(held);
    elapsed
}

fn median(mut samples: Vec<Duration>) -> Duration {
    samples.sort();
    samples[samples.len() / 2]
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let rounds: usize = std::env::args()
        .nth(1)
        .map_or(5, |r| r.parse().expect("ROUNDS is a number"));
    let server = LocalServer::start();
    let versions = [PlainHttp::Http1, PlainHttp::H2cPriorKnowledge];
    let mut sandboxes = Vec::new();
    for plain in versions {
        let sandbox = Sandbox::create(&api(&server, plain), &NewSandbox::new("base"))
            .await
            .expect("create sandbox");
        // Warm-up round, not counted.
        concurrent_streams(&sandbox).await;
        sandboxes.push(sandbox);
    }
    let mut streams = vec![Vec::new(); versions.len()];
    let mut unary = vec![Vec::new(); versions.len()];
    // Rounds alternate the versions (and which goes first) so drift in the
    // machine's load does not favour one of them.
    for round in 0..rounds {
        for step in 0..versions.len() {
            let i = (round + step) % versions.len();
            streams[i].push(concurrent_streams(&sandboxes[i]).await);
            unary[i].push(unary_under_held_streams(&sandboxes[i]).await);
        }
    }
    for (i, plain) in versions.iter().enumerate() {
        println!(
            "{plain:?}: {CONCURRENT_STREAMS} concurrent process streams: median {:.1} ms; \
             {UNARY_CALLS} concurrent stats under {HELD_STREAMS} open streams: median {:.1} ms",
            median(streams[i].clone()).as_secs_f64() * 1e3,
            median(unary[i].clone()).as_secs_f64() * 1e3,
        );
    }
    for sandbox in sandboxes {
        sandbox.kill().await.expect("kill");
    }
}
