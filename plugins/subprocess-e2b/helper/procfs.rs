//! The sandbox's process table, read from `/proc`: who is in a process
//! group or a session, a terminal's foreground group, a process's start
//! time. Zombies (`Z`) and dead entries (`X`) run nothing and count as
//! gone.

use std::io;

/// The fields of `/proc/<pid>/stat` the helper uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stat {
    pub pid: i32,
    pub state: u8,
    pub pgid: i32,
    pub sid: i32,
    /// The foreground process group of the process's terminal (-1: none).
    pub tpgid: i32,
    /// Start time after boot, in clock ticks.
    pub starttime: u64,
    /// The wait status a zombie will report (Linux 3.5+; `None` when the
    /// kernel does not say).
    pub exit_code: Option<i32>,
}

impl Stat {
    pub fn is_live(&self) -> bool {
        !matches!(self.state, b'Z' | b'X' | b'x')
    }
}

/// Parses `pid (comm) state ppid pgrp session tty_nr tpgid … starttime …`;
/// `comm` may hold spaces and parentheses, so fields count from the last
/// `)`.
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
        starttime: field(22)?.parse().ok()?,
        exit_code: field(52).and_then(|code| code.parse().ok()),
    })
}

/// `/proc/<pid>/stat`, or `None` when the process is gone.
pub fn stat_of(pid: i32) -> io::Result<Option<Stat>> {
    match std::fs::read(format!("/proc/{pid}/stat")) {
        Ok(line) => Ok(parse_stat(&line)),
        Err(err) if err.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(err) if err.raw_os_error() == Some(super::sys::ESRCH) => Ok(None),
        Err(err) => Err(err),
    }
}

/// Every live process matching `filter`. Processes that exit during the
/// scan are skipped; failing to list `/proc` itself is an error.
pub fn live(filter: impl Fn(&Stat) -> bool) -> io::Result<Vec<Stat>> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc")? {
        let entry = entry?;
        let name = entry.file_name();
        let Some(pid) = name.to_str().and_then(|n| n.parse::<i32>().ok()) else {
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

/// Live members of process group `pgid`. `kill(-pgid, 0)` answering ESRCH
/// proves the group empty without a scan.
pub fn group_members(pgid: i32) -> io::Result<Vec<Stat>> {
    if let Err(err) = super::sys::send_signal(-pgid, 0)
        && err.raw_os_error() == Some(super::sys::ESRCH)
    {
        return Ok(Vec::new());
    }
    live(|stat| stat.pgid == pgid)
}

/// Live members of session `sid`.
pub fn session_members(sid: i32) -> io::Result<Vec<Stat>> {
    live(|stat| stat.sid == sid)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_lines_with_awkward_names_parse() {
        let line =
            b"4242 (a) b (c) S 1 4240 4239 34816 4241 4194560 0 0 0 0 1 2 0 0 20 0 1 0 987654 0";
        assert_eq!(
            parse_stat(line),
            Some(Stat {
                pid: 4242,
                state: b'S',
                pgid: 4240,
                sid: 4239,
                tpgid: 4241,
                starttime: 987654,
                exit_code: None,
            })
        );
        assert!(
            !parse_stat(b"7 (sh) Z 1 7 7 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 5 0")
                .unwrap()
                .is_live()
        );
        let mut long = b"9 (z) Z 1 9 9 0 -1 0".to_vec();
        for field in 10..=52 {
            long.extend_from_slice(format!(" {}", if field == 52 { 256 } else { 5 }).as_bytes());
        }
        assert_eq!(parse_stat(&long).unwrap().exit_code, Some(256));
        assert_eq!(parse_stat(b"garbage"), None);
        assert_eq!(parse_stat(b"12 (x) S 1 12"), None);
    }

    #[test]
    fn the_scan_finds_this_process() {
        let me = std::process::id() as i32;
        let rows = live(|stat| stat.pid == me).expect("scan");
        assert_eq!(rows.len(), 1);
        assert!(rows[0].starttime > 0);
        assert_eq!(stat_of(me).unwrap().unwrap().pid, me);
        assert_eq!(stat_of(i32::MAX).unwrap(), None);
    }
}
