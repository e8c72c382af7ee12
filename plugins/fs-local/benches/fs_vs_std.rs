//! fs-local against `std::fs`, measured in the same run.
//!
//! `cargo bench -p dsh-fs-local --bench fs_vs_std` (add `-- quick` for a
//! short run; `DSH_BENCH_DIR=/dev/shm` measures on tmpfs instead of the
//! temporary directory's filesystem). Each figure is the median of
//! interleaved rounds; the ratio is fs-local's time over the peer's.
//! Operations run inside a 2-worker multi-thread runtime like a plugin's
//! own, called in-process (the ABI layer's cost is not included).

use std::fs::{self, File};
use std::hint::black_box;
use std::io::{Read, Write};
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::Path;
use std::time::{Duration, Instant};

use dsh_fs_local::FsLocal;
use dsh_plugin_api::Bytes;
use dsh_plugin_api::fs::{FsProvider, WriteGuard};
use futures::StreamExt;

const KIB: usize = 1024;
const MIB: usize = 1024 * 1024;

fn main() {
    let quick = std::env::args().any(|arg| arg == "quick");
    // Any other argument (not a cargo flag) filters operations by label.
    let filter: Option<String> = std::env::args()
        .skip(1)
        .find(|arg| arg != "quick" && !arg.starts_with('-'));
    let rounds = if quick { 5 } else { 15 };
    let small_iters = if quick { 2_000 } else { 10_000 };
    let large_iters = if quick { 2 } else { 5 };
    // Small writes are dominated by the filesystem's journal; fewer suffice.
    let small_write_iters = if quick { 200 } else { 1_000 };

    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    let dir = match std::env::var_os("DSH_BENCH_DIR") {
        Some(base) => tempfile::tempdir_in(base),
        None => tempfile::tempdir(),
    }
    .expect("tempdir");
    println!("directory: {}", dir.path().display());
    let root = fs::canonicalize(dir.path()).expect("canonical");
    let fs_local = FsLocal::new(root.to_str().expect("utf-8")).expect("fs");

    let small = vec![b'a'; KIB];
    let large: Vec<u8> = (0..64 * MIB).map(|i| b'a' + (i % 26) as u8).collect();
    fs::write(root.join("small.txt"), &small).unwrap();
    fs::write(root.join("large.txt"), &large).unwrap();

    println!(
        "{:<34} {:>12} {:>12} {:>7}",
        "operation", "fs-local", "std::fs", "ratio"
    );
    let small_path = root.join("small.txt");
    let large_path = root.join("large.txt");

    report(
        &filter,
        "read_text 1 KiB vs read_to_string",
        rounds,
        small_iters,
        |n| {
            rt.block_on(async {
                for _ in 0..n {
                    black_box(fs_local.read_text("small.txt").await.unwrap());
                }
            })
        },
        each(|| {
            black_box(fs::read_to_string(&small_path).unwrap());
        }),
    );
    report(
        &filter,
        "read_text 64 MiB vs read_to_string",
        rounds,
        large_iters,
        |n| {
            rt.block_on(async {
                for _ in 0..n {
                    black_box(fs_local.read_text("large.txt").await.unwrap());
                }
            })
        },
        each(|| {
            black_box(fs::read_to_string(&large_path).unwrap());
        }),
    );
    report(
        &filter,
        "read_bytes 1 KiB vs fs::read",
        rounds,
        small_iters,
        |n| {
            rt.block_on(async {
                for _ in 0..n {
                    drain_bytes(&fs_local, "small.txt").await;
                }
            })
        },
        each(|| {
            black_box(fs::read(&small_path).unwrap());
        }),
    );
    report(
        &filter,
        "read_bytes 64 MiB vs 64 KiB reads",
        rounds,
        large_iters,
        |n| {
            rt.block_on(async {
                for _ in 0..n {
                    drain_bytes(&fs_local, "large.txt").await;
                }
            })
        },
        each(|| chunked_std_read(&large_path, false)),
    );
    report(
        &filter,
        "stream_text 64 MiB vs reads+from_utf8",
        rounds,
        large_iters,
        |n| {
            rt.block_on(async {
                for _ in 0..n {
                    let mut stream = fs_local.stream_text("large.txt").await.unwrap().chunks;
                    while let Some(chunk) = stream.next().await {
                        black_box(chunk.unwrap());
                    }
                }
            })
        },
        each(|| chunked_std_read(&large_path, true)),
    );

    let target_small = root.join("w-small.txt");
    let target_large = root.join("w-large.txt");
    for (label, iters, content, target) in [
        ("write 1 KiB", small_write_iters, &small, &target_small),
        ("write 64 MiB", large_iters, &large, &target_large),
    ] {
        let name = target.file_name().unwrap().to_str().unwrap().to_owned();
        let ours = |n| {
            rt.block_on(async {
                for _ in 0..n {
                    fs_local
                        .write(&name, Bytes::from(content.clone()), WriteGuard::Overwrite)
                        .await
                        .unwrap();
                }
            })
        };
        report(
            &filter,
            &format!("{label} vs fs::write"),
            rounds,
            iters,
            ours,
            each(|| {
                let owned = content.clone();
                fs::write(target, &owned).unwrap();
            }),
        );
        report(
            &filter,
            &format!("{label} vs std atomic write"),
            rounds,
            iters,
            ours,
            each(|| std_atomic_write(target, content.clone())),
        );
    }
}

async fn drain_bytes(fs_local: &FsLocal, path: &str) {
    let mut stream = fs_local.read_bytes(path).await.unwrap().chunks;
    while let Some(chunk) = stream.next().await {
        black_box(chunk.unwrap());
    }
}

/// The std peer of a streamed read: 64 KiB chunks, each a fresh buffer
/// handed on (as a stream consumer receives them), validated as UTF-8 when
/// `text` (the content is ASCII, so no boundary handling is needed).
fn chunked_std_read(path: &Path, text: bool) {
    let mut file = File::open(path).unwrap();
    loop {
        let mut chunk = vec![0_u8; 64 * KIB];
        let read = file.read(&mut chunk).unwrap();
        if read == 0 {
            break;
        }
        chunk.truncate(read);
        if text {
            black_box(std::str::from_utf8(&chunk).unwrap());
        }
        black_box(chunk);
    }
}

/// The same atomic protocol with plain std calls: a new private file (mode
/// 0600) beside the target, write, stat the target, chmod, rename, stat.
fn std_atomic_write(target: &Path, content: Vec<u8>) {
    let staged = target.with_file_name(format!(".peer-stage-{:016x}", rand_u64()));
    let mut file = fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&staged)
        .unwrap();
    file.write_all(&content).unwrap();
    let _ = fs::symlink_metadata(target);
    file.set_permissions(fs::Permissions::from_mode(0o644))
        .unwrap();
    fs::rename(&staged, target).unwrap();
    black_box(file.metadata().unwrap());
}

fn rand_u64() -> u64 {
    use std::sync::atomic::{AtomicU64, Ordering};
    static NEXT: AtomicU64 = AtomicU64::new(1);
    NEXT.fetch_add(1, Ordering::Relaxed)
}

/// A peer body run `n` times.
fn each(mut work: impl FnMut()) -> impl FnMut(usize) {
    move |n| {
        for _ in 0..n {
            work();
        }
    }
}

/// Times `ours(iters)` and `peer(iters)` (each runs the operation `iters`
/// times) over interleaved rounds and prints the medians per operation.
fn report(
    filter: &Option<String>,
    label: &str,
    rounds: usize,
    iters: usize,
    mut ours: impl FnMut(usize),
    mut peer: impl FnMut(usize),
) {
    if filter
        .as_ref()
        .is_some_and(|filter| !label.contains(filter.as_str()))
    {
        return;
    }
    let mut our_times = Vec::with_capacity(rounds);
    let mut peer_times = Vec::with_capacity(rounds);
    // One warm-up round each, then interleaved measured rounds.
    for round in 0..=rounds {
        let mine = time(iters, &mut ours);
        let theirs = time(iters, &mut peer);
        if round > 0 {
            our_times.push(mine);
            peer_times.push(theirs);
        }
    }
    let ours = median(&mut our_times);
    let peer = median(&mut peer_times);
    println!(
        "{label:<34} {:>12} {:>12} {:>6.2}x",
        format_per_op(ours, iters),
        format_per_op(peer, iters),
        ours.as_secs_f64() / peer.as_secs_f64()
    );
}

fn time(iters: usize, work: &mut impl FnMut(usize)) -> Duration {
    let start = Instant::now();
    work(iters);
    start.elapsed()
}

fn median(times: &mut [Duration]) -> Duration {
    times.sort();
    times[times.len() / 2]
}

fn format_per_op(total: Duration, iters: usize) -> String {
    let per = total.as_secs_f64() / iters as f64;
    if per < 1e-3 {
        format!("{:.2} µs", per * 1e6)
    } else {
        format!("{:.2} ms", per * 1e3)
    }
}
