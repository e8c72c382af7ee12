//! The calls the helper needs that rustix does not offer safely: `fork`,
//! `execve`, `_exit`, the process-wide identity changes, signal
//! dispositions and masks, `signalfd`, `close_range` and `listxattrat`. Everything else
//! goes through rustix at the call site. Reading and writing retry on
//! EINTR.

use std::ffi::{CStr, c_char, c_int};
use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd};

use rustix::process::Pid;

fn check(result: c_int) -> io::Result<c_int> {
    if result == -1 {
        Err(io::Error::last_os_error())
    } else {
        Ok(result)
    }
}

/// `fork()`: `Some(child)` in the parent, `None` in the child.
///
/// # Safety
/// The caller must be single-threaded: the child may then run anything
/// (the helper only makes system calls and exits).
pub unsafe fn fork() -> io::Result<Option<Pid>> {
    // SAFETY: forwarded to the caller.
    let pid = check(unsafe { libc::fork() })?;
    Ok(Pid::from_raw(pid))
}

/// Takes on `uid`, `gid` and `groups` for good (root → the sandbox user).
/// libc, not rustix: the C library applies these to every thread of the
/// process, rustix's raw calls only to the calling thread.
pub fn become_user(uid: u32, gid: u32, groups: &[u32]) -> io::Result<()> {
    // SAFETY: a valid pointer and its length.
    check(unsafe { libc::setgroups(groups.len(), groups.as_ptr()) })?;
    // SAFETY: no pointers.
    check(unsafe { libc::setgid(gid) })?;
    // SAFETY: no pointers.
    check(unsafe { libc::setuid(uid) })?;
    Ok(())
}

/// `listxattrat(dir, name, 0, list, len)` (Linux 6.13): the extended
/// attribute names of `name` in `dir`, symlinks followed, NUL-separated in
/// `list`; how many bytes. `NOSYS` on older kernels.
pub fn listxattrat(dir: BorrowedFd<'_>, name: &CStr, list: &mut [u8]) -> rustix::io::Result<usize> {
    // One number on every architecture (calls added since Linux 5.1 share a
    // table); the libc crate does not name it yet.
    const SYS_LISTXATTRAT: libc::c_long = 465;
    // SAFETY: `name` is NUL-terminated and `list` writable for its length,
    // which is all the kernel writes.
    let len = unsafe {
        libc::syscall(
            SYS_LISTXATTRAT,
            dir.as_raw_fd(),
            name.as_ptr(),
            0 as libc::c_uint,
            list.as_mut_ptr(),
            list.len(),
        )
    };
    usize::try_from(len).map_err(|_| {
        rustix::io::Errno::from_raw_os_error(io::Error::last_os_error().raw_os_error().unwrap_or(0))
    })
}

/// Sets the filesystem identity (files are then created, and permissions
/// checked, as `uid`/`gid`); returns the previous ids.
pub fn set_fs_identity(uid: u32, gid: u32) -> (u32, u32) {
    // The gid first: changing the uid away from root drops the capability
    // needed to change the gid.
    // SAFETY: no pointers; setfsgid cannot fail in a way that matters here
    // (it returns the previous id either way).
    let old_gid = unsafe { libc::setfsgid(gid) } as u32;
    // SAFETY: as above.
    let old_uid = unsafe { libc::setfsuid(uid) } as u32;
    (old_uid, old_gid)
}

/// Replaces the process with `path`; returns only the error.
///
/// # Safety
/// `argv` and `envp` must be NULL-terminated arrays of pointers to valid C
/// strings that outlive the call.
pub unsafe fn exec(path: &CStr, argv: &[*const c_char], envp: &[*const c_char]) -> io::Error {
    // SAFETY: forwarded to the caller.
    unsafe { libc::execve(path.as_ptr(), argv.as_ptr(), envp.as_ptr()) };
    io::Error::last_os_error()
}

/// Ends the process at once, running nothing else (what a forked child
/// must do, and what the helper does once its frames are out).
pub fn exit_now(status: c_int) -> ! {
    // SAFETY: _exit has no preconditions.
    unsafe { libc::_exit(status) }
}

fn mask_of(signals: &[c_int]) -> libc::sigset_t {
    // SAFETY: sigset_t is plain data; sigemptyset initialises it.
    let mut set = unsafe { std::mem::zeroed::<libc::sigset_t>() };
    // SAFETY: `set` is a valid sigset_t; bad numbers fail harmlessly.
    unsafe {
        libc::sigemptyset(&mut set);
        for &signal in signals {
            libc::sigaddset(&mut set, signal);
        }
    }
    set
}

/// Every signal back to its default action and none blocked: what a
/// program expects at startup (the Rust runtime of the helper ignores
/// SIGPIPE, which must not leak into the program).
pub fn reset_signals() {
    for signal in 1..=libc::SIGRTMAX() {
        if signal != libc::SIGKILL && signal != libc::SIGSTOP {
            // SAFETY: SIG_DFL is always a valid disposition; numbers the C
            // library reserves fail harmlessly.
            unsafe { libc::signal(signal, libc::SIG_DFL) };
        }
    }
    let empty = mask_of(&[]);
    // SAFETY: a valid set; a NULL old set is allowed.
    unsafe { libc::sigprocmask(libc::SIG_SETMASK, &empty, std::ptr::null_mut()) };
}

/// Blocks `signals` and returns a non-blocking signalfd that reports them.
pub fn signal_fd(signals: &[c_int]) -> io::Result<OwnedFd> {
    let mask = mask_of(signals);
    // SAFETY: a valid set; a NULL old set is allowed.
    check(unsafe { libc::sigprocmask(libc::SIG_BLOCK, &mask, std::ptr::null_mut()) })?;
    // SAFETY: a valid set.
    let fd = check(unsafe { libc::signalfd(-1, &mask, libc::SFD_CLOEXEC | libc::SFD_NONBLOCK) })?;
    // SAFETY: a fresh descriptor nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Reads one pending signal from a signalfd (`None` when none is pending).
pub fn read_signal(fd: BorrowedFd<'_>) -> io::Result<Option<c_int>> {
    let mut info = [0u8; size_of::<libc::signalfd_siginfo>()];
    match read_fd(fd, &mut info) {
        Ok(n) if n == info.len() => {
            // `ssi_signo` is the first field.
            Ok(Some(
                u32::from_ne_bytes([info[0], info[1], info[2], info[3]]) as c_int,
            ))
        }
        Ok(n) => Err(io::Error::other(format!(
            "short signalfd read of {n} bytes"
        ))),
        Err(err) if err.raw_os_error() == Some(libc::EAGAIN) => Ok(None),
        Err(err) => Err(err),
    }
}

/// Restores `signal`'s default action and unblocks it.
pub fn default_action(signal: c_int) {
    // SAFETY: SIG_DFL is valid.
    unsafe { libc::signal(signal, libc::SIG_DFL) };
    let mask = mask_of(&[signal]);
    // SAFETY: a valid set; a NULL old set is allowed.
    unsafe { libc::sigprocmask(libc::SIG_UNBLOCK, &mask, std::ptr::null_mut()) };
}

/// Sends `signal` (any number) to the helper itself.
pub fn raise(signal: c_int) {
    // SAFETY: no pointers.
    unsafe { libc::raise(signal) };
}

/// Marks every descriptor from `first` on close-on-exec.
pub fn cloexec_from(first: u32) {
    // SAFETY: no pointers. Failure (a kernel before 5.11) leaves the
    // descriptors as they are, which the helper's own CLOEXEC flags cover.
    unsafe {
        libc::syscall(
            libc::SYS_close_range,
            first,
            u32::MAX,
            libc::CLOSE_RANGE_CLOEXEC,
        )
    };
}

/// `read`, retried on EINTR.
pub fn read_fd(fd: BorrowedFd<'_>, buf: &mut [u8]) -> io::Result<usize> {
    Ok(rustix::io::retry_on_intr(|| {
        rustix::io::read(fd, &mut *buf)
    })?)
}

/// Writes all of `buf`, retrying on EINTR.
pub fn write_all_fd(fd: impl AsFd, mut buf: &[u8]) -> io::Result<()> {
    let fd = fd.as_fd();
    while !buf.is_empty() {
        let n = rustix::io::retry_on_intr(|| rustix::io::write(fd, buf))?;
        buf = &buf[n..];
    }
    Ok(())
}

/// Closes every descriptor from `first` on (what a process that must not
/// hold its caller's descriptors does first).
pub fn close_from(first: u32) {
    // SAFETY: no pointers. Called before the helper opened anything it
    // keeps, so no owned descriptor is closed behind its owner's back.
    unsafe { libc::syscall(libc::SYS_close_range, first, u32::MAX, 0) };
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The kernel's release as (major, minor).
    fn kernel() -> (u32, u32) {
        let release = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap();
        let mut numbers = release
            .split(|c: char| !c.is_ascii_digit())
            .map(|part| part.parse().unwrap_or(0));
        (numbers.next().unwrap_or(0), numbers.next().unwrap_or(0))
    }

    #[test]
    fn listxattrat_lists_a_names_attributes_relative_to_its_directory() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("file"), b"x").unwrap();
        let tagged = rustix::fs::setxattr(
            dir.path().join("file").as_path(),
            "user.e2b.k",
            b"v",
            rustix::fs::XattrFlags::empty(),
        );
        if tagged == Err(rustix::io::Errno::NOTSUP) {
            panic!("the temporary directory's filesystem has no user extended attributes");
        }
        tagged.unwrap();
        let opened = std::fs::File::open(dir.path()).unwrap();
        let mut list = [0u8; 256];
        match listxattrat(opened.as_fd(), c"file", &mut list) {
            Ok(len) => assert!(
                list[..len]
                    .split(|&b| b == 0)
                    .any(|name| name == b"user.e2b.k"),
                "{:?}",
                String::from_utf8_lossy(&list[..len])
            ),
            // Only a kernel from before the call (Linux 6.13) may lack it.
            Err(rustix::io::Errno::NOSYS) => {
                assert!(kernel() < (6, 13), "{:?}", kernel());
                return;
            }
            Err(err) => panic!("listxattrat: {err}"),
        }
        assert_eq!(
            listxattrat(opened.as_fd(), c"missing", &mut list),
            Err(rustix::io::Errno::NOENT)
        );
    }
}
