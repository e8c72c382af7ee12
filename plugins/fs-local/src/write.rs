//! `write`: atomic, guarded replacement of a file's content.

use std::path::Path;

use dsh_plugin_api::Result;
use dsh_plugin_api::fs::{Version, WriteGuard};

use crate::commit::{self, check_guard};
use crate::errors::Op;
use crate::locks;
use crate::paths;
use crate::staging::Staged;
use crate::tree::ensure_dir;

/// Writes `content` to the canonical target of `path` (symlinks followed,
/// as a shell redirection does).
///
/// Steps: canonicalise; fail fast if the guard already fails or the target
/// is a directory (so nothing is staged in vain); create missing parents;
/// stage the content; take the target's lock; re-check the guard and
/// publish (see [`commit::commit`]).
///
/// Cancellation: the awaits are the lock and, on a current-thread runtime,
/// the large-content write on the blocking pool. Dropping the future at
/// either removes the staging directory before the drop returns and leaves
/// the target untouched; after the lock is held, nothing awaits until the
/// commit is done.
pub(crate) async fn write(
    op: Op<'_>,
    path: &Path,
    content: Vec<u8>,
    guard: WriteGuard,
) -> Result<Version> {
    let target = paths::canonicalize(op, path)?;
    let (parent, name) = paths::split_file(op, &target)?;
    check_guard(op, commit::current(op, &target)?.as_ref(), &guard)?;
    ensure_dir(op, &parent)?;
    let staged = Staged::write(op, &parent, &name, content).await?;
    let lock = locks::lock(&target).await;
    commit::commit(op, staged, &target, &guard, &lock)
}
