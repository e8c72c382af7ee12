//! The table: medians per client, each with its ratio against each peer;
//! then the 64 MiB transfers' ratios paired per round, with the targets.

use std::time::Duration;

use crate::{Figures, LARGE, Plan};

fn median(samples: &[Duration]) -> Duration {
    let mut sorted = samples.to_vec();
    sorted.sort_unstable();
    sorted.get(sorted.len() / 2).copied().unwrap_or_default()
}

/// The median and quartiles of the peer's time over ours, round by round
/// (> 1 favours ours).
fn paired(ours: &[Duration], peer: &[Duration]) -> [f64; 3] {
    let mut ratios: Vec<f64> = ours
        .iter()
        .zip(peer)
        .map(|(ours, peer)| peer.as_secs_f64() / ours.as_secs_f64())
        .collect();
    ratios.sort_unstable_by(f64::total_cmp);
    let at = |q: f64| ratios[((ratios.len() - 1) as f64 * q).round() as usize];
    [at(0.5), at(0.25), at(0.75)]
}

fn ms(duration: Duration) -> f64 {
    duration.as_secs_f64() * 1000.0
}

fn mib_per_s(samples: &[Duration]) -> f64 {
    (LARGE as f64 / (1 << 20) as f64) / median(samples).as_secs_f64()
}

fn mib(bytes: u64) -> f64 {
    bytes as f64 / (1 << 20) as f64
}

/// How a figure compares: `LowerIsBetter` (latency, memory) or
/// `HigherIsBetter` (throughput).
#[derive(Clone, Copy)]
enum Better {
    Lower,
    Higher,
}

/// The factor by which ours is better than the peer (> 1: ours is better).
fn advantage(ours: f64, peer: f64, better: Better) -> f64 {
    match better {
        Better::Lower => peer / ours,
        Better::Higher => ours / peer,
    }
}

pub fn print(plan: &Plan, dsh: &Figures, js: &Figures, python: &Figures) {
    let huge = format!("peak RSS streaming {} MiB (MiB)", plan.huge_len >> 20);
    let rows: Vec<(String, Better, [f64; 3])> = vec![
        (
            format!("stat median (ms, n={})", plan.iterations),
            Better::Lower,
            [dsh, js, python].map(|f| ms(median(&f.stat))),
        ),
        (
            "read 1 KiB median (ms)".to_owned(),
            Better::Lower,
            [dsh, js, python].map(|f| ms(median(&f.read_small))),
        ),
        (
            "read_text 1 KiB, helper running (ms)".to_owned(),
            Better::Lower,
            [
                ms(median(&dsh.read_text_native)),
                ms(median(&js.read_small)),
                ms(median(&python.read_small)),
            ],
        ),
        (
            "write 1 KiB median (ms)".to_owned(),
            Better::Lower,
            [dsh, js, python].map(|f| ms(median(&f.write_small))),
        ),
        (
            "write 1 KiB, helper running (ms)".to_owned(),
            Better::Lower,
            [
                ms(median(&dsh.write_native)),
                ms(median(&js.write_small)),
                ms(median(&python.write_small)),
            ],
        ),
        (
            "edit 1 KiB median (ms; SDKs: read + write)".to_owned(),
            Better::Lower,
            [dsh, js, python].map(|f| ms(median(&f.edit_small))),
        ),
        (
            "edit 1 KiB, helper running (ms; SDKs: read + write)".to_owned(),
            Better::Lower,
            [
                ms(median(&dsh.edit_native)),
                ms(median(&js.edit_small)),
                ms(median(&python.edit_small)),
            ],
        ),
        (
            format!("read 64 MiB (MiB/s, median of {})", plan.runs),
            Better::Higher,
            [dsh, js, python].map(|f| mib_per_s(&f.read_large)),
        ),
        (
            format!("write 64 MiB (MiB/s, median of {})", plan.runs),
            Better::Higher,
            [dsh, js, python].map(|f| mib_per_s(&f.write_large)),
        ),
        (
            "peak RSS streaming 64 MiB (MiB)".to_owned(),
            Better::Lower,
            [dsh, js, python].map(|f| mib(f.rss_large)),
        ),
        (
            huge,
            Better::Lower,
            [dsh, js, python].map(|f| mib(f.rss_huge)),
        ),
    ];
    println!();
    println!(
        "{:<52} {:>11} {:>14} {:>18} {:>9} {:>9}",
        "figure", "dsh-fs-e2b", "js e2b@2.51.0", "py e2b==2.63.0", "vs js", "vs py"
    );
    for (name, better, [ours, js, py]) in rows {
        println!(
            "{name:<52} {ours:>11.2} {js:>14.2} {py:>18.2} {:>8.2}x {:>8.2}x",
            advantage(ours, js, better),
            advantage(ours, py, better),
        );
    }
    println!();
    println!(
        "\"vs\" columns: how many times better dsh-fs-e2b is (peer/ours for times and memory, ours/peer for throughput); > 1 favours dsh."
    );
    println!();
    println!(
        "64 MiB transfers paired per round ({} interleaved rounds; peer's time / dsh-fs-e2b's, median [p25-p75]):",
        plan.runs
    );
    // The targets: issue 28 (write ≥ 1× Python and ≥ 3× JS); reads have none.
    let rows = [
        (
            "read ",
            &dsh.read_large,
            &js.read_large,
            &python.read_large,
            None,
        ),
        (
            "write",
            &dsh.write_large,
            &js.write_large,
            &python.write_large,
            Some((3.0, 1.0)),
        ),
    ];
    for (name, ours, js, py, targets) in rows {
        let [js_median, js_low, js_high] = paired(ours, js);
        let [py_median, py_low, py_high] = paired(ours, py);
        let verdict = |ratio: f64, target: Option<f64>| match target {
            Some(target) if ratio >= target => format!(" (target >= {target}x: met)"),
            Some(target) => format!(" (target >= {target}x: MISSED)"),
            None => String::new(),
        };
        println!(
            "  {name}  vs js {js_median:.2}x [{js_low:.2}-{js_high:.2}]{}   vs py {py_median:.2}x [{py_low:.2}-{py_high:.2}]{}",
            verdict(js_median, targets.map(|(js, _)| js)),
            verdict(py_median, targets.map(|(_, py)| py)),
        );
    }
}
