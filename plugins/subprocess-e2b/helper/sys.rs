//! The few C library calls and Linux system calls the helper makes, for
//! x86_64 Linux (the only platform it is built for). The helper has no
//! dependencies beyond `std`, so it declares them itself.

use std::ffi::{CStr, c_char, c_int, c_long, c_uint, c_ulong, c_void};
use std::io;

pub type Pid = c_int;

pub const SIGHUP: c_int = 1;
pub const SIGKILL: c_int = 9;
pub const SIGUSR1: c_int = 10;
pub const SIGUSR2: c_int = 12;
pub const SIGTERM: c_int = 15;
pub const SIGCHLD: c_int = 17;
pub const SIGCONT: c_int = 18;
/// The largest signal number (`SIGRTMAX` on Linux).
pub const SIGMAX: c_int = 64;

pub const ESRCH: c_int = 3;
pub const EINTR: c_int = 4;
pub const EACCES: c_int = 13;
pub const ENOENT: c_int = 2;
pub const ENOTDIR: c_int = 20;
pub const EINVAL: c_int = 22;
pub const EAGAIN: c_int = 11;

pub const O_RDONLY: c_int = 0;
pub const O_WRONLY: c_int = 1;
pub const O_CREAT: c_int = 0o100;
pub const O_EXCL: c_int = 0o200;
pub const O_NONBLOCK: c_int = 0o4000;
pub const O_NOFOLLOW: c_int = 0o400000;
pub const O_CLOEXEC: c_int = 0o2000000;

pub const F_GETFL: c_int = 3;
pub const F_SETFL: c_int = 4;

pub const POLLIN: i16 = 0x001;
pub const POLLERR: i16 = 0x008;
pub const POLLHUP: i16 = 0x010;

pub const WNOHANG: c_int = 1;
pub const PR_SET_PDEATHSIG: c_int = 1;
pub const RLIMIT_CORE: c_int = 4;
pub const SIG_BLOCK: c_int = 0;
pub const SIG_SETMASK: c_int = 2;
pub const SIG_DFL: usize = 0;

const SYS_RT_SIGPROCMASK: c_long = 14;
const SYS_SIGNALFD4: c_long = 289;
const SYS_PIDFD_SEND_SIGNAL: c_long = 424;
const SYS_PIDFD_OPEN: c_long = 434;
const SYS_CLOSE_RANGE: c_long = 436;
const CLOSE_RANGE_CLOEXEC: c_uint = 4;
const SFD_CLOEXEC: c_int = O_CLOEXEC;
const SFD_NONBLOCK: c_int = O_NONBLOCK;

#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct PollFd {
    pub fd: c_int,
    pub events: i16,
    pub revents: i16,
}

#[repr(C)]
struct Rlimit {
    cur: u64,
    max: u64,
}

unsafe extern "C" {
    fn fork() -> Pid;
    fn setsid() -> Pid;
    fn getpid() -> Pid;
    fn getppid() -> Pid;
    fn setgroups(size: usize, list: *const c_uint) -> c_int;
    fn setgid(gid: c_uint) -> c_int;
    fn setuid(uid: c_uint) -> c_int;
    fn setfsuid(uid: c_uint) -> c_int;
    fn setfsgid(gid: c_uint) -> c_int;
    fn prctl(option: c_int, arg2: c_ulong, ...) -> c_int;
    fn chdir(path: *const c_char) -> c_int;
    fn dup2(old: c_int, new: c_int) -> c_int;
    fn close(fd: c_int) -> c_int;
    fn pipe2(fds: *mut c_int, flags: c_int) -> c_int;
    fn open(path: *const c_char, flags: c_int, ...) -> c_int;
    fn mkdir(path: *const c_char, mode: c_uint) -> c_int;
    fn fcntl(fd: c_int, cmd: c_int, ...) -> c_int;
    fn read(fd: c_int, buf: *mut c_void, count: usize) -> isize;
    fn write(fd: c_int, buf: *const c_void, count: usize) -> isize;
    fn execve(path: *const c_char, argv: *const *const c_char, envp: *const *const c_char)
    -> c_int;
    fn access(path: *const c_char, mode: c_int) -> c_int;
    fn _exit(status: c_int) -> !;
    fn waitpid(pid: Pid, status: *mut c_int, options: c_int) -> Pid;
    fn kill(pid: Pid, sig: c_int) -> c_int;
    fn poll(fds: *mut PollFd, nfds: c_ulong, timeout: c_int) -> c_int;
    fn signal(signum: c_int, handler: usize) -> usize;
    fn setrlimit(resource: c_int, limit: *const Rlimit) -> c_int;
    fn syscall(number: c_long, ...) -> c_long;
}

fn check(result: c_int) -> io::Result<c_int> {
    if result == -1 {
        Err(io::Error::last_os_error())
    } else {
        Ok(result)
    }
}

fn check_long(result: c_long) -> io::Result<c_long> {
    if result == -1 {
        Err(io::Error::last_os_error())
    } else {
        Ok(result)
    }
}

/// The calling thread's `errno`.
pub fn errno() -> c_int {
    io::Error::last_os_error().raw_os_error().unwrap_or(0)
}

/// # Safety
/// The caller must be single-threaded (the child may only make
/// async-signal-safe calls before `exec`).
pub unsafe fn fork_process() -> io::Result<Pid> {
    // SAFETY: forwarded to the caller.
    check(unsafe { fork() })
}

pub fn new_session() -> io::Result<Pid> {
    // SAFETY: no pointers.
    check(unsafe { setsid() })
}

pub fn own_pid() -> Pid {
    // SAFETY: no pointers.
    unsafe { getpid() }
}

pub fn parent_pid() -> Pid {
    // SAFETY: no pointers.
    unsafe { getppid() }
}

/// Takes on `uid`, `gid` and `groups` for good (root → the sandbox user).
pub fn become_user(uid: u32, gid: u32, groups: &[u32]) -> io::Result<()> {
    // SAFETY: a valid pointer and length.
    check(unsafe { setgroups(groups.len(), groups.as_ptr()) })?;
    // SAFETY: no pointers.
    check(unsafe { setgid(gid) })?;
    // SAFETY: no pointers.
    check(unsafe { setuid(uid) })?;
    Ok(())
}

/// Sets the filesystem identity (files are then created, and permissions
/// checked, as `uid`/`gid`); returns the previous ids.
pub fn set_fs_identity(uid: u32, gid: u32) -> (u32, u32) {
    // SAFETY: no pointers. The gid first: changing the uid away from root
    // drops the capability needed to change the gid.
    let old_gid = unsafe { setfsgid(gid) } as u32;
    // SAFETY: no pointers.
    let old_uid = unsafe { setfsuid(uid) } as u32;
    (old_uid, old_gid)
}

pub fn parent_death_signal(signal: c_int) -> io::Result<()> {
    // SAFETY: PR_SET_PDEATHSIG takes one integer argument.
    check(unsafe { prctl(PR_SET_PDEATHSIG, signal as c_ulong) }).map(drop)
}

pub fn change_dir(path: &CStr) -> io::Result<()> {
    // SAFETY: a valid C string.
    check(unsafe { chdir(path.as_ptr()) }).map(drop)
}

pub fn dup_to(old: c_int, new: c_int) -> io::Result<()> {
    // SAFETY: no pointers.
    check(unsafe { dup2(old, new) }).map(drop)
}

pub fn close_fd(fd: c_int) {
    // SAFETY: closing a descriptor this process owns.
    unsafe { close(fd) };
}

/// A pipe, both ends close-on-exec: `(read, write)`.
pub fn pipe() -> io::Result<(c_int, c_int)> {
    let mut fds = [0 as c_int; 2];
    // SAFETY: `fds` has room for two descriptors.
    check(unsafe { pipe2(fds.as_mut_ptr(), O_CLOEXEC) })?;
    Ok((fds[0], fds[1]))
}

pub fn open_path(path: &CStr, flags: c_int, mode: c_uint) -> io::Result<c_int> {
    // SAFETY: a valid C string; the mode is read only with O_CREAT.
    check(unsafe { open(path.as_ptr(), flags | O_CLOEXEC, mode) })
}

pub fn make_dir(path: &CStr, mode: c_uint) -> io::Result<()> {
    // SAFETY: a valid C string.
    check(unsafe { mkdir(path.as_ptr(), mode) }).map(drop)
}

pub fn set_nonblocking(fd: c_int) -> io::Result<()> {
    // SAFETY: F_GETFL/F_SETFL take and return integers.
    let flags = check(unsafe { fcntl(fd, F_GETFL) })?;
    // SAFETY: as above.
    check(unsafe { fcntl(fd, F_SETFL, flags | O_NONBLOCK) }).map(drop)
}

pub fn read_fd(fd: c_int, buf: &mut [u8]) -> io::Result<usize> {
    loop {
        // SAFETY: `buf` is valid for writes of its length.
        let n = unsafe { read(fd, buf.as_mut_ptr().cast(), buf.len()) };
        if n >= 0 {
            return Ok(n as usize);
        }
        let err = io::Error::last_os_error();
        if err.raw_os_error() != Some(EINTR) {
            return Err(err);
        }
    }
}

pub fn write_all_fd(fd: c_int, mut buf: &[u8]) -> io::Result<()> {
    while !buf.is_empty() {
        // SAFETY: `buf` is valid for reads of its length.
        let n = unsafe { write(fd, buf.as_ptr().cast(), buf.len()) };
        if n < 0 {
            let err = io::Error::last_os_error();
            if err.raw_os_error() == Some(EINTR) {
                continue;
            }
            return Err(err);
        }
        buf = &buf[n as usize..];
    }
    Ok(())
}

/// # Safety
/// `argv` and `envp` must be NULL-terminated arrays of valid C strings.
pub unsafe fn exec(path: &CStr, argv: &[*const c_char], envp: &[*const c_char]) -> io::Error {
    // SAFETY: forwarded to the caller.
    unsafe { execve(path.as_ptr(), argv.as_ptr(), envp.as_ptr()) };
    io::Error::last_os_error()
}

/// `access(path, X_OK)` with the real identity.
pub fn executable(path: &CStr) -> bool {
    const X_OK: c_int = 1;
    // SAFETY: a valid C string.
    unsafe { access(path.as_ptr(), X_OK) == 0 }
}

pub fn exit_now(status: c_int) -> ! {
    // SAFETY: ends the process without running anything else (what a
    // forked child must do).
    unsafe { _exit(status) }
}

/// `waitpid(pid, options)`: `Some(raw status)` once the child ended.
pub fn wait_child(pid: Pid, options: c_int) -> io::Result<Option<c_int>> {
    let mut status = 0;
    loop {
        // SAFETY: `status` is a valid out-pointer.
        let result = unsafe { waitpid(pid, &mut status, options) };
        match result {
            0 => return Ok(None),
            -1 if errno() == EINTR => continue,
            -1 => return Err(io::Error::last_os_error()),
            _ => return Ok(Some(status)),
        }
    }
}

pub fn send_signal(pid: Pid, signal: c_int) -> io::Result<()> {
    // SAFETY: no pointers.
    check(unsafe { kill(pid, signal) }).map(drop)
}

pub fn poll_fds(fds: &mut [PollFd], timeout_ms: c_int) -> io::Result<usize> {
    loop {
        // SAFETY: `fds` is valid for its length.
        let n = unsafe { poll(fds.as_mut_ptr(), fds.len() as c_ulong, timeout_ms) };
        if n >= 0 {
            return Ok(n as usize);
        }
        let err = io::Error::last_os_error();
        if err.raw_os_error() != Some(EINTR) {
            return Err(err);
        }
    }
}

/// Every signal back to its default action and none blocked: what a
/// program expects to find at startup (the Rust runtime of the helper
/// ignores SIGPIPE, which must not leak into the program).
pub fn reset_signals() {
    for signum in 1..=SIGMAX {
        if signum != SIGKILL && signum != 19 {
            // SAFETY: SIG_DFL is always a valid disposition; numbers the C
            // library reserves fail harmlessly.
            unsafe { signal(signum, SIG_DFL) };
        }
    }
    let empty: u64 = 0;
    // SAFETY: the kernel's sigset is 8 bytes on x86_64.
    unsafe {
        syscall(
            SYS_RT_SIGPROCMASK,
            SIG_SETMASK as c_long,
            &empty as *const u64,
            std::ptr::null_mut::<u64>(),
            8 as c_long,
        )
    };
}

fn sigmask(signals: &[c_int]) -> u64 {
    signals.iter().fold(0, |mask, s| mask | (1u64 << (s - 1)))
}

/// Blocks `signals` and returns a non-blocking signalfd that reports them.
pub fn signal_fd(signals: &[c_int]) -> io::Result<c_int> {
    let mask = sigmask(signals);
    // SAFETY: an 8-byte kernel sigset.
    check_long(unsafe {
        syscall(
            SYS_RT_SIGPROCMASK,
            SIG_BLOCK as c_long,
            &mask as *const u64,
            std::ptr::null_mut::<u64>(),
            8 as c_long,
        )
    })?;
    // SAFETY: as above.
    let fd = check_long(unsafe {
        syscall(
            SYS_SIGNALFD4,
            -1 as c_long,
            &mask as *const u64,
            8 as c_long,
            (SFD_CLOEXEC | SFD_NONBLOCK) as c_long,
        )
    })?;
    Ok(fd as c_int)
}

/// Reads one pending signal from a signalfd (`None` when none is pending).
pub fn read_signal(fd: c_int) -> io::Result<Option<c_int>> {
    let mut info = [0u8; 128];
    match read_fd(fd, &mut info) {
        Ok(128) => Ok(Some(i32::from_le_bytes([
            info[0], info[1], info[2], info[3],
        ]))),
        Ok(n) => Err(io::Error::other(format!(
            "short signalfd read of {n} bytes"
        ))),
        Err(err) if err.raw_os_error() == Some(EAGAIN) => Ok(None),
        Err(err) => Err(err),
    }
}

/// A pidfd for `pid` (Linux 5.3+): readable once the process ended.
pub fn pidfd(pid: Pid) -> io::Result<c_int> {
    // SAFETY: no pointers.
    check_long(unsafe { syscall(SYS_PIDFD_OPEN, pid as c_long, 0 as c_long) }).map(|fd| fd as c_int)
}

/// Sends `signal` to the process a pidfd pins (never to a recycled pid).
pub fn pidfd_signal(pidfd: c_int, signal: c_int) -> io::Result<()> {
    // SAFETY: a NULL siginfo is allowed.
    check_long(unsafe {
        syscall(
            SYS_PIDFD_SEND_SIGNAL,
            pidfd as c_long,
            signal as c_long,
            std::ptr::null::<c_void>(),
            0 as c_long,
        )
    })
    .map(drop)
}

/// Marks every descriptor from `first` on close-on-exec.
pub fn cloexec_from(first: c_uint) {
    // SAFETY: no pointers; failure (an old kernel) leaves descriptors as
    // they are, which the helper's own CLOEXEC flags already cover.
    unsafe {
        syscall(
            SYS_CLOSE_RANGE,
            first as c_long,
            c_uint::MAX as c_long,
            CLOSE_RANGE_CLOEXEC as c_long,
        )
    };
}

/// No core files (before the helper re-raises its child's fatal signal).
pub fn disable_core_dumps() {
    let limit = Rlimit { cur: 0, max: 0 };
    // SAFETY: a valid pointer.
    unsafe { setrlimit(RLIMIT_CORE, &limit) };
}

/// Restores `signum`'s default action and unblocks it.
pub fn default_action(signum: c_int) {
    // SAFETY: SIG_DFL is valid.
    unsafe { signal(signum, SIG_DFL) };
    let mask = sigmask(&[signum]);
    const SIG_UNBLOCK: c_long = 1;
    // SAFETY: an 8-byte kernel sigset.
    unsafe {
        syscall(
            SYS_RT_SIGPROCMASK,
            SIG_UNBLOCK,
            &mask as *const u64,
            std::ptr::null_mut::<u64>(),
            8 as c_long,
        )
    };
}
