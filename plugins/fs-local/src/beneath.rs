//! Opens confined beneath a directory: no symlink followed and no `..`
//! leaving it, decided by the kernel on the open itself (docs/design.md
//! §5.1, "World-side operations") — never a check followed by an open.

use std::ffi::OsStr;
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::sync::atomic::{AtomicBool, Ordering};

use rustix::fs::{Mode, OFlags, ResolveFlags};
use rustix::io::Errno;

/// Whether `openat2` answered `ENOSYS` once (a kernel before 5.6, or a
/// seccomp filter refusing it): the descriptor walk is used from then on.
static NO_OPENAT2: AtomicBool = AtomicBool::new(false);

/// Opens `relative` (components separated by `/`, none of them empty, `.`
/// or `..`) beneath `dir` with `flags`, following no symlink on the way or
/// at the end. A symlink met is `ELOOP` (the descriptor walk: `ELOOP` or
/// `ENOTDIR`), an escape `EXDEV`.
pub(crate) fn open(dir: impl AsFd, relative: &str, flags: OFlags) -> rustix::io::Result<OwnedFd> {
    check_components(relative)?;
    let flags = flags | OFlags::CLOEXEC | OFlags::NOFOLLOW | OFlags::NOCTTY;
    if !NO_OPENAT2.load(Ordering::Relaxed) {
        let resolve =
            ResolveFlags::BENEATH | ResolveFlags::NO_SYMLINKS | ResolveFlags::NO_MAGICLINKS;
        match rustix::fs::openat2(&dir, relative, flags, Mode::empty(), resolve) {
            Err(Errno::NOSYS) => NO_OPENAT2.store(true, Ordering::Relaxed),
            // `EAGAIN`: a concurrent rename made the kernel give up; retry.
            Err(Errno::AGAIN) => return open(dir, relative, flags),
            answered => return answered,
        }
    }
    open_by_walk(dir, relative, flags)
}

/// [`open`] without `openat2`: one `openat(O_NOFOLLOW)` per component,
/// each relative to the descriptor of the one before, so no path is ever
/// resolved twice.
pub(crate) fn open_by_walk(
    dir: impl AsFd,
    relative: &str,
    flags: OFlags,
) -> rustix::io::Result<OwnedFd> {
    check_components(relative)?;
    let mut parts = relative.split('/').peekable();
    let mut current: Option<OwnedFd> = None;
    while let Some(part) = parts.next() {
        let name = OsStr::new(part).as_bytes();
        let at = match &current {
            Some(fd) => fd.as_fd(),
            None => dir.as_fd(),
        };
        let opened = if parts.peek().is_some() {
            let flags = OFlags::PATH | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
            rustix::fs::openat(at, name, flags, Mode::empty())?
        } else {
            rustix::fs::openat(at, name, flags | OFlags::NOFOLLOW, Mode::empty())?
        };
        current = Some(opened);
    }
    current.ok_or(Errno::XDEV)
}

/// `EXDEV` for a path that is empty, absolute or has an empty, `.` or `..`
/// component: only plain names lead beneath.
fn check_components(relative: &str) -> rustix::io::Result<()> {
    if relative
        .split('/')
        .any(|part| matches!(part, "" | "." | ".."))
    {
        return Err(Errno::XDEV);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::symlink;

    use super::*;

    fn check(open: fn(&OwnedFd, &str, OFlags) -> rustix::io::Result<OwnedFd>) {
        let scratch = tempfile::tempdir().expect("scratch");
        let root = scratch.path().join("root");
        std::fs::create_dir_all(root.join("d")).expect("mkdir");
        std::fs::write(root.join("d/f"), "in").expect("write");
        std::fs::write(scratch.path().join("outside"), "out").expect("write");
        symlink("../../outside", root.join("d/up")).expect("symlink");
        symlink(scratch.path(), root.join("out")).expect("symlink");
        symlink("f", root.join("d/near")).expect("symlink");
        let fd: OwnedFd =
            rustix::fs::open(&root, OFlags::PATH | OFlags::DIRECTORY, Mode::empty()).expect("root");
        let read = |relative: &str| {
            open(&fd, relative, OFlags::RDONLY).map(|fd| {
                let mut text = String::new();
                std::io::Read::read_to_string(&mut std::fs::File::from(fd), &mut text)
                    .expect("read");
                text
            })
        };
        assert_eq!(read("d/f").as_deref(), Ok("in"));
        for escape in [
            "d/up",
            "out/outside",
            "d/near",
            "../outside",
            "d/../d/f",
            "/etc/passwd",
            "d//f",
        ] {
            assert!(read(escape).is_err(), "{escape} was opened");
        }
    }

    #[test]
    fn opens_stay_beneath_the_root_with_openat2() {
        check(|dir, relative, flags| open(dir, relative, flags));
    }

    #[test]
    fn opens_stay_beneath_the_root_by_descriptor_walk() {
        check(|dir, relative, flags| open_by_walk(dir, relative, flags));
    }
}
