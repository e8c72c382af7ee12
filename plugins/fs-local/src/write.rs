//! `write`: atomic, guarded replacement of a file's content.

use std::path::Path;

use dsh_plugin_api::fs::{Version, WriteGuard};
use dsh_plugin_api::{ErrorKind, Result};
use dsh_provider_kit::content::WriteContent;

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
/// Steps: canonicalise; for a guarded, large or streamed write, fail fast if the
/// guard already fails or the target is a directory (so nothing is staged
/// or created in vain — a plain small write skips this `stat`, its commit
/// check is authoritative and it has nothing to undo); stage the content,
/// creating missing parents when the staged file cannot be made; take
/// the target's lock; re-check the guard and publish (see
/// [`commit::commit`]).
///
/// Cancellation: the awaits are the lock, the stream's next chunk and, on a
/// current-thread runtime, the large-content write on the blocking pool.
/// Dropping the future at any of them removes the staged file before the drop returns and leaves
/// the target untouched; after the lock is held, nothing awaits until the
/// commit is done.
pub(crate) async fn write(
    op: Op<'_>,
    path: &Path,
    content: WriteContent,
    guard: WriteGuard,
) -> Result<Version> {
    let target = paths::canonicalize(op, path)?;
    let (parent, _) = paths::split_file(op, &target)?;
    // A stream's size is unknown: it counts as large.
    let large = content.known_len().is_none_or(|len| len > INLINE_LIMIT);
    if guard != WriteGuard::Overwrite || large {
        check_guard(op, commit::current(op, &target)?.as_ref(), &guard)?;
    }
    let staged = match Staged::create(op, &parent) {
        Err(err) if err.kind() == ErrorKind::NotFound => {
            ensure_dir(op, &parent)?;
            Staged::create(op, &parent)?
        }
        staged => staged?,
    };
    let staged = match content {
        WriteContent::Whole(bytes) => staged.fill(op, bytes).await?,
        WriteContent::Stream(chunks) => staged.fill_stream(op, chunks).await?,
    };
    let lock = locks::lock(&target).await;
    commit::commit(op, staged, &target, &guard, &lock)
}
