//! `write`: atomic, guarded replacement of a file's content.

use std::path::Path;

use dsh_plugin_api::fs::{Version, WriteGuard};
use dsh_plugin_api::{Bytes, ErrorKind, Result};

use crate::blocking::INLINE_LIMIT;
use crate::commit::{self, check_guard};
use crate::errors::Op;
use crate::locks;
use crate::paths;
use crate::staging::Staged;
use crate::tree::ensure_dir;

/// Writes `content` to the canonical target of `path` (symlinks followed,
/// as a shell redirection does).
///
/// Steps: canonicalise; for a guarded or large write, fail fast if the
/// guard already fails or the target is a directory (so nothing is staged
/// or created in vain — a plain small write skips this `stat`, its commit
/// check is authoritative and it has nothing to undo); stage the content,
/// creating missing parents when the staging directory cannot be made; take
/// the target's lock; re-check the guard and publish (see
/// [`commit::commit`]).
///
/// Cancellation: the awaits are the lock and, on a current-thread runtime,
/// the large-content write on the blocking pool. Dropping the future at
/// either removes the staging directory before the drop returns and leaves
/// the target untouched; after the lock is held, nothing awaits until the
/// commit is done.
pub(crate) async fn write(
    op: Op<'_>,
    path: &Path,
    content: Bytes,
    guard: WriteGuard,
) -> Result<Version> {
    let target = paths::canonicalize(op, path)?;
    let (parent, name) = paths::split_file(op, &target)?;
    if guard != WriteGuard::Overwrite || content.len() as u64 > INLINE_LIMIT {
        check_guard(op, commit::current(op, &target)?.as_ref(), &guard)?;
    }
    let staged = match Staged::create(op, &parent, &name) {
        Err(err) if err.kind() == ErrorKind::NotFound => {
            ensure_dir(op, &parent)?;
            Staged::create(op, &parent, &name)?
        }
        staged => staged?,
    };
    let staged = staged.fill(op, content).await?;
    let lock = locks::lock(&target).await;
    commit::commit(op, staged, &target, &guard, &lock)
}
