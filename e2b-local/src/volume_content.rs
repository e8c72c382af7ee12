//! The files of a volume, as its content API reads and changes them (docs/design.md §7).
//!
//! A volume's files are written by sandboxes, so they may hold symlinks to anywhere — and this
//! server runs as root on the host. Every operation therefore runs on a thread of its own whose
//! filesystem root is the volume's root (`unshare(CLONE_FS)` then `chroot`, which changes that
//! thread only): whatever a path or a symlink says, `..` and absolute targets resolve inside the
//! volume, as they would inside a sandbox that mounts it. File descriptors opened there are
//! handed back, so uploads and downloads stream on the async runtime without a path.

use std::ffi::CString;
use std::fs::File;
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::time::{Duration, UNIX_EPOCH};

use serde::Serialize;

use crate::world::users;

/// The most entries one listing returns (a listing beyond it is refused, not cut short).
pub const MAX_LISTED: usize = 100_000;

/// A file's description, as the content API returns it (`VolumeEntryStat`).
#[derive(Debug, Clone, Serialize)]
pub struct EntryStat {
    pub name: String,
    #[serde(rename = "type")]
    pub kind: &'static str,
    pub path: String,
    pub size: u64,
    /// Permission bits only (`st_mode & 0o7777`).
    pub mode: u32,
    pub uid: u32,
    pub gid: u32,
    pub atime: String,
    pub mtime: String,
    pub ctime: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub target: Option<String>,
}

/// Owner and permission bits to give what a request creates or changes (also the body of a
/// metadata change, `{"uid"?, "gid"?, "mode"?}`).
#[derive(Debug, Clone, Copy, Default, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Metadata {
    pub uid: Option<u32>,
    pub gid: Option<u32>,
    pub mode: Option<u32>,
}

pub use e2b_local_api::volume::normalize;

/// Runs `op` with `root` as its thread's filesystem root (see the module docs). Resolves when
/// `op` returns; dropping the future leaves the thread to finish on its own.
pub async fn confined<T: Send + 'static>(
    root: PathBuf,
    op: impl FnOnce() -> io::Result<T> + Send + 'static,
) -> io::Result<T> {
    let (tx, rx) = tokio::sync::oneshot::channel();
    spawn_confined(root, move |entered| {
        let _ = tx.send(entered.and_then(|()| op()));
    })?;
    rx.await
        .map_err(|_| io::Error::other("volume operation thread ended without an answer"))?
}

/// Runs `op` on a new thread, told whether entering `root` worked.
fn spawn_confined(
    root: PathBuf,
    op: impl FnOnce(io::Result<()>) + Send + 'static,
) -> io::Result<()> {
    std::thread::Builder::new()
        .name("volume-content".to_owned())
        .spawn(move || op(enter(&root)))
        .map(drop)
}

fn enter(root: &Path) -> io::Result<()> {
    let root = CString::new(root.as_os_str().as_bytes()).map_err(io::Error::other)?;
    // SAFETY: unshare(2) with CLONE_FS affects only the calling thread's root, cwd and umask.
    if unsafe { libc::unshare(libc::CLONE_FS) } != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: valid NUL-terminated path; this thread alone shares the changed root.
    if unsafe { libc::chroot(root.as_ptr()) } != 0 {
        return Err(io::Error::last_os_error());
    }
    std::env::set_current_dir("/")
}

/// Describes `path` (not following a final symlink).
pub fn stat(path: &str) -> io::Result<EntryStat> {
    let meta = std::fs::symlink_metadata(path)?;
    describe(path, &meta)
}

fn describe(path: &str, meta: &std::fs::Metadata) -> io::Result<EntryStat> {
    let kind = if meta.file_type().is_symlink() {
        "symlink"
    } else if meta.is_dir() {
        "directory"
    } else if meta.is_file() {
        "file"
    } else {
        "unknown"
    };
    let time = |secs: i64, nanos: i64| {
        let at = UNIX_EPOCH
            + Duration::from_secs(secs.max(0) as u64)
            + Duration::from_nanos(nanos.max(0) as u64);
        crate::timefmt::rfc3339(at)
    };
    let target = meta
        .file_type()
        .is_symlink()
        .then(|| std::fs::read_link(path))
        .transpose()?
        .map(|t| t.to_string_lossy().into_owned());
    Ok(EntryStat {
        name: Path::new(path)
            .file_name()
            .map_or_else(String::new, |n| n.to_string_lossy().into_owned()),
        kind,
        path: path.to_owned(),
        size: meta.len(),
        mode: meta.mode() & 0o7777,
        uid: meta.uid(),
        gid: meta.gid(),
        atime: time(meta.atime(), meta.atime_nsec()),
        mtime: time(meta.mtime(), meta.mtime_nsec()),
        ctime: time(meta.ctime(), meta.ctime_nsec()),
        target,
    })
}

/// The entries under directory `path`, `depth` levels deep (1: its children), by name within
/// each directory; symlinked directories are listed, not entered.
pub fn list(path: &str, depth: u32) -> io::Result<Vec<EntryStat>> {
    if !std::fs::metadata(path)?.is_dir() {
        return Err(io::Error::new(
            io::ErrorKind::NotADirectory,
            format!("{path} is not a directory"),
        ));
    }
    let mut out = Vec::new();
    list_into(path, depth, &mut out)?;
    Ok(out)
}

fn list_into(dir: &str, depth: u32, out: &mut Vec<EntryStat>) -> io::Result<()> {
    let mut names: Vec<String> = std::fs::read_dir(dir)?
        .map(|entry| entry.map(|e| e.file_name().to_string_lossy().into_owned()))
        .collect::<io::Result<_>>()?;
    names.sort();
    for name in names {
        let child = if dir == "/" {
            format!("/{name}")
        } else {
            format!("{dir}/{name}")
        };
        let entry = match stat(&child) {
            Ok(entry) => entry,
            // Removed meanwhile.
            Err(err) if err.kind() == io::ErrorKind::NotFound => continue,
            Err(err) => return Err(err),
        };
        let is_dir = entry.kind == "directory";
        out.push(entry);
        if out.len() > MAX_LISTED {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("more than {MAX_LISTED} entries: list a smaller depth or directory"),
            ));
        }
        if is_dir && depth > 1 {
            list_into(&child, depth - 1, out)?;
        }
    }
    Ok(())
}

/// Creates directory `path` with `meta` (default: the sandbox user's, 0755). With `force` its
/// missing parents are created too (the sandbox user's, 0755) and an existing directory is
/// accepted; without, a missing parent is `NotFound` and an existing path `AlreadyExists`.
pub fn make_dir(path: &str, force: bool, meta: Metadata) -> io::Result<EntryStat> {
    if force {
        if let Some(parent) = Path::new(path).parent() {
            make_parents(parent)?;
        }
        match std::fs::symlink_metadata(path) {
            Ok(existing) if existing.is_dir() => return describe(path, &existing),
            _ => {}
        }
    }
    std::fs::create_dir(path)?;
    apply(path, meta, 0o755)?;
    stat(path)
}

fn make_parents(dir: &Path) -> io::Result<()> {
    if dir.is_dir() {
        return Ok(());
    }
    if let Some(parent) = dir.parent() {
        make_parents(parent)?;
    }
    match std::fs::create_dir(dir) {
        Err(err) if err.kind() == io::ErrorKind::AlreadyExists && dir.is_dir() => Ok(()),
        Err(err) => Err(err),
        Ok(()) => apply(dir, Metadata::default(), 0o755),
    }
}

/// Sets owner (default: the sandbox user) and mode (default `default_mode`) of `path`.
fn apply(path: impl AsRef<Path>, meta: Metadata, default_mode: u32) -> io::Result<()> {
    let path = path.as_ref();
    std::os::unix::fs::chown(
        path,
        Some(meta.uid.unwrap_or(users::UID)),
        Some(meta.gid.unwrap_or(users::GID)),
    )?;
    std::fs::set_permissions(
        path,
        std::fs::Permissions::from_mode(meta.mode.unwrap_or(default_mode)),
    )
}

/// An upload under way: a hidden file beside its destination that [`commit`] renames into place.
#[derive(Debug)]
pub struct Upload {
    pub file: File,
    staged: String,
    path: String,
}

/// Starts an upload to `path`: its directory must exist (`NotFound`); an existing file is
/// `AlreadyExists` unless `force`, an existing directory always is.
pub fn begin_upload(path: &str, force: bool) -> io::Result<Upload> {
    let target = Path::new(path);
    let parent = target.parent().ok_or_else(|| {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            "the volume's root is a directory",
        )
    })?;
    if !std::fs::metadata(parent)?.is_dir() {
        return Err(io::Error::new(
            io::ErrorKind::NotADirectory,
            format!("{} is not a directory", parent.display()),
        ));
    }
    match std::fs::symlink_metadata(path) {
        Ok(existing) if existing.is_dir() => {
            return Err(io::Error::new(
                io::ErrorKind::AlreadyExists,
                format!("{path} is a directory"),
            ));
        }
        Ok(_) if !force => {
            return Err(io::Error::new(
                io::ErrorKind::AlreadyExists,
                format!("{path} exists: pass force to overwrite it"),
            ));
        }
        _ => {}
    }
    let name = target
        .file_name()
        .map_or_else(Default::default, |n| n.to_string_lossy().into_owned());
    let staged = parent
        .join(format!(
            ".{name}.e2b-local-upload-{}",
            &crate::ids::sandbox_id()[..8]
        ))
        .to_string_lossy()
        .into_owned();
    let file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW)
        .open(&staged)?;
    Ok(Upload {
        file,
        staged,
        path: path.to_owned(),
    })
}

impl Upload {
    /// Where the bytes go until [`commit`] (a path inside the volume); [`abandon`] removes it.
    pub fn staged(&self) -> &str {
        &self.staged
    }
}

/// Puts a complete upload in place with `meta` (default: the sandbox user's, 0644): atomically
/// replacing a file only with `force` (without, a file that appeared meanwhile is
/// `AlreadyExists`). The staged file is removed if this fails.
pub fn commit(upload: Upload, force: bool, meta: Metadata) -> io::Result<EntryStat> {
    let done = (|| {
        upload.file.sync_all()?;
        apply(&upload.staged, meta, 0o644)?;
        if force {
            std::fs::rename(&upload.staged, &upload.path)
        } else {
            rename_no_replace(&upload.staged, &upload.path)
        }
    })();
    if let Err(err) = done {
        let _ = std::fs::remove_file(&upload.staged);
        return Err(err);
    }
    stat(&upload.path)
}

/// Removes staged upload `staged` of the volume rooted at `root`, which will not be committed,
/// on a confined thread of its own; nothing waits for it.
pub fn abandon(root: PathBuf, staged: String) {
    let spawned = spawn_confined(root, move |entered| {
        if entered.is_ok() {
            let _ = std::fs::remove_file(&staged);
        }
    });
    if let Err(err) = spawned {
        tracing::warn!("remove a staged volume upload: {err}");
    }
}

fn rename_no_replace(from: &str, to: &str) -> io::Result<()> {
    let (from, to) = (
        CString::new(from).map_err(io::Error::other)?,
        CString::new(to).map_err(io::Error::other)?,
    );
    // SAFETY: renameat2(2) with valid NUL-terminated paths relative to this thread's cwd.
    let rc = unsafe {
        libc::renameat2(
            libc::AT_FDCWD,
            from.as_ptr(),
            libc::AT_FDCWD,
            to.as_ptr(),
            libc::RENAME_NOREPLACE,
        )
    };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Opens regular file `path` for reading.
pub fn open_file(path: &str) -> io::Result<File> {
    let file = File::open(path)?;
    if !file.metadata()?.is_file() {
        return Err(io::Error::new(
            io::ErrorKind::IsADirectory,
            format!("{path} is not a regular file"),
        ));
    }
    Ok(file)
}

/// Changes what `meta` sets of `path`'s owner and mode, leaving the rest.
pub fn set_metadata(path: &str, meta: Metadata) -> io::Result<EntryStat> {
    std::fs::metadata(path)?;
    if meta.uid.is_some() || meta.gid.is_some() {
        std::os::unix::fs::chown(path, meta.uid, meta.gid)?;
    }
    if let Some(mode) = meta.mode {
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))?;
    }
    stat(path)
}

/// Removes `path`: a file or symlink, or a directory — with everything in it when `recursive`,
/// else only if empty (`DirectoryNotEmpty`). The volume's root cannot be removed.
pub fn remove(path: &str, recursive: bool) -> io::Result<()> {
    if path == "/" {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "the volume's root cannot be removed",
        ));
    }
    if std::fs::symlink_metadata(path)?.is_dir() {
        if recursive {
            std::fs::remove_dir_all(path)
        } else {
            std::fs::remove_dir(path)
        }
    } else {
        std::fs::remove_file(path)
    }
}
