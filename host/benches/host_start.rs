//! Host start for the local composition: manifest → validated → every
//! plugin created and ready, as a ratio against peers measured in the same
//! run — spawning and reaping `true` (the cost of one process start) and a
//! dlopen/dlclose of a small system library (the cost of one library load).
//!
//! Run: `cargo bench -p dsh-host --bench host_start` after
//! `cargo build -p dsh-fs-local -p dsh-subprocess-local` (release libraries
//! are used when benchmarking in release, debug ones otherwise; set
//! DSH_PLUGIN_PATH to choose). Target: warm start ≤ 20 ms.

use std::ffi::CString;
use std::time::{Duration, Instant};

use dsh_host::{Composition, Manifest, ManifestFormat};

mod common;

const ROUNDS: usize = 30;

fn main() {
    let search = common::search_path();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");

    // manifest -> validated -> every plugin created; dispose is not timed.
    let start_once = || {
        let started = Instant::now();
        let host = runtime.block_on(async {
            let manifest = Manifest::parse(
                dsh_host::embedded::LOCAL_YAML,
                ManifestFormat::Yaml,
                dsh_host::embedded::LOCAL_ORIGIN,
                None,
            )
            .expect("embedded manifest");
            Composition::from_manifest(&manifest, &search)
                .unwrap_or_else(|err| panic!("local composition: {err}"))
                .start()
                .await
                .expect("start")
        });
        let elapsed = started.elapsed();
        runtime.block_on(host.dispose()).expect("dispose");
        elapsed
    };
    // The first start in this process includes dlopen of both libraries.
    let cold = start_once();
    let host_start = measure(start_once);
    let spawn_true = measure(|| {
        let started = Instant::now();
        let status = std::process::Command::new("true")
            .status()
            .expect("spawn true");
        assert!(status.success());
        started.elapsed()
    });
    let dlopen = measure(dlopen_small_library);

    println!("host start (local composition, manifest -> ready), {ROUNDS} rounds, median:");
    println!("  cold first start        {:>9.3} ms", ms(cold));
    println!("  warm start              {:>9.3} ms", ms(host_start));
    println!("  peer: spawn+wait `true` {:>9.3} ms", ms(spawn_true));
    println!("  peer: dlopen+dlclose    {:>9.3} ms", ms(dlopen));
    println!(
        "  ratio warm/spawn-true   {:>9.2}x",
        host_start.as_secs_f64() / spawn_true.as_secs_f64()
    );
    println!(
        "  ratio cold/spawn-true   {:>9.2}x",
        cold.as_secs_f64() / spawn_true.as_secs_f64()
    );
    println!(
        "  target warm <= 20 ms: {}",
        if ms(host_start) <= 20.0 {
            "met"
        } else {
            "NOT met"
        }
    );
}

fn ms(duration: Duration) -> f64 {
    duration.as_secs_f64() * 1000.0
}

fn measure(mut once: impl FnMut() -> Duration) -> Duration {
    once(); // warm-up
    let mut samples: Vec<Duration> = (0..ROUNDS).map(|_| once()).collect();
    samples.sort();
    samples[samples.len() / 2]
}

/// dlopen + dlclose of libresolv with RTLD_NOW (a fresh load each time since
/// nothing else in this process holds it).
fn dlopen_small_library() -> Duration {
    let name = CString::new("libresolv.so.2").expect("name");
    let started = Instant::now();
    // SAFETY: loading and unloading libresolv runs no initialisers that touch
    // our state; the handle is closed before it goes out of scope.
    unsafe {
        let handle = libc::dlopen(name.as_ptr(), libc::RTLD_NOW | libc::RTLD_LOCAL);
        if handle.is_null() {
            let reason = std::ffi::CStr::from_ptr(libc::dlerror());
            panic!("dlopen libresolv.so.2: {}", reason.to_string_lossy());
        }
        libc::dlclose(handle);
    }
    started.elapsed()
}
