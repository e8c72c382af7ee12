//! `edit`: literal edits of a UTF-8 file, stored atomically.

use std::sync::Arc;

use dsh_plugin_api::fs::{Edit, EditOutcome, FileKind, WriteGuard};
use dsh_plugin_api::{Bytes, ErrorKind, Result, Text};
use dsh_provider_kit::content::WriteContent;
use dsh_provider_kit::literal;
use dsh_provider_kit::utf8::into_text;
use futures::StreamExt;

use crate::direct;
use crate::errors::Op;
use crate::locks;
use crate::meta::{kind_of, mode_of, other_kind_name};
use crate::staging::Staged;
use crate::version::version_of;
use crate::world::{EnvdTransport, World};
use crate::write::check_guard;

/// Applies `edits` to the canonical target of the absolute `path`: by the
/// sandbox helper's running process where it can ([`World::edit_native`]),
/// else the direct way, else staged.
///
/// The target's lock is held from before the read until after the commit,
/// so concurrent edits and writes through this process serialise and none
/// is lost. `guard` is checked against the state that was read; the commit
/// then requires the file to still be in exactly that state (one more
/// `Stat` right before the rename), so a change by anyone else in between
/// fails with `Conflict` instead of being overwritten. Bad edits (none
/// given, empty `old`, zero or ambiguous matches) are `InvalidInput` and
/// store nothing.
///
/// Cancellation: as [`crate::write::write`] — nothing changes unless the
/// rename was issued, and the staging directory is removed.
pub(crate) async fn edit<T: EnvdTransport>(
    world: &Arc<World<T>>,
    op: Op<'_>,
    path: &str,
    edits: Vec<Edit>,
    guard: WriteGuard,
) -> Result<EditOutcome> {
    literal::validate(&edits).map_err(|failure| op.error(ErrorKind::InvalidInput, failure))?;
    if let Some(outcome) = world.edit_native(op, path, &edits, &guard).await? {
        return Ok(outcome);
    }
    if let Some(outcome) = direct::edit(world, op, path, &edits, &guard).await? {
        return Ok(outcome);
    }
    let mut staged = Staged::prepare(world, op, path).await?;
    let lock = locks::lock(&world.sandbox_id, &staged.target).await;
    match stage(world, op, &mut staged, &edits, &guard).await {
        Ok(replacements) => {
            let version = staged.publish(op, lock).await?;
            Ok(EditOutcome {
                version,
                replacements,
            })
        }
        Err(err) => {
            drop(lock);
            staged.discard().await;
            Err(err)
        }
    }
}

/// Reads the target, applies the edits, uploads the result and checks, just
/// before the commit, that the target is still what was read. Returns the
/// number of replacements.
async fn stage<T: EnvdTransport>(
    world: &World<T>,
    op: Op<'_>,
    staged: &mut Staged<T>,
    edits: &[Edit],
    guard: &WriteGuard,
) -> Result<usize> {
    let target = staged.target.clone();
    let Some(entry) = world.stat_if_exists(op, &target).await? else {
        return Err(op.error(ErrorKind::NotFound, "the file does not exist"));
    };
    check_guard(op, Some(&entry), guard)?;
    if kind_of(&entry) != FileKind::File {
        return Err(op.error(
            ErrorKind::InvalidInput,
            format_args!(
                "not a regular file (a {}), refusing to edit it",
                other_kind_name(&entry)
            ),
        ));
    }
    let read_version = version_of(&entry);
    let original = read_all(world, op, &target, entry.size).await?;
    let applied = literal::apply(&original, edits)
        .map_err(|failure| op.error(ErrorKind::InvalidInput, failure))?;
    drop(original);
    staged
        .upload(op, WriteContent::Whole(Bytes::from(applied.text)))
        .await?;
    let now = world.stat_if_exists(op, &target).await?;
    check_guard(op, now.as_ref(), &WriteGuard::IfVersion(read_version))?;
    if let Some(now) = &now {
        staged.set_mode(op, mode_of(now)).await?;
    }
    Ok(applied.replacements)
}

/// The whole file as strict UTF-8 text.
pub(crate) async fn read_all<T: EnvdTransport>(
    world: &World<T>,
    op: Op<'_>,
    path: &str,
    size: u64,
) -> Result<String> {
    let mut pieces = world.download(op, path).await?;
    let mut content = Vec::with_capacity(usize::try_from(size).unwrap_or(0));
    while let Some(piece) = pieces.next().await {
        content.extend_from_slice(&piece?);
    }
    // No copy: the text is the uniquely owned `Vec` read above.
    into_text(&op, content).map(Text::into_string)
}
