//! `fs`: dsh-fs-local through the host against `std::fs` — whole-file
//! reads, a streamed read and atomic writes, of 1 KiB and 64 MiB.

use std::fs::{File, OpenOptions, Permissions};
use std::hint::black_box;
use std::io::{Read, Write};
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use anyhow::{Context, Result, ensure};
use dsh_fs_local::FsLocal;
use dsh_host::Host;
use dsh_plugin_api::fs::{FsProvider, WriteGuard};
use futures::StreamExt;

use super::Bench;
use crate::figure::{Figure, Section, Target};
use crate::locate::{BENCH_DIR_ENV, bench_dir};
use crate::machine::filesystem_type;
use crate::measure::{Contender, Plan, interleave, time_each, time_each_async};
use dsh_plugin_api::Bytes;

const KIB: usize = 1024;
const MIB: usize = 1024 * 1024;
/// The peer's read size for a streamed read (fs-local's chunk size).
const STREAM_READ: usize = 64 * KIB;

/// The two providers measured: through the host and in-process.
struct Providers {
    host: Arc<dyn FsProvider>,
    local: Arc<dyn FsProvider>,
}

/// Measures the section with the host's `fs` service.
pub fn measure(bench: &Bench, host: &Host) -> Result<Section> {
    let dir = bench_dir()?;
    let root = dir
        .path()
        .canonicalize()
        .with_context(|| format!("canonicalize {}", dir.path().display()))?;
    let root_text = root
        .to_str()
        .with_context(|| format!("the benchmark directory {} is not UTF-8", root.display()))?;
    let providers = Providers {
        host: host.fs().context("the host's fs service")?,
        local: Arc::new(FsLocal::new(root_text).context("create an in-process fs-local")?),
    };

    let small = {
        let mut text = vec![b'a'; KIB - 1];
        text.push(b'\n');
        text
    };
    let large: Vec<u8> = (0..64 * MIB)
        .map(|i| {
            if i % 80 == 79 {
                b'\n'
            } else {
                b'a' + (i % 26) as u8
            }
        })
        .collect();
    let small_path = root.join("small.txt");
    let large_path = root.join("large.txt");
    std::fs::write(&small_path, &small)
        .with_context(|| format!("write {}", small_path.display()))?;
    std::fs::write(&large_path, &large)
        .with_context(|| format!("write {}", large_path.display()))?;

    let small_reads = Plan {
        rounds: bench.pick(21, 5),
        iterations: bench.pick(2000, 300),
    };
    let small_writes = Plan {
        rounds: bench.pick(21, 5),
        iterations: bench.pick(200, 50),
    };
    let large_ops = Plan {
        rounds: bench.pick(15, 3),
        iterations: bench.pick(2, 1),
    };

    let mut figures = vec![
        read_text(
            bench,
            &providers,
            &small_path,
            small_reads,
            "read_text 1 KiB vs std::fs::read_to_string",
        )?,
        read_text(
            bench,
            &providers,
            &large_path,
            large_ops,
            "read_text 64 MiB vs std::fs::read_to_string",
        )?,
        read_bytes(bench, &providers, &large_path, large_ops)?,
    ];
    for (content, size, plan) in [
        (&small, "1 KiB", small_writes),
        (&large, "64 MiB", large_ops),
    ] {
        figures.extend(write(bench, &providers, &root, content, size, plan)?);
    }
    let filesystem =
        filesystem_type(&root).unwrap_or_else(|err| format!("unknown filesystem ({err:#})"));
    Ok(Section {
        title: "fs — dsh-fs-local loaded through the host vs std::fs".into(),
        figures,
        notes: vec![
            format!("files in {} ({filesystem}; set {BENCH_DIR_ENV} to measure elsewhere, e.g. /dev/shm)", root.display()),
            "write: every contender gets an owned buffer prepared outside the timed region (a Vec for std, Bytes over one for dsh); fs-local stages in a private (0600) sibling file and renames (atomic, no fsync)".into(),
            "std atomic: the same protocol in plain std — create_new 0600 + write, lstat target, fchmod, rename, fstat".into(),
            format!("read_bytes: the stream drained chunk by chunk vs std File::read into one reused {} KiB buffer", STREAM_READ / KIB),
        ],
    })
}

fn read_text(
    bench: &Bench,
    providers: &Providers,
    path: &Path,
    plan: Plan,
    label: &str,
) -> Result<Figure> {
    let path_text = utf8(path)?;
    let ours = |fs: &Arc<dyn FsProvider>| {
        let fs = fs.clone();
        move |n| {
            bench.runtime.block_on(time_each_async(n, || async {
                let file = fs
                    .read_text(path_text)
                    .await
                    .with_context(|| format!("read_text {path_text}"))?;
                black_box(file);
                Ok(())
            }))
        }
    };
    let mut contenders = [
        Contender::new("dsh read_text", ours(&providers.host)),
        Contender::new("in-process read_text", ours(&providers.local)),
        Contender::new("std::fs::read_to_string", |n| {
            time_each(n, || {
                let text = std::fs::read_to_string(path)
                    .with_context(|| format!("read {}", path.display()))?;
                black_box(text);
                Ok(())
            })
        }),
    ];
    let [ours, local, peer] = interleave(plan, &mut contenders)?;
    Ok(Figure::timed(
        label,
        &ours,
        Some(&local),
        &peer,
        Target::RatioAtMost(1.15),
    ))
}

fn read_bytes(bench: &Bench, providers: &Providers, path: &Path, plan: Plan) -> Result<Figure> {
    let path_text = utf8(path)?;
    let expected = std::fs::metadata(path)
        .with_context(|| format!("stat {}", path.display()))?
        .len();
    let ours = |fs: &Arc<dyn FsProvider>| {
        let fs = fs.clone();
        move |n| {
            bench.runtime.block_on(time_each_async(n, || async {
                let read = fs
                    .read_bytes(path_text)
                    .await
                    .with_context(|| format!("read_bytes {path_text}"))?;
                let mut chunks = read.chunks;
                let mut total = 0u64;
                while let Some(chunk) = chunks.next().await {
                    let chunk =
                        chunk.with_context(|| format!("read_bytes {path_text}: next chunk"))?;
                    total += chunk.len() as u64;
                    black_box(chunk);
                }
                ensure!(
                    total == expected,
                    "read_bytes {path_text}: {total} bytes, expected {expected}"
                );
                Ok(())
            }))
        }
    };
    let mut contenders = [
        Contender::new("dsh read_bytes", ours(&providers.host)),
        Contender::new("in-process read_bytes", ours(&providers.local)),
        Contender::new("std File::read", |n| {
            let mut buf = vec![0u8; STREAM_READ];
            time_each(n, || {
                let mut file =
                    File::open(path).with_context(|| format!("open {}", path.display()))?;
                let mut total = 0u64;
                loop {
                    let read = file
                        .read(&mut buf)
                        .with_context(|| format!("read {}", path.display()))?;
                    if read == 0 {
                        break;
                    }
                    total += read as u64;
                    black_box(&buf[..read]);
                }
                ensure!(
                    total == expected,
                    "read {}: {total} bytes, expected {expected}",
                    path.display()
                );
                Ok(())
            })
        }),
    ];
    let [ours, local, peer] = interleave(plan, &mut contenders)?;
    Ok(Figure::timed(
        "read_bytes 64 MiB, streamed, vs std File::read",
        &ours,
        Some(&local),
        &peer,
        Target::RatioAtMost(1.15),
    ))
}

/// Two figures for writes of `content`: against `std::fs::write` and
/// against the same atomic protocol in plain std.
fn write(
    bench: &Bench,
    providers: &Providers,
    root: &Path,
    content: &[u8],
    size: &str,
    plan: Plan,
) -> Result<[Figure; 2]> {
    let target = |who: &str| root.join(format!("w-{who}-{}", size.replace(' ', "")));
    let (host_target, local_target, std_target, atomic_target) = (
        target("dsh"),
        target("local"),
        target("std"),
        target("atomic"),
    );
    let (host_text, local_text) = (
        utf8(&host_target)?.to_owned(),
        utf8(&local_target)?.to_owned(),
    );
    let ours = |fs: &Arc<dyn FsProvider>, path: String| {
        let fs = fs.clone();
        move |n| {
            // A `Bytes` over each owned `Vec` (no copy), made before the
            // timed region like the peers' buffers.
            let inputs: Vec<Bytes> = owned_copies(content, n)
                .into_iter()
                .map(Bytes::from)
                .collect();
            bench.runtime.block_on(async {
                let started = Instant::now();
                for input in inputs {
                    let version = fs
                        .write(&path, input, WriteGuard::Overwrite)
                        .await
                        .with_context(|| format!("write {path}"))?;
                    black_box(version);
                }
                Ok(started.elapsed())
            })
        }
    };
    let peer = |target: &Path, atomic: bool| {
        let target = target.to_path_buf();
        move |n| {
            let inputs = owned_copies(content, n);
            let started = Instant::now();
            for input in inputs {
                if atomic {
                    std_atomic_write(&target, input)?;
                } else {
                    std::fs::write(&target, input)
                        .with_context(|| format!("write {}", target.display()))?;
                }
            }
            Ok(started.elapsed())
        }
    };
    let mut contenders = [
        Contender::new("dsh write", ours(&providers.host, host_text)),
        Contender::new("in-process write", ours(&providers.local, local_text)),
        Contender::new("std::fs::write", peer(&std_target, false)),
        Contender::new("std atomic write", peer(&atomic_target, true)),
    ];
    let [ours, local, plain, atomic] = interleave(plan, &mut contenders)?;
    Ok([
        Figure::timed(
            format!("write {size} vs std::fs::write"),
            &ours,
            Some(&local),
            &plain,
            Target::RatioAtMost(1.15),
        ),
        Figure::timed(
            format!("write {size} vs the same atomic protocol in std"),
            &ours,
            Some(&local),
            &atomic,
            Target::RatioAtMost(1.15),
        ),
    ])
}

/// `n` owned copies of `content`, made before the timed region: the
/// contract takes the content by value, so a caller hands over a buffer it
/// already owns.
fn owned_copies(content: &[u8], n: usize) -> Vec<Vec<u8>> {
    (0..n).map(|_| content.to_vec()).collect()
}

/// fs-local's atomic write protocol in plain std: a new private file (mode
/// 0600) beside the target, the content written into it, the target
/// checked, the file given its final mode, renamed over the target, and
/// its metadata read (the version).
fn std_atomic_write(target: &Path, content: Vec<u8>) -> Result<()> {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let staged = target.with_file_name(format!(
        ".peer-stage-{}-{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    ));
    let mut file = OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&staged)
        .with_context(|| format!("create {}", staged.display()))?;
    file.write_all(&content)
        .with_context(|| format!("write {}", staged.display()))?;
    drop(content);
    black_box(std::fs::symlink_metadata(target).ok());
    file.set_permissions(Permissions::from_mode(0o644))
        .with_context(|| format!("chmod {}", staged.display()))?;
    std::fs::rename(&staged, target)
        .with_context(|| format!("rename {} to {}", staged.display(), target.display()))?;
    black_box(
        file.metadata()
            .with_context(|| format!("stat {}", target.display()))?,
    );
    Ok(())
}

fn utf8(path: &Path) -> Result<&str> {
    path.to_str()
        .with_context(|| format!("{} is not UTF-8", path.display()))
}
