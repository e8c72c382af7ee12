//! Host metadata projected onto the seam's [`Metadata`].

use std::fs;
use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use dsh_plugin_api::Result;
use dsh_plugin_api::fs::{FileKind, Metadata};

use crate::errors::Op;
use crate::paths::name_string;
use crate::version::version_of;

/// The seam's kind for a host file type.
pub fn kind_of(file_type: fs::FileType) -> FileKind {
    if file_type.is_symlink() {
        FileKind::Symlink
    } else if file_type.is_dir() {
        FileKind::Directory
    } else if file_type.is_file() {
        FileKind::File
    } else {
        FileKind::Other
    }
}

/// Projects `meta`; `symlink_target` is the link's stored target when
/// `meta` describes a symlink itself.
pub(crate) fn project(meta: &fs::Metadata, symlink_target: Option<String>) -> Metadata {
    Metadata {
        kind: kind_of(meta.file_type()),
        size: meta.size(),
        mode: meta.mode() & 0o7777,
        modified: modified(meta),
        symlink_target,
        version: version_of(meta),
    }
}

/// mtime as a `SystemTime`, built from the raw fields so it cannot fail.
fn modified(meta: &fs::Metadata) -> SystemTime {
    let nanos = Duration::from_nanos(u64::try_from(meta.mtime_nsec()).unwrap_or(0));
    match u64::try_from(meta.mtime()) {
        Ok(secs) => UNIX_EPOCH + Duration::from_secs(secs) + nanos,
        Err(_) => UNIX_EPOCH - Duration::from_secs(meta.mtime().unsigned_abs()) + nanos,
    }
}

/// `stat` (`follow`) or `lstat` of `path`, projected; for a symlink seen by
/// `lstat` its stored target is read too.
pub(crate) fn stat(op: Op<'_>, path: &Path, follow: bool) -> Result<Metadata> {
    let meta = if follow {
        fs::metadata(path)
    } else {
        fs::symlink_metadata(path)
    }
    .map_err(|err| op.io(&err))?;
    let target = if meta.file_type().is_symlink() {
        Some(link_target(op, path)?)
    } else {
        None
    };
    Ok(project(&meta, target))
}

/// A symlink's stored target as text (lossy if it is not UTF-8).
pub(crate) fn link_target(op: Op<'_>, path: &Path) -> Result<String> {
    let target = fs::read_link(path)
        .map_err(|err| op.io_at(format_args!("readlink {}", path.display()), &err))?;
    Ok(name_string(target.as_os_str()))
}
