//! The final table: every section's figures, ratios, targets and verdicts.

use std::fmt::Write;

use crate::figure::{Section, Value, Verdict};
use crate::stats::Spread;

const VALUE: usize = 11;
const RATIO: usize = 21;
const TARGET: usize = 11;

/// What the value columns are called.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Headings {
    pub ours: &'static str,
    pub in_process: &'static str,
    pub peer: &'static str,
    pub ratio: &'static str,
    pub in_process_ratio: &'static str,
}

impl Headings {
    /// The foundation benchmark's columns.
    pub const FOUNDATION: Headings = Headings {
        ours: "dsh (host)",
        in_process: "in-process",
        peer: "peer",
        ratio: "dsh/peer [p25-p75]",
        in_process_ratio: "in-proc/peer",
    };
}

/// Renders `sections` as a plain-text table (one block per section, its
/// notes under it) followed by a count of met and missed targets. The
/// in-process columns appear only if some figure has an in-process value.
pub fn render(sections: &[Section], headings: Headings) -> String {
    let figures = || sections.iter().flat_map(|section| &section.figures);
    let label = figures()
        .map(|figure| figure.label.chars().count() + 2)
        .chain([6])
        .max()
        .unwrap_or(6);
    let in_process = figures().any(|figure| figure.in_process.is_some());
    let layout = Layout { label, in_process };
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{}",
        layout.line(
            "figure",
            [headings.ours, headings.in_process, headings.peer],
            [headings.ratio, headings.in_process_ratio],
            "target",
            "verdict"
        )
    );
    let rule = "-".repeat(out.trim_end().chars().count());
    let (mut met, mut missed) = (0, 0);
    for section in sections {
        let _ = writeln!(out, "{rule}");
        let _ = writeln!(out, "{}", section.title);
        for figure in &section.figures {
            let verdict = figure.verdict();
            match verdict {
                Verdict::Met => met += 1,
                Verdict::Missed => missed += 1,
                Verdict::Informational => {}
            }
            let row = layout.line(
                &format!("  {}", figure.label),
                [
                    &figure.ours.to_string(),
                    &optional(figure.in_process),
                    &optional(figure.peer),
                ],
                [&spread(figure.ratio), &spread(figure.in_process_ratio)],
                &figure.target.to_string(),
                &verdict.to_string(),
            );
            let _ = writeln!(out, "{}", row.trim_end());
        }
        for note in &section.notes {
            let _ = writeln!(out, "  note: {note}");
        }
    }
    let _ = writeln!(out, "{rule}");
    let _ = writeln!(out, "targets met: {met}, missed: {missed}");
    out
}

/// Column widths of one table.
struct Layout {
    label: usize,
    in_process: bool,
}

impl Layout {
    fn line(
        &self,
        label: &str,
        values: [&str; 3],
        ratios: [&str; 2],
        target: &str,
        verdict: &str,
    ) -> String {
        let [ours, in_process, peer] = values;
        let [ratio, in_process_ratio] = ratios;
        let width = self.label;
        let mut line = format!("{label:<width$} {ours:>VALUE$}");
        if self.in_process {
            let _ = write!(line, " {in_process:>VALUE$}");
        }
        let _ = write!(line, " {peer:>VALUE$} {ratio:>RATIO$}");
        if self.in_process {
            let _ = write!(line, " {in_process_ratio:>RATIO$}");
        }
        let _ = write!(line, " {target:>TARGET$} {verdict}");
        line
    }
}

fn optional(value: Option<Value>) -> String {
    value.map_or_else(|| "—".to_owned(), |value| value.to_string())
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
    use crate::figure::{Figure, Target};
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
        let table = render(&sections, Headings::FOUNDATION);
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
        let header = lines[0];
        let ratio_column = header.find("dsh/peer").expect("ratio heading");
        let ratio_cell = read.find("1.200x").expect("ratio cell");
        assert!(
            ratio_cell <= ratio_column + 20,
            "columns line up:\n{header}\n{read}"
        );
    }

    #[test]
    fn without_in_process_values_those_columns_are_left_out() {
        let peer = samples(&[100, 100]);
        let sections = vec![Section {
            title: "prototype".into(),
            figures: vec![Figure::timed(
                "a",
                &samples(&[50, 50]),
                None,
                &peer,
                Target::None,
            )],
            notes: vec![],
        }];
        let headings = Headings {
            ours: "measured",
            in_process: "unused",
            peer: "baseline",
            ratio: "ratio",
            in_process_ratio: "unused",
        };
        let table = render(&sections, headings);
        assert!(!table.contains("unused"), "{table}");
        assert!(
            table.lines().next().expect("header").contains("baseline"),
            "{table}"
        );
        let row = table
            .lines()
            .find(|line| line.starts_with("  a"))
            .expect("row");
        assert!(
            row.contains("0.500x") && row.trim_end().ends_with("—"),
            "{row:?}"
        );
    }
}
