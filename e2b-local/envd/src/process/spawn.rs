//! Starting a command the way envd does (docs/e2b-protocol.md §5.4): `/bin/sh -c 'exec "$@"' -- cmd
//! args…` as the requested user (uid, gid and supplementary groups), in the resolved working
//! directory, with exactly the environment envd builds, `oom_score_adj` 100, nice 0 and
//! best-effort I/O priority 4; stdio as pipes (stdin optionally `/dev/null`) or a new PTY
//! session with the terminal as controlling terminal.
//!
//! Unlike PTY processes, pipe processes are not put in a session or process group of their own:
//! envd does not do it either, so they share the daemon's group.

use std::ffi::CString;
use std::io;
use std::os::fd::OwnedFd;
use std::os::unix::ffi::OsStrExt;
use std::path::PathBuf;
use std::process::Stdio;
use std::sync::Arc;

use tokio::process::{Child, ChildStderr, ChildStdin, ChildStdout, Command};

use super::pty::{self, PtyMaster};

/// What envd's wrapper script boils down to once the priority settings are applied before
/// `exec`: the shell replaces itself with the user's command, so the pid is the command's own and
/// a missing command is reported by the shell (exit 127), not as a spawn failure.
const WRAPPER_SCRIPT: &str = "exec \"$@\"";

/// How the child's stdio is wired.
#[derive(Debug, Clone, Copy)]
pub(crate) enum StdioMode {
    /// stdout/stderr pipes; stdin a pipe when `stdin` is true, else `/dev/null`.
    Pipes { stdin: bool },
    /// A new pseudo-terminal of `cols`×`rows` as stdin, stdout, stderr and controlling terminal.
    Pty { cols: u32, rows: u32 },
}

/// Everything needed to start one command.
#[derive(Debug, Clone)]
pub(crate) struct SpawnSpec {
    pub cmd: String,
    pub args: Vec<String>,
    /// The complete environment, in order (later entries with the same name win).
    pub env: Vec<(String, String)>,
    pub cwd: PathBuf,
    pub uid: u32,
    pub gid: u32,
    pub groups: Vec<u32>,
    pub stdio: StdioMode,
}

/// The daemon's ends of a started child's stdio.
pub(crate) enum ChildIo {
    Pipes {
        stdin: Option<ChildStdin>,
        stdout: ChildStdout,
        stderr: ChildStderr,
    },
    Pty(Arc<PtyMaster>),
}

/// A started child: its pid, a pidfd for race-free signalling, the handle to reap it, its stdio.
pub(crate) struct Spawned {
    pub pid: u32,
    pub pidfd: OwnedFd,
    pub child: Child,
    pub io: ChildIo,
}

/// Starts `spec`. Errors are what the kernel said about the fork/exec or the credential and
/// directory changes before it (e.g. EACCES for a working directory the user cannot enter).
pub(crate) fn spawn(spec: &SpawnSpec) -> io::Result<Spawned> {
    let mut command = Command::new("/bin/sh");
    command
        .arg("-c")
        .arg(WRAPPER_SCRIPT)
        .arg("--")
        .arg(&spec.cmd)
        .args(&spec.args)
        .env_clear();
    for (name, value) in &spec.env {
        command.env(name, value);
    }

    let mut pty_master = None;
    match spec.stdio {
        StdioMode::Pipes { stdin } => {
            command
                .stdin(if stdin { Stdio::piped() } else { Stdio::null() })
                .stdout(Stdio::piped())
                .stderr(Stdio::piped());
        }
        StdioMode::Pty { cols, rows } => {
            let pair = pty::open(cols, rows)?;
            command
                .stdin(Stdio::from(pair.slave.try_clone()?))
                .stdout(Stdio::from(pair.slave.try_clone()?))
                .stderr(Stdio::from(pair.slave));
            pty_master = Some(pair.master);
        }
    }

    let child_setup = ChildSetup {
        groups: spec.groups.clone(),
        uid: spec.uid,
        gid: spec.gid,
        cwd: CString::new(spec.cwd.as_os_str().as_bytes())
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "cwd contains a NUL byte"))?,
        new_session: matches!(spec.stdio, StdioMode::Pty { .. }),
    };
    // SAFETY: the closure only makes async-signal-safe system calls (no allocation, no locks)
    // on data prepared before the fork.
    unsafe {
        command.pre_exec(move || child_setup.apply());
    }

    let mut child = command.spawn()?;
    // The command (and with it the parent's copies of the pty slave) must be gone before the
    // master can ever report EOF.
    drop(command);
    let pid = child
        .id()
        .ok_or_else(|| io::Error::other("child exited before its pid was known"))?;
    let pidfd = rustix::process::pidfd_open(
        rustix::process::Pid::from_raw(i32::try_from(pid).map_err(io::Error::other)?)
            .ok_or_else(|| io::Error::other("child pid is zero"))?,
        rustix::process::PidfdFlags::empty(),
    )?;
    let io = match pty_master {
        Some(master) => ChildIo::Pty(Arc::new(PtyMaster::new(master)?)),
        None => ChildIo::Pipes {
            stdin: child.stdin.take(),
            stdout: child
                .stdout
                .take()
                .ok_or_else(|| io::Error::other("stdout pipe missing"))?,
            stderr: child
                .stderr
                .take()
                .ok_or_else(|| io::Error::other("stderr pipe missing"))?,
        },
    };
    Ok(Spawned {
        pid,
        pidfd,
        child,
        io,
    })
}

/// The per-child setup run between fork and exec, in Go's order: groups, gid, uid, then the
/// working directory (so a directory the user may not enter fails the start), then the session
/// for a PTY, then envd's priorities.
struct ChildSetup {
    groups: Vec<u32>,
    uid: u32,
    gid: u32,
    cwd: CString,
    new_session: bool,
}

impl ChildSetup {
    fn apply(&self) -> io::Result<()> {
        fn check(result: libc::c_int) -> io::Result<()> {
            if result == -1 {
                Err(io::Error::last_os_error())
            } else {
                Ok(())
            }
        }
        // SAFETY: plain system calls on valid pointers owned by `self`.
        unsafe {
            check(libc::setgroups(self.groups.len(), self.groups.as_ptr()))?;
            check(libc::setgid(self.gid))?;
            check(libc::setuid(self.uid))?;
            check(libc::chdir(self.cwd.as_ptr()))?;
            if self.new_session {
                check(libc::setsid())?;
                check(libc::ioctl(0, libc::TIOCSCTTY, 0))?;
            }
            // envd's `echo 100 > /proc/$$/oom_score_adj`, `nice -n <reset to 0>` and
            // `ionice -c 2 -n 4`; each is best effort, as a missing helper is in envd.
            let oom = libc::open(
                c"/proc/self/oom_score_adj".as_ptr(),
                libc::O_WRONLY | libc::O_CLOEXEC,
            );
            if oom >= 0 {
                libc::write(oom, b"100".as_ptr().cast(), 3);
                libc::close(oom);
            }
            libc::setpriority(libc::PRIO_PROCESS, 0, 0);
            const IOPRIO_WHO_PROCESS: libc::c_long = 1;
            const IOPRIO_CLASS_BE: libc::c_long = 2;
            libc::syscall(
                libc::SYS_ioprio_set,
                IOPRIO_WHO_PROCESS,
                0 as libc::c_long,
                (IOPRIO_CLASS_BE << 13) | 4,
            );
        }
        Ok(())
    }
}
