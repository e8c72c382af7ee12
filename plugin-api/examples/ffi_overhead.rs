//! Measures what the FFI layer costs per call, and what the alternative
//! future strategy would cost, against `std::fs` reading a 1 KiB file (the
//! budget: fs-local must read 1 KiB within ~1.15× of `std::fs`).
//!
//! Run with `cargo run --release -p dsh-plugin-api --example ffi_overhead`
//! (after `cargo build --release -p dsh-probe-fs -p dsh-probe-e2b`, or let
//! the example's dev-dependencies build them). The figures are recorded in
//! the `ffi` module documentation.
//!
//! Every figure is the median over rounds of the mean time per call:
//! - `std::fs::read_to_string` of a 1 KiB file (the peer);
//! - the in-memory probe fs `read_text` of 1 KiB, called in-process (the
//!   work itself);
//! - the same call through the loaded plugin (FFI, runtime entered on
//!   poll: the strategy in use);
//! - the same in-process call spawned on a second tokio runtime and awaited
//!   through a runtime-agnostic oneshot (the cost the alternative strategy
//!   adds).

use std::sync::Arc;
use std::time::{Duration, Instant};

use dsh_plugin_api::fs::{FsProvider, WriteGuard};
use dsh_plugin_api::host::{CreateRequest, PluginLibrary, library_file_name};
use dsh_plugin_api::{Bytes, Service, ServiceKind};
use dsh_probe_common::Counters;
use dsh_probe_common::memory_fs::MemoryFs;

const CALLS: u32 = 20_000;
const ROUNDS: usize = 7;

fn library(package: &str) -> std::path::PathBuf {
    let exe = std::env::current_exe().expect("exe");
    let dir = exe.parent().expect("dir");
    let name = library_file_name(package);
    [
        dir.join("../deps").join(&name),
        dir.join("deps").join(&name),
        dir.join("..").join(&name),
    ]
    .into_iter()
    .find(|path| path.is_file())
    .unwrap_or_else(|| panic!("{name} not built next to {}", exe.display()))
}

async fn median_per_call<F, Fut>(mut call: F) -> Duration
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    for _ in 0..CALLS / 10 {
        call().await;
    }
    let mut rounds = Vec::new();
    for _ in 0..ROUNDS {
        let started = Instant::now();
        for _ in 0..CALLS {
            call().await;
        }
        rounds.push(started.elapsed() / CALLS);
    }
    rounds.sort();
    rounds[ROUNDS / 2]
}

fn main() {
    let host = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("host runtime");
    host.block_on(async {
        let dir = tempfile::tempdir().expect("scratch dir");
        let file = dir.path().join("one-kib.txt");
        let text = "x".repeat(1023) + "\n";
        std::fs::write(&file, &text).expect("write");

        let std_fs = median_per_call(|| {
            let file = file.clone();
            async move {
                let text = std::fs::read_to_string(&file).expect("read");
                std::hint::black_box(text);
            }
        })
        .await;

        let direct: Arc<dyn FsProvider> = Arc::new(MemoryFs::new("/", Arc::new(Counters::default())));
        direct.write("/one-kib.txt", Bytes::from(text.clone()), WriteGuard::Overwrite).await.expect("write");
        let in_process = median_per_call(|| {
            let fs = direct.clone();
            async move {
                std::hint::black_box(fs.read_text("/one-kib.txt").await.expect("read"));
            }
        })
        .await;

        let owner = PluginLibrary::load(&library("dsh-probe-e2b"))
            .expect("load e2b probe")
            .create(CreateRequest { id: "e2b".into(), config: serde_json::Value::Null, services: vec![] })
            .await
            .expect("create e2b");
        let fs_instance = PluginLibrary::load(&library("dsh-probe-fs"))
            .expect("load fs probe")
            .create(CreateRequest {
                id: "fs".into(),
                config: serde_json::Value::Null,
                services: owner.services().to_vec(),
            })
            .await
            .expect("create fs");
        let Some(Service::Fs(plugin_fs)) =
            fs_instance.services().iter().find(|service| service.kind() == ServiceKind::Fs).cloned()
        else {
            panic!("the fs probe provides fs");
        };
        plugin_fs.write("/one-kib.txt", Bytes::from(text), WriteGuard::Overwrite).await.expect("write");
        let through_ffi = median_per_call(|| {
            let fs = plugin_fs.clone();
            async move {
                std::hint::black_box(fs.read_text("/one-kib.txt").await.expect("read"));
            }
        })
        .await;

        let other = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .expect("second runtime");
        let handle = other.handle().clone();
        let spawned = median_per_call(|| {
            let fs = direct.clone();
            let handle = handle.clone();
            async move {
                let (done, result) = futures::channel::oneshot::channel();
                handle.spawn(async move {
                    let _ = done.send(fs.read_text("/one-kib.txt").await);
                });
                std::hint::black_box(result.await.expect("spawned").expect("read"));
            }
        })
        .await;

        let ns = |duration: Duration| duration.as_nanos();
        println!("per call, median of {ROUNDS} rounds x {CALLS} calls:");
        println!("  std::fs::read_to_string 1 KiB          {:>7} ns  (peer)", ns(std_fs));
        println!("  probe read_text 1 KiB, in-process      {:>7} ns", ns(in_process));
        println!("  probe read_text 1 KiB, through FFI     {:>7} ns", ns(through_ffi));
        println!("  probe read_text 1 KiB, spawned+oneshot {:>7} ns", ns(spawned));
        let overhead = through_ffi.saturating_sub(in_process);
        let spawn_overhead = spawned.saturating_sub(in_process);
        println!("  FFI overhead (entered on poll)         {:>7} ns = {:.3}x of the std::fs peer",
            ns(overhead), overhead.as_secs_f64() / std_fs.as_secs_f64());
        println!("  spawn+channel overhead (without FFI)   {:>7} ns = {:.3}x of the std::fs peer",
            ns(spawn_overhead), spawn_overhead.as_secs_f64() / std_fs.as_secs_f64());
        println!("  => a provider doing std::fs work through FFI: {:.3}x (entered) vs >= {:.3}x (spawned)",
            (std_fs + overhead).as_secs_f64() / std_fs.as_secs_f64(),
            (std_fs + overhead + spawn_overhead).as_secs_f64() / std_fs.as_secs_f64());

        // Streams: 16 MiB in 4 KiB chunks (the probe's chunk size), pulled
        // in-process and through FFI (one poll and one copy per chunk).
        let big = vec![7u8; 16 << 20];
        direct.write("/big", Bytes::from(big.clone()), WriteGuard::Overwrite).await.expect("write big");
        plugin_fs.write("/big", Bytes::from(big), WriteGuard::Overwrite).await.expect("write big");
        let pull = |fs: Arc<dyn FsProvider>| async move {
            let mut best = Duration::MAX;
            for _ in 0..ROUNDS {
                let started = Instant::now();
                let read = fs.read_bytes("/big").await.expect("read_bytes");
                let bytes = dsh_plugin_api::stream::collect_bytes(read.chunks).await.expect("collect");
                std::hint::black_box(bytes);
                best = best.min(started.elapsed());
            }
            best
        };
        let stream_direct = pull(direct.clone()).await;
        let stream_ffi = pull(plugin_fs.clone()).await;
        let mib_s = |duration: Duration| 16.0 / duration.as_secs_f64();
        println!("  read_bytes 16 MiB in 4 KiB chunks, in-process  {:>8.0} MiB/s", mib_s(stream_direct));
        println!("  read_bytes 16 MiB in 4 KiB chunks, through FFI {:>8.0} MiB/s ({:.0} ns more per chunk)",
            mib_s(stream_ffi),
            (stream_ffi.as_nanos() as f64 - stream_direct.as_nanos() as f64) / 4096.0);

        drop(plugin_fs);
        fs_instance.dispose().await.expect("dispose fs");
        owner.dispose().await.expect("dispose e2b");
        other.shutdown_background();
        std::fs::remove_dir_all(&dir).expect("cleanup");
    });
}
