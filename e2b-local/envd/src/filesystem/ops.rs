//! The blocking filesystem operations behind the unary `filesystem.Filesystem` RPCs, with envd's
//! semantics and error codes (docs/e2b-protocol.md §6.3). Paths are already resolved.

use std::io;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use connectrpc::ConnectError;
use envd_proto::filesystem::EntryInfo;

use crate::entry::{entry_info, is_not_found};
use crate::paths::{ensure_dirs, parent};
use crate::users::{OwnerNames, User};

/// An `internal` error with `message`, or `permission_denied` when the acting user lacks the
/// permission (envd acts as that user: [`crate::acting_user`]).
fn failure(err: &io::Error, message: String) -> ConnectError {
    // The kind survives the context other layers add (EACCES and EPERM both map to it).
    if err.kind() == io::ErrorKind::PermissionDenied {
        ConnectError::permission_denied(message)
    } else {
        ConnectError::internal(message)
    }
}

/// `Stat`: the `lstat`-based entry.
pub(crate) fn stat(path: &Path, names: &OwnerNames) -> Result<EntryInfo, ConnectError> {
    entry(path, names)
}

fn entry(path: &Path, names: &OwnerNames) -> Result<EntryInfo, ConnectError> {
    entry_info(path, names).map_err(|err| {
        if is_not_found(&err) {
            ConnectError::not_found(format!("file not found: {}: {err}", path.display()))
        } else {
            failure(
                &err,
                format!("error getting file info: {}: {err}", path.display()),
            )
        }
    })
}

/// `MakeDir`: `mkdir -p` owned by `user`; an existing directory is `already_exists`, an
/// existing non-directory `invalid_argument`.
pub(crate) fn make_dir(
    path: &Path,
    user: &User,
    names: &OwnerNames,
) -> Result<EntryInfo, ConnectError> {
    match std::fs::metadata(path) {
        Ok(meta) if meta.is_dir() => {
            return Err(ConnectError::already_exists(format!(
                "directory already exists: {}",
                path.display()
            )));
        }
        Ok(_) => {
            return Err(ConnectError::invalid_argument(format!(
                "path already exists but it is not a directory: {}",
                path.display()
            )));
        }
        Err(err) if is_not_found(&err) => {}
        Err(err) => {
            return Err(failure(
                &err,
                format!("error getting file info: {}: {err}", path.display()),
            ));
        }
    }
    ensure_dirs(path, user.uid, user.gid).map_err(|err| {
        if err.kind() == io::ErrorKind::NotADirectory {
            ConnectError::invalid_argument(format!("make dir {}: {err}", path.display()))
        } else {
            failure(&err, format!("make dir {}: {err}", path.display()))
        }
    })?;
    entry(path, names)
}

/// `Move`: creates the destination's parents (owned by `user`), renames, returns the
/// destination's entry. A missing source is `not_found`.
pub(crate) fn rename(
    source: &Path,
    destination: &Path,
    user: &User,
    names: &OwnerNames,
) -> Result<EntryInfo, ConnectError> {
    ensure_dirs(&parent(destination), user.uid, user.gid).map_err(|err| {
        failure(
            &err,
            format!(
                "move {} to {}: creating parent directories: {err}",
                source.display(),
                destination.display()
            ),
        )
    })?;
    std::fs::rename(source, destination).map_err(|err| {
        if is_not_found(&err) {
            ConnectError::not_found(format!(
                "source file not found: {}: {err}",
                source.display()
            ))
        } else {
            failure(
                &err,
                format!(
                    "error renaming {} to {}: {err}",
                    source.display(),
                    destination.display()
                ),
            )
        }
    })?;
    entry(destination, names)
}

/// `Remove`: recursive; a missing path is not an error.
pub(crate) fn remove(path: &Path) -> Result<(), ConnectError> {
    let result = match std::fs::symlink_metadata(path) {
        Err(err) if is_not_found(&err) => return Ok(()),
        Err(err) => Err(err),
        Ok(meta) if meta.is_dir() => std::fs::remove_dir_all(path),
        Ok(_) => std::fs::remove_file(path),
    };
    match result {
        Ok(()) => Ok(()),
        Err(err) if is_not_found(&err) => Ok(()),
        Err(err) => Err(failure(
            &err,
            format!("error removing file or directory {}: {err}", path.display()),
        )),
    }
}

/// `ListDir`: resolves symlinks in `requested` first, then walks the directory in lexical
/// pre-order down to `depth` (0 means 1), never descending into symlinked directories. Entry
/// paths are `requested` + the path relative to the walked directory.
pub(crate) fn list_dir(
    requested: &Path,
    depth: u32,
    names: &OwnerNames,
) -> Result<Vec<EntryInfo>, ConnectError> {
    let depth = depth.max(1);
    let resolved = std::fs::canonicalize(requested).map_err(|err| {
        if is_not_found(&err) {
            ConnectError::not_found(format!("path not found: {}: {err}", requested.display()))
        } else if err.raw_os_error() == Some(libc::ELOOP) {
            ConnectError::failed_precondition(format!(
                "cyclic symlink or chain >255 links at {:?}",
                requested.display().to_string()
            ))
        } else {
            failure(
                &err,
                format!("error resolving symlink {}: {err}", requested.display()),
            )
        }
    })?;
    let meta = std::fs::metadata(&resolved).map_err(|err| {
        if is_not_found(&err) {
            ConnectError::not_found(format!(
                "directory not found: {}: {err}",
                resolved.display()
            ))
        } else {
            failure(
                &err,
                format!("error getting file info: {}: {err}", resolved.display()),
            )
        }
    })?;
    if !meta.is_dir() {
        return Err(ConnectError::invalid_argument(format!(
            "path is not a directory: {}",
            resolved.display()
        )));
    }
    let mut entries = Vec::new();
    walk(&resolved, requested, 1, depth, names, &mut entries).map_err(|err| {
        failure(
            &err,
            format!("error reading directory {}: {err}", resolved.display()),
        )
    })?;
    Ok(entries)
}

fn walk(
    dir: &Path,
    shown_as: &Path,
    level: u32,
    depth: u32,
    names: &OwnerNames,
    entries: &mut Vec<EntryInfo>,
) -> io::Result<()> {
    let mut children: Vec<(std::ffi::OsString, bool)> = std::fs::read_dir(dir)?
        .map(|child| {
            let child = child?;
            let is_dir = child.file_type().is_ok_and(|kind| kind.is_dir());
            Ok((child.file_name(), is_dir))
        })
        .collect::<io::Result<_>>()?;
    children.sort_by(|a, b| a.0.as_bytes().cmp(b.0.as_bytes()));
    for (name, is_dir) in children {
        let path = dir.join(&name);
        let mut info = match entry_info(&path, names) {
            Ok(info) => info,
            // Removed while we walked: skip it, as envd does.
            Err(err) if is_not_found(&err) => continue,
            Err(err) => return Err(err),
        };
        let shown: PathBuf = shown_as.join(&name);
        info.path = crate::paths::clean(&shown.to_string_lossy());
        entries.push(info);
        if is_dir && level < depth {
            match walk(&path, &shown, level + 1, depth, names, entries) {
                Ok(()) => {}
                Err(err) if is_not_found(&err) => {}
                Err(err) => return Err(err),
            }
        }
    }
    Ok(())
}
