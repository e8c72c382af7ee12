//! The host's process table from `/proc`, as far as the soak needs it: parent, zombie state,
//! cgroup membership, command line, environment markers and resident memory.

use std::path::Path;

/// One process.
#[derive(Debug, Clone)]
pub struct Proc {
    pub pid: u32,
    pub ppid: u32,
    pub zombie: bool,
    /// `/proc/PID/cgroup`, every line.
    pub cgroup: String,
    /// The command line, arguments joined by spaces.
    pub cmdline: String,
}

impl Proc {
    /// `pid ppid cmdline` for reports.
    pub fn describe(&self) -> String {
        let zombie = if self.zombie { " (zombie)" } else { "" };
        let cmdline: String = self.cmdline.chars().take(160).collect();
        format!("pid {} ppid {}{zombie}: {cmdline}", self.pid, self.ppid)
    }
}

/// Every process readable now (those that exit during the scan are skipped).
pub fn scan() -> Vec<Proc> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter_map(|entry| entry.file_name().to_str()?.parse::<u32>().ok())
        .filter_map(read)
        .collect()
}

fn read(pid: u32) -> Option<Proc> {
    let dir = Path::new("/proc").join(pid.to_string());
    let stat = std::fs::read_to_string(dir.join("stat")).ok()?;
    let (state, ppid) = parse_stat(&stat)?;
    let cgroup = std::fs::read_to_string(dir.join("cgroup")).unwrap_or_default();
    let cmdline = std::fs::read(dir.join("cmdline"))
        .map(|bytes| {
            String::from_utf8_lossy(&bytes)
                .trim_end_matches('\0')
                .replace('\0', " ")
        })
        .unwrap_or_default();
    Some(Proc {
        pid,
        ppid,
        zombie: state == 'Z',
        cgroup,
        cmdline,
    })
}

/// State and parent pid from `/proc/PID/stat` (the command name may hold spaces and `)`).
fn parse_stat(stat: &str) -> Option<(char, u32)> {
    let rest = &stat[stat.rfind(')')? + 1..];
    let mut fields = rest.split_whitespace();
    let state = fields.next()?.chars().next()?;
    let ppid = fields.next()?.parse().ok()?;
    Some((state, ppid))
}

/// Whether process `pid`'s environment holds the entry `entry` (`NAME=value`).
pub fn environ_has(pid: u32, entry: &str) -> bool {
    std::fs::read(format!("/proc/{pid}/environ"))
        .is_ok_and(|environ| environ.split(|b| *b == 0).any(|e| e == entry.as_bytes()))
}

/// Resident memory of `pid` in KiB (`VmRSS`), `None` if it is gone.
pub fn rss_kib(pid: u32) -> Option<u64> {
    status_field(pid, "VmRSS:").and_then(|value| value.trim_end_matches("kB").trim().parse().ok())
}

/// The anonymous part of `pid`'s resident memory in KiB (`RssAnon`), `None` if it is gone.
pub fn anon_rss_kib(pid: u32) -> Option<u64> {
    status_field(pid, "RssAnon:").and_then(|value| value.trim_end_matches("kB").trim().parse().ok())
}

/// Number of threads of `pid`, `None` if it is gone.
pub fn threads(pid: u32) -> Option<u64> {
    status_field(pid, "Threads:").and_then(|value| value.parse().ok())
}

fn status_field(pid: u32, name: &str) -> Option<String> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find_map(|line| line.strip_prefix(name))
        .map(|value| value.trim().to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_lines_with_odd_command_names_parse() {
        assert_eq!(parse_stat("42 (a) b (c)) S 7 42 42 0 -1"), Some(('S', 7)));
        assert_eq!(parse_stat("9 (sleep) Z 1 9"), Some(('Z', 1)));
        assert_eq!(parse_stat("garbage"), None);
    }

    #[test]
    fn this_process_is_seen_with_its_parent_memory_and_environment() {
        let me = std::process::id();
        let found = scan().into_iter().find(|p| p.pid == me).expect("self");
        assert!(!found.zombie && found.ppid > 0);
        assert!(rss_kib(me).is_some_and(|kib| kib > 0));
        assert!(threads(me).is_some_and(|n| n > 0));
        let path = std::env::var("PATH").unwrap_or_default();
        assert!(environ_has(me, &format!("PATH={path}")));
        assert!(!environ_has(me, "DSH_SOAK_NO_SUCH_VARIABLE=1"));
    }
}
