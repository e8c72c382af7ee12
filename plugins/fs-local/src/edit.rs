//! `edit`: literal edits of a UTF-8 file, stored atomically.

use std::path::Path;

use dsh_plugin_api::fs::{Edit, EditOutcome, WriteGuard};
use dsh_plugin_api::{Bytes, ErrorKind, Result};
use dsh_provider_kit::literal;

use crate::commit::{self, check_guard};
use crate::errors::Op;
use crate::locks;
use crate::paths;
use crate::read::{open_regular, read_text_content};
use crate::staging::Staged;
use crate::version::version_of;

/// Applies `edits` to the canonical target of `path`.
///
/// The target's lock is held from before the read until after the commit,
/// so concurrent edits and writes through this process serialise and none
/// is lost. `guard` is checked against the state that was read; the commit
/// then requires the file to still be in exactly that state, so a change by
/// another process in between fails with `Conflict` instead of being
/// overwritten. Bad edits (none given, empty `old`, zero or ambiguous
/// matches) are `InvalidInput` and store nothing.
///
/// Cancellation: dropping the future while it waits for the lock, reads a
/// large file or stages large content leaves the file untouched and no
/// staged file behind.
pub(crate) async fn edit(
    op: Op<'_>,
    path: &Path,
    edits: Vec<Edit>,
    guard: WriteGuard,
) -> Result<EditOutcome> {
    literal::validate(&edits).map_err(|failure| op.error(ErrorKind::InvalidInput, failure))?;
    let target = paths::canonicalize(op, path)?;
    let (parent, _) = paths::split_file(op, &target)?;
    let lock = locks::lock(&target).await;
    let (file, meta) = open_regular(op, &target)?;
    check_guard(op, Some(&meta), &guard)?;
    let read_version = version_of(&meta);
    let original = read_text_content(op, file, meta.len()).await?;
    let applied = literal::apply(&original, &edits)
        .map_err(|failure| op.error(ErrorKind::InvalidInput, failure))?;
    drop(original);
    let staged = Staged::create(op, &parent)?
        .fill(op, Bytes::from(applied.text))
        .await?;
    let version = commit::commit(
        op,
        staged,
        &target,
        &WriteGuard::IfVersion(read_version),
        &lock,
    )?;
    Ok(EditOutcome {
        version,
        replacements: applied.replacements,
    })
}
