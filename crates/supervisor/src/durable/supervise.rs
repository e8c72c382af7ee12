//! The detached supervisor of one durable command: it forks the command as
//! `run` does (the launch identity, a session and process group of its
//! own, the cwd, the exact environment, the program looked up on the
//! search path, stdin on /dev/null, stdout and stderr on pipes — one for
//! both when the request merges them), records
//! it before letting it exec, reports the start to `durable-start`, then
//! retains its output, applies the timeout, reaps it, drains its output
//! (until both pipes end or the drain grace passed) and records its
//! status last.

use std::ffi::c_int;
use std::os::fd::{AsFd, OwnedFd};
use std::path::Path;
use std::time::{Duration, Instant};

use dsh_process_group::signal::signal_group;
use dsh_supervisor::wire::{DurableStartRequest, Stage};
use rustix::event::{PollFd, PollFlags, Timespec};
use rustix::fs::Mode;
use rustix::io::Errno;
use rustix::pipe::PipeFlags;
use rustix::process::{Pid, Signal, WaitOptions};

use super::follow::WIDE_PIPE;
use super::hold::Hold;
use super::retain::Retention;
use super::start::one_line;
use super::store::{self, Record, Status};
use crate::launch::{self, Failure, Gate, Prepared};
use crate::sys;

/// Largest read from a command's pipe (as wide as the pipe).
const CHUNK: usize = WIDE_PIPE;
/// Between the timeout's SIGTERM and its SIGKILL.
const KILL_AFTER: Duration = Duration::from_secs(2);
/// How much of each stream is still read, without waiting, once the drain
/// grace is over.
const FINAL_DRAIN: usize = 1024 * 1024;
/// How long the supervisor holds output for a follower that does not come.
const START_HOLD: Duration = Duration::from_secs(60);
/// How often a stream blocked by a slow holder looks at the holds again.
const HOLD_RECHECK: Duration = Duration::from_millis(5);

/// Runs in the detached supervisor; never returns. `umask` is the caller's,
/// which the command gets back. `report` carries the one control line to
/// `durable-start`.
pub fn main(
    request: &DurableStartRequest,
    prepared: &Prepared,
    cmd_dir: &Path,
    id: &str,
    umask: Mode,
    report: OwnedFd,
) -> ! {
    let give_up = |line: String| -> ! {
        let _ = std::fs::remove_dir_all(cmd_dir);
        let _ = sys::write_all_fd(&report, line.as_bytes());
        sys::exit_now(1)
    };
    let error = |errno: i32, what: &str, err: &dyn std::fmt::Display| -> String {
        format!("error {errno} {what}: {err}")
    };
    // Before the command can write a byte (see `DurableStartRequest::hold`).
    let start_hold = request
        .hold
        .then(|| Hold::publish(cmd_dir, [0, 0]))
        .flatten();
    let mut command = match start(request, prepared, cmd_dir, umask) {
        Ok(command) => command,
        Err(Start::Failed(failure)) => {
            let detail = match failure.stage {
                Stage::Cwd => &request.launch.cwd,
                _ => &request.launch.argv[0],
            };
            give_up(format!(
                "failed {} {} {}",
                failure.stage as u8,
                failure.errno,
                one_line(detail)
            ))
        }
        Err(Start::Error(errno, what)) => {
            give_up(error(errno, &what, &Errno::from_raw_os_error(errno)))
        }
    };
    let line = format!("ok {id} {}", command.pid.as_raw_nonzero());
    let _ = sys::write_all_fd(&report, line.as_bytes());
    drop(report);
    let status = command.supervise(request, start_hold);
    if store::write_atomic(cmd_dir, store::STATUS, &status.to_text()).is_err() {
        sys::exit_now(1);
    }
    sys::exit_now(0)
}

/// Why the command did not start: its launch failed (reported like
/// `run`'s), or the supervisor's own resources did.
enum Start {
    Failed(Failure),
    Error(i32, String),
}

fn resource(what: &str) -> impl Fn(std::io::Error) -> Start + '_ {
    move |err| Start::Error(err.raw_os_error().unwrap_or(libc::EIO), what.to_owned())
}

/// A running command and the supervisor's ends of its plumbing.
struct Command {
    pid: Pid,
    pipes: [Option<OwnedFd>; 2],
    retention: [Retention; 2],
    /// A signalfd for SIGCHLD.
    signals: OwnedFd,
}

/// Creates the segments and pipes, forks, records, lets the command exec,
/// and waits for it to exec or report why it could not.
fn start(
    request: &DurableStartRequest,
    prepared: &Prepared,
    cmd_dir: &Path,
    umask: Mode,
) -> Result<Command, Start> {
    let retention = [
        Retention::create(cmd_dir, 0, request.retain).map_err(resource("stdout segment"))?,
        Retention::create(cmd_dir, 1, request.retain).map_err(resource("stderr segment"))?,
    ];
    let pipe =
        |what| rustix::pipe::pipe_with(PipeFlags::CLOEXEC).map_err(|e| resource(what)(e.into()));
    let (out_r, out_w) = pipe("stdout pipe")?;
    // A merged stderr has no pipe: the command's fd 2 is stdout's.
    let (err_r, err_w) = if request.merge_stderr {
        (None, None)
    } else {
        let (read, write) = pipe("stderr pipe")?;
        (Some(read), Some(write))
    };
    let (report_r, report_w) = pipe("report pipe")?;
    let (go_r, go_w) = pipe("go pipe")?;
    let signals = sys::signal_fd(&[libc::SIGCHLD]).map_err(resource("signalfd"))?;
    let supervisor = rustix::process::getpid();
    // SAFETY: the supervisor is single-threaded.
    let Some(pid) = unsafe { sys::fork() }.map_err(resource("fork"))? else {
        drop((out_r, err_r, report_r, go_w));
        let gate = Gate { go: &go_r, umask };
        let err_w = err_w.as_ref().unwrap_or(&out_w);
        launch::child(prepared, supervisor, &out_w, err_w, &report_w, Some(gate));
    };
    drop((out_w, err_w, report_w, go_r));
    let kill = |start: Start| {
        let _ = rustix::process::kill_process(pid, Signal::KILL);
        let _ = rustix::process::waitpid(Some(pid), WaitOptions::empty());
        start
    };
    // The record exists before the command may exec.
    let own = supervisor.as_raw_nonzero().get() as u32;
    let record = (|| {
        Ok::<_, std::io::Error>(Record {
            pid: pid.as_raw_nonzero().get() as u32,
            starttime: store::starttime_of(pid.as_raw_nonzero().get() as u32)?,
            supervisor: own,
            supervisor_starttime: store::starttime_of(own)?,
            started_unix_ms: store::now_unix_ms(),
            argv: request.launch.argv.clone(),
            cwd: request.launch.cwd.clone(),
            retain: request.retain,
        })
    })()
    .map_err(|err| kill(resource("start times")(err)))?;
    store::write_atomic(cmd_dir, store::COMMAND, &record.to_text())
        .map_err(|err| kill(resource("command record")(err)))?;
    sys::write_all_fd(&go_w, b"+").map_err(|err| kill(resource("go pipe")(err)))?;
    drop(go_w);

    let mut bytes = [0u8; 5];
    let mut got = 0;
    while got < bytes.len() {
        match sys::read_fd(report_r.as_fd(), &mut bytes[got..]) {
            Ok(0) | Err(_) => break,
            Ok(n) => got += n,
        }
    }
    if got == bytes.len() {
        let _ = rustix::process::waitpid(Some(pid), WaitOptions::empty());
        return Err(Start::Failed(Failure {
            stage: Stage::from_u8(bytes[0]).unwrap_or(Stage::Exec),
            errno: i32::from_le_bytes([bytes[1], bytes[2], bytes[3], bytes[4]]),
        }));
    }
    for fd in [Some(&out_r), err_r.as_ref()].into_iter().flatten() {
        rustix::io::ioctl_fionbio(fd, true).map_err(|e| kill(resource("output pipe")(e.into())))?;
        // Fewer wakeups for bulk output; a user over the pipe allowance
        // keeps the default.
        let _ = rustix::pipe::fcntl_setpipe_size(fd, WIDE_PIPE);
    }
    Ok(Command {
        pid,
        pipes: [Some(out_r), err_r],
        retention,
        signals,
    })
}

impl Command {
    /// Retains output, applies the timeout, reaps the command and drains;
    /// returns the status to record.
    fn supervise(&mut self, request: &DurableStartRequest, mut start_hold: Option<Hold>) -> Status {
        let start_hold_until = Instant::now() + START_HOLD;
        let pgid = self.pid.as_raw_nonzero().get();
        let deadline = (request.timeout_ms > 0)
            .then(|| Instant::now() + Duration::from_millis(request.timeout_ms));
        let grace = Duration::from_millis(request.drain_grace_ms);
        let mut kill_at: Option<Instant> = None;
        let mut timed_out = false;
        let mut raw: Option<c_int> = None;
        let mut drain_until: Option<Instant> = None;
        let mut buf = vec![0u8; CHUNK];
        loop {
            let now = Instant::now();
            if raw.is_some()
                && (self.pipes.iter().all(Option::is_none) || drain_until.is_some_and(|d| now >= d))
            {
                break;
            }
            if raw.is_none() {
                if !timed_out && deadline.is_some_and(|d| now >= d) {
                    timed_out = true;
                    let _ = signal_group(pgid, libc::SIGTERM);
                    let _ = signal_group(pgid, libc::SIGCONT);
                    kill_at = Some(now + KILL_AFTER);
                }
                if kill_at.is_some_and(|k| now >= k) {
                    let _ = signal_group(pgid, libc::SIGKILL);
                    kill_at = None;
                }
            }
            let wake = [
                deadline.filter(|_| !timed_out && raw.is_none()),
                kill_at.filter(|_| raw.is_none()),
                drain_until,
            ]
            .into_iter()
            .flatten()
            .min();
            if start_hold.is_some() && now >= start_hold_until {
                // The holding follower never came: keep only `retain`.
                start_hold = None;
            }
            // A stream a slow holder blocks is not read; look again soon.
            let blocked: Vec<bool> = (0..2).map(|i| self.retention[i].recheck()).collect();
            let wake = if blocked.contains(&true) {
                Some(wake.map_or(now + HOLD_RECHECK, |at| at.min(now + HOLD_RECHECK)))
            } else {
                wake
            };
            let timeout = wake.map(|at| {
                Timespec::try_from(at.saturating_duration_since(now)).unwrap_or(Timespec {
                    tv_sec: i64::MAX,
                    tv_nsec: 0,
                })
            });
            let open: Vec<usize> = (0..2)
                .filter(|&i| self.pipes[i].is_some() && !blocked[i])
                .collect();
            let ready: Vec<PollFlags> = {
                let mut fds: Vec<PollFd<'_>> = open
                    .iter()
                    .filter_map(|&i| self.pipes[i].as_ref())
                    .map(|fd| PollFd::new(fd, PollFlags::IN))
                    .collect();
                fds.push(PollFd::new(&self.signals, PollFlags::IN));
                match rustix::event::poll(&mut fds, timeout.as_ref()) {
                    Ok(_) | Err(Errno::INTR) => {}
                    Err(_) => sys::exit_now(1),
                }
                fds.iter().map(PollFd::revents).collect()
            };
            for (slot, &i) in open.iter().enumerate() {
                if ready[slot].intersects(PollFlags::IN | PollFlags::HUP | PollFlags::ERR) {
                    let _ = self.pump(i, &mut buf);
                }
            }
            if ready[open.len()].contains(PollFlags::IN) {
                while let Ok(Some(_)) = sys::read_signal(self.signals.as_fd()) {}
                if raw.is_none()
                    && let Ok(Some((_, status))) =
                        rustix::process::waitpid(Some(self.pid), WaitOptions::NOHANG)
                {
                    raw = Some(status.as_raw());
                    drain_until = Some(Instant::now() + grace);
                }
            }
        }
        // What is already buffered is still kept (a drain grace of 0, or a
        // writer that outlived the grace), bounded against a writer that
        // never pauses.
        for i in 0..2 {
            let mut budget = FINAL_DRAIN;
            while budget > 0 && self.pipes[i].is_some() {
                match self.pump(i, &mut buf) {
                    0 => break,
                    n => budget = budget.saturating_sub(n),
                }
            }
        }
        let raw = raw.expect("the loop ends after the reap");
        let signal = raw & 0x7f;
        Status {
            code: (signal == 0).then_some((raw >> 8) & 0xff),
            signal: (signal != 0).then_some(signal),
            timed_out,
            totals: [self.retention[0].total(), self.retention[1].total()],
            ended_unix_ms: store::now_unix_ms(),
        }
    }

    /// Reads one chunk of stream `i` into its retention; closes it at end
    /// of file. Returns the bytes read (0: nothing buffered, or the end).
    fn pump(&mut self, i: usize, buf: &mut [u8]) -> usize {
        let Some(fd) = &self.pipes[i] else { return 0 };
        match sys::read_fd(fd.as_fd(), buf) {
            Ok(0) => self.pipes[i] = None,
            Ok(n) => {
                self.retention[i].write(&buf[..n]);
                return n;
            }
            Err(err) if err.raw_os_error() == Some(libc::EAGAIN) => {}
            Err(_) => self.pipes[i] = None,
        }
        0
    }
}
