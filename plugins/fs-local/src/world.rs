//! The world-side operations natively, on the machine this process runs
//! on: `walk` and `search` run `dsh_provider_kit::world`'s engines over
//! [`LocalTree`] — directory descriptors and `openat2` instead of one seam
//! call per directory and file — and [`read_many`] reads in-process. Every
//! open below the root is confined ([`crate::beneath`]): a walk or search
//! never follows a symlink below its root, whether or not `beneath` was
//! asked; `beneath` additionally leaves the `.gitignore` files above the
//! root unread, and confines `read_many`.
//!
//! Public as [`crate::native`]: `dsh-supervisor` runs the same code inside
//! an E2B sandbox for `dsh-fs-e2b` (docs/design.md §6.3), describing entries
//! as envd does ([`Describe`]) where this provider describes them by
//! [`Host`].

use std::ffi::OsStr;
use std::fs::File;
use std::io::Read;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::{Path, PathBuf};

use async_trait::async_trait;
use dsh_plugin_api::fs::{DirEntry, Metadata, ReadManyItem, ReadManyLimits, TextFile, Version};
use dsh_plugin_api::{Bytes, ErrorKind, Result};
use dsh_provider_kit::utf8::into_text;
use dsh_provider_kit::world::{Tree, file_too_big, read_many_bounds};
use rustix::fs::{Mode, OFlags};
use rustix::io::Errno;

use crate::errors::Op;
use crate::meta::project;
use crate::paths::name_string;
use crate::read::{check_regular, open_regular, read_all};
use crate::version::version_of;
use crate::{beneath, paths};

/// How a native walk, search or `read_many` describes what it meets: the
/// world's own metadata and versions, which must be what the provider's
/// `lstat` and `read_text` answer for the same state.
pub trait Describe: Send + Sync + 'static {
    /// The seam's metadata of the listed entry `entry` whose `lstat` is
    /// `meta` (taken relative to the directory it was listed in, or through
    /// the entry's own descriptor); `target` is a symlink's stored text.
    fn describe(
        &self,
        entry: &Listed<'_>,
        meta: &std::fs::Metadata,
        target: Option<String>,
    ) -> Metadata;

    /// The version of the regular file at `path` whose `fstat` is `meta`.
    fn version(&self, path: &Path, meta: &std::fs::Metadata) -> Version;
}

/// An entry met listing a directory, as [`Describe::describe`] sees it.
pub struct Listed<'a> {
    /// Its absolute path (symlinks in the root followed).
    pub path: &'a Path,
    /// The directory it was listed in, opened beneath the root, and its
    /// name there: reading more of the entry relative to them looks up one
    /// name instead of every component of `path`.
    pub dir: BorrowedFd<'a>,
    pub name: &'a OsStr,
}

/// This provider's own description: host metadata and versions.
pub struct Host;

impl Describe for Host {
    fn describe(
        &self,
        _: &Listed<'_>,
        meta: &std::fs::Metadata,
        target: Option<String>,
    ) -> Metadata {
        project(meta, target)
    }

    fn version(&self, _: &Path, meta: &std::fs::Metadata) -> Version {
        version_of(meta)
    }
}

/// The tree below one root on this machine.
pub struct LocalTree<D = Host> {
    describe: std::sync::Arc<D>,
    operation: &'static str,
    /// The root, absolute, as the caller named it (symlinks in it followed).
    root: PathBuf,
    canonical: PathBuf,
    /// The root itself (`O_PATH`): every open below it is relative to it.
    fd: OwnedFd,
    is_dir: bool,
}

impl<D: Describe> LocalTree<D> {
    /// Opens the root `root` (absolute) for `operation`, describing entries
    /// by `describe`.
    pub fn open(
        describe: std::sync::Arc<D>,
        operation: &'static str,
        root: PathBuf,
    ) -> Result<LocalTree<D>> {
        let op = Op::new(operation, &root);
        let fd = rustix::fs::open(&root, OFlags::PATH | OFlags::CLOEXEC, Mode::empty())
            .map_err(|errno| op.io(&errno.into()))?;
        let meta = File::from(fd.try_clone().map_err(|err| op.io(&err))?)
            .metadata()
            .map_err(|err| op.io(&err))?;
        let canonical = paths::canonicalize(op, &root)?;
        Ok(LocalTree {
            describe,
            operation,
            root,
            canonical,
            fd,
            is_dir: meta.is_dir(),
        })
    }

    fn op(&self) -> Op<'_> {
        Op::new(self.operation, &self.root)
    }

    /// Opens `relative` beneath the root (`""`: the root itself), mapping a
    /// symlink or escape met on the way to `PermissionDenied`.
    fn open_below(&self, relative: &str, flags: OFlags) -> Result<File> {
        let opened = if relative.is_empty() {
            rustix::fs::openat(&self.fd, ".", flags | OFlags::CLOEXEC, Mode::empty()).or_else(
                |errno| match errno {
                    // The root is a file: `.` below it is `ENOTDIR`.
                    Errno::NOTDIR => rustix::fs::open(
                        &self.root,
                        flags | OFlags::CLOEXEC | OFlags::NOCTTY,
                        Mode::empty(),
                    ),
                    errno => Err(errno),
                },
            )
        } else {
            beneath::open(&self.fd, relative, flags)
        };
        opened.map(File::from).map_err(|errno| match errno {
            Errno::LOOP | Errno::XDEV => self.op().error(
                ErrorKind::PermissionDenied,
                format_args!("{relative}: a symlink or `..` on the way would leave the root"),
            ),
            errno => self
                .op()
                .io_at(format_args!("open {relative}"), &errno.into()),
        })
    }

    fn list_blocking(&self, relative: &str) -> Result<Vec<DirEntry>> {
        let dir = self.open_below(relative, OFlags::RDONLY | OFlags::DIRECTORY)?;
        let op = self.op();
        let mut found = Vec::new();
        // Each entry is one `lstat` relative to the directory opened beneath the root
        // (std's `DirEntry::metadata` is `statx(dirfd, name, AT_SYMLINK_NOFOLLOW)`), reached
        // through the descriptor's /proc entry, which names that very directory, not a path
        // to it. Opening each entry to `fstat` it cost three syscalls an entry, half of a
        // 1,000-entry `list_dir` (tests/benches/README.md). Without /proc (or with one that
        // names another directory there), entries are opened.
        let through_proc = format!("/proc/self/fd/{}", dir.as_raw_fd());
        match same_file(&dir, &through_proc).and_then(|()| std::fs::read_dir(&through_proc)) {
            Ok(entries) => {
                for entry in entries {
                    let entry = entry.map_err(|err| op.io(&err))?;
                    match entry.metadata() {
                        Ok(meta) => found.push((entry.file_name().into_vec(), Some(meta))),
                        // Removed while listing.
                        Err(err) if err.kind() == std::io::ErrorKind::NotFound => {}
                        Err(err) => return Err(op.io(&err)),
                    }
                }
            }
            Err(_) => {
                for entry in
                    rustix::fs::Dir::read_from(dir.as_fd()).map_err(|errno| op.io(&errno.into()))?
                {
                    let entry = entry.map_err(|errno| op.io(&errno.into()))?;
                    let name = entry.file_name().to_bytes();
                    if name != b"." && name != b".." {
                        found.push((name.to_vec(), None));
                    }
                }
            }
        }
        found.sort_unstable_by(|a, b| a.0.cmp(&b.0));
        let mut entries = Vec::with_capacity(found.len());
        for (raw, meta) in found {
            let (meta, target) = match meta {
                Some(meta) if !meta.file_type().is_symlink() => (meta, None),
                // A symlink (or an entry not yet seen): opened, so its target is read through
                // its own descriptor with the metadata that descriptor gives — the name may
                // be something else by now.
                _ => match self.open_entry(&dir, &raw)? {
                    Some(opened) => opened,
                    None => continue,
                },
            };
            let name = name_string(OsStr::from_bytes(&raw));
            let path = dsh_provider_kit::world::below(relative, &name);
            let listed = Listed {
                path: &self.canonical.join(&path),
                dir: dir.as_fd(),
                name: OsStr::from_bytes(&raw),
            };
            entries.push(DirEntry {
                metadata: self.describe.describe(&listed, &meta, target),
                path,
                name,
                resolved: None,
            });
        }
        Ok(entries)
    }

    /// `name` in `dir` opened without following it: its metadata and, for a
    /// symlink, its stored target; `None` when it was removed meanwhile.
    fn open_entry(
        &self,
        dir: &File,
        name: &[u8],
    ) -> Result<Option<(std::fs::Metadata, Option<String>)>> {
        let op = self.op();
        let flags = OFlags::PATH | OFlags::NOFOLLOW | OFlags::CLOEXEC;
        let entry = match rustix::fs::openat(dir, name, flags, Mode::empty()) {
            Ok(entry) => File::from(entry),
            Err(Errno::NOENT) => return Ok(None),
            Err(errno) => return Err(op.io(&errno.into())),
        };
        let meta = entry.metadata().map_err(|err| op.io(&err))?;
        let target = if meta.file_type().is_symlink() {
            let target = rustix::fs::readlinkat(&entry, "", Vec::new())
                .map_err(|errno| op.io(&errno.into()))?;
            Some(name_string(OsStr::from_bytes(target.as_bytes())))
        } else {
            None
        };
        Ok(Some((meta, target)))
    }

    fn read_blocking(&self, relative: &str, max: u64) -> Result<(Bytes, u64)> {
        let file = self.open_below(relative, OFlags::RDONLY | OFlags::NONBLOCK)?;
        let (file, meta) = check_regular(self.op(), file)?;
        let size = meta.len();
        let mut content = Vec::with_capacity(usize::try_from(size.min(max)).unwrap_or(0));
        (&file)
            .take(max)
            .read_to_end(&mut content)
            .map_err(|err| self.op().io_at(format_args!("read {relative}"), &err))?;
        Ok((Bytes::from(content), size))
    }
}

#[async_trait]
impl<D: Describe> Tree for LocalTree<D> {
    async fn root(&mut self) -> Result<(PathBuf, bool)> {
        Ok((self.canonical.clone(), self.is_dir))
    }

    async fn list(&mut self, relative: &str) -> Result<Vec<DirEntry>> {
        self.list_blocking(relative)
    }

    async fn read(&mut self, relative: &str, max: u64) -> Result<(Bytes, u64)> {
        self.read_blocking(relative, max)
    }

    async fn ancestors(&mut self, dirs: &[PathBuf]) -> Vec<(bool, Option<String>)> {
        dirs.iter().map(|dir| ancestor(dir)).collect()
    }
}

/// `Ok` when `path` names the file `file` is open on (device and inode).
fn same_file(file: &File, path: &str) -> std::io::Result<()> {
    use std::os::unix::fs::MetadataExt;
    let (open, named) = (file.metadata()?, std::fs::metadata(path)?);
    if (open.dev(), open.ino()) == (named.dev(), named.ino()) {
        Ok(())
    } else {
        Err(std::io::Error::other("another file"))
    }
}

/// Whether `dir` holds `.git` and its `.gitignore`'s text (see
/// [`Tree::ancestors`]).
fn ancestor(dir: &Path) -> (bool, Option<String>) {
    let is_repo_root = std::fs::symlink_metadata(dir.join(".git"))
        .is_ok_and(|meta| meta.is_dir() || meta.is_file());
    let limit = 1024 * 1024;
    let text = File::open(dir.join(".gitignore")).ok().and_then(|file| {
        let mut text = Vec::new();
        file.take(limit + 1).read_to_end(&mut text).ok()?;
        (text.len() as u64 <= limit)
            .then(|| String::from_utf8(text).ok())
            .flatten()
    });
    (is_repo_root, text)
}

/// `read_many` on this machine: each file as `read_text` reads it, or —
/// confined — opened beneath the root (`openat2(RESOLVE_BENEATH |
/// RESOLVE_NO_SYMLINKS)`, or a no-follow descriptor walk) and decoded by
/// the same rules, versions by `describe`; the bounds as
/// `dsh_provider_kit::world` applies them. Relative paths (and the root)
/// join `cwd`.
pub fn read_many<D: Describe>(
    describe: &std::sync::Arc<D>,
    cwd: &Path,
    paths: Vec<String>,
    limits: ReadManyLimits,
) -> Result<Vec<ReadManyItem>> {
    let root = match &limits.beneath {
        Some(root) => {
            let root = crate::paths::absolute("read_many", cwd, root)?;
            Some(LocalTree::open(describe.clone(), "read_many", root)?)
        }
        None => None,
    };
    let mut reads = Vec::with_capacity(paths.len());
    for path in paths {
        let result = match &root {
            Some(tree) => read_beneath(tree, &path, limits.max_file_bytes),
            None => read_one(describe.as_ref(), cwd, &path, limits.max_file_bytes),
        };
        reads.push(ReadManyItem { path, result });
    }
    Ok(read_many_bounds(reads, &limits))
}

fn read_one(describe: &impl Describe, cwd: &Path, path: &str, max: u64) -> Result<TextFile> {
    let absolute = crate::paths::absolute("read_many", cwd, path)?;
    let op = Op::new("read_many", &absolute);
    let (file, meta) = open_regular(op, &absolute)?;
    read_open(describe, op, &absolute, &file, &meta, path, max)
}

/// Reads `path` — relative to the tree's root, or absolute and lexically
/// inside it — confined beneath the root.
fn read_beneath<D: Describe>(tree: &LocalTree<D>, path: &str, max: u64) -> Result<TextFile> {
    let op = Op::new("read_many", Path::new(path));
    let relative = match Path::new(path).strip_prefix(&tree.root) {
        Ok(relative) => relative.to_str().unwrap_or(path),
        Err(_) if path.starts_with('/') => {
            return Err(op.error(ErrorKind::PermissionDenied, "outside the confining root"));
        }
        Err(_) => path,
    };
    let relative = relative.trim_end_matches('/');
    let file = tree.open_below(relative, OFlags::RDONLY | OFlags::NONBLOCK)?;
    let (file, meta) = check_regular(op, file)?;
    let absolute = tree.canonical.join(relative);
    read_open(
        tree.describe.as_ref(),
        op,
        &absolute,
        &file,
        &meta,
        path,
        max,
    )
}

/// The text of the open regular `file` (`fstat` `meta`), refused over `max`.
fn read_open(
    describe: &impl Describe,
    op: Op<'_>,
    absolute: &Path,
    file: &File,
    meta: &std::fs::Metadata,
    path: &str,
    max: u64,
) -> Result<TextFile> {
    if meta.len() > max {
        return Err(file_too_big(path, meta.len(), max));
    }
    let version = describe.version(absolute, meta);
    let content = read_all(op, file, meta.len())?;
    Ok(TextFile {
        text: into_text(&op, content)?,
        version,
    })
}
