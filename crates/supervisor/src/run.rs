//! `run`: start one command as the sandbox user, as the leader of a new
//! session and process group, and supervise it until it is reaped and its
//! output is closed.
//!
//! The helper runs as root and stays the command's parent: it reports
//! exactly when and how the direct child ended (an exit code or the signal
//! that killed it), relays stdout and stderr as raw bytes in frames, writes
//! the spill copies, and detaches a stream (reads what is buffered, then
//! closes it, so later writers get EPIPE) when SIGUSR1 (stdout) or SIGUSR2
//! (stderr) arrives — only root can send those. Its own exit mirrors the
//! child's status, so a host that lost the frame stream still learns it
//! from envd. The child gets `SIGKILL` if the helper dies first.

use std::ffi::c_int;
use std::io::{self, stdout};
use std::os::fd::{AsFd, OwnedFd};

use dsh_process_group::table;
use dsh_supervisor::wire::{self, RunRequest, Spill, Stage, tag};
use rustix::event::{PollFd, PollFlags};
use rustix::fs::{Mode, OFlags};
use rustix::io::Errno;
use rustix::pipe::PipeFlags;
use rustix::process::{Pid, Resource, Rlimit, WaitOptions};

use crate::launch::{Failure, Prepared};
use crate::sys;
/// Largest read from a command's pipe: one output frame is then exactly
/// 32 KiB, what envd reads from the helper at a time. Frames that fill the
/// pipe to envd evenly never leave a few-byte tail behind (a 64 KiB frame
/// plus its header overflows a 64 KiB pipe by 5 bytes, which envd then
/// forwards as a tiny event of its own — thousands of them for a large
/// output, and HTTP/2 peers on the way count tiny frames against a budget).
const CHUNK: usize = 32 * 1024 - wire::HEADER;
/// How much a detach still reads from a stream before closing it (what a
/// grown pipe can hold; a writer that never pauses is cut off there).
const DETACH_DRAIN: usize = 1024 * 1024;

/// Runs `request`; never returns. With a [`wire::ProbeFor`], it first
/// learns the sandbox and says what it learned (a [`tag::PROBED`] frame).
pub fn main(request: &RunRequest) -> ! {
    let mut out = Frames::new();
    let learned;
    let request = match &request.probe {
        None => request,
        Some(probe) => match crate::probe::launch_for(probe, &request.launch) {
            Ok((launch, record)) => {
                out.frame(tag::PROBED, &record);
                learned = RunRequest {
                    launch,
                    probe: None,
                    ..request.clone()
                };
                &learned
            }
            Err(message) => out.fail(
                Stage::Request,
                libc::EINVAL,
                &format!("probe the sandbox: {message}"),
            ),
        },
    };
    let prepared = match Prepared::new(&request.launch) {
        Ok(prepared) => prepared,
        Err(message) => out.fail(Stage::Request, libc::EINVAL, &message),
    };
    match start(request, &prepared, &mut out) {
        Ok(child) => supervise(child, out),
        Err((failure, detail)) => out.fail(failure.stage, failure.errno, &detail),
    }
}

/// A started command and the helper's ends of its plumbing.
struct Child {
    pid: Pid,
    streams: [Stream; 2],
    /// A signalfd for SIGCHLD, SIGUSR1 and SIGUSR2.
    signals: OwnedFd,
}

/// One output stream of the command.
struct Stream {
    id: u8,
    data_tag: u8,
    /// The helper's read end; `None` once the stream ended.
    fd: Option<OwnedFd>,
    count_only: bool,
    spill: Option<SpillFile>,
}

/// The spill copy of one stream.
struct SpillFile {
    fd: OwnedFd,
    room: u64,
    failed: bool,
}

fn resources(err: impl Into<io::Error>, what: &str) -> (Failure, String) {
    (
        Failure {
            stage: Stage::Resources,
            errno: err.into().raw_os_error().unwrap_or(0),
        },
        what.to_owned(),
    )
}

/// Creates the plumbing, forks, and waits for the child to either exec the
/// program or report why it could not.
fn start(
    request: &RunRequest,
    prepared: &Prepared,
    out: &mut Frames,
) -> Result<Child, (Failure, String)> {
    let pipe = || rustix::pipe::pipe_with(PipeFlags::CLOEXEC);
    let merged = request.stderr == wire::Relay::Merged;
    let (out_r, out_w) = pipe().map_err(|e| resources(e, "stdout pipe"))?;
    // A merged stderr has no pipe: the command's fd 2 is stdout's.
    let err_pipe = if merged {
        None
    } else {
        Some(pipe().map_err(|e| resources(e, "stderr pipe"))?)
    };
    let (err_r, err_w) = err_pipe.unzip();
    let (report_r, report_w) = pipe().map_err(|e| resources(e, "report pipe"))?;
    let spills = match &request.spill {
        Some(spill) => Some(open_spills(request, spill)?),
        None => None,
    };
    // SIGCHLD says the child ended; SIGUSR1/2 ask for a detach. Blocked
    // from here on (the child unblocks everything before exec).
    let signals = sys::signal_fd(&[libc::SIGCHLD, libc::SIGUSR1, libc::SIGUSR2])
        .map_err(|e| resources(e, "signalfd"))?;
    let helper = rustix::process::getpid();
    // SAFETY: the helper is single-threaded.
    let Some(pid) = unsafe { sys::fork() }.map_err(|e| resources(e, "fork"))? else {
        let err_w = err_w.as_ref().unwrap_or(&out_w);
        crate::launch::child(prepared, helper, &out_w, err_w, &report_w, None);
    };
    // The child has its ends; the helper's must close so EOF can happen.
    drop((out_w, err_w, report_w));
    // The command has the stdin pipe now; the helper keeps no reader of it
    // (a write after the command is gone must fail, not fill the pipe).
    let null = rustix::fs::open(
        c"/dev/null",
        OFlags::RDONLY | OFlags::CLOEXEC,
        Mode::empty(),
    )
    .map_err(|e| resources(e, "/dev/null"))?;
    let _ = rustix::stdio::dup2_stdin(&null);
    drop(null);

    let mut report = [0u8; 5];
    let got = read_report(&report_r, &mut report);
    drop(report_r);
    if got == report.len() {
        let _ = rustix::process::waitpid(Some(pid), WaitOptions::empty());
        let stage = Stage::from_u8(report[0]).unwrap_or(Stage::Exec);
        let errno = i32::from_le_bytes([report[1], report[2], report[3], report[4]]);
        let detail = match stage {
            Stage::Cwd => request.launch.cwd.clone(),
            _ => request.launch.argv[0].clone(),
        };
        return Err((Failure { stage, errno }, detail));
    }
    let starttime = table::stat_of(helper.as_raw_nonzero().get())
        .ok()
        .flatten()
        .map_or(0, |stat| stat.starttime);
    let mut payload = [0u8; 12];
    payload[..4].copy_from_slice(&pid.as_raw_nonzero().get().to_le_bytes());
    payload[4..].copy_from_slice(&starttime.to_le_bytes());
    out.frame(tag::STARTED, &payload);
    if merged {
        out.frame(tag::CLOSED, &[wire::STDERR, wire::CLOSED_EOF]);
    }
    // `spawn` resolves on this frame: it goes out at once.
    out.flush();

    let [out_spill, err_spill] = match spills {
        Some([a, b]) => [Some(a), Some(b)],
        None => [None, None],
    };
    let streams = [
        Stream {
            id: wire::STDOUT,
            data_tag: tag::STDOUT,
            fd: Some(out_r),
            count_only: request.stdout == wire::Relay::Count,
            spill: out_spill,
        },
        Stream {
            id: wire::STDERR,
            data_tag: tag::STDERR,
            fd: err_r,
            count_only: request.stderr == wire::Relay::Count,
            spill: err_spill,
        },
    ];
    for stream in &streams {
        if let Some(fd) = &stream.fd {
            rustix::io::ioctl_fionbio(fd, true).map_err(|e| resources(e, "output pipe"))?;
        }
    }
    Ok(Child {
        pid,
        streams,
        signals,
    })
}

/// Reads the child's report: 0 bytes (the pipe closed at exec) or 5.
fn read_report(fd: &OwnedFd, buf: &mut [u8; 5]) -> usize {
    let mut got = 0;
    while got < buf.len() {
        match sys::read_fd(fd.as_fd(), &mut buf[got..]) {
            Ok(0) | Err(_) => break,
            Ok(n) => got += n,
        }
    }
    got
}

/// Creates the spill directory (if missing) and both files, as the sandbox
/// user: the files are theirs, mode 0600, and nothing in a directory they
/// control can redirect a root write.
fn open_spills(request: &RunRequest, spill: &Spill) -> Result<[SpillFile; 2], (Failure, String)> {
    let id = &request.launch.identity;
    let (old_uid, old_gid) = sys::set_fs_identity(id.uid, id.gid);
    let result = (|| -> Result<[SpillFile; 2], (Failure, String)> {
        // A NUL in a path fails as EINVAL.
        match rustix::fs::mkdir(spill.dir.as_str(), Mode::from_raw_mode(0o700)) {
            Ok(()) => {}
            Err(Errno::EXIST) => check_spill_dir(&spill.dir, id.uid)?,
            Err(err) => return Err(spill_failure(err.into(), &spill.dir)),
        }
        let open = |name: &str| -> Result<SpillFile, (Failure, String)> {
            let path = format!("{}/{name}", spill.dir);
            let fd = rustix::fs::open(
                path.as_str(),
                OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC,
                Mode::from_raw_mode(0o600),
            )
            .map_err(|err| spill_failure(err.into(), &path))?;
            Ok(SpillFile {
                fd,
                room: spill.limit,
                failed: false,
            })
        };
        Ok([open(&spill.stdout)?, open(&spill.stderr)?])
    })();
    sys::set_fs_identity(old_uid, old_gid);
    result
}

fn spill_failure(err: io::Error, path: &str) -> (Failure, String) {
    (
        Failure {
            stage: Stage::Spill,
            errno: err.raw_os_error().unwrap_or(0),
        },
        path.to_owned(),
    )
}

/// An existing spill directory must be a real directory of the user's,
/// private to them.
fn check_spill_dir(dir: &str, uid: u32) -> Result<(), (Failure, String)> {
    use std::os::unix::fs::MetadataExt;
    let meta = std::fs::symlink_metadata(dir).map_err(|err| spill_failure(err, dir))?;
    if !meta.is_dir() || meta.uid() != uid || meta.mode() & 0o077 != 0 {
        return Err((
            Failure {
                stage: Stage::Spill,
                errno: libc::ENOTDIR,
            },
            format!("{dir} is not a private directory of the sandbox user"),
        ));
    }
    Ok(())
}

/// Relays output and reports the exit until the child is reaped and both
/// streams are closed, then exits like the child.
fn supervise(mut child: Child, mut out: Frames) -> ! {
    let mut status: Option<c_int> = None;
    let mut buf = vec![0u8; wire::HEADER + CHUNK];
    loop {
        let open: Vec<usize> = (0..2).filter(|&i| child.streams[i].fd.is_some()).collect();
        if status.is_some() && open.is_empty() {
            break;
        }
        let ready: Vec<PollFlags> = {
            let mut fds: Vec<PollFd<'_>> = open
                .iter()
                .filter_map(|&i| child.streams[i].fd.as_ref())
                .map(|fd| PollFd::new(fd, PollFlags::IN))
                .collect();
            fds.push(PollFd::new(&child.signals, PollFlags::IN));
            if let Err(err) = rustix::io::retry_on_intr(|| rustix::event::poll(&mut fds, None)) {
                out.abort(&format!("poll: {err}"));
            }
            fds.iter().map(PollFd::revents).collect()
        };
        for (slot, &i) in open.iter().enumerate() {
            if ready[slot].intersects(PollFlags::IN | PollFlags::HUP | PollFlags::ERR) {
                relay(&mut child.streams[i], &mut buf, &mut out, usize::MAX);
            }
        }
        if ready[open.len()].contains(PollFlags::IN) {
            while let Ok(Some(signal)) = sys::read_signal(child.signals.as_fd()) {
                match signal {
                    libc::SIGUSR1 => detach(&mut child.streams[0], &mut buf, &mut out),
                    libc::SIGUSR2 => detach(&mut child.streams[1], &mut buf, &mut out),
                    _ => {}
                }
            }
            if status.is_none()
                && let Ok(Some((_, raw))) =
                    rustix::process::waitpid(Some(child.pid), WaitOptions::NOHANG)
            {
                status = Some(raw.as_raw());
                out.exited(raw.as_raw(), child.pid);
            }
        }
        // What this round produced leaves in one write: fewer, larger
        // envd events.
        out.flush();
    }
    mirror(status.expect("the loop ends after the reap"))
}

/// Reads what `stream` has (at most `budget` bytes, one chunk at a time,
/// stopping when nothing is buffered) and relays it; closes the stream at
/// end of file. Returns the bytes read.
fn relay(stream: &mut Stream, buf: &mut [u8], out: &mut Frames, budget: usize) -> usize {
    let mut total = 0;
    while let Some(fd) = &stream.fd {
        if total >= budget {
            break;
        }
        match sys::read_fd(fd.as_fd(), &mut buf[wire::HEADER..]) {
            Ok(0) => {
                close(stream, out, wire::CLOSED_EOF);
                break;
            }
            Ok(n) => {
                total += n;
                deliver(stream, buf, n, out);
                if budget == usize::MAX {
                    // Back to poll: the other stream and the exit are
                    // served in turn.
                    break;
                }
            }
            Err(err) if err.raw_os_error() == Some(libc::EAGAIN) => break,
            Err(_) => {
                close(stream, out, wire::CLOSED_EOF);
                break;
            }
        }
    }
    total
}

fn deliver(stream: &mut Stream, buf: &mut [u8], n: usize, out: &mut Frames) {
    if let Some(spill) = stream.spill.as_mut()
        && !spill.failed
    {
        let take = (n as u64).min(spill.room) as usize;
        if take > 0 {
            let data = &buf[wire::HEADER..wire::HEADER + take];
            match sys::write_all_fd(&spill.fd, data) {
                Ok(()) => spill.room -= take as u64,
                Err(err) => {
                    spill.failed = true;
                    let mut payload = [0u8; 5];
                    payload[0] = stream.id;
                    payload[1..].copy_from_slice(&err.raw_os_error().unwrap_or(0).to_le_bytes());
                    out.frame(tag::SPILL_FAILED, &payload);
                }
            }
        }
    }
    if stream.count_only {
        let mut payload = [0u8; 9];
        payload[0] = stream.id;
        payload[1..].copy_from_slice(&(n as u64).to_le_bytes());
        out.frame(tag::COUNTED, &payload);
    } else {
        wire::frame_header(&mut buf[..wire::HEADER], stream.data_tag, n);
        out.raw(&buf[..wire::HEADER + n]);
    }
}

/// Reads what is buffered (bounded), then closes the stream: the command's
/// later writes fail with EPIPE.
fn detach(stream: &mut Stream, buf: &mut [u8], out: &mut Frames) {
    if stream.fd.is_some() {
        relay(stream, buf, out, DETACH_DRAIN);
        close(stream, out, wire::CLOSED_DETACHED);
    }
}

/// Closes the stream (and its spill copy) and reports how it ended.
fn close(stream: &mut Stream, out: &mut Frames, how: u8) {
    if stream.fd.take().is_some() {
        out.frame(tag::CLOSED, &[stream.id, how]);
    }
    stream.spill = None;
}

/// Ends the helper the way the child ended: the same exit code, or the
/// same signal (without a core file).
pub(crate) fn mirror(raw: c_int) -> ! {
    let signal = raw & 0x7f;
    if signal == 0 {
        sys::exit_now((raw >> 8) & 0xff);
    }
    let no_core = Rlimit {
        current: Some(0),
        maximum: Some(0),
    };
    let _ = rustix::process::setrlimit(Resource::Core, no_core);
    sys::default_action(signal);
    sys::raise(signal);
    // A signal whose default is to ignore (the child stopped-and-killed
    // case cannot reach here): exit as a shell would report it.
    sys::exit_now(128 + signal)
}

/// The frame stream on the helper's stdout. Small frames are queued and
/// leave together ([`Frames::flush`]); output frames flush the queue ahead
/// of themselves, so the order is always the order of events. If nobody can
/// read frames any more there is nothing left to supervise for: the helper
/// exits (and the parent-death signal ends the command).
pub struct Frames {
    queued: Vec<u8>,
}

impl Frames {
    /// Frames on the helper's stdout.
    pub fn new() -> Frames {
        Frames { queued: Vec::new() }
    }

    /// Queues one frame with `payload`.
    pub fn frame(&mut self, tag: u8, payload: &[u8]) {
        let at = self.queued.len();
        self.queued.resize(at + wire::HEADER, 0);
        wire::frame_header(&mut self.queued[at..], tag, payload.len());
        self.queued.extend_from_slice(payload);
    }

    /// Writes bytes that already are a whole frame, after what is queued.
    pub fn raw(&mut self, bytes: &[u8]) {
        self.flush();
        self.write(bytes);
    }

    /// Writes what is queued.
    pub fn flush(&mut self) {
        if !self.queued.is_empty() {
            let queued = std::mem::take(&mut self.queued);
            self.write(&queued);
            self.queued = queued;
            self.queued.clear();
        }
    }

    fn write(&mut self, bytes: &[u8]) {
        if sys::write_all_fd(stdout(), bytes).is_err() {
            sys::exit_now(125);
        }
    }

    /// Reports a failed start and exits 127.
    pub fn fail(&mut self, stage: Stage, errno: c_int, detail: &str) -> ! {
        let mut payload = Vec::with_capacity(5 + detail.len());
        payload.push(stage as u8);
        payload.extend_from_slice(&errno.to_le_bytes());
        payload.extend_from_slice(detail.as_bytes());
        self.frame(tag::FAILED, &payload);
        self.flush();
        sys::exit_now(127)
    }

    /// Reports the child's end.
    fn exited(&mut self, raw: c_int, pid: Pid) {
        let signal = raw & 0x7f;
        let (kind, value) = if signal == 0 {
            (wire::EXIT_CODE, (raw >> 8) & 0xff)
        } else {
            (wire::EXIT_SIGNAL, signal)
        };
        let core = u8::from(raw & 0x80 != 0);
        // The cheap proof only (no process has the group id any more); a
        // group with members left is proven empty by a later ladder.
        let empty =
            dsh_process_group::signal::group_absent(pid.as_raw_nonzero().get()).unwrap_or(false);
        let mut payload = [0u8; 7];
        payload[0] = kind;
        payload[1..5].copy_from_slice(&value.to_le_bytes());
        payload[5] = core;
        payload[6] = u8::from(empty);
        self.frame(tag::EXITED, &payload);
    }

    /// An internal failure after the start: a message on stderr (which the
    /// host logs) and exit 125.
    fn abort(&mut self, message: &str) -> ! {
        eprintln!("dsh-supervisor: {message}");
        sys::exit_now(125)
    }
}
