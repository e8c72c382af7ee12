//! The final report and the verdict: operations and counters (the tally), what expired, what
//! e2b-local logged at WARN or above, leftovers while serving and after the stop, e2b-local's
//! memory (after warm-up, at the end, their ratio, peak, after teardown, by tenth of the run next
//! to the operation rate), and one `dsh-soak: PASS|FAIL (reasons) — …` line.

use std::process::ExitStatus;
use std::time::Duration;

use crate::args::Args;
use crate::leaks::Leaks;
use crate::rss::{Samples, mib};
use crate::tally::Tally;

/// Lines of the server's log shown when it warned or erred.
const LOG_LINES_SHOWN: usize = 5;

/// Everything the report shows and the verdict weighs.
#[derive(Debug)]
pub struct Findings<'a> {
    pub args: &'a Args,
    pub tally: &'a Tally,
    /// Workers that panicked.
    pub panicked: usize,
    /// Sandboxes listed when the load ended (abandoned ones, waiting for their timeout).
    pub abandoned: usize,
    /// How long until none was listed (or the wait gave up).
    pub expiry_wait: Duration,
    /// The server's log.
    pub log: String,
    pub serving: Leaks,
    pub stopped: Leaks,
    /// How the server ended.
    pub exit: ExitStatus,
    pub samples: &'a Samples,
    /// The server's RSS once every sandbox was gone, in KiB.
    pub after_teardown: Option<u64>,
    /// The whole soak's duration.
    pub took: Duration,
}

impl Findings<'_> {
    /// Prints the report; true if the soak passed.
    pub fn report(&self) -> bool {
        let args = self.args;
        println!("\n{}", self.tally.report());
        println!(
            "abandoned sandboxes: {} listed when the load ended, the last gone after {:.0} s",
            self.abandoned,
            self.expiry_wait.as_secs_f64()
        );
        let (warnings, shown) = log_warnings(&self.log);
        println!("e2b-local log: {warnings} warning or error lines");
        for line in shown {
            println!("  {line}");
        }
        println!("leaks while serving: {}", self.serving.counts());
        print!("{}", self.serving.details());
        println!("leaks after stop:    {}", self.stopped.counts());
        print!("{}", self.stopped.details());
        println!("e2b-local exit: {}", self.exit);

        // Medians over a twentieth of the run (5–30 s) ending at the warm-up and at the end.
        let window = (args.duration / 20).clamp(Duration::from_secs(5), Duration::from_secs(30));
        let samples = self.samples;
        let warm = samples.median_between(args.warm_up.saturating_sub(window), args.warm_up);
        let end = samples.median_between(args.duration.saturating_sub(window), args.duration);
        let ratio = match (warm, end) {
            (Some(warm), Some(end)) if warm > 0 => Some(end as f64 / warm as f64),
            _ => None,
        };
        let shown = |kib: Option<u64>| kib.map_or("?".to_owned(), mib);
        println!(
            "e2b-local RSS: after warm-up {}, at the end {}, ratio {} (limit {}); peak {}, after \
             teardown {}; children outside worlds at most {}",
            shown(warm),
            shown(end),
            ratio.map_or("?".to_owned(), |r| format!("{r:.3}")),
            args.max_rss_ratio,
            shown(samples.peak()),
            shown(self.after_teardown),
            mib(samples.helpers_peak())
        );
        let rss: Vec<String> = samples
            .timeline(args.duration, 10)
            .into_iter()
            .map(|kib| kib.map_or("?".to_owned(), |kib| format!("{:.1}", kib as f64 / 1024.0)))
            .collect();
        println!(
            "e2b-local RSS by tenth of the load (median MiB): {}",
            rss.join(" ")
        );
        let rates: Vec<String> = samples
            .rate_timeline(args.duration, 10)
            .into_iter()
            .map(|rate| rate.map_or("?".to_owned(), |rate| format!("{rate:.1}")))
            .collect();
        println!(
            "operations per second by tenth of the load:     {}",
            rates.join(" ")
        );
        let anon = |at: Duration| {
            samples
                .anon_median_between(at.saturating_sub(window), at)
                .map_or("?".to_owned(), mib)
        };
        println!(
            "e2b-local anonymous RSS (heap, stacks): after warm-up {}, at the end {}",
            anon(args.warm_up),
            anon(args.duration)
        );
        let (peak_threads, last_threads) = samples.threads();
        println!(
            "e2b-local threads: at most {peak_threads}, {last_threads} at the end of the load"
        );

        let mut reasons = Vec::new();
        if self.tally.failure_count() > 0 {
            reasons.push(format!("{} failed operations", self.tally.failure_count()));
        }
        if self.panicked > 0 {
            reasons.push(format!("{} workers panicked", self.panicked));
        }
        let leaks = self.serving.total() + self.stopped.total();
        if leaks > 0 {
            reasons.push(format!("{leaks} leaks"));
        }
        match ratio {
            Some(ratio) if ratio <= args.max_rss_ratio => {}
            Some(ratio) => reasons.push(format!("RSS ratio {ratio:.3} > {}", args.max_rss_ratio)),
            None => reasons.push("RSS not measured".to_owned()),
        }
        if !self.exit.success() {
            reasons.push(format!("e2b-local ended with {}", self.exit));
        }
        let (ok, killed, failed) = self.tally.totals();
        println!(
            "dsh-soak: {} — {ok} operations checked, {killed} dsh processes SIGKILLed, {failed} \
             failed, {:.0} s in all",
            if reasons.is_empty() {
                "PASS".to_owned()
            } else {
                format!("FAIL ({})", reasons.join("; "))
            },
            self.took.as_secs_f64()
        );
        reasons.is_empty()
    }
}

/// Lines of the server's log at WARN or ERROR: how many, and the first few.
fn log_warnings(log: &str) -> (usize, Vec<String>) {
    let lines: Vec<&str> = log
        .lines()
        .filter(|line| line.contains("WARN") || line.contains("ERROR"))
        .collect();
    let shown = lines
        .iter()
        .take(LOG_LINES_SHOWN)
        .map(|line| line.chars().take(300).collect())
        .collect();
    (lines.len(), shown)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn warnings_and_errors_of_the_log_are_counted() {
        let log = "a INFO x\nb \u{1b}[33m WARN\u{1b}[0m y\nc ERROR z\n";
        let (count, shown) = log_warnings(log);
        assert_eq!(count, 2);
        assert_eq!(shown[1], "c ERROR z");
    }
}
