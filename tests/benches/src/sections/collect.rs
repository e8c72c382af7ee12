//! Memory of collect mode: peak RSS of a fresh process while 1 GiB of
//! output passes through `subprocess` collect mode with a 1 MiB tail,
//! through the host — and the same at a quarter of the size, to show the
//! peak does not grow with the output.
//!
//! The peer is a fresh process reading the same output with
//! `tokio::process` into a 1 MiB ring buffer: the least memory a program
//! keeping that tail can use.

use std::time::{Duration, Instant};

use anyhow::{Context, Result, ensure};
use dsh_plugin_api::subprocess::{OutputMode, OutputStream, SpawnSpec, SubprocessProvider};

use super::producer::{producer_argv, tokio_drain};
use super::{Bench, host_runtime};
use crate::child::{self, ChildReport, ChildTask};
use crate::composition::LocalComposition;
use crate::figure::{Figure, Section, Target, Value};
use crate::memory;
use crate::stats::{Spread, paired_ratio};

const MIB: u64 = 1024 * 1024;
/// The tail kept in memory.
const TAIL: usize = 1024 * 1024;
/// Output run through once before the baseline, so code and buffers of the
/// path are resident before the measured run.
const WARM_UP_MIB: u64 = 4;
/// The RSS target of the largest run.
const RSS_TARGET: u64 = 32 * MIB;
/// "Flat": the larger run's peak over the smaller run's.
const FLAT_TARGET: f64 = 1.05;

/// One size's reports over the rounds, ours and the peer's.
#[derive(Default)]
struct Runs {
    ours: Vec<ChildReport>,
    peer: Vec<ChildReport>,
}

/// Measures the section.
pub fn measure(bench: &Bench) -> Result<Section> {
    let large = bench.pick(1024, 256) * MIB;
    let small = large / 4;
    let rounds = bench.pick(3, 1);
    let mut runs = [Runs::default(), Runs::default()];
    for round in 0..rounds {
        // Alternate which size and which side goes first.
        let mut order = [
            (0, small, false),
            (0, small, true),
            (1, large, false),
            (1, large, true),
        ];
        let len = order.len();
        order.rotate_left(round % len);
        for (index, bytes, peer) in order {
            let task = if peer {
                ChildTask::CollectPeer { bytes }
            } else {
                ChildTask::Collect { bytes }
            };
            let report = child::run(task)?;
            ensure!(
                report.bytes == bytes,
                "{task:?}: {} bytes went through, expected {bytes}",
                report.bytes
            );
            let side = if peer {
                &mut runs[index].peer
            } else {
                &mut runs[index].ours
            };
            side.push(report);
        }
    }
    let [small_runs, large_runs] = &runs;
    let peak = |reports: &[ChildReport]| values(reports, |report| report.peak_rss as f64);
    let elapsed = |reports: &[ChildReport]| values(reports, |report| report.elapsed_ns as f64);
    let growth = |reports: &[ChildReport]| {
        values(reports, |report| {
            report.peak_rss.saturating_sub(report.baseline_rss) as f64
        })
    };
    let median = |values: &[f64]| Spread::of(values).map_or(0.0, |spread| spread.median);
    let bytes = |value: f64| Value::Bytes(value as u64);
    let label = |bytes: u64| {
        if bytes >= 1024 * MIB {
            format!("{} GiB", bytes / (1024 * MIB))
        } else {
            format!("{} MiB", bytes / MIB)
        }
    };
    let figures = vec![
        Figure {
            label: format!("peak RSS, {} through collect (1 MiB tail)", label(large)),
            ours: bytes(median(&peak(&large_runs.ours))),
            in_process: None,
            peer: Some(bytes(median(&peak(&large_runs.peer)))),
            ratio: paired_ratio(&peak(&large_runs.ours), &peak(&large_runs.peer)),
            in_process_ratio: None,
            target: Target::AtMost(Value::Bytes(RSS_TARGET)),
        },
        Figure {
            label: format!("  of which growth during the {} run", label(large)),
            ours: bytes(median(&growth(&large_runs.ours))),
            in_process: None,
            peer: Some(bytes(median(&growth(&large_runs.peer)))),
            ratio: None,
            in_process_ratio: None,
            target: Target::None,
        },
        Figure {
            label: format!(
                "peak RSS, {} vs {} (flat in output size)",
                label(large),
                label(small)
            ),
            ours: bytes(median(&peak(&large_runs.ours))),
            in_process: None,
            peer: Some(bytes(median(&peak(&small_runs.ours)))),
            ratio: paired_ratio(&peak(&large_runs.ours), &peak(&small_runs.ours)),
            in_process_ratio: None,
            target: Target::RatioAtMost(FLAT_TARGET),
        },
        Figure {
            label: format!(
                "{} through collect, time vs tokio ring buffer",
                label(large)
            ),
            ours: Value::Time(Duration::from_nanos(
                median(&elapsed(&large_runs.ours)) as u64
            )),
            in_process: None,
            peer: Some(Value::Time(Duration::from_nanos(
                median(&elapsed(&large_runs.peer)) as u64,
            ))),
            ratio: paired_ratio(&elapsed(&large_runs.ours), &elapsed(&large_runs.peer)),
            in_process_ratio: None,
            target: Target::None,
        },
    ];
    Ok(Section {
        title: "collect — peak RSS of a fresh process, output through the host's subprocess in collect mode".into(),
        figures,
        notes: vec![
            format!(
                "each run is a fresh process: host started, {WARM_UP_MIB} MiB warm-up, baseline RSS, peak reset (/proc/self/clear_refs), then `{}`",
                producer_argv(large / MIB).join(" ")
            ),
            "peak = the kernel's high-water mark (VmHWM) of the whole process, plugins included; peer: tokio::process into a 1 MiB ring buffer".into(),
            format!("flat: the {} run's peak over the {} run's, paired by round (target ≤ {FLAT_TARGET:.2}x)", label(large), label(small)),
            format!("{rounds} round(s) per size and side"),
        ],
    })
}

fn values(reports: &[ChildReport], value: impl Fn(&ChildReport) -> f64) -> Vec<f64> {
    reports.iter().map(value).collect()
}

/// In a fresh child: `bytes` through collect mode via the host.
pub fn child_collect(bytes: u64) -> Result<ChildReport> {
    let mib = whole_mib(bytes)?;
    let composition = LocalComposition::locate()?;
    let runtime = host_runtime()?;
    runtime.block_on(async {
        let host = composition.start().await?;
        let subprocess = host.subprocess().context("the host's subprocess service")?;
        collect(subprocess.as_ref(), WARM_UP_MIB).await?;
        let baseline = memory::resident()?.now;
        memory::reset_peak()?;
        let started = Instant::now();
        let total = collect(subprocess.as_ref(), mib).await?;
        let elapsed = started.elapsed();
        let peak = memory::resident()?.peak;
        drop(subprocess);
        host.dispose()
            .await
            .context("dispose the local composition")?;
        Ok(ChildReport::new(elapsed, baseline, peak, total))
    })
}

/// Runs the producer of `mib` MiB with both outputs in collect mode and
/// checks what was kept: the total, the truncation flag and a full tail.
async fn collect(subprocess: &dyn SubprocessProvider, mib: u64) -> Result<u64> {
    let argv = producer_argv(mib);
    let command = argv.join(" ");
    let mut spec = SpawnSpec::new(argv);
    spec.stdout = OutputMode::Collect { limit: TAIL };
    spec.stderr = OutputMode::Collect { limit: TAIL };
    let process = subprocess
        .spawn(spec)
        .await
        .with_context(|| format!("spawn {command}"))?;
    let status = process
        .wait()
        .await
        .with_context(|| format!("wait for {command}"))?;
    ensure!(
        status.success(),
        "{command} exited unsuccessfully: {status:?}"
    );
    let summary = process
        .read_output(OutputStream::Stdout, 0, 0)
        .await
        .with_context(|| format!("read_output of {command}"))?;
    let expected = mib * MIB;
    ensure!(
        summary.total == expected,
        "{command}: {} bytes collected, expected {expected}",
        summary.total
    );
    ensure!(
        summary.truncated == (expected > TAIL as u64),
        "{command}: truncated is {} for {expected} bytes and a {TAIL}-byte tail",
        summary.truncated
    );
    Ok(summary.total)
}

/// In a fresh child: the peer reading `bytes` into a 1 MiB ring buffer.
pub fn child_collect_peer(bytes: u64) -> Result<ChildReport> {
    let mib = whole_mib(bytes)?;
    let runtime = host_runtime()?;
    runtime.block_on(async {
        tokio_tail(WARM_UP_MIB).await?;
        let baseline = memory::resident()?.now;
        memory::reset_peak()?;
        let started = Instant::now();
        let total = tokio_tail(mib).await?;
        let elapsed = started.elapsed();
        let peak = memory::resident()?.peak;
        Ok(ChildReport::new(elapsed, baseline, peak, total))
    })
}

/// The peer's run: the producer's output kept as a 1 MiB ring buffer.
async fn tokio_tail(mib: u64) -> Result<u64> {
    let mut ring = vec![0u8; TAIL];
    let mut at = 0usize;
    let total = tokio_drain(mib, |chunk| {
        // Copy into the ring at the running offset, wrapping once at most
        // (a read is never larger than the ring).
        let first = chunk.len().min(TAIL - at);
        ring[at..at + first].copy_from_slice(&chunk[..first]);
        ring[..chunk.len() - first].copy_from_slice(&chunk[first..]);
        at = (at + chunk.len()) % TAIL;
    })
    .await?;
    std::hint::black_box(&ring);
    Ok(total)
}

fn whole_mib(bytes: u64) -> Result<u64> {
    ensure!(
        bytes > 0 && bytes.is_multiple_of(MIB),
        "collect: {bytes} bytes is not a positive whole number of MiB"
    );
    Ok(bytes / MIB)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_must_be_whole_mebibytes() {
        assert_eq!(whole_mib(3 * MIB).expect("whole"), 3);
        for bad in [0, MIB + 1] {
            let err = whole_mib(bad).expect_err("not whole");
            assert_eq!(
                err.to_string(),
                format!("collect: {bad} bytes is not a positive whole number of MiB")
            );
        }
    }
}
