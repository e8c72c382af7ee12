//! The table: medians per client, each with its ratio against each peer
//! and the target.

use std::time::Duration;

use crate::ours::Wrappers;
use crate::{Figures, Plan};

fn median(samples: &[Duration]) -> Duration {
    let mut sorted = samples.to_vec();
    sorted.sort_unstable();
    sorted.get(sorted.len() / 2).copied().unwrap_or_default()
}

fn ms(duration: Duration) -> f64 {
    duration.as_secs_f64() * 1000.0
}

fn mib(bytes: u64) -> f64 {
    bytes as f64 / f64::from(1u32 << 20)
}

#[derive(Clone, Copy)]
enum Better {
    Lower,
    Higher,
}

/// By how much ours beats `peer` (> 1: ours is better).
fn advantage(ours: f64, peer: f64, better: Better) -> f64 {
    match better {
        Better::Lower => peer / ours,
        Better::Higher => ours / peer,
    }
}

pub fn print(plan: &Plan, dsh: &Figures, js: &Figures, python: &Figures, wrappers: &Wrappers) {
    let throughput = |f: &Figures| mib(plan.throughput_bytes) / median(&f.throughput).as_secs_f64();
    let rows: Vec<(String, Better, [f64; 3], &str)> = vec![
        (
            format!("`true` round trip, median (ms, n={})", plan.iterations),
            Better::Lower,
            [dsh, js, python].map(|f| ms(median(&f.round_trip))),
            "<= 0.8x js (>= 1.25 here)",
        ),
        (
            format!(
                "{} MiB of stdout (MiB/s, median of {})",
                plan.throughput_bytes >> 20,
                plan.runs
            ),
            Better::Higher,
            [dsh, js, python].map(throughput),
            ">= 3x js",
        ),
        (
            format!(
                "{} concurrent commands, wall median (ms, {} rounds)",
                plan.concurrent, plan.rounds
            ),
            Better::Lower,
            [dsh, js, python].map(|f| ms(median(&f.concurrent))),
            ">= 2x faster than js",
        ),
        (
            format!(
                "peak RSS, {} MiB through collect (MiB)",
                plan.collect_bytes >> 20
            ),
            Better::Lower,
            [dsh, js, python].map(|f| mib(f.collect_rss)),
            "dsh <= 64 MiB, flat",
        ),
    ];
    println!();
    println!(
        "{:<52} {:>12} {:>14} {:>15} {:>8} {:>8}  target",
        "figure", "dsh", "js e2b@2.51.0", "py e2b==2.63.0", "vs js", "vs py"
    );
    for (name, better, [ours, js, py], target) in rows {
        println!(
            "{name:<52} {ours:>12.2} {js:>14.2} {py:>15.2} {:>7.2}x {:>7.2}x  {target}",
            advantage(ours, js, better),
            advantage(ours, py, better),
        );
    }
    for (client, figures) in [("dsh", dsh), ("js", js), ("python", python)] {
        if let Some(error) = &figures.collect_error {
            println!("  collect run of {client} did not complete: {error}");
        }
    }
    println!(
        "\"vs\": how many times better dsh is (peer/ours for times and memory, ours/peer for throughput); > 1 favours dsh."
    );
    println!();
    println!(
        "wrapper choice (docs/design.md §6), `true` started as root through envd, median of {} (ms):",
        plan.iterations
    );
    println!(
        "  (a) shell wrapper `bash -c 'setsid -w true; echo $?'`: {:.2}",
        ms(median(&wrappers.shell))
    );
    println!(
        "  (b) dsh-supervisor (the provider's spawn + wait):      {:.2}   ({:.2}x)",
        ms(median(&wrappers.helper)),
        ms(median(&wrappers.shell)) / ms(median(&wrappers.helper))
    );
}
