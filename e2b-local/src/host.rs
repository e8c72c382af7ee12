//! Facts about the host that the API reports for every sandbox (sandboxes share the host's
//! CPUs, memory and disk).

use std::path::Path;

/// Read once at server start.
#[derive(Debug, Clone)]
pub struct HostFacts {
    pub cpu_count: u32,
    pub mem_total_bytes: u64,
    pub disk_total_bytes: u64,
    pub clock_ticks_per_sec: u64,
}

impl HostFacts {
    /// Reads CPU count, `MemTotal`, the size of the filesystem holding `state_dir`, and
    /// `CLK_TCK`. Unreadable values fall back to conservative figures (1 CPU, 128 MiB, 0).
    pub fn read(state_dir: &Path) -> Self {
        let cpu_count = std::thread::available_parallelism().map_or(1, |n| n.get() as u32);
        let mem_total_bytes = std::fs::read_to_string("/proc/meminfo")
            .ok()
            .and_then(|m| {
                m.lines()
                    .find_map(|l| l.strip_prefix("MemTotal:"))
                    .and_then(|v| v.split_whitespace().next()?.parse::<u64>().ok())
            })
            .map_or(128 << 20, |kib| kib * 1024);
        // SAFETY: sysconf has no memory-safety preconditions.
        let ticks = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
        Self {
            cpu_count,
            mem_total_bytes,
            disk_total_bytes: disk_total(state_dir),
            clock_ticks_per_sec: if ticks > 0 { ticks as u64 } else { 100 },
        }
    }

    pub fn memory_mb(&self) -> u64 {
        (self.mem_total_bytes >> 20).max(128)
    }

    pub fn disk_size_mb(&self) -> u64 {
        self.disk_total_bytes >> 20
    }
}

fn disk_total(path: &Path) -> u64 {
    use std::os::unix::ffi::OsStrExt;
    let Ok(c) = std::ffi::CString::new(path.as_os_str().as_bytes()) else {
        return 0;
    };
    // SAFETY: statvfs is plain old data; all-zero bytes are a valid value.
    let mut stat: libc::statvfs = unsafe { std::mem::zeroed() };
    // SAFETY: valid NUL-terminated path and a properly sized out-parameter.
    if unsafe { libc::statvfs(c.as_ptr(), &mut stat) } != 0 {
        return 0;
    }
    stat.f_blocks as u64 * stat.f_frsize as u64
}
