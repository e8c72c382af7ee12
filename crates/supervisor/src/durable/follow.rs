//! `durable-follow`: the command's retained stdout on the helper's stdout
//! and its stderr on the helper's stderr, raw, from the requested absolute
//! offsets (clamped up to the first retained one), as they grow, until
//! the status is recorded and everything up to the final totals is out;
//! then the helper ends the way the command did.
//!
//! Waiting is a short sleep that grows while nothing comes ([`Backoff`]),
//! so a fast command's end is seen within a quarter of a millisecond and
//! a quiet one costs a wakeup every 25 ms; every [`RECHECK`] the
//! supervisor is checked (one gone without a status: the command is Lost,
//! exit 125).
//! Reading is bounded per round and per stream, through one buffer; a
//! slow reader of the helper's stdout simply blocks it.

use std::fs::File;
use std::io;
use std::os::fd::{AsFd, BorrowedFd};
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::time::{Duration, Instant};

use rustix::io::Errno;

use super::hold::Hold;
use super::store::{self, Record, Status, segment_name};
use crate::sys;

/// The exit of a follow that cannot mirror the command.
const FAILED: i32 = 125;
/// Bytes copied per stream before the other one and the status get a turn.
const BUDGET: u64 = 1024 * 1024;
/// How often a follower with nothing to copy checks its supervisor.
const RECHECK: Duration = Duration::from_millis(500);
/// The first and the longest sleep while nothing new is there.
const POLL_MIN: Duration = Duration::from_micros(250);
const POLL_MAX: Duration = Duration::from_millis(25);
/// How long quiet lasts before the sleeps grow.
const POLL_EAGER: Duration = Duration::from_millis(50);
/// The size `wide` gives the follower's output pipes.
pub const WIDE_PIPE: usize = 1024 * 1024;
/// How long a follower started beside its command's start waits for it.
const START_WAIT: Duration = Duration::from_secs(30);

/// Follows command `id` of `dir`; returns only the helper's exit code when
/// it cannot mirror the command. It says nothing of its own: its stderr
/// carries the command's, and the host reads why from the record. With
/// `hold`, retention keeps what it has not copied yet ([`super::hold`]):
/// nothing is lost to a slow reader, whose pace the command then takes.
///
/// With `wait`, a command that does not exist yet is waited for (up to
/// [`START_WAIT`]): the caller started this follower beside the
/// `durable-start` of a command whose id it chose, to save a round trip.
///
/// With `wide`, the helper's stdout and stderr are the caller's own pipes
/// (not a terminal or a pipe of the caller's caller), which it widens to
/// [`WIDE_PIPE`]: bulk output then costs a sixteenth of the wakeups.
pub fn main(dir: &str, id: &str, from: [u64; 2], hold: bool, wait: bool, wide: bool) -> i32 {
    if wide {
        for out in [io::stdout().as_fd(), io::stderr().as_fd()] {
            // Not a pipe, or over the user's pipe allowance: it stays.
            let _ = rustix::pipe::fcntl_setpipe_size(out, WIDE_PIPE);
        }
    }
    match follow(Path::new(dir), id, from, hold, wait) {
        Ok(status) => crate::run::mirror(status.raw_wait_status()),
        Err(_) => FAILED,
    }
}

fn follow(dir: &Path, id: &str, from: [u64; 2], hold: bool, wait: bool) -> Result<Status, String> {
    let (cmd_dir, record) = find(dir, id, wait)?;
    let mut backoff = Backoff::new();
    // The first idle round checks the supervisor at once.
    let mut next_check = Instant::now();
    // Published before the first read: nothing at or after `from` goes.
    let mut hold = hold.then(|| Hold::publish(&cmd_dir, from)).flatten();
    if hold.is_some() {
        // It takes over from the supervisor's hold of a new command.
        Hold::release(&cmd_dir, record.supervisor);
    }
    let mut cursors = [Cursor::new(0, from[0]), Cursor::new(1, from[1])];
    let (stdout, stderr) = (io::stdout(), io::stderr());
    let outputs = [stdout.as_fd(), stderr.as_fd()];
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        // The status first: once it is recorded, every byte up to its
        // totals is in the segments.
        let status = Status::read(&cmd_dir);
        let mut pending = false;
        let mut copied = 0;
        for (cursor, output) in cursors.iter_mut().zip(&outputs) {
            let (n, at_end) = cursor
                .pump(&cmd_dir, &mut buf, *output, BUDGET)
                .map_err(|err| format!("follow {}: {err}", store::STREAMS[cursor.stream]))?;
            copied += n;
            pending |= !at_end;
        }
        if let Some(hold) = &mut hold {
            hold.advance([cursors[0].pos, cursors[1].pos]);
        }
        if let Some(status) = status {
            if !pending {
                return Ok(status);
            }
            continue;
        }
        if pending {
            continue;
        }
        if copied > 0 {
            backoff.reset();
        }
        if Instant::now() >= next_check {
            next_check = Instant::now() + RECHECK;
            if !record.supervisor_alive() {
                match Status::read(&cmd_dir) {
                    // Ended just now: copy the rest.
                    Some(_) => continue,
                    None => {
                        return Err(format!(
                            "durable command {id} is lost: its supervisor ended without recording a status"
                        ));
                    }
                }
            }
        }
        backoff.wait();
    }
}

/// Command `id`'s directory and record; with `wait`, waited for while
/// the command is not there yet.
fn find(dir: &Path, id: &str, wait: bool) -> Result<(std::path::PathBuf, Record), String> {
    let deadline = Instant::now() + START_WAIT;
    let mut backoff = Backoff::new();
    loop {
        let found = match store::command_dir(dir, id) {
            Ok(cmd_dir) => match Record::read(&cmd_dir) {
                Some(record) => return Ok((cmd_dir, record)),
                None => format!("durable command {id} has no record"),
            },
            Err((errno, message)) if errno == libc::ENOENT => message,
            Err((_, message)) => return Err(message),
        };
        if !wait || Instant::now() >= deadline {
            return Err(found);
        }
        backoff.wait();
    }
}

/// How long the follower sleeps when nothing new is there: [`POLL_MIN`]
/// through the first [`POLL_EAGER`] of quiet (a short command's end is
/// seen within a millisecond), then doubling up to [`POLL_MAX`].
///
/// Polling, not inotify: closing an inotify instance waits for the
/// kernel's mark reaper (10–20 ms measured here), which every follower
/// would pay at its exit — more than a whole plain command costs.
struct Backoff {
    sleep: Duration,
    quiet_since: Instant,
}

impl Backoff {
    fn new() -> Backoff {
        Backoff {
            sleep: POLL_MIN,
            quiet_since: Instant::now(),
        }
    }

    /// Something new came: the next waits are short again.
    fn reset(&mut self) {
        *self = Backoff::new();
    }

    fn wait(&mut self) {
        std::thread::sleep(self.sleep);
        if self.quiet_since.elapsed() >= POLL_EAGER {
            self.sleep = (self.sleep * 2).min(POLL_MAX);
        }
    }
}

/// Copies up to `max` bytes of `file` from `offset` to `out`; returns how
/// many (0: the end of what the file holds now). By `sendfile`, so the
/// bytes stay in the kernel (a pipe takes the file's pages); through
/// `buf` where `out` refuses it.
fn send(
    out: BorrowedFd<'_>,
    file: &File,
    offset: u64,
    buf: &mut [u8],
    max: usize,
) -> io::Result<usize> {
    let mut at = offset;
    match rustix::io::retry_on_intr(|| rustix::fs::sendfile(out, file, Some(&mut at), max)) {
        Ok(n) => Ok(n),
        Err(Errno::INVAL | Errno::NOSYS) => {
            let len = max.min(buf.len());
            let n = file.read_at(&mut buf[..len], offset)?;
            sys::write_all_fd(out, &buf[..n])?;
            Ok(n)
        }
        Err(err) => Err(err.into()),
    }
}

/// Where one stream is read.
struct Cursor {
    stream: usize,
    /// The next absolute offset to copy.
    pos: u64,
    /// The segment being read: its start and file.
    segment: Option<(u64, File)>,
}

impl Cursor {
    fn new(stream: usize, pos: u64) -> Cursor {
        Cursor {
            stream,
            pos,
            segment: None,
        }
    }

    /// Copies what is retained from `pos` on to `out`, up to `budget`
    /// bytes. Returns the bytes copied and whether the end of what exists
    /// now was reached.
    fn pump(
        &mut self,
        cmd_dir: &Path,
        buf: &mut [u8],
        out: BorrowedFd<'_>,
        budget: u64,
    ) -> io::Result<(u64, bool)> {
        let mut copied = 0;
        while copied < budget {
            let Some((start, file)) = &self.segment else {
                if self.locate(cmd_dir)? {
                    continue;
                }
                return Ok((copied, true));
            };
            let n = send(out, file, self.pos - start, buf, (budget - copied) as usize)?;
            if n == 0 {
                // The segment holding `pos` may be a newer one by now (this
                // one is full once its successor exists).
                let current = *start;
                if self.locate(cmd_dir)?
                    && self.segment.as_ref().is_some_and(|(s, _)| *s != current)
                {
                    continue;
                }
                return Ok((copied, true));
            }
            self.pos += n as u64;
            copied += n as u64;
        }
        Ok((copied, false))
    }

    /// Opens the segment holding `pos` (the newest starting at or before
    /// it), first moving `pos` up to the oldest retained byte. Returns
    /// false when the stream has no segment. A segment dropped between the
    /// listing and the open is looked up again.
    fn locate(&mut self, cmd_dir: &Path) -> io::Result<bool> {
        loop {
            let starts = store::segments(cmd_dir, self.stream)?;
            let Some(&first) = starts.first() else {
                return Ok(false);
            };
            self.pos = self.pos.max(first);
            let start = *starts
                .iter()
                .rev()
                .find(|&&start| start <= self.pos)
                .expect("pos ≥ the first start");
            if let Some((current, _)) = &self.segment
                && *current == start
            {
                return Ok(true);
            }
            match File::open(cmd_dir.join(segment_name(self.stream, start))) {
                Ok(file) => {
                    self.segment = Some((start, file));
                    return Ok(true);
                }
                Err(err) if err.kind() == io::ErrorKind::NotFound => {}
                Err(err) => return Err(err),
            }
        }
    }
}
