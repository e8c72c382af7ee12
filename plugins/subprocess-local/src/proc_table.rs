//! The process table: who is still in a process group or session, and
//! signals to them.
//!
//! Linux has no event for "this process group became empty", so proving a
//! group or session empty means reading `/proc/<pid>/stat` for every
//! process. Entries in state `Z` (zombie) or `X` (dead) count as gone: they
//! run nothing and hold nothing but a table slot their parent will free.

use std::io::{self, Read};
use std::time::Duration;

use tokio::time::Instant;

/// One row of the process table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Entry {
    pub pid: i32,
    pub state: u8,
    pub pgid: i32,
    pub sid: i32,
    pub threads: u32,
}

impl Entry {
    /// Whether the process can still run. A zombie or dead entry cannot —
    /// unless only its main thread ended: a process whose main thread
    /// called `pthread_exit` shows state `Z` while its other threads run,
    /// and then reports more than one thread.
    pub fn is_live(&self) -> bool {
        !matches!(self.state, b'Z' | b'X' | b'x') || self.threads > 1
    }
}

/// Parses `/proc/<pid>/stat`: `pid (comm) state ppid pgrp session …
/// num_threads …` (`num_threads` is the 20th field). The command name may
/// contain spaces and parentheses, so fields are read after the last `)`.
pub fn parse_stat(line: &[u8]) -> Option<Entry> {
    let open = line.iter().position(|b| *b == b'(')?;
    let close = line.iter().rposition(|b| *b == b')')?;
    let pid = std::str::from_utf8(&line[..open])
        .ok()?
        .trim()
        .parse()
        .ok()?;
    let rest = std::str::from_utf8(line.get(close + 1..)?).ok()?;
    let mut fields = rest.split_ascii_whitespace();
    let state = *fields.next()?.as_bytes().first()?;
    let _ppid = fields.next()?;
    let pgid = fields.next()?.parse().ok()?;
    let sid = fields.next()?.parse().ok()?;
    // tty_nr … nice (fields 7 to 19), then num_threads.
    let threads = fields.nth(13)?.parse().ok()?;
    Some(Entry {
        pid,
        state,
        pgid,
        sid,
        threads,
    })
}

/// Every live process matching `filter`. Processes that vanish during the
/// scan are skipped; failing to list `/proc` itself is an error.
pub fn live(filter: impl Fn(&Entry) -> bool) -> io::Result<Vec<Entry>> {
    let mut found = Vec::new();
    let mut buf = Vec::with_capacity(512);
    for dirent in std::fs::read_dir("/proc")? {
        let dirent = dirent?;
        let name = dirent.file_name();
        let Some(name) = name.to_str() else { continue };
        if !name.bytes().all(|b| b.is_ascii_digit()) {
            continue;
        }
        buf.clear();
        let path = format!("/proc/{name}/stat");
        let read = std::fs::File::open(&path).and_then(|mut file| file.read_to_end(&mut buf));
        match read {
            Ok(_) => {}
            // Exited between readdir and open.
            Err(err) if matches!(err.raw_os_error(), Some(libc::ENOENT | libc::ESRCH)) => continue,
            Err(err) => return Err(io::Error::new(err.kind(), format!("{path}: {err}"))),
        }
        if let Some(entry) = parse_stat(&buf)
            && entry.is_live()
            && filter(&entry)
        {
            found.push(entry);
        }
    }
    Ok(found)
}

/// Live members of process group `pgid`. A `kill(-pgid, 0)` answering
/// ESRCH proves the group empty without a scan.
pub fn live_in_group(pgid: i32) -> io::Result<Vec<i32>> {
    match signal_group(pgid, 0) {
        Err(err) if err.raw_os_error() == Some(libc::ESRCH) => return Ok(Vec::new()),
        _ => {}
    }
    Ok(live(|entry| entry.pgid == pgid)?
        .into_iter()
        .map(|entry| entry.pid)
        .collect())
}

/// Live members of session `sid`.
pub fn live_in_session(sid: i32) -> io::Result<Vec<Entry>> {
    live(|entry| entry.sid == sid)
}

/// `kill(-pgid, signal)`. Refuses group ids ≤ 1: `kill(-1)` signals every
/// process the caller may signal, and `-0` is the caller's own group.
pub fn signal_group(pgid: i32, signal: i32) -> io::Result<()> {
    if pgid <= 1 {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("refusing to signal process group {pgid}"),
        ));
    }
    // SAFETY: kill has no memory-safety preconditions.
    if unsafe { libc::kill(-pgid, signal) } == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// Polls `probe` until it reports nothing live or `deadline` passes, with
/// backoff from 1 ms to 50 ms (there is no event to wait for; see the
/// module docs). Returns the last probe's live list (empty = proven).
pub async fn settle<T>(
    deadline: Instant,
    mut probe: impl FnMut() -> io::Result<Vec<T>>,
) -> io::Result<Vec<T>> {
    let mut pause = Duration::from_millis(1);
    loop {
        let live = probe()?;
        if live.is_empty() || Instant::now() >= deadline {
            return Ok(live);
        }
        tokio::time::sleep_until(deadline.min(Instant::now() + pause)).await;
        pause = (pause * 2).min(Duration::from_millis(50));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_lines_with_awkward_names_parse() {
        let line = b"4242 (a) b (c) S 1 4240 4239 34816 4240 4194560 1 2 3 4 5 6 7 8 20 0 3 0 99";
        assert_eq!(
            parse_stat(line),
            Some(Entry {
                pid: 4242,
                state: b'S',
                pgid: 4240,
                sid: 4239,
                threads: 3,
            })
        );
        let zombie =
            parse_stat(b"7 (sh) Z 1 7 7 0 -1 4228 0 0 0 0 0 0 0 0 20 0 1 0 5").expect("parses");
        assert!(!zombie.is_live());
        let main_thread_gone =
            parse_stat(b"7 (app) Z 1 7 7 0 -1 4228 0 0 0 0 0 0 0 0 20 0 2 0 5").expect("parses");
        assert!(main_thread_gone.is_live(), "other threads still run");
        assert_eq!(parse_stat(b"garbage"), None);
        assert_eq!(parse_stat(b"12 (x) S 1 2 3"), None);
    }

    #[test]
    fn the_scan_finds_this_process() {
        let me = std::process::id() as i32;
        let rows = live(|entry| entry.pid == me).expect("scan");
        assert_eq!(rows.len(), 1);
        // libc, not rustix: in a container whose session leader lives outside
        // our PID namespace the kernel reports sid 0, which rustix's `Pid`
        // cannot hold (it panics), while /proc shows the same 0.
        // SAFETY: getsid(0) only reads the calling process's session id.
        assert_eq!(rows[0].sid, unsafe { libc::getsid(0) });
    }

    #[tokio::test]
    async fn settle_is_bounded_and_returns_what_is_still_live() {
        let deadline = Instant::now() + Duration::from_millis(60);
        let mut probes = 0;
        let live = settle(deadline, || {
            probes += 1;
            Ok(vec![7])
        })
        .await
        .expect("settle");
        assert_eq!(live, [7], "never empty: the last live list comes back");
        assert!(Instant::now() >= deadline);
        assert!(
            (2..=20).contains(&probes),
            "backoff, not a busy loop: {probes} probes"
        );

        let mut left = 3;
        let live = settle(Instant::now() + Duration::from_secs(5), || {
            left -= 1;
            Ok(if left == 0 { Vec::new() } else { vec![1] })
        })
        .await
        .expect("settle");
        assert!(live.is_empty(), "returns as soon as the probe is empty");

        let err = settle::<i32>(Instant::now(), || Err(io::Error::other("no /proc")))
            .await
            .expect_err("probe failure");
        assert_eq!(err.to_string(), "no /proc");
    }

    #[test]
    fn dangerous_group_ids_are_refused() {
        for pgid in [-5, 0, 1] {
            let err = signal_group(pgid, 0).expect_err("refused");
            assert_eq!(err.kind(), io::ErrorKind::InvalidInput);
        }
    }
}
