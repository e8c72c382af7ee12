//! e2b-local's memory over the run: its resident set (`VmRSS`) sampled every second, and the
//! resident memory of its children outside sandbox worlds. It has no helper processes: its
//! children are the worlds' keepers, which join their world's cgroup right after they start (a
//! sample may catch one before it does — the only non-zero figure seen). Figures are medians
//! over a window, so one sample taken mid-upload does not decide.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use crate::procs;

/// How often memory is sampled.
pub const INTERVAL: Duration = Duration::from_secs(1);

/// One sample: when (since the start of the load), the server's RSS and that of its children
/// outside sandbox worlds, in KiB, and how many operations had ended by then (the load's rate
/// moves the RSS: a reader of the figures needs both).
#[derive(Debug, Clone, Copy)]
pub struct Sample {
    pub at: Duration,
    pub server_kib: u64,
    /// The anonymous part of `server_kib` (`RssAnon`: heap and stacks, not the binary's pages).
    pub anon_kib: u64,
    pub helpers_kib: u64,
    pub operations: u64,
    /// The server's thread count (its allocator's arenas follow its threads).
    pub threads: u64,
}

/// Samples taken so far.
#[derive(Debug, Default)]
pub struct Samples {
    samples: Mutex<Vec<Sample>>,
}

impl Samples {
    fn push(&self, sample: Sample) {
        self.samples
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(sample);
    }

    fn all(&self) -> Vec<Sample> {
        self.samples
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Median server RSS over samples taken in `[from, to]` (the nearest sample when none).
    pub fn median_between(&self, from: Duration, to: Duration) -> Option<u64> {
        median_between(&self.all(), from, to)
    }

    /// Like [`Self::median_between`], of the anonymous part.
    pub fn anon_median_between(&self, from: Duration, to: Duration) -> Option<u64> {
        let anon: Vec<Sample> = self
            .all()
            .into_iter()
            .map(|s| Sample {
                server_kib: s.anon_kib,
                ..s
            })
            .collect();
        median_between(&anon, from, to)
    }

    /// The largest server RSS sampled.
    pub fn peak(&self) -> Option<u64> {
        self.all().iter().map(|s| s.server_kib).max()
    }

    /// The largest RSS of server children outside sandbox worlds.
    pub fn helpers_peak(&self) -> u64 {
        self.all().iter().map(|s| s.helpers_kib).max().unwrap_or(0)
    }

    /// The median server RSS of each of `parts` equal spans of `[0, until]`.
    pub fn timeline(&self, until: Duration, parts: u32) -> Vec<Option<u64>> {
        let all = self.all();
        (0..parts)
            .map(|i| {
                let (from, to) = (until * i / parts, until * (i + 1) / parts);
                let inside: Vec<Sample> = all
                    .iter()
                    .filter(|s| s.at >= from && s.at <= to)
                    .copied()
                    .collect();
                median_between(&inside, from, to)
            })
            .collect()
    }

    /// Operations ended per second in each of `parts` equal spans of `[0, until]`.
    pub fn rate_timeline(&self, until: Duration, parts: u32) -> Vec<Option<f64>> {
        let all = self.all();
        let at = |t: Duration| all.iter().min_by_key(|s| s.at.abs_diff(t)).copied();
        (0..parts)
            .map(|i| {
                let (from, to) = (at(until * i / parts)?, at(until * (i + 1) / parts)?);
                let secs = (to.at.saturating_sub(from.at)).as_secs_f64();
                (secs > 0.0).then(|| to.operations.saturating_sub(from.operations) as f64 / secs)
            })
            .collect()
    }

    /// The server's largest thread count, and its last.
    pub fn threads(&self) -> (u64, u64) {
        let all = self.all();
        let peak = all.iter().map(|s| s.threads).max().unwrap_or(0);
        (peak, all.last().map_or(0, |s| s.threads))
    }

    pub fn latest(&self) -> Option<u64> {
        self.all().last().map(|s| s.server_kib)
    }
}

fn median_between(samples: &[Sample], from: Duration, to: Duration) -> Option<u64> {
    let mut window: Vec<u64> = samples
        .iter()
        .filter(|s| s.at >= from && s.at <= to)
        .map(|s| s.server_kib)
        .collect();
    if window.is_empty() {
        let mid = (from + to) / 2;
        return samples
            .iter()
            .min_by_key(|s| s.at.abs_diff(mid))
            .map(|s| s.server_kib);
    }
    window.sort_unstable();
    Some(window[window.len() / 2])
}

/// Samples the server `pid` (and `operations()`) every [`INTERVAL`] from `start` until the
/// returned task is aborted.
pub fn spawn_sampler(
    pid: u32,
    start: Instant,
    operations: impl Fn() -> u64 + Send + 'static,
) -> (Arc<Samples>, tokio::task::JoinHandle<()>) {
    let samples = Arc::new(Samples::default());
    let shared = Arc::clone(&samples);
    let task = tokio::spawn(async move {
        let mut ticker = tokio::time::interval(INTERVAL);
        loop {
            ticker.tick().await;
            let measured = tokio::task::spawn_blocking(move || measure(pid)).await;
            if let Ok(Some(((server_kib, anon_kib), helpers_kib, threads))) = measured {
                shared.push(Sample {
                    at: start.elapsed(),
                    server_kib,
                    anon_kib,
                    helpers_kib,
                    threads,
                    operations: operations(),
                });
            }
        }
    });
    (samples, task)
}

/// The server's RSS (total, anonymous), its non-world children's, and its thread count, now.
pub fn measure(pid: u32) -> Option<((u64, u64), u64, u64)> {
    let server = (procs::rss_kib(pid)?, procs::anon_rss_kib(pid).unwrap_or(0));
    let threads = procs::threads(pid).unwrap_or(0);
    let helpers = procs::scan()
        .iter()
        .filter(|p| p.ppid == pid && !p.cgroup.contains("/e2b-local/"))
        .filter_map(|p| procs::rss_kib(p.pid))
        .sum();
    Some((server, helpers, threads))
}

/// KiB as MiB with one decimal.
pub fn mib(kib: u64) -> String {
    format!("{:.1} MiB", kib as f64 / 1024.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(secs: u64, kib: u64) -> Sample {
        Sample {
            at: Duration::from_secs(secs),
            server_kib: kib,
            anon_kib: kib,
            helpers_kib: 0,
            threads: 1,
            operations: secs * 10,
        }
    }

    #[test]
    fn a_window_s_median_ignores_one_spike() {
        let samples = [at(1, 10), at(2, 11), at(3, 500), at(4, 12), at(5, 13)];
        let s = |n| Duration::from_secs(n);
        assert_eq!(median_between(&samples, s(1), s(5)), Some(12));
        assert_eq!(median_between(&samples, s(4), s(5)), Some(13));
        // No sample inside: the nearest one.
        assert_eq!(median_between(&samples, s(9), s(9)), Some(13));
        assert_eq!(median_between(&[], s(0), s(1)), None);
        let recorded = Samples::default();
        for sample in samples {
            recorded.push(sample);
        }
        // [0, 2]: 10 11; [2, 4]: 11 500 12; [4, 6]: 12 13 (upper medians).
        assert_eq!(recorded.timeline(s(6), 3), [Some(11), Some(12), Some(13)]);
        assert_eq!(recorded.timeline(s(12), 2)[1], None);
        // 10 operations a second throughout.
        assert_eq!(recorded.rate_timeline(s(4), 2), [Some(10.0), Some(10.0)]);
    }

    #[test]
    fn this_process_can_be_measured() {
        let ((server, anon), _, threads) = measure(std::process::id()).expect("self");
        assert!(server > 0 && anon > 0 && anon <= server && threads > 0);
        assert_eq!(mib(1536), "1.5 MiB");
    }
}
