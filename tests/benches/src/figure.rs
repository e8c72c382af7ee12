//! One measured figure: our value through the host, the peer's, their
//! ratio, and the target it is held to.

use std::fmt;
use std::time::Duration;

use crate::stats::{Samples, Spread};

/// A measured quantity.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Value {
    /// Time per operation.
    Time(Duration),
    /// A memory size in bytes.
    Bytes(u64),
}

impl Value {
    fn magnitude(self) -> f64 {
        match self {
            Value::Time(time) => time.as_secs_f64(),
            Value::Bytes(bytes) => bytes as f64,
        }
    }
}

impl fmt::Display for Value {
    /// Human units: `ns`/`µs`/`ms`/`s` for times, `KiB`/`MiB`/`GiB` for
    /// sizes, four significant figures at most.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (value, unit) = match *self {
            Value::Time(time) => {
                let seconds = time.as_secs_f64();
                if seconds < 1e-6 {
                    (seconds * 1e9, "ns")
                } else if seconds < 1e-3 {
                    (seconds * 1e6, "µs")
                } else if seconds < 1.0 {
                    (seconds * 1e3, "ms")
                } else {
                    (seconds, "s")
                }
            }
            Value::Bytes(bytes) => {
                let bytes = bytes as f64;
                if bytes < 1024.0 * 1024.0 {
                    (bytes / 1024.0, "KiB")
                } else if bytes < 1024.0 * 1024.0 * 1024.0 {
                    (bytes / (1024.0 * 1024.0), "MiB")
                } else {
                    (bytes / (1024.0 * 1024.0 * 1024.0), "GiB")
                }
            }
        };
        let decimals = if value >= 100.0 {
            1
        } else if value >= 10.0 {
            2
        } else {
            3
        };
        let text = format!("{value:.decimals$} {unit}");
        f.pad(&text)
    }
}

/// What a figure is held to.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Target {
    /// The median paired ratio against the peer must not exceed this.
    RatioAtMost(f64),
    /// Our value must not exceed this.
    AtMost(Value),
    /// Shown for explanation only.
    None,
}

impl fmt::Display for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let text = match self {
            Target::RatioAtMost(ratio) => format!("≤ {ratio:.2}x"),
            Target::AtMost(value) => format!("≤ {value}"),
            Target::None => "—".to_owned(),
        };
        f.pad(&text)
    }
}

/// Whether a figure meets its target.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    Met,
    Missed,
    /// No target (or nothing to hold it against).
    Informational,
}

impl fmt::Display for Verdict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad(match self {
            Verdict::Met => "met",
            Verdict::Missed => "MISSED",
            Verdict::Informational => "",
        })
    }
}

/// One row of the final table.
#[derive(Debug, Clone, PartialEq)]
pub struct Figure {
    /// What was measured, naming the peer (`read_text 1 KiB vs
    /// std::fs::read_to_string`).
    pub label: String,
    /// The plugin loaded through the host: what users get.
    pub ours: Value,
    /// The same provider linked in-process (no ABI crossing), when
    /// measured: the difference to `ours` is what the ABI costs.
    pub in_process: Option<Value>,
    /// The raw peer.
    pub peer: Option<Value>,
    /// `ours / peer`, paired per round.
    pub ratio: Option<Spread>,
    /// `in_process / peer`, paired per round.
    pub in_process_ratio: Option<Spread>,
    pub target: Target,
}

impl Figure {
    /// A timed comparison from per-round samples: ours (through the host),
    /// optionally the in-process provider, and the peer.
    pub fn timed(
        label: impl Into<String>,
        ours: &Samples,
        in_process: Option<&Samples>,
        peer: &Samples,
        target: Target,
    ) -> Figure {
        Figure {
            label: label.into(),
            ours: Value::Time(ours.median()),
            in_process: in_process.map(|samples| Value::Time(samples.median())),
            peer: Some(Value::Time(peer.median())),
            ratio: ours.ratio_to(peer),
            in_process_ratio: in_process.and_then(|samples| samples.ratio_to(peer)),
            target,
        }
    }

    /// Whether the figure meets its target.
    pub fn verdict(&self) -> Verdict {
        let met = match self.target {
            Target::RatioAtMost(limit) => match self.ratio {
                Some(ratio) => ratio.median <= limit,
                None => return Verdict::Informational,
            },
            Target::AtMost(limit) => self.ours.magnitude() <= limit.magnitude(),
            Target::None => return Verdict::Informational,
        };
        if met { Verdict::Met } else { Verdict::Missed }
    }
}

/// A titled group of figures, with notes printed under it.
#[derive(Debug, Clone, PartialEq)]
pub struct Section {
    pub title: String,
    pub figures: Vec<Figure>,
    pub notes: Vec<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn samples(micros: &[u64]) -> Samples {
        let mut samples = Samples::default();
        for &value in micros {
            samples.push(Duration::from_micros(value), 1);
        }
        samples
    }

    #[test]
    fn values_print_in_human_units() {
        assert_eq!(
            Value::Time(Duration::from_nanos(850)).to_string(),
            "850.0 ns"
        );
        assert_eq!(
            Value::Time(Duration::from_micros(12)).to_string(),
            "12.00 µs"
        );
        assert_eq!(
            Value::Time(Duration::from_millis(3)).to_string(),
            "3.000 ms"
        );
        assert_eq!(Value::Time(Duration::from_secs(2)).to_string(), "2.000 s");
        assert_eq!(Value::Bytes(512).to_string(), "0.500 KiB");
        assert_eq!(Value::Bytes(32 << 20).to_string(), "32.00 MiB");
        assert_eq!(Value::Bytes(3 << 30).to_string(), "3.000 GiB");
        assert_eq!(format!("{:>10}", Value::Bytes(1 << 20)), " 1.000 MiB");
    }

    #[test]
    fn ratio_targets_hold_the_paired_median() {
        let peer = samples(&[100, 100, 100]);
        let fast = Figure::timed(
            "x",
            &samples(&[110, 112, 300]),
            None,
            &peer,
            Target::RatioAtMost(1.15),
        );
        assert_eq!(fast.verdict(), Verdict::Met);
        let slow = Figure::timed(
            "x",
            &samples(&[120, 130, 90]),
            None,
            &peer,
            Target::RatioAtMost(1.15),
        );
        assert_eq!(slow.verdict(), Verdict::Missed);
        assert_eq!(slow.in_process, None);
    }

    #[test]
    fn absolute_targets_hold_our_value() {
        let figure = |ours| Figure {
            label: "peak RSS".into(),
            ours: Value::Bytes(ours),
            in_process: None,
            peer: None,
            ratio: None,
            in_process_ratio: None,
            target: Target::AtMost(Value::Bytes(32 << 20)),
        };
        assert_eq!(figure(31 << 20).verdict(), Verdict::Met);
        assert_eq!(figure(33 << 20).verdict(), Verdict::Missed);
    }

    #[test]
    fn a_ratio_target_without_a_ratio_or_no_target_is_informational() {
        let mut figure = Figure::timed(
            "x",
            &samples(&[1, 2]),
            None,
            &samples(&[1]),
            Target::RatioAtMost(1.0),
        );
        assert_eq!(figure.ratio, None, "unpaired rounds give no ratio");
        assert_eq!(figure.verdict(), Verdict::Informational);
        figure.target = Target::None;
        assert_eq!(figure.verdict(), Verdict::Informational);
    }
}
