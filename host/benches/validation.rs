//! Validation time against the number of manifest entries: a manifest of
//! n entries parsed and validated (libraries resolved and opened, every
//! config checked, the graph planned; nothing created) at 10,000 and 20,000
//! entries. The figure is the ratio of the two: 2x is linear, 4x quadratic
//! (issue 23: 12.4 s at 20,000 entries before the graph stopped rescanning).
//!
//! Two shapes:
//! - a valid chain: `dsh-fs-local` under 19,999 read-only decorators, each
//!   injecting the `fs` of the one before it;
//! - an invalid one: base/decorator pairs (every decorator left unconsumed)
//!   and consumers choosing among all of them, one problem per consumer.
//!
//! Run: `cargo bench -p dsh-host --bench validation` after
//! `cargo build --release -p dsh-fs-local -p dsh-example-fs-readonly` (the
//! libraries of the benchmark's profile are used; set DSH_PLUGIN_PATH to
//! choose). Target: 20,000 entries in under 1 s, and linear.

use std::time::{Duration, Instant};

use dsh_host::{Composition, HostError, Manifest, ManifestFormat, SearchPath};

mod common;

const ROUNDS: usize = 3;
const SIZES: [usize; 2] = [10_000, 20_000];

fn main() {
    let search = common::search_path();
    println!(
        "validation time by entries ({ROUNDS} rounds, median; parse + validate, nothing created):"
    );
    let mut met = true;
    for (shape, manifest) in [
        ("valid chain", chain as fn(usize) -> String),
        ("invalid", invalid),
    ] {
        let texts = SIZES.map(manifest);
        let [small, large] = [0, 1].map(|at| measure(&texts[at], &search));
        let ratio = large.as_secs_f64() / small.as_secs_f64();
        met &= ratio < 3.0 && large < Duration::from_secs(1);
        println!(
            "  {shape:<12} {:>6} entries {:>9.1} ms ({} KiB)   {:>6} entries {:>9.1} ms ({} KiB)   ratio {ratio:.2}x",
            SIZES[0],
            ms(small),
            texts[0].len() >> 10,
            SIZES[1],
            ms(large),
            texts[1].len() >> 10,
        );
    }
    println!(
        "  target 20,000 entries < 1 s and 20k/10k < 3x: {}",
        if met { "met" } else { "NOT met" }
    );
}

/// `dsh-fs-local` under n-1 read-only decorators, each over the previous.
fn chain(n: usize) -> String {
    let mut text = String::from("plugins:\n- {id: e0, name: dsh-fs-local}\n");
    for index in 1..n {
        let below = index - 1;
        text.push_str(&format!(
            "- {{id: e{index}, name: dsh-example-fs-readonly, inject: {{fs: e{below}}}}}\n"
        ));
    }
    text
}

/// Pairs of a base and a decorator bound to it (each decorator unconsumed:
/// which one is served is ambiguous), then as many decorators left to
/// choose among every `fs` provider (each ambiguous).
fn invalid(n: usize) -> String {
    let mut text = String::from("plugins:\n");
    for pair in 0..n / 4 {
        text.push_str(&format!(
            "- {{id: b{pair}, name: dsh-fs-local}}\n- {{id: r{pair}, name: dsh-example-fs-readonly, inject: {{fs: b{pair}}}}}\n"
        ));
    }
    for user in 0..n / 2 {
        text.push_str(&format!(
            "- {{id: u{user}, name: dsh-example-fs-readonly}}\n"
        ));
    }
    text
}

/// The median time from manifest text to a validated composition (or its
/// refusal: the invalid shape must be refused, the valid one accepted).
fn measure(text: &str, search: &SearchPath) -> Duration {
    let mut samples: Vec<Duration> = (0..ROUNDS)
        .map(|_| {
            let started = Instant::now();
            let outcome = Manifest::parse(text, ManifestFormat::Yaml, "bench.yaml", None)
                .map_err(HostError::from)
                .and_then(|manifest| Composition::from_manifest(&manifest, search));
            let elapsed = started.elapsed();
            match outcome {
                Ok(composition) => assert!(
                    composition
                        .served(dsh_plugin_api::ServiceKind::Fs)
                        .is_some()
                ),
                Err(HostError::Invalid(invalid)) => assert!(!invalid.errors.is_empty()),
                Err(err) => panic!("validation bench: {err}"),
            }
            elapsed
        })
        .collect();
    samples.sort();
    samples[samples.len() / 2]
}

fn ms(duration: Duration) -> f64 {
    duration.as_secs_f64() * 1000.0
}
