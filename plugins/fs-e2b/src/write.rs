//! `write`: atomic, guarded replacement of a file's content.

use std::sync::Arc;

use dsh_plugin_api::fs::{FileKind, Version, WriteGuard};
use dsh_plugin_api::{ErrorKind, Result};
use dsh_provider_kit::content::WriteContent;
use dsh_provider_kit::guard;
use e2b_client::EntryInfo;

use crate::direct;
use crate::errors::Op;
use crate::locks::{self, TargetLock};
use crate::meta::{kind_of, mode_of};
use crate::staging::Staged;
use crate::version::version_of;
use crate::world::{EnvdTransport, World};

/// Writes `content` to the canonical target of the absolute `path`.
///
/// Whole content replacing an existing file is one request to the sandbox
/// helper's running process when it can ([`World::write_native`]), else
/// goes the direct way when it can ([`crate::direct`]: a `Stat` alongside
/// the upload — before it, for content over 256 KiB — and the `Move`).
/// Otherwise, staged —
/// round trips: the preparing command, the upload, the rename and the
/// staging directory's removal; a guarded write adds one `Stat` under the
/// target's lock (a guarded stream one more before its upload, so a write
/// that cannot commit pulls nothing), and replacing a set-user-ID or set-group-ID file one
/// `chmod` (envd's upload clears those bits).
///
/// Cancellation: dropping the future before the rename leaves the target
/// untouched and the staging directory is removed; once the rename is
/// issued it completes (see [`Staged::publish`]).
pub(crate) async fn write<T: EnvdTransport>(
    world: &Arc<World<T>>,
    op: Op<'_>,
    path: &str,
    content: WriteContent,
    guard: WriteGuard,
) -> Result<Version> {
    if let WriteContent::Whole(bytes) = &content {
        if let Some(version) = world.write_native(op, path, bytes, &guard).await? {
            return Ok(version);
        }
        if let Some(version) = direct::write(world, op, path, bytes, &guard).await? {
            return Ok(version);
        }
    }
    let mut staged = Staged::prepare(world, op, path).await?;
    if matches!(content, WriteContent::Stream(_)) && guard != WriteGuard::Overwrite {
        let current = world.stat_if_exists(op, &staged.target).await;
        if let Err(err) = current.and_then(|current| check_guard(op, current.as_ref(), &guard)) {
            staged.discard().await;
            return Err(err);
        }
    }
    match stage(world, op, &mut staged, content, &guard).await {
        Ok(lock) => staged.publish(op, lock).await,
        Err(err) => {
            staged.discard().await;
            Err(err)
        }
    }
}

/// Uploads the content, takes the target's lock, checks the guard and
/// settles the staged file's mode; returns the held lock.
async fn stage<T: EnvdTransport>(
    world: &World<T>,
    op: Op<'_>,
    staged: &mut Staged<T>,
    content: WriteContent,
    guard: &WriteGuard,
) -> Result<TargetLock> {
    staged.upload(op, content).await?;
    let lock = locks::lock(&world.sandbox_id, &staged.target).await;
    let current = match guard {
        // No condition: the rename itself refuses a directory that
        // appeared meanwhile, and the mode seen when staging is kept.
        WriteGuard::Overwrite => None,
        _ => world.stat_if_exists(op, &staged.target).await?,
    };
    check_guard(op, current.as_ref(), guard)?;
    let mode = match (&current, &staged.existing) {
        (Some(entry), _) => Some(mode_of(entry)),
        (None, Some(existing)) if matches!(guard, WriteGuard::Overwrite) => Some(existing.mode),
        (None, _) => None,
    };
    if let Some(mode) = mode {
        staged.set_mode(op, mode).await?;
    }
    Ok(lock)
}

/// Checks `guard` against the target's state (`None`: absent; see
/// [`guard::check`]). A directory is `IsADirectory`; a symlink means the
/// target changed since it was canonicalised (which followed every link),
/// so it is `Conflict`.
pub(crate) fn check_guard(op: Op<'_>, state: Option<&EntryInfo>, guard: &WriteGuard) -> Result<()> {
    if let Some(entry) = state {
        match kind_of(entry) {
            FileKind::Directory => {
                return Err(op.error(ErrorKind::IsADirectory, "the target is a directory"));
            }
            FileKind::Symlink => {
                return Err(op.error(
                    ErrorKind::Conflict,
                    "the target became a symbolic link during the operation",
                ));
            }
            FileKind::File | FileKind::Other => {}
        }
    }
    guard::check(&op, state.map(version_of).as_ref(), guard)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::meta::tests::entry;

    fn op() -> Op<'static> {
        Op::new("write", "/w/a")
    }

    #[test]
    fn guards_hold_against_the_current_state() {
        let file = entry("-rw-r--r--", 0o644);
        let version = version_of(&file);
        check_guard(op(), None, &WriteGuard::Overwrite).unwrap();
        check_guard(op(), Some(&file), &WriteGuard::Overwrite).unwrap();
        check_guard(op(), None, &WriteGuard::CreateNew).unwrap();
        check_guard(op(), Some(&file), &WriteGuard::IfVersion(version.clone())).unwrap();
        let kind = |state: Option<&EntryInfo>, guard: WriteGuard| {
            check_guard(op(), state, &guard).unwrap_err().kind()
        };
        assert_eq!(
            kind(Some(&file), WriteGuard::CreateNew),
            ErrorKind::AlreadyExists
        );
        assert_eq!(
            kind(None, WriteGuard::IfVersion(version.clone())),
            ErrorKind::NotFound
        );
        assert_eq!(
            kind(Some(&file), WriteGuard::IfVersion(Version("stale".into()))),
            ErrorKind::Conflict
        );
        assert_eq!(
            kind(Some(&entry("drwxr-xr-x", 0o755)), WriteGuard::Overwrite),
            ErrorKind::IsADirectory
        );
        assert_eq!(
            kind(
                Some(&entry("Lrwxrwxrwx", 0o644)),
                WriteGuard::IfVersion(version)
            ),
            ErrorKind::Conflict
        );
    }
}
