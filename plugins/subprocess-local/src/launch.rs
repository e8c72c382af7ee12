//! Starting a program with `posix_spawn` as the leader of a new session.
//!
//! Why `posix_spawn` rather than `std::process::Command`: std offers
//! `setsid` only on nightly, and a `pre_exec` hook forces a full `fork`,
//! which costs page-table copies proportional to the host's size. glibc's
//! `posix_spawn` uses `clone(CLONE_VM | CLONE_VFORK)`, performs `setsid`
//! (`POSIX_SPAWN_SETSID`, glibc ≥ 2.26) before the file actions, and reports
//! a failing `execve` as its return value — so the child is a session and
//! group leader from its first instruction, and a missing program is an
//! error here rather than an exit code.
//!
//! The child starts with an empty signal mask, every signal at its default
//! disposition (an agent's commands must not inherit the host's ignored
//! SIGPIPE or SIGINT), and no descriptor but 0, 1 and 2. Requires glibc
//! 2.34 (`addclosefrom_np`; Debian 12 has 2.36).

use std::ffi::{CStr, c_char, c_int};
use std::io;
use std::mem::MaybeUninit;
use std::os::fd::RawFd;
use std::ptr;

use rustix::process::Pid;

/// One step of the child's file-descriptor setup, run in order after
/// `setsid`.
#[derive(Debug, Clone, Copy)]
pub enum FdAction<'a> {
    /// `dup2(src, target)`; `src` must be a descriptor of the parent that
    /// is not 0, 1 or 2 (see [`crate::fdio::above_stdio`]) unless an
    /// earlier action set it up in the child.
    Dup { src: RawFd, target: RawFd },
    /// `open(path, flags)` onto `target`. Opening a terminal this way in
    /// the new session makes it the controlling terminal.
    Open {
        target: RawFd,
        path: &'a CStr,
        flags: c_int,
    },
}

/// What to start.
#[derive(Debug)]
pub struct Launch<'a> {
    /// The resolved, absolute program path.
    pub program: &'a CStr,
    /// The argument vector (`argv[0]` as the caller gave it).
    pub argv: &'a [&'a CStr],
    /// `NAME=VALUE` entries.
    pub env: &'a [&'a CStr],
    /// The working directory (must exist).
    pub cwd: &'a CStr,
    pub fds: &'a [FdAction<'a>],
}

/// Starts `launch` and returns the child's pid, which is also its process
/// group and session id. Runs on the calling thread (the `posix_spawn` call
/// suspends it until the child has exec'd or failed); never blocks beyond
/// that.
pub fn spawn(launch: &Launch<'_>) -> io::Result<Pid> {
    let mut actions = FileActions::new()?;
    for action in launch.fds {
        match *action {
            FdAction::Dup { src, target } => actions.dup2(src, target)?,
            FdAction::Open {
                target,
                path,
                flags,
            } => actions.open(target, path, flags)?,
        }
    }
    // Only 0, 1 and 2 reach the program: descriptors some other part of
    // the host opened without close-on-exec must not leak into it.
    actions.close_from(3)?;
    actions.chdir(launch.cwd)?;
    let attr = SpawnAttr::new_session()?;

    let argv = null_terminated(launch.argv);
    let env = null_terminated(launch.env);
    let mut pid: libc::pid_t = 0;
    // SAFETY: every pointer is valid for the duration of the call: the
    // program path and the argv/env strings are borrowed `CStr`s, the
    // pointer arrays are NUL-terminated and outlive the call, and the
    // actions/attributes were initialised by their constructors.
    let rc = unsafe {
        libc::posix_spawn(
            &mut pid,
            launch.program.as_ptr(),
            actions.as_ptr(),
            attr.as_ptr(),
            argv.as_ptr(),
            env.as_ptr(),
        )
    };
    check(rc)?;
    Pid::from_raw(pid).ok_or_else(|| io::Error::other("posix_spawn returned pid 0"))
}

fn null_terminated(strings: &[&CStr]) -> Vec<*mut c_char> {
    let mut pointers: Vec<*mut c_char> = Vec::with_capacity(strings.len() + 1);
    // posix_spawn takes `char *const[]` but never writes through them.
    pointers.extend(strings.iter().map(|s| s.as_ptr().cast_mut()));
    pointers.push(ptr::null_mut());
    pointers
}

fn check(rc: c_int) -> io::Result<()> {
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::from_raw_os_error(rc))
    }
}

/// `posix_spawn_file_actions_t`, destroyed on drop. Boxed so its address is
/// stable between initialisation and destruction.
struct FileActions(Box<MaybeUninit<libc::posix_spawn_file_actions_t>>);

impl FileActions {
    fn new() -> io::Result<FileActions> {
        let mut raw = Box::new(MaybeUninit::uninit());
        // SAFETY: `raw` points to writable storage of the right type.
        check(unsafe { libc::posix_spawn_file_actions_init(raw.as_mut_ptr()) })?;
        Ok(FileActions(raw))
    }

    fn as_ptr(&self) -> *const libc::posix_spawn_file_actions_t {
        self.0.as_ptr()
    }

    fn as_mut_ptr(&mut self) -> *mut libc::posix_spawn_file_actions_t {
        self.0.as_mut_ptr()
    }

    fn dup2(&mut self, src: RawFd, target: RawFd) -> io::Result<()> {
        // SAFETY: the actions object is initialised (see `new`).
        check(unsafe { libc::posix_spawn_file_actions_adddup2(self.as_mut_ptr(), src, target) })
    }

    fn open(&mut self, target: RawFd, path: &CStr, flags: c_int) -> io::Result<()> {
        // SAFETY: initialised actions; glibc copies `path`.
        check(unsafe {
            libc::posix_spawn_file_actions_addopen(
                self.as_mut_ptr(),
                target,
                path.as_ptr(),
                flags,
                0,
            )
        })
    }

    fn close_from(&mut self, first: RawFd) -> io::Result<()> {
        // SAFETY: initialised actions (glibc ≥ 2.34).
        check(unsafe { libc::posix_spawn_file_actions_addclosefrom_np(self.as_mut_ptr(), first) })
    }

    fn chdir(&mut self, dir: &CStr) -> io::Result<()> {
        // SAFETY: initialised actions; glibc (≥ 2.29) copies `dir`.
        check(unsafe {
            libc::posix_spawn_file_actions_addchdir_np(self.as_mut_ptr(), dir.as_ptr())
        })
    }
}

impl Drop for FileActions {
    fn drop(&mut self) {
        // SAFETY: initialised in `new`, destroyed exactly once.
        unsafe {
            libc::posix_spawn_file_actions_destroy(self.as_mut_ptr());
        }
    }
}

/// `posix_spawnattr_t` set up for a new session with a clean signal state.
struct SpawnAttr(Box<MaybeUninit<libc::posix_spawnattr_t>>);

impl SpawnAttr {
    fn new_session() -> io::Result<SpawnAttr> {
        let mut raw = Box::new(MaybeUninit::uninit());
        // SAFETY: `raw` points to writable storage of the right type.
        check(unsafe { libc::posix_spawnattr_init(raw.as_mut_ptr()) })?;
        let mut attr = SpawnAttr(raw);
        let flags = libc::POSIX_SPAWN_SETSID
            | libc::POSIX_SPAWN_SETSIGMASK as libc::c_short
            | libc::POSIX_SPAWN_SETSIGDEF as libc::c_short;
        let mut empty = MaybeUninit::<libc::sigset_t>::uninit();
        let mut all = MaybeUninit::<libc::sigset_t>::uninit();
        // SAFETY: the attribute object is initialised; the sets are
        // initialised by sigemptyset/sigfillset before use and copied by
        // the setters.
        unsafe {
            check(libc::posix_spawnattr_setflags(attr.as_mut_ptr(), flags))?;
            libc::sigemptyset(empty.as_mut_ptr());
            check(libc::posix_spawnattr_setsigmask(
                attr.as_mut_ptr(),
                empty.as_ptr(),
            ))?;
            libc::sigfillset(all.as_mut_ptr());
            // KILL and STOP cannot be changed; leave them out.
            libc::sigdelset(all.as_mut_ptr(), libc::SIGKILL);
            libc::sigdelset(all.as_mut_ptr(), libc::SIGSTOP);
            check(libc::posix_spawnattr_setsigdefault(
                attr.as_mut_ptr(),
                all.as_ptr(),
            ))?;
        }
        Ok(attr)
    }

    fn as_ptr(&self) -> *const libc::posix_spawnattr_t {
        self.0.as_ptr()
    }

    fn as_mut_ptr(&mut self) -> *mut libc::posix_spawnattr_t {
        self.0.as_mut_ptr()
    }
}

impl Drop for SpawnAttr {
    fn drop(&mut self) {
        // SAFETY: initialised in `new_session`, destroyed exactly once.
        unsafe {
            libc::posix_spawnattr_destroy(self.as_mut_ptr());
        }
    }
}
