//! The process table, read from `/proc`: who is still in a process group or
//! a session, and the fields of `/proc/<pid>/stat` the providers use.
//!
//! Linux has no event for "this process group became empty", so proving a
//! group or a session empty means reading `/proc/<pid>/stat` for every
//! process. Which rows count is [`Stat::is_live`], the crate's one
//! quiescence rule.

use std::io;

/// The fields of one `/proc/<pid>/stat` row the providers use.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stat {
    pub pid: i32,
    /// The state letter of the thread-group leader (`R`, `S`, `Z` …).
    pub state: u8,
    pub pgid: i32,
    pub sid: i32,
    /// The foreground process group of the process's terminal (-1: none).
    pub tpgid: i32,
    /// Threads of the process still counted by the kernel (the zombie
    /// leader of a thread group counts until it is reaped).
    pub threads: u32,
    /// Start time after boot, in clock ticks: with the pid, identifies one
    /// process across pid reuse.
    pub starttime: u64,
    /// The wait status a zombie will report (Linux 3.5+; `None` when the
    /// kernel does not say).
    pub exit_code: Option<i32>,
}

impl Stat {
    /// The quiescence rule: whether this process can still run code (and
    /// so hold pipes or fork). Only a true zombie cannot — state `Z` or `X`
    /// with nothing but the leader left. A leader that ended with
    /// `pthread_exit` while other threads run also shows `Z`, but with more
    /// than one thread: it is live.
    pub fn is_live(&self) -> bool {
        !matches!(self.state, b'Z' | b'X' | b'x') || self.threads > 1
    }
}

/// Parses `pid (comm) state ppid pgrp session tty_nr tpgid … num_threads …
/// starttime … exit_code`. `comm` may hold spaces and parentheses, so
/// fields count from the last `)`; `exit_code` (field 52) is optional.
pub fn parse_stat(line: &[u8]) -> Option<Stat> {
    let open = line.iter().position(|&b| b == b'(')?;
    let close = line.iter().rposition(|&b| b == b')')?;
    let pid = std::str::from_utf8(&line[..open])
        .ok()?
        .trim()
        .parse()
        .ok()?;
    let rest = std::str::from_utf8(line.get(close + 1..)?).ok()?;
    let fields: Vec<&str> = rest.split_ascii_whitespace().collect();
    // fields[0] is field 3 of proc(5).
    let field = |n: usize| fields.get(n - 3).copied();
    Some(Stat {
        pid,
        state: *field(3)?.as_bytes().first()?,
        pgid: field(5)?.parse().ok()?,
        sid: field(6)?.parse().ok()?,
        tpgid: field(8)?.parse().ok()?,
        threads: field(20)?.parse().ok()?,
        starttime: field(22)?.parse().ok()?,
        exit_code: field(52).and_then(|code| code.parse().ok()),
    })
}

/// `/proc/<pid>/stat`, or `None` when there is no such process. A row the
/// kernel wrote in a shape this parser does not know is an error naming
/// the file.
pub fn stat_of(pid: i32) -> io::Result<Option<Stat>> {
    let path = format!("/proc/{pid}/stat");
    match std::fs::read(&path) {
        Ok(line) => parse_stat(&line).map(Some).ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::InvalidData,
                format!("read {path}: unexpected format"),
            )
        }),
        // Exited between the lookup and the read.
        Err(err) if matches!(err.raw_os_error(), Some(libc::ENOENT | libc::ESRCH)) => Ok(None),
        Err(err) => Err(io::Error::new(err.kind(), format!("read {path}: {err}"))),
    }
}

/// Every live process (by [`Stat::is_live`]) that matches `filter`.
/// Processes that exit during the scan are skipped; failing to list
/// `/proc` itself is an error.
pub fn live(filter: impl Fn(&Stat) -> bool) -> io::Result<Vec<Stat>> {
    let mut found = Vec::new();
    let list = |err: io::Error| io::Error::new(err.kind(), format!("list /proc: {err}"));
    for dirent in std::fs::read_dir("/proc").map_err(list)? {
        let name = dirent.map_err(list)?.file_name();
        let Some(pid) = name.to_str().and_then(|name| name.parse::<i32>().ok()) else {
            continue;
        };
        if let Some(stat) = stat_of(pid)?
            && stat.is_live()
            && filter(&stat)
        {
            found.push(stat);
        }
    }
    Ok(found)
}

/// Live members of process group `pgid` (empty: the group is quiescent).
/// A `kill(-pgid, 0)` answering ESRCH proves the group empty without a
/// scan. Group ids ≤ 0 are refused.
pub fn group_members(pgid: i32) -> io::Result<Vec<Stat>> {
    if crate::signal::group_absent(pgid)? {
        return Ok(Vec::new());
    }
    live(|stat| stat.pgid == pgid)
}

/// Live members of session `sid` (empty: the session is quiescent).
pub fn session_members(sid: i32) -> io::Result<Vec<Stat>> {
    live(|stat| stat.sid == sid)
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::testing::ZombieLeader;

    #[test]
    fn stat_lines_with_awkward_names_parse() {
        let line =
            b"4242 (a) b (c) S 1 4240 4239 34816 4241 4194560 0 0 0 0 1 2 0 0 20 0 3 0 987654 0";
        assert_eq!(
            parse_stat(line),
            Some(Stat {
                pid: 4242,
                state: b'S',
                pgid: 4240,
                sid: 4239,
                tpgid: 4241,
                threads: 3,
                starttime: 987654,
                exit_code: None,
            })
        );
        let mut long = b"9 (z) Z 1 9 9 0 -1 0".to_vec();
        for field in 10..=52 {
            long.extend_from_slice(format!(" {}", if field == 52 { 256 } else { 1 }).as_bytes());
        }
        assert_eq!(parse_stat(&long).unwrap().exit_code, Some(256));
        assert_eq!(parse_stat(b"garbage"), None);
        assert_eq!(parse_stat(b"12 (x) S 1 12"), None);
    }

    #[test]
    fn only_a_zombie_without_threads_is_quiescent() {
        let row = |state: &str, threads: u32| {
            parse_stat(
                format!("7 (app) {state} 1 7 7 0 -1 0 0 0 0 0 0 0 0 0 20 0 {threads} 0 5")
                    .as_bytes(),
            )
            .expect("parses")
        };
        assert!(row("S", 1).is_live());
        assert!(row("R", 4).is_live());
        assert!(!row("Z", 1).is_live(), "a true zombie runs nothing");
        assert!(!row("X", 1).is_live(), "a dead entry runs nothing");
        assert!(
            row("Z", 2).is_live(),
            "a zombie leader whose other thread runs is live"
        );
    }

    #[test]
    fn the_scan_finds_this_process() {
        let me = std::process::id() as i32;
        let rows = live(|stat| stat.pid == me).expect("scan");
        assert_eq!(rows.len(), 1);
        assert!(rows[0].starttime > 0);
        assert!(rows[0].threads >= 1);
        // libc, not rustix: in a container whose session leader lives
        // outside our PID namespace the kernel reports sid 0, which rustix's
        // `Pid` cannot hold, while /proc shows the same 0.
        // SAFETY: getsid(0) only reads the calling process's session id.
        assert_eq!(rows[0].sid, unsafe { libc::getsid(0) });
        assert_eq!(stat_of(me).unwrap().unwrap().pid, me);
        assert_eq!(stat_of(i32::MAX).unwrap(), None);
        assert!(group_members(0).is_err(), "group 0 is the caller's own");
    }

    #[test]
    fn a_zombie_leader_with_a_running_thread_keeps_its_group_live() {
        let child = ZombieLeader::spawn();
        let leader = child.leader_stat();
        assert_eq!(leader.state, b'Z', "the main thread ended: {leader:?}");
        assert!(leader.threads > 1, "another thread runs: {leader:?}");
        assert!(leader.is_live());
        let members = group_members(child.pgid()).expect("scan");
        assert_eq!(
            members.iter().map(|stat| stat.pid).collect::<Vec<_>>(),
            [child.pgid()],
            "the group is live while the thread runs"
        );
        // Still live a moment later: the thread is not on its way out.
        std::thread::sleep(Duration::from_millis(200));
        assert!(!group_members(child.pgid()).expect("scan").is_empty());

        child.kill_group();
        let gone = child.await_true_zombie();
        assert_eq!((gone.state, gone.threads), (b'Z', 1), "{gone:?}");
        assert!(!gone.is_live());
        assert_eq!(group_members(child.pgid()).expect("scan"), []);
    }
}
