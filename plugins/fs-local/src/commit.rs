//! The commit point of `write` and `edit`: guard check, mode and owner
//! preservation, and the publishing rename — all under the target's lock.

use std::fs::{self, Metadata, Permissions};
use std::io;
use std::os::unix::fs::{MetadataExt, PermissionsExt, fchown};
use std::path::Path;

use dsh_plugin_api::fs::{Version, WriteGuard};
use dsh_plugin_api::{ErrorKind, Result};
use dsh_provider_kit::guard;
use rustix::fs::{CWD, RenameFlags};
use rustix::io::Errno;

use crate::errors::Op;
use crate::locks::TargetLock;
use crate::staging::Staged;
use crate::version::version_of;

/// The target's current state as a file to replace: `None` if absent.
/// A directory is `IsADirectory`; a symlink means the target changed since
/// it was canonicalised (which followed every link), so it is `Conflict`.
pub(crate) fn current(op: Op<'_>, target: &Path) -> Result<Option<Metadata>> {
    match fs::symlink_metadata(target) {
        Ok(meta) if meta.is_dir() => Err(op.error(
            ErrorKind::IsADirectory,
            format_args!("{} is a directory", target.display()),
        )),
        Ok(meta) if meta.file_type().is_symlink() => Err(op.error(
            ErrorKind::Conflict,
            format_args!(
                "{} became a symbolic link during the operation",
                target.display()
            ),
        )),
        Ok(meta) => Ok(Some(meta)),
        Err(err) if err.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(err) => Err(op.io_at(format_args!("stat {}", target.display()), &err)),
    }
}

/// Checks `guard` against the target's state (`None`: absent), as the kit's
/// [`guard::check`] decides.
pub(crate) fn check_guard(op: Op<'_>, state: Option<&Metadata>, guard: &WriteGuard) -> Result<()> {
    guard::check(&op, state.map(version_of).as_ref(), guard)
}

/// Publishes `staged` as `target` if `guard` holds right now, and returns
/// the committed version.
///
/// Runs synchronously under `_lock` (held by the caller), so no other
/// mutation of `target` through this process interleaves and the future
/// calling it cannot be dropped between the check and the rename: once the
/// rename is issued it completes. The replaced file's permission bits are
/// kept; so are its owner and group where the process may set them (as
/// root) — where it may not, set-user-ID and set-group-ID bits are dropped
/// rather than granted to a new owner. A new file gets the umask-derived
/// mode of any new file (the staged file was private until then). `CreateNew` publishes with
/// `RENAME_NOREPLACE`, so even a file created by another process in the
/// meantime is never replaced.
pub(crate) fn commit(
    op: Op<'_>,
    staged: Staged,
    target: &Path,
    guard: &WriteGuard,
    _lock: &TargetLock,
) -> Result<Version> {
    let state = current(op, target)?;
    check_guard(op, state.as_ref(), guard)?;
    match &state {
        Some(existing) => preserve(op, &staged, existing)?,
        None => staged.set_new_file_mode(op)?,
    }
    rename_into_place(op, &staged, target, matches!(guard, WriteGuard::CreateNew))?;
    let file = staged.published();
    // The rename changed the inode's ctime, so the version is read now.
    match file.metadata().or_else(|_| fs::symlink_metadata(target)) {
        Ok(meta) => Ok(version_of(&meta)),
        Err(err) => Err(op.io_at(
            format_args!(
                "the content was committed, but the version of {} could not be read",
                target.display()
            ),
            &err,
        )),
    }
}

/// Gives the staged file the replaced file's mode (and owner, if allowed).
fn preserve(op: Op<'_>, staged: &Staged, existing: &Metadata) -> Result<()> {
    let file = staged.file();
    let mine = file.metadata().map_err(|err| {
        op.io_at(
            format_args!("stat {}", staged.staged_path().display()),
            &err,
        )
    })?;
    let mut mode = existing.mode() & 0o7777;
    if (mine.uid(), mine.gid()) != (existing.uid(), existing.gid()) {
        match fchown(file, Some(existing.uid()), Some(existing.gid())) {
            Ok(()) => {}
            Err(err) if err.kind() == io::ErrorKind::PermissionDenied => mode &= !0o6000,
            Err(err) => {
                return Err(op.io_at(
                    format_args!("chown {}", staged.staged_path().display()),
                    &err,
                ));
            }
        }
    }
    if mine.mode() & 0o7777 != mode {
        file.set_permissions(Permissions::from_mode(mode))
            .map_err(|err| {
                op.io_at(
                    format_args!("chmod {}", staged.staged_path().display()),
                    &err,
                )
            })?;
    }
    Ok(())
}

fn rename_into_place(op: Op<'_>, staged: &Staged, target: &Path, no_replace: bool) -> Result<()> {
    let failed = |err: &io::Error| {
        op.io_at(
            format_args!(
                "rename {} to {}",
                staged.staged_path().display(),
                target.display()
            ),
            err,
        )
    };
    if no_replace {
        match rustix::fs::renameat_with(
            CWD,
            staged.staged_path(),
            CWD,
            target,
            RenameFlags::NOREPLACE,
        ) {
            Ok(()) => return Ok(()),
            Err(Errno::EXIST) => return Err(guard::already_exists(&op)),
            // The filesystem lacks RENAME_NOREPLACE: absence was checked
            // under the lock just now, which covers this provider's own
            // mutations.
            Err(Errno::INVAL | Errno::NOSYS) => {}
            Err(errno) => return Err(failed(&errno.into())),
        }
    }
    fs::rename(staged.staged_path(), target).map_err(|err| failed(&err))
}
