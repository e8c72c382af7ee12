//! The final table: every section's figures, ratios, targets and verdicts.

use std::fmt::Write;

use crate::figure::{Figure, Section, Verdict};
use crate::stats::Spread;

const LABEL: usize = 50;
const VALUE: usize = 11;
const RATIO: usize = 21;

/// Renders `sections` as a plain-text table (one block per section, its
/// notes under it) followed by a count of met and missed targets.
pub fn render(sections: &[Section]) -> String {
    let mut out = String::new();
    let rule = "-".repeat(LABEL + 3 * (VALUE + 1) + 2 * (RATIO + 1) + 20);
    let _ = writeln!(
        out,
        "{:<LABEL$} {:>VALUE$} {:>VALUE$} {:>VALUE$} {:>RATIO$} {:>RATIO$} {:>9} verdict",
        "figure",
        "dsh (host)",
        "in-process",
        "peer",
        "dsh/peer [p25-p75]",
        "in-proc/peer",
        "target",
    );
    let (mut met, mut missed) = (0, 0);
    for section in sections {
        let _ = writeln!(out, "{rule}");
        let _ = writeln!(out, "{}", section.title);
        for figure in &section.figures {
            match figure.verdict() {
                Verdict::Met => met += 1,
                Verdict::Missed => missed += 1,
                Verdict::Informational => {}
            }
            let _ = writeln!(out, "{}", row(figure));
        }
        for note in &section.notes {
            let _ = writeln!(out, "  note: {note}");
        }
    }
    let _ = writeln!(out, "{rule}");
    let _ = writeln!(out, "targets met: {met}, missed: {missed}");
    out
}

fn row(figure: &Figure) -> String {
    let optional = |value: Option<crate::figure::Value>| {
        value.map_or_else(|| "—".to_owned(), |value| value.to_string())
    };
    format!(
        "  {:<width$} {:>VALUE$} {:>VALUE$} {:>VALUE$} {:>RATIO$} {:>RATIO$} {:>9} {}",
        figure.label,
        figure.ours.to_string(),
        optional(figure.in_process),
        optional(figure.peer),
        spread(figure.ratio),
        spread(figure.in_process_ratio),
        figure.target.to_string(),
        figure.verdict(),
        width = LABEL - 2,
    )
}

fn spread(spread: Option<Spread>) -> String {
    match spread {
        Some(spread) => format!(
            "{:.3}x [{:.2}-{:.2}]",
            spread.median, spread.p25, spread.p75
        ),
        None => "—".to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::figure::{Target, Value};
    use crate::stats::Samples;

    fn samples(micros: &[u64]) -> Samples {
        let mut samples = Samples::default();
        for &value in micros {
            samples.push(Duration::from_micros(value), 1);
        }
        samples
    }

    #[test]
    fn the_table_shows_values_ratios_targets_verdicts_and_a_count() {
        let peer = samples(&[100, 100, 100]);
        let sections = vec![Section {
            title: "fs".into(),
            figures: vec![
                Figure::timed(
                    "read_text 1 KiB vs std::fs::read_to_string",
                    &samples(&[120, 120, 120]),
                    Some(&samples(&[105, 105, 105])),
                    &peer,
                    Target::RatioAtMost(1.15),
                ),
                Figure {
                    label: "peak RSS".into(),
                    ours: Value::Bytes(10 << 20),
                    in_process: None,
                    peer: None,
                    ratio: None,
                    in_process_ratio: None,
                    target: Target::AtMost(Value::Bytes(32 << 20)),
                },
            ],
            notes: vec!["on ext4".into()],
        }];
        let table = render(&sections);
        let lines: Vec<&str> = table.lines().collect();
        assert!(lines[0].starts_with("figure"), "{table}");
        let read = lines
            .iter()
            .find(|line| line.contains("read_text 1 KiB"))
            .expect("row");
        for expected in [
            "120.0 µs",
            "105.0 µs",
            "100.0 µs",
            "1.200x [1.20-1.20]",
            "1.050x",
            "≤ 1.15x",
            "MISSED",
        ] {
            assert!(
                read.contains(expected),
                "{expected:?} missing from {read:?}"
            );
        }
        let rss = lines
            .iter()
            .find(|line| line.contains("peak RSS"))
            .expect("row");
        assert!(
            rss.contains("10.00 MiB") && rss.contains("≤ 32.00 MiB") && rss.ends_with("met"),
            "{rss:?}"
        );
        assert!(table.contains("  note: on ext4"));
        assert!(
            table.trim_end().ends_with("targets met: 1, missed: 1"),
            "{table}"
        );
    }
}
