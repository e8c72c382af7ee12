//! Real resource figures of one world, measured from its cgroup's processes and its dirs.

use std::path::{Path, PathBuf};
use std::time::{Instant, SystemTime};

use crate::host::HostFacts;

/// Raw counters read from `/proc` and the sandbox dirs.
#[derive(Debug, Default, Clone)]
pub struct Measurement {
    /// utime + stime (+ reaped children's) of every live process, in clock ticks.
    pub cpu_ticks: u64,
    /// Anonymous resident memory, bytes.
    pub mem_anon: u64,
    /// File-backed and shared-memory resident memory, bytes.
    pub mem_file: u64,
    /// Bytes allocated by the overlay upper layer, `/tmp` and `/home/user`.
    pub disk_used: u64,
}

/// CPU counter at a point in time, for the next sample's delta.
#[derive(Debug, Clone, Copy)]
pub struct CpuSample {
    at: Instant,
    ticks: u64,
}

/// A metrics sample as the API reports it.
#[derive(Debug, Clone)]
pub struct Sample {
    pub at: SystemTime,
    pub cpu_count: u32,
    pub cpu_used_pct: f64,
    pub mem_used: u64,
    pub mem_total: u64,
    pub mem_cache: u64,
    pub disk_used: u64,
    pub disk_total: u64,
}

impl Sample {
    /// Builds a sample; CPU use is the share of all host CPUs used since `previous` (0 for the
    /// first sample), and `previous` is advanced to now.
    pub fn new(measured: &Measurement, previous: &mut Option<CpuSample>, host: &HostFacts) -> Self {
        let now = CpuSample {
            at: Instant::now(),
            ticks: measured.cpu_ticks,
        };
        let cpu_used_pct = previous.map_or(0.0, |prev| {
            let elapsed = now.at.duration_since(prev.at).as_secs_f64();
            let used =
                now.ticks.saturating_sub(prev.ticks) as f64 / host.clock_ticks_per_sec as f64;
            if elapsed > 0.0 {
                (used / elapsed / f64::from(host.cpu_count) * 100.0).clamp(0.0, 100.0)
            } else {
                0.0
            }
        });
        *previous = Some(now);
        Self {
            at: SystemTime::now(),
            cpu_count: host.cpu_count,
            cpu_used_pct,
            mem_used: measured.mem_anon + measured.mem_file,
            mem_total: host.mem_total_bytes,
            mem_cache: measured.mem_file,
            disk_used: measured.disk_used,
            disk_total: host.disk_total_bytes,
        }
    }
}

/// Reads the counters of `pids` (host pids) and the allocated size of `dirs`. Processes that
/// exit meanwhile are skipped.
pub fn measure(pids: &[i32], dirs: &[PathBuf]) -> Measurement {
    let mut m = Measurement::default();
    for pid in pids {
        if let Some(ticks) = cpu_ticks(*pid) {
            m.cpu_ticks += ticks;
        }
        if let Some((anon, file)) = resident(*pid) {
            m.mem_anon += anon;
            m.mem_file += file;
        }
    }
    m.disk_used = dirs.iter().map(|d| allocated_bytes(d)).sum();
    m
}

/// utime + stime + cutime + cstime from `/proc/<pid>/stat` (fields 14–17).
fn cpu_ticks(pid: i32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name may contain spaces and parentheses: fields start after the last ')'.
    let rest = &stat[stat.rfind(')')? + 2..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // `rest` starts at field 3 (state); fields 14..=17 are at indexes 11..=14.
    let sum = fields
        .get(11..15)?
        .iter()
        .filter_map(|f| f.parse::<i64>().ok())
        .map(|v| v.max(0) as u64)
        .sum();
    Some(sum)
}

/// (RssAnon, RssFile + RssShmem) in bytes from `/proc/<pid>/status`.
fn resident(pid: i32) -> Option<(u64, u64)> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let kib = |key: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(key))
            .and_then(|v| v.split_whitespace().next()?.parse::<u64>().ok())
            .unwrap_or(0)
            * 1024
    };
    Some((kib("RssAnon:"), kib("RssFile:") + kib("RssShmem:")))
}

/// Allocated bytes (st_blocks × 512) of everything under `dir`, not following symlinks.
fn allocated_bytes(dir: &Path) -> u64 {
    use std::os::unix::fs::MetadataExt;
    let mut total = 0;
    let mut stack = vec![dir.to_path_buf()];
    while let Some(path) = stack.pop() {
        let Ok(meta) = std::fs::symlink_metadata(&path) else {
            continue;
        };
        total += meta.blocks() * 512;
        if meta.is_dir()
            && let Ok(entries) = std::fs::read_dir(&path)
        {
            stack.extend(entries.flatten().map(|e| e.path()));
        }
    }
    total
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn measures_this_process_and_a_dir() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("f"), vec![1u8; 64 * 1024]).unwrap();
        let m = measure(&[std::process::id() as i32], &[dir.path().to_path_buf()]);
        assert!(m.mem_anon > 0);
        assert!(m.disk_used >= 64 * 1024, "{}", m.disk_used);
    }

    #[test]
    fn first_sample_has_zero_cpu_then_deltas() {
        let host = HostFacts {
            cpu_count: 2,
            mem_total_bytes: 1 << 30,
            disk_total_bytes: 1 << 40,
            clock_ticks_per_sec: 100,
        };
        let mut previous = None;
        let first = Sample::new(
            &Measurement {
                cpu_ticks: 1000,
                ..Default::default()
            },
            &mut previous,
            &host,
        );
        assert_eq!(first.cpu_used_pct, 0.0);
        std::thread::sleep(std::time::Duration::from_millis(20));
        let second = Sample::new(
            &Measurement {
                cpu_ticks: 1001,
                ..Default::default()
            },
            &mut previous,
            &host,
        );
        assert!(
            second.cpu_used_pct > 0.0 && second.cpu_used_pct <= 100.0,
            "{}",
            second.cpu_used_pct
        );
    }

    #[test]
    fn vanished_pids_are_skipped() {
        let m = measure(&[i32::MAX], &[]);
        assert_eq!(m.cpu_ticks, 0);
    }
}
