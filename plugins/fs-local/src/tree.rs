//! Directory-tree mutations: `mkdir -p`, recursive remove, rename.

use std::fs;
use std::io;
use std::path::Path;

use dsh_plugin_api::{ErrorKind, Result};

use crate::blocking;
use crate::errors::Op;
use crate::locks;
use crate::paths;

/// Creates `dir` and its missing parents. An existing directory is success;
/// an existing non-directory at `dir` is `AlreadyExists`, one among its
/// parents is `NotADirectory`.
pub(crate) fn ensure_dir(op: Op<'_>, dir: &Path) -> Result<()> {
    match fs::create_dir_all(dir) {
        Ok(()) => Ok(()),
        Err(err) if err.kind() == io::ErrorKind::AlreadyExists => {
            // `create_dir_all` reports EEXIST when `dir` or one of its
            // ancestors exists and is not a directory; name that path.
            let blocker = dir
                .ancestors()
                .find(|path| fs::metadata(path).is_ok_and(|meta| !meta.is_dir()))
                .unwrap_or(dir);
            Err(op.error(
                if blocker == op.path {
                    ErrorKind::AlreadyExists
                } else {
                    ErrorKind::NotADirectory
                },
                format_args!("{} exists and is not a directory", blocker.display()),
            ))
        }
        Err(err) => Err(op.io_at(format_args!("create directory {}", dir.display()), &err)),
    }
}

/// `mkdir`: `mkdir -p path`.
pub(crate) fn mkdir(op: Op<'_>, path: &Path) -> Result<()> {
    ensure_dir(op, path)
}

/// `remove`: the entry `path` names (a symlink itself, never its target),
/// recursively for a directory. `Ok(false)` when nothing was there.
///
/// Holds the entry's lock, so it does not interleave with a write or edit
/// of the same file. A directory tree is removed through
/// [`blocking::run`]; once started, the removal is not interrupted.
pub(crate) async fn remove(op: Op<'_>, path: &Path) -> Result<bool> {
    let entry = paths::entry(op, path)?;
    let _lock = locks::lock(&entry).await;
    let meta = match fs::symlink_metadata(&entry) {
        Ok(meta) => meta,
        Err(err) if err.kind() == io::ErrorKind::NotFound => return Ok(false),
        Err(err) => return Err(op.io(&err)),
    };
    let removed = if meta.is_dir() {
        let target = entry.clone();
        blocking::run(op, move || fs::remove_dir_all(target)).await?
    } else {
        fs::remove_file(&entry)
    };
    match removed {
        // Gone meanwhile: it existed when we looked, and it is gone now.
        Err(err) if err.kind() == io::ErrorKind::NotFound => Ok(true),
        Err(err) => Err(op.io(&err)),
        Ok(()) => Ok(true),
    }
}

/// `rename`: moves the entry `from` names (a symlink itself) to `to`,
/// creating `to`'s missing parents first; replaces an existing file at `to`
/// as rename(2) does.
///
/// Refused before anything changes: a missing source (`NotFound`) and a
/// directory moved into itself (`InvalidInput`).
pub(crate) async fn rename(op: Op<'_>, from: &Path, to: &Path) -> Result<()> {
    let source = paths::entry(op, from)?;
    let dest_op = Op::new(op.name, to);
    let dest = paths::entry(dest_op, to)?;
    let _locks = locks::lock_pair(&source, &dest).await;
    let meta = fs::symlink_metadata(&source).map_err(|err| op.io(&err))?;
    if meta.is_dir() && dest != source && dest.starts_with(&source) {
        return Err(op.error(
            ErrorKind::InvalidInput,
            format_args!(
                "cannot move directory {} into itself ({})",
                source.display(),
                dest.display()
            ),
        ));
    }
    if let Some(parent) = dest.parent() {
        ensure_dir(dest_op, parent)?;
    }
    fs::rename(&source, &dest)
        .map_err(|err| op.io_at(format_args!("rename to {}", to.display()), &err))
}
