//! A directory watcher over inotify with fsnotify's semantics, which envd uses
//! (docs/e2b-protocol.md §6.3): one event per inotify record carrying every operation it stands
//! for, recursive watches that follow directories created or moved in later, and the watched
//! directory's own removal or move reported under its own path.

use std::collections::{HashMap, VecDeque};
use std::io;
use std::mem::MaybeUninit;
use std::os::fd::OwnedFd;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use rustix::fs::inotify::{self, ReadFlags, WatchFlags};
use tokio::io::unix::AsyncFd;

/// The operations one inotify record stands for, as fsnotify names them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Ops {
    pub create: bool,
    pub write: bool,
    pub remove: bool,
    pub rename: bool,
    pub chmod: bool,
}

/// One change under the watched directory: the absolute path it concerns and what happened.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Change {
    pub path: PathBuf,
    pub ops: Ops,
}

/// Why watching stopped.
#[derive(Debug, thiserror::Error)]
pub(crate) enum WatchError {
    #[error("fsnotify: queue or buffer overflow")]
    Overflow,
    #[error("{0}")]
    Io(#[from] io::Error),
}

struct Watch {
    path: PathBuf,
    /// The directory the client asked for (as opposed to a subdirectory of a recursive watch).
    root: bool,
}

/// A watch on one directory, optionally recursive.
pub(crate) struct DirWatcher {
    fd: AsyncFd<OwnedFd>,
    recursive: bool,
    watches: HashMap<i32, Watch>,
    by_path: HashMap<PathBuf, i32>,
    /// Recent IN_MOVED_FROM cookies, to re-path watched subdirectories moved within the tree.
    moved_from: VecDeque<(u32, PathBuf)>,
    pending: VecDeque<Change>,
    buf: Vec<MaybeUninit<u8>>,
}

fn mask() -> WatchFlags {
    WatchFlags::CREATE
        | WatchFlags::MODIFY
        | WatchFlags::DELETE
        | WatchFlags::DELETE_SELF
        | WatchFlags::MOVED_FROM
        | WatchFlags::MOVED_TO
        | WatchFlags::MOVE_SELF
        | WatchFlags::ATTRIB
}

impl DirWatcher {
    /// Starts watching `root` (and, if `recursive`, every directory below it, without following
    /// symlinks). Must be called on a tokio runtime.
    pub(crate) fn new(root: &Path, recursive: bool) -> io::Result<Self> {
        let fd = inotify::init(inotify::CreateFlags::CLOEXEC | inotify::CreateFlags::NONBLOCK)?;
        // SAFETY: `fd` is an open inotify descriptor owned by the `AsyncFd` for its whole life.
        let fd = unsafe { AsyncFd::register(fd)? };
        let mut watcher = Self {
            fd,
            recursive,
            watches: HashMap::new(),
            by_path: HashMap::new(),
            moved_from: VecDeque::new(),
            pending: VecDeque::new(),
            buf: vec![MaybeUninit::uninit(); 64 * 1024],
        };
        watcher.add(root, true)?;
        if recursive {
            watcher.add_tree(root)?;
        }
        Ok(watcher)
    }

    fn add(&mut self, path: &Path, root: bool) -> io::Result<()> {
        let wd = inotify::add_watch(self.fd.get_ref(), path, mask())?;
        if let Some(previous) = self.watches.get(&wd).map(|watch| watch.path.clone()) {
            // The same directory under a new name (moved within the tree).
            self.by_path.remove(&previous);
        }
        self.watches.insert(
            wd,
            Watch {
                path: path.to_path_buf(),
                root,
            },
        );
        self.by_path.insert(path.to_path_buf(), wd);
        Ok(())
    }

    /// Adds every directory below `dir` (the walk ignores entries that vanish meanwhile).
    fn add_tree(&mut self, dir: &Path) -> io::Result<()> {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return Ok(());
        };
        for entry in entries.flatten() {
            let is_dir = entry.file_type().is_ok_and(|kind| kind.is_dir());
            if is_dir {
                let path = entry.path();
                match self.add(&path, false) {
                    Ok(()) => self.add_tree(&path)?,
                    Err(err) if err.kind() == io::ErrorKind::NotFound => {}
                    Err(err) => return Err(err),
                }
            }
        }
        Ok(())
    }

    /// The next change. Cancel-safe: dropping the future loses nothing already read.
    pub(crate) async fn next(&mut self) -> Result<Change, WatchError> {
        loop {
            if let Some(change) = self.pending.pop_front() {
                return Ok(change);
            }
            let mut guard = self.fd.readable().await?;
            let records = {
                let mut reader = inotify::Reader::new(guard.get_ref().get_ref(), &mut self.buf);
                let mut records = Vec::new();
                loop {
                    match reader.next() {
                        Ok(event) => records.push(Record {
                            wd: event.wd(),
                            flags: event.events(),
                            cookie: event.cookie(),
                            name: event.file_name().map(|name| {
                                std::ffi::OsStr::from_bytes(name.to_bytes()).to_owned()
                            }),
                        }),
                        Err(rustix::io::Errno::AGAIN) => break,
                        Err(err) => return Err(WatchError::Io(err.into())),
                    }
                    if reader.is_buffer_empty() {
                        break;
                    }
                }
                records
            };
            if records.is_empty() {
                guard.clear_ready();
                continue;
            }
            for record in records {
                self.handle(record)?;
            }
        }
    }

    fn handle(&mut self, record: Record) -> Result<(), WatchError> {
        let flags = record.flags;
        if flags.contains(ReadFlags::QUEUE_OVERFLOW) {
            return Err(WatchError::Overflow);
        }
        let Some(watch) = self.watches.get(&record.wd) else {
            return Ok(());
        };
        let watch_path = watch.path.clone();
        let watch_is_root = watch.root;
        let path = match &record.name {
            Some(name) => watch_path.join(name),
            None => watch_path.clone(),
        };

        if flags.contains(ReadFlags::IGNORED) || flags.contains(ReadFlags::UNMOUNT) {
            self.forget(record.wd);
            return Ok(());
        }
        if flags.contains(ReadFlags::MOVE_SELF) {
            if !watch_is_root {
                // A moved subdirectory is reported by its parent's MOVED_FROM/MOVED_TO.
                return Ok(());
            }
            self.forget(record.wd);
            self.pending.push_back(Change {
                path,
                ops: Ops {
                    rename: true,
                    ..Ops::default()
                },
            });
            return Ok(());
        }
        if flags.contains(ReadFlags::DELETE_SELF) {
            self.forget(record.wd);
            // The parent, if watched, already reported the removal.
            if self
                .by_path
                .contains_key(&crate::paths::parent(&watch_path))
            {
                return Ok(());
            }
        }

        let ops = Ops {
            create: flags.intersects(ReadFlags::CREATE | ReadFlags::MOVED_TO),
            remove: flags.intersects(ReadFlags::DELETE | ReadFlags::DELETE_SELF),
            write: flags.contains(ReadFlags::MODIFY),
            rename: flags.intersects(ReadFlags::MOVE_SELF | ReadFlags::MOVED_FROM),
            chmod: flags.contains(ReadFlags::ATTRIB),
        };
        if flags.contains(ReadFlags::MOVED_FROM) && record.cookie != 0 {
            self.moved_from.push_back((record.cookie, path.clone()));
            if self.moved_from.len() > 16 {
                self.moved_from.pop_front();
            }
        }
        if self.recursive && flags.contains(ReadFlags::ISDIR) && ops.create {
            let renamed_from = flags
                .contains(ReadFlags::MOVED_TO)
                .then(|| {
                    self.moved_from
                        .iter()
                        .find(|(cookie, _)| *cookie == record.cookie)
                        .map(|(_, from)| from.clone())
                })
                .flatten();
            if let Some(from) = renamed_from {
                self.repath(&from, &path);
            }
            match self.add(&path, false).and_then(|()| self.add_tree(&path)) {
                Ok(()) => {}
                // Gone again before we could watch it: its removal is reported separately.
                Err(err) if err.kind() == io::ErrorKind::NotFound => {}
                Err(err) => return Err(WatchError::Io(err)),
            }
        }
        self.pending.push_back(Change { path, ops });
        Ok(())
    }

    fn forget(&mut self, wd: i32) {
        if let Some(watch) = self.watches.remove(&wd)
            && self.by_path.get(&watch.path) == Some(&wd)
        {
            self.by_path.remove(&watch.path);
        }
    }

    /// Renames the recorded paths of watched directories under `from` to live under `to`.
    fn repath(&mut self, from: &Path, to: &Path) {
        let mut moved = Vec::new();
        for (wd, watch) in &self.watches {
            if let Ok(rest) = watch.path.strip_prefix(from) {
                moved.push((*wd, watch.path.clone(), to.join(rest)));
            }
        }
        for (wd, old, new) in moved {
            self.by_path.remove(&old);
            self.by_path.insert(new.clone(), wd);
            if let Some(watch) = self.watches.get_mut(&wd) {
                watch.path = new;
            }
        }
    }
}

struct Record {
    wd: i32,
    flags: ReadFlags,
    cookie: u32,
    name: Option<std::ffi::OsString>,
}
