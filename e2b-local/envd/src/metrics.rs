//! `GET /metrics` figures (docs/e2b-protocol.md §7.4), read from `/proc` and `statfs("/")` the way
//! envd's gopsutil does: CPU use since the previous sample, memory from `/proc/meminfo`, disk
//! use of the root filesystem.

use std::sync::Mutex;

use serde::Serialize;

/// Cumulative CPU times from the `cpu` line of `/proc/stat` (in clock ticks).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
struct CpuTimes {
    busy: u64,
    total: u64,
}

fn read_cpu_times() -> std::io::Result<CpuTimes> {
    let stat = std::fs::read_to_string("/proc/stat")?;
    let line = stat
        .lines()
        .find(|line| line.starts_with("cpu "))
        .ok_or_else(|| std::io::Error::other("/proc/stat has no aggregate cpu line"))?;
    let fields: Vec<u64> = line
        .split_whitespace()
        .skip(1)
        .filter_map(|field| field.parse().ok())
        .collect();
    // user nice system idle iowait irq softirq steal [guest guest_nice] — guest time is already
    // counted in user/nice.
    let total: u64 = fields.iter().take(8).sum();
    let idle = fields.get(3).copied().unwrap_or(0) + fields.get(4).copied().unwrap_or(0);
    Ok(CpuTimes {
        busy: total.saturating_sub(idle),
        total,
    })
}

/// Remembers the previous CPU sample so each `/metrics` call reports use since the last one.
pub(crate) struct CpuSampler {
    last: Mutex<CpuTimes>,
}

impl CpuSampler {
    pub(crate) fn new() -> Self {
        Self {
            last: Mutex::new(read_cpu_times().unwrap_or_default()),
        }
    }

    /// Percentage of CPU time busy since the previous call (or since the daemon started),
    /// rounded to two decimals.
    fn used_percent(&self) -> std::io::Result<f64> {
        let now = read_cpu_times()?;
        let mut last = self
            .last
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        let total = now.total.saturating_sub(last.total);
        let busy = now.busy.saturating_sub(last.busy);
        *last = now;
        if total == 0 {
            return Ok(0.0);
        }
        let percent = busy as f64 * 100.0 / total as f64;
        Ok((percent * 100.0).round() / 100.0)
    }
}

/// The body of `GET /metrics`.
#[derive(Debug, Serialize, PartialEq)]
pub(crate) struct Metrics {
    pub ts: i64,
    pub cpu_count: u32,
    pub cpu_used_pct: f32,
    pub mem_total_mib: u64,
    pub mem_used_mib: u64,
    pub mem_total: u64,
    pub mem_used: u64,
    pub mem_cache: u64,
    pub disk_used: u64,
    pub disk_total: u64,
}

fn meminfo_kib(meminfo: &str, key: &str) -> u64 {
    meminfo
        .lines()
        .find_map(|line| {
            let rest = line.strip_prefix(key)?.strip_prefix(':')?;
            rest.split_whitespace().next()?.parse::<u64>().ok()
        })
        .unwrap_or(0)
}

/// Samples every figure now.
pub(crate) fn collect(cpu: &CpuSampler) -> std::io::Result<Metrics> {
    let meminfo = std::fs::read_to_string("/proc/meminfo")?;
    let kib = |key| meminfo_kib(&meminfo, key) * 1024;
    let mem_total = kib("MemTotal");
    let mem_cache = kib("Cached") + kib("SReclaimable");
    let mem_used = mem_total
        .saturating_sub(kib("MemFree"))
        .saturating_sub(kib("Buffers"))
        .saturating_sub(mem_cache);
    let disk = rustix::fs::statfs("/")?;
    #[allow(
        clippy::unnecessary_cast,
        reason = "statfs field types differ by target"
    )]
    let block = disk.f_bsize as u64;
    #[allow(
        clippy::unnecessary_cast,
        reason = "statfs field types differ by target"
    )]
    let disk_total = disk.f_blocks as u64 * block;
    #[allow(
        clippy::unnecessary_cast,
        reason = "statfs field types differ by target"
    )]
    let disk_available = disk.f_bavail as u64 * block;
    let cpu_count = std::thread::available_parallelism().map_or(1, |n| n.get() as u32);
    Ok(Metrics {
        ts: std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |elapsed| elapsed.as_secs() as i64),
        cpu_count,
        cpu_used_pct: cpu.used_percent()? as f32,
        mem_total_mib: mem_total / 1024 / 1024,
        mem_used_mib: mem_used / 1024 / 1024,
        mem_total,
        mem_used,
        mem_cache,
        disk_used: disk_total.saturating_sub(disk_available),
        disk_total,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn real_figures_are_plausible() {
        let sampler = CpuSampler::new();
        let metrics = collect(&sampler).expect("metrics");
        assert!(metrics.cpu_count >= 1);
        assert!((0.0..=100.0).contains(&metrics.cpu_used_pct));
        assert!(metrics.mem_total > metrics.mem_used);
        assert_eq!(metrics.mem_total_mib, metrics.mem_total / 1024 / 1024);
        assert!(metrics.disk_total >= metrics.disk_used && metrics.disk_total > 0);
        assert!(metrics.ts > 1_600_000_000);
    }

    #[test]
    fn meminfo_parsing() {
        let text = "MemTotal:       16 kB\nMemFree:         4 kB\nCached: 2 kB\n";
        assert_eq!(meminfo_kib(text, "MemTotal"), 16);
        assert_eq!(meminfo_kib(text, "Cached"), 2);
        assert_eq!(meminfo_kib(text, "Buffers"), 0);
    }
}
