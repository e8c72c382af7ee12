//! The command line: how long, how many sandboxes, how hostile, and which binaries.

use std::path::PathBuf;
use std::time::Duration;

use clap::Parser;

/// `dsh-soak [OPTIONS]`.
#[derive(Debug, Clone, Parser)]
#[command(
    name = "dsh-soak",
    about = "Soak the E2B composition against a private e2b-local on loopback: concurrent \
             sandboxes, mixed commands, terminals and file operations, random SIGKILLs; then \
             count what is left and compare e2b-local's memory with its size after warm-up.",
    long_about = None
)]
pub struct Args {
    /// How long operations are started, warm-up included (`30m`, `40s`, `1h30m`, `500ms`).
    #[arg(long, default_value = "30m", value_parser = parse_duration)]
    pub duration: Duration,

    /// Concurrent workers, each owning one sandbox at a time.
    #[arg(long, default_value_t = 20, value_parser = clap::value_parser!(u32).range(1..=200))]
    pub sandboxes: u32,

    /// Seed of every random choice (default: from the clock; printed either way).
    #[arg(long)]
    pub seed: Option<u64>,

    /// The first part of the run after which e2b-local's RSS is the baseline (under this load
    /// e2b-local's RSS climbs for its first 4-5 minutes, then levels off).
    #[arg(long, default_value = "5m", value_parser = parse_duration)]
    pub warm_up: Duration,

    /// The `dsh` binary (default: `dsh` next to this program); its plugins are looked up in its
    /// directory.
    #[arg(long)]
    pub dsh: Option<PathBuf>,

    /// The `e2b-local` binary (default: `e2b-local` next to this program).
    #[arg(long)]
    pub e2b_local: Option<PathBuf>,

    /// `timeoutMs` of every sandbox: how long one abandoned by a killed `dsh` lives on.
    #[arg(long, default_value = "60s", value_parser = parse_duration)]
    pub sandbox_timeout: Duration,

    /// Chance that an operation's `dsh` process is SIGKILLed midway (0 to 1).
    #[arg(long, default_value_t = 0.08, value_parser = parse_probability)]
    pub kill_rate: f64,

    /// The longest one `dsh` invocation may take before it counts as hung (and is killed).
    #[arg(long, default_value = "120s", value_parser = parse_duration)]
    pub op_timeout: Duration,

    /// Largest accepted ratio of e2b-local's RSS at the end to its RSS after warm-up.
    #[arg(long, default_value_t = 1.2)]
    pub max_rss_ratio: f64,

    /// Leave out of the mix the `dsh`s started at the same moment on one sandbox (each
    /// installs its helper while the other starts: an owner's start must not sweep the state
    /// of an owner running now).
    #[arg(long)]
    pub no_concurrent_starts: bool,

    /// e2b-local's log filter (its log goes to this program's stderr).
    #[arg(long, default_value = "e2b_local=warn")]
    pub server_log: String,
}

impl Args {
    /// Checks what clap cannot: the warm-up ends before the run does, and the sandbox timeout
    /// is a whole number of seconds the API can carry.
    pub fn validate(&self) -> Result<(), String> {
        if self.warm_up >= self.duration {
            return Err(format!(
                "--warm-up {} must be shorter than --duration {}",
                show(self.warm_up),
                show(self.duration)
            ));
        }
        if self.sandbox_timeout < Duration::from_secs(5) || self.sandbox_timeout.subsec_nanos() != 0
        {
            return Err(format!(
                "--sandbox-timeout {} must be whole seconds, at least 5 s",
                show(self.sandbox_timeout)
            ));
        }
        if self.op_timeout < Duration::from_secs(5) {
            return Err(format!(
                "--op-timeout {} must be at least 5 s",
                show(self.op_timeout)
            ));
        }
        if self.max_rss_ratio.is_nan() || self.max_rss_ratio < 1.0 {
            return Err(format!(
                "--max-rss-ratio {} must be at least 1",
                self.max_rss_ratio
            ));
        }
        Ok(())
    }
}

/// Parses `<number><unit>` terms (`h`, `m`, `s`, `ms`), e.g. `30m`, `1h30m`, `40s`, `1500ms`.
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let bad = |why: &str| format!("{text:?}: {why} (e.g. 30m, 1h30m, 40s, 500ms)");
    if text.is_empty() {
        return Err(bad("empty duration"));
    }
    let mut total = Duration::ZERO;
    let mut rest = text;
    while !rest.is_empty() {
        let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
        if digits == 0 {
            return Err(bad("expected a number"));
        }
        let number: u64 = rest[..digits]
            .parse()
            .map_err(|_| bad("number out of range"))?;
        rest = &rest[digits..];
        let unit_len = rest.bytes().take_while(u8::is_ascii_alphabetic).count();
        let unit = &rest[..unit_len];
        rest = &rest[unit_len..];
        let term = match unit {
            "h" => number.checked_mul(3600).map(Duration::from_secs),
            "m" => number.checked_mul(60).map(Duration::from_secs),
            "s" => Some(Duration::from_secs(number)),
            "ms" => Some(Duration::from_millis(number)),
            "" => return Err(bad("a number needs a unit")),
            _ => return Err(bad(&format!("unknown unit {unit:?}"))),
        };
        total = term
            .and_then(|term| total.checked_add(term))
            .ok_or_else(|| bad("too long"))?;
    }
    Ok(total)
}

fn parse_probability(text: &str) -> Result<f64, String> {
    let value: f64 = text
        .parse()
        .map_err(|_| format!("{text:?} is not a number"))?;
    if (0.0..=1.0).contains(&value) {
        Ok(value)
    } else {
        Err(format!("{text} is not between 0 and 1"))
    }
}

/// A duration as the command line writes it (`1m30s`, `40s`, `250ms`).
pub fn show(duration: Duration) -> String {
    let millis = duration.as_millis();
    if !millis.is_multiple_of(1000) || millis == 0 {
        return format!("{millis}ms");
    }
    let secs = millis / 1000;
    let (h, m, s) = (secs / 3600, secs / 60 % 60, secs % 60);
    let mut out = String::new();
    for (value, unit) in [(h, "h"), (m, "m"), (s, "s")] {
        if value > 0 {
            out.push_str(&format!("{value}{unit}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_parse_in_every_unit_and_combination() {
        assert_eq!(parse_duration("30m"), Ok(Duration::from_secs(1800)));
        assert_eq!(parse_duration("40s"), Ok(Duration::from_secs(40)));
        assert_eq!(parse_duration("1h30m"), Ok(Duration::from_secs(5400)));
        assert_eq!(parse_duration("2m5s"), Ok(Duration::from_secs(125)));
        assert_eq!(parse_duration("1500ms"), Ok(Duration::from_millis(1500)));
    }

    #[test]
    fn bad_durations_are_refused_with_an_example() {
        for bad in ["", "30", "m", "3x", "1.5s", "-4s", "99999999999999999999h"] {
            let err = parse_duration(bad).expect_err(bad);
            assert!(err.contains("e.g. 30m"), "{bad}: {err}");
        }
    }

    #[test]
    fn durations_show_as_they_are_written() {
        assert_eq!(show(Duration::from_secs(1800)), "30m");
        assert_eq!(show(Duration::from_secs(5405)), "1h30m5s");
        assert_eq!(show(Duration::from_millis(250)), "250ms");
        assert_eq!(show(Duration::ZERO), "0ms");
    }

    #[test]
    fn defaults_are_the_issue_soak_and_validate() {
        let args = Args::parse_from(["dsh-soak"]);
        assert_eq!(args.duration, Duration::from_secs(1800));
        assert_eq!(args.sandboxes, 20);
        assert_eq!(args.validate(), Ok(()));
    }

    #[test]
    fn a_warm_up_as_long_as_the_run_and_odd_timeouts_are_refused() {
        let args = Args::parse_from(["dsh-soak", "--duration", "40s", "--warm-up", "40s"]);
        assert!(args.validate().unwrap_err().contains("--warm-up 40s"));
        let args = Args::parse_from(["dsh-soak", "--sandbox-timeout", "1500ms"]);
        assert!(args.validate().unwrap_err().contains("whole seconds"));
        assert!(Args::try_parse_from(["dsh-soak", "--kill-rate", "1.5"]).is_err());
        assert!(Args::try_parse_from(["dsh-soak", "--sandboxes", "0"]).is_err());
    }
}
