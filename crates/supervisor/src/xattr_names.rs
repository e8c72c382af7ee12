//! The extended attribute names of the entries `world` describes (envd's
//! `EntryInfo.metadata` is their `user.e2b.*` attributes, followed), read
//! relative to the directory an entry was listed in where the kernel can
//! (`listxattrat`, Linux 6.13: one name looked up, not every component of
//! the path), and remembered for the resident process's life by inode and
//! change time, so an unchanged tree listed again costs one `statx` an
//! entry instead of two system calls — the attribute lookup was a third of
//! the supervisor's time listing 1,000 entries (tests/benches/README.md).
//!
//! Setting or removing an attribute changes the inode's change time, so a
//! remembered list whose inode still has the change time it was read at is
//! still the inode's. Lists are remembered only for inodes whose change
//! time is [`SETTLED`] in the past when read: a change made later gets a
//! later change time even where timestamps are coarse (the rule git's
//! index uses for "racily clean" files).

use std::collections::HashMap;
use std::ffi::OsStr;
use std::os::fd::BorrowedFd;
use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, LazyLock, Mutex, PoisonError};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use rustix::io::Errno;
use rustix::path::Arg;

use crate::sys;

/// Most bytes of an entry's attribute names read (more: none are).
const MAX_NAMES: usize = 4096;

/// How long ago an inode's change time must be for its names to be kept.
const SETTLED: Duration = Duration::from_secs(2);

/// Most inodes remembered; past it the memory starts again.
const CAPACITY: usize = 100_000;

/// Attribute names, NUL-separated, as `listxattr` gives them.
pub(crate) type Names = Arc<[u8]>;

/// The names of `path`'s extended attributes, followed; `None` when
/// unreadable. `meta` is the entry's `lstat` (or its open file's `fstat`);
/// `listed`, the directory it was listed in and its name there.
pub(crate) fn names(
    path: &Path,
    listed: Option<(BorrowedFd<'_>, &OsStr)>,
    meta: &std::fs::Metadata,
) -> Option<Names> {
    // A symlink's names are its target's: not this inode's to remember.
    if meta.file_type().is_symlink() {
        return read(path, listed);
    }
    MEMORY.names(meta, SystemTime::now(), || read(path, listed))
}

static MEMORY: LazyLock<Memory> = LazyLock::new(|| Memory::new(SETTLED, CAPACITY));

/// An inode: its device and number.
type Inode = (u64, u64);

/// A change time: seconds and nanoseconds since the epoch.
type Changed = (i64, i64);

/// Names remembered by inode, with the change time they were read at.
struct Memory {
    settled: Duration,
    capacity: usize,
    inodes: Mutex<HashMap<Inode, (Changed, Names)>>,
}

impl Memory {
    fn new(settled: Duration, capacity: usize) -> Memory {
        Memory {
            settled,
            capacity,
            inodes: Mutex::default(),
        }
    }

    /// The remembered names of `meta`'s inode if its change time is the
    /// one they were read at; else `read`'s, kept when the change time is
    /// settled at `now`.
    fn names(
        &self,
        meta: &std::fs::Metadata,
        now: SystemTime,
        read: impl FnOnce() -> Option<Names>,
    ) -> Option<Names> {
        let inode = (meta.dev(), meta.ino());
        let changed = (meta.ctime(), meta.ctime_nsec());
        let inodes = self.inodes.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some((at, names)) = inodes.get(&inode)
            && *at == changed
        {
            return Some(names.clone());
        }
        drop(inodes);
        let names = read()?;
        let settled = now
            .checked_sub(self.settled)
            .and_then(|line| line.duration_since(UNIX_EPOCH).ok())
            .is_some_and(|line| changed < (line.as_secs() as i64, i64::from(line.subsec_nanos())));
        if settled {
            let mut inodes = self.inodes.lock().unwrap_or_else(PoisonError::into_inner);
            if inodes.len() >= self.capacity {
                inodes.clear();
            }
            inodes.insert(inode, (changed, names.clone()));
        }
        Some(names)
    }
}

/// The names as the kernel gives them now.
fn read(path: &Path, listed: Option<(BorrowedFd<'_>, &OsStr)>) -> Option<Names> {
    /// Cleared once the kernel (or a seccomp filter) refused the call.
    static LISTXATTRAT: AtomicBool = AtomicBool::new(true);
    let mut buf = [0u8; MAX_NAMES];
    if let Some((dir, name)) = listed
        && LISTXATTRAT.load(Ordering::Relaxed)
    {
        match name.into_with_c_str(|name| sys::listxattrat(dir, name, &mut buf)) {
            Ok(len) => return Some(buf[..len].into()),
            Err(Errno::NOSYS | Errno::PERM) => LISTXATTRAT.store(false, Ordering::Relaxed),
            Err(_) => return None,
        }
    }
    let len = rustix::fs::listxattr(path, &mut buf[..]).ok()?;
    Some(buf[..len].into())
}

#[cfg(test)]
mod tests {
    use std::os::fd::AsFd;

    use super::*;

    fn set(path: &Path, name: &str) {
        rustix::fs::setxattr(path, name, b"v", rustix::fs::XattrFlags::empty()).unwrap();
    }

    fn listed(names: &Names) -> Vec<String> {
        names
            .split(|&b| b == 0)
            .filter(|name| !name.is_empty())
            .map(|name| String::from_utf8_lossy(name).into_owned())
            .collect()
    }

    #[test]
    fn names_are_read_relative_to_the_directory_and_through_the_path_alike() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("file");
        std::fs::write(&path, b"x").unwrap();
        set(&path, "user.e2b.k");
        let opened = std::fs::File::open(dir.path()).unwrap();
        let at = read(&path, Some((opened.as_fd(), OsStr::new("file")))).unwrap();
        assert_eq!(listed(&at), ["user.e2b.k"]);
        assert_eq!(read(&path, None).unwrap(), at);
        assert!(read(&dir.path().join("missing"), None).is_none());
    }

    #[test]
    fn remembered_names_last_until_the_inode_changes() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("file");
        std::fs::write(&path, b"x").unwrap();
        let memory = Memory::new(Duration::ZERO, 10);
        // Later than any change time here: every list read is kept.
        let now = SystemTime::now() + Duration::from_secs(60);
        let meta = std::fs::metadata(&path).unwrap();
        let first = memory.names(&meta, now, || read(&path, None)).unwrap();
        assert_eq!(listed(&first), Vec::<String>::new());
        let remembered = memory.names(&meta, now, || panic!("read again")).unwrap();
        assert_eq!(remembered, first);

        // Setting an attribute changes the change time: read again.
        std::thread::sleep(Duration::from_millis(20));
        set(&path, "user.e2b.k");
        let meta = std::fs::metadata(&path).unwrap();
        let changed = memory.names(&meta, now, || read(&path, None)).unwrap();
        assert_eq!(listed(&changed), ["user.e2b.k"]);
    }

    #[test]
    fn names_of_a_recent_change_are_not_remembered() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("file");
        std::fs::write(&path, b"x").unwrap();
        let memory = Memory::new(Duration::from_secs(2), 10);
        let meta = std::fs::metadata(&path).unwrap();
        let now = SystemTime::now();
        memory.names(&meta, now, || read(&path, None)).unwrap();
        let mut reads = 0;
        memory.names(&meta, now, || {
            reads += 1;
            read(&path, None)
        });
        assert_eq!(
            reads, 1,
            "a change time within the window is read each time"
        );
        // Once settled, it is kept.
        let later = now + Duration::from_secs(3);
        memory.names(&meta, later, || read(&path, None)).unwrap();
        memory.names(&meta, later, || panic!("read again")).unwrap();
    }

    #[test]
    fn the_memory_is_bounded() {
        let dir = tempfile::tempdir().unwrap();
        let memory = Memory::new(Duration::ZERO, 3);
        let now = SystemTime::now() + Duration::from_secs(60);
        for n in 0..10 {
            let path = dir.path().join(n.to_string());
            std::fs::write(&path, b"x").unwrap();
            let meta = std::fs::metadata(&path).unwrap();
            memory.names(&meta, now, || read(&path, None)).unwrap();
            let kept = memory.inodes.lock().unwrap().len();
            assert!(kept <= 3, "{kept}");
        }
    }
}
