//! What the owner gateway costs: the same envd calls on one e2b-local
//! sandbox through three paths, measured in one run —
//!
//! - `direct`: `Envd<SandboxTransport>` (the peer: no owner at all);
//! - `owner`: `Envd<OwnerTransport>` over the owner in-process;
//! - `abi`: `Envd<OwnerTransport>` over the owner loaded by the host from
//!   `libdsh_e2b_owner.so` (what adapters get in dsh).
//!
//! Prints medians and ratios against `direct`, plus the owner's create
//! time (sandbox + setup) against a bare sandbox create.
//!
//! ```sh
//! cargo build --release -p e2b-local -p dsh-e2b-owner
//! cargo run --release -p dsh-e2b-owner --example gateway_overhead [ROUNDS]
//! ```
//!
//! Needs root (e2b-local).
//!
//! Measured (release, 2 cores, 200 rounds; ratio = path / direct):
//!
//! | operation | direct | owner | abi |
//! |---|---|---|---|
//! | create (bare sandbox vs owner: sandbox + setup) | 17.8 ms | 22.0 ms (1.24) | — |
//! | stat | 197 µs | 205 µs (1.04) | 223 µs (1.13) |
//! | read 1 KiB | 241 µs | 243 µs (1.01) | 260 µs (1.08) |
//! | run `/bin/true` (stream) | 2.37 ms | 2.09 ms (0.88) | 2.07 ms (0.87) |
//! | read 64 MiB | 779 MiB/s | 763 MiB/s (1.02) | 738 MiB/s (1.06) |
//! | write 64 MiB | 511 MiB/s | 567 MiB/s (0.90) | 640 MiB/s (0.80) |
//!
//! (The 64 MiB rows are 5 rounds each and noisy; process start-up
//! dominates the stream row.)

use std::time::{Duration, Instant};

use bytes::Bytes;
use dsh_e2b_gateway::{OwnerEnvd, envd_client};
use dsh_e2b_owner::E2bPlugin;
use dsh_host::{Host, ManifestFormat};
use dsh_plugin_api::OwnerKind;
use dsh_plugin_api::{CreateContext, Injected, Plugin};
use e2b_client::{
    Api, CallOptions, ClientTransport, Command, ConnectionOptions, DownloadOptions, Envd,
    NewSandbox, Sandbox, StreamOptions, UploadOptions,
};
use e2b_local::harness::LocalServer;
use futures::StreamExt;
use http_body::Body;

const BIG: usize = 64 << 20;

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let rounds: usize = std::env::args()
        .nth(1)
        .map(|n| n.parse().expect("ROUNDS is a number"))
        .unwrap_or(200);
    let server = LocalServer::start();
    let vars: Vec<(String, String)> = server.env();
    let env = move |name: &str| vars.iter().find(|(k, _)| k == name).map(|(_, v)| v.clone());
    let api = Api::new(
        ConnectionOptions::default()
            .with_api_key(server.api_key())
            .with_api_url(server.api_url())
            .with_sandbox_url(server.sandbox_url())
            .resolve_with(|_| None)
            .unwrap(),
    );

    // Create: a bare sandbox vs the owner (sandbox + setup), then dispose.
    let mut bare = Vec::new();
    let mut owned = Vec::new();
    for _ in 0..5 {
        let started = Instant::now();
        let sandbox = Sandbox::create(&api, &NewSandbox::new("base"))
            .await
            .unwrap();
        bare.push(started.elapsed());
        sandbox.kill().await.unwrap();
        let started = Instant::now();
        let plugin = E2bPlugin::create_with_env(ctx(serde_json::Value::Null), &env)
            .await
            .unwrap();
        owned.push(started.elapsed());
        plugin.dispose().await.unwrap();
    }
    println!(
        "create: bare sandbox {:?}, owner (sandbox + setup) {:?} (x{:.2})",
        median(&mut bare),
        median(&mut owned),
        ratio(median(&mut owned), median(&mut bare)),
    );

    // One sandbox, three paths to it.
    let plugin = E2bPlugin::create_with_env(ctx(serde_json::json!({"onDispose": "leave"})), &env)
        .await
        .unwrap();
    let id = plugin.sandbox().id().to_owned();
    let library = std::env::current_exe()
        .unwrap()
        .parent()
        .and_then(|examples| examples.parent())
        .unwrap()
        .join("libdsh_e2b_owner.so");
    let manifest = format!(
        "plugins:\n  - id: e2b\n    name: dsh-e2b-owner\n    path: {}\n    config:\n      sandboxId: {id}\n      onDispose: kill\n      apiKey: {}\n      apiUrl: {}\n      sandboxUrl: {}\n",
        library.display(),
        server.api_key(),
        server.api_url(),
        server.sandbox_url()
    );
    let host = Host::from_str(&manifest, ManifestFormat::Yaml)
        .await
        .expect("load libdsh_e2b_owner.so (cargo build --release -p dsh-e2b-owner)");
    let direct = plugin.sandbox().envd().clone();
    let owner: OwnerEnvd = envd_client(plugin.owner().clone());
    let abi: OwnerEnvd = envd_client(host.owner(OwnerKind::E2B).unwrap());

    let make = direct
        .start(
            &Command::shell(format!(
                "head -c 1024 /dev/urandom > /tmp/small && head -c {BIG} /dev/urandom > /tmp/big"
            )),
            &StreamOptions::default(),
        )
        .await
        .unwrap()
        .wait()
        .await
        .unwrap();
    assert!(make.success());

    println!("\n{rounds} rounds each; medians; ratio = path / direct");
    println!(
        "{:<28} {:>12} {:>12} {:>12} {:>8} {:>8}",
        "operation", "direct", "owner", "abi", "owner", "abi"
    );
    let stat = [
        measure(rounds, || stat(&direct)).await,
        measure(rounds, || stat(&owner)).await,
        measure(rounds, || stat(&abi)).await,
    ];
    row("stat", &stat);
    let small = [
        measure(rounds, || read(&direct, "/tmp/small")).await,
        measure(rounds, || read(&owner, "/tmp/small")).await,
        measure(rounds, || read(&abi, "/tmp/small")).await,
    ];
    row("read 1 KiB", &small);
    let run = [
        measure(rounds / 4, || true_(&direct)).await,
        measure(rounds / 4, || true_(&owner)).await,
        measure(rounds / 4, || true_(&abi)).await,
    ];
    row("run /bin/true (stream)", &run);
    let big_rounds = 5;
    let big = [
        measure(big_rounds, || read(&direct, "/tmp/big")).await,
        measure(big_rounds, || read(&owner, "/tmp/big")).await,
        measure(big_rounds, || read(&abi, "/tmp/big")).await,
    ];
    row("read 64 MiB", &big);
    let up = [
        measure(big_rounds, || write(&direct)).await,
        measure(big_rounds, || write(&owner)).await,
        measure(big_rounds, || write(&abi)).await,
    ];
    row("write 64 MiB", &up);
    println!(
        "64 MiB throughput (MiB/s): read {:.0} / {:.0} / {:.0}, write {:.0} / {:.0} / {:.0}",
        mibps(big[0]),
        mibps(big[1]),
        mibps(big[2]),
        mibps(up[0]),
        mibps(up[1]),
        mibps(up[2])
    );

    drop((owner, abi));
    host.dispose().await.unwrap();
    plugin.dispose().await.unwrap();
}

fn ctx(config: serde_json::Value) -> CreateContext {
    CreateContext {
        id: "e2b".into(),
        config,
        services: Injected::default(),
    }
}

async fn stat<T>(envd: &Envd<T>)
where
    T: ClientTransport,
    T::ResponseBody: Unpin,
    <T::ResponseBody as Body>::Error: std::fmt::Display,
{
    envd.stat("/tmp/small", &CallOptions::default())
        .await
        .unwrap();
}

async fn read<T>(envd: &Envd<T>, path: &str)
where
    T: ClientTransport,
    T::ResponseBody: Unpin,
    <T::ResponseBody as Body>::Error: std::fmt::Display,
{
    let mut download = envd
        .download(path, &DownloadOptions::default())
        .await
        .unwrap();
    while let Some(chunk) = download.next().await {
        chunk.unwrap();
    }
}

async fn write<T>(envd: &Envd<T>)
where
    T: ClientTransport,
    T::ResponseBody: Unpin,
    <T::ResponseBody as Body>::Error: std::fmt::Display,
{
    let chunk = Bytes::from(vec![7u8; 1 << 20]);
    let chunks =
        futures::stream::iter((0..BIG >> 20).map(move |_| Ok::<_, std::io::Error>(chunk.clone())));
    envd.upload(
        "/tmp/up",
        chunks,
        &UploadOptions::default().content_length(BIG as u64),
    )
    .await
    .unwrap();
}

async fn true_<T>(envd: &Envd<T>)
where
    T: ClientTransport,
    T::ResponseBody: Unpin,
    <T::ResponseBody as Body>::Error: std::fmt::Display,
{
    let status = envd
        .start(&Command::new("/bin/true"), &StreamOptions::default())
        .await
        .unwrap()
        .wait()
        .await
        .unwrap();
    assert!(status.success());
}

async fn measure<F, Fut>(rounds: usize, mut op: F) -> Duration
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    // One warm-up call (connections, caches).
    op().await;
    let mut times = Vec::with_capacity(rounds);
    for _ in 0..rounds.max(1) {
        let started = Instant::now();
        op().await;
        times.push(started.elapsed());
    }
    median(&mut times)
}

fn median(times: &mut [Duration]) -> Duration {
    times.sort_unstable();
    times[times.len() / 2]
}

fn ratio(a: Duration, b: Duration) -> f64 {
    a.as_secs_f64() / b.as_secs_f64()
}

fn mibps(time: Duration) -> f64 {
    (BIG as f64 / (1 << 20) as f64) / time.as_secs_f64()
}

fn row(name: &str, times: &[Duration; 3]) {
    println!(
        "{name:<28} {:>12.3?} {:>12.3?} {:>12.3?} {:>8.2} {:>8.2}",
        times[0],
        times[1],
        times[2],
        ratio(times[1], times[0]),
        ratio(times[2], times[0])
    );
}
