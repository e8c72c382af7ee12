//! Direct writes: the common write or small edit in as few round trips as
//! its contract allows (docs/design.md §6.1, "Direct writes").
//!
//! The staged path ([`crate::staging`]) pays for a preparing command (a
//! process in the sandbox: canonical path, a 0700 staging directory, an
//! attribute-only copy of the replaced file) and for removing the staging
//! directory afterwards. Both exist to keep what the replaced file was —
//! its mode and owner — and to keep new content private until it is
//! published. When the replaced file already has exactly the attributes a
//! fresh upload gets (or there is none), neither is needed: the content is
//! uploaded straight beside the target, as `<parent>/.dsh-stage-<random>`,
//! readable by exactly whoever will be able to read the published file
//! (same directory, same mode, same owner), and published by the same
//! `Move`, which consumes it. A write is then one `Stat` alongside the
//! upload, and the `Move`; an edit a `Stat`, the download, the upload
//! alongside the second `Stat`, and the `Move`. Content over
//! [`DIRECT_LIMIT`] asks before it uploads ([`write_large`]); edits apply
//! to files up to it.
//!
//! It applies only where envd acts as the world's user (e2b-local; E2B's own envd acts as
//! root, so there every write is staged by the user's own process, see
//! [`crate::as_user`]), to a path whose final component is not a symlink, and to a target that
//! is absent or a regular file with the upload's attributes — learned from
//! this world's envd, once (the first direct write of a new file, or one
//! `Stat` of a staged file). Everything else, and every failure before the
//! commit other than a guard's, goes the staged way, which says precisely
//! what is wrong; nothing of the direct attempt is left behind.
//!
//! Locks are taken on the path as given (the staged path locks the
//! canonical one): two concurrent guarded writes of one file through two
//! different symlinked spellings in one process are serialised only by
//! their guards' checks, as writes from other processes are.

use std::sync::Arc;

use dsh_plugin_api::fs::{Edit, EditOutcome, FileKind, Version, WriteGuard};
use dsh_plugin_api::{Bytes, ErrorKind, Result};
use dsh_provider_kit::content::WriteContent;
use dsh_provider_kit::literal;
use e2b_client::EntryInfo;

use crate::edit::read_all;
use crate::errors::Op;
use crate::identity::EnvdFileAccess;
use crate::locks::{self, TargetLock};
use crate::meta::{kind_of, mode_of};
use crate::staging::{Existing, STAGING_PREFIX, Staged};
use crate::version::version_of;
use crate::world::{EnvdTransport, World};
use crate::write::check_guard;

/// The largest content (and edited file) whose upload runs while the
/// target's `Stat` is in flight: one thrown away must be cheap. Larger
/// content waits for the `Stat` ([`write_large`]).
pub(crate) const DIRECT_LIMIT: usize = 256 << 10;

/// What a fresh upload's file gets from this world's envd: its permission
/// bits, owner and group.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct UploadAttrs {
    mode: u32,
    owner: String,
    group: String,
}

impl UploadAttrs {
    fn of(entry: &EntryInfo) -> UploadAttrs {
        UploadAttrs {
            mode: mode_of(entry),
            owner: entry.owner.clone(),
            group: entry.group.clone(),
        }
    }
}

/// `write` of whole content the direct way: `Ok(None)` when it does not
/// apply or failed before the commit for a reason the staged path reports
/// better (nothing is left behind); a refused guard is its error.
///
/// Cancellation as the staged path: dropping the future before the `Move`
/// leaves the target untouched and removes the staged file; once the
/// `Move` is issued it completes.
pub(crate) async fn write<T: EnvdTransport>(
    world: &Arc<World<T>>,
    op: Op<'_>,
    path: &str,
    content: &Bytes,
    guard: &WriteGuard,
) -> Result<Option<Version>> {
    let Some(attempt) = Attempt::start(world, op, path).await? else {
        return Ok(None);
    };
    if content.len() > DIRECT_LIMIT {
        return write_large(attempt, op, content, guard).await;
    }
    let (current, uploaded) =
        futures::future::join(attempt.target(), attempt.upload(op, content)).await;
    let decided = match current {
        None => Ok(None),
        Some(current) => {
            check_guard(op, current.as_ref(), guard).map(|()| uploaded.then_some(current))
        }
    };
    attempt.conclude(op, decided).await
}

/// [`write`] of content over [`DIRECT_LIMIT`]: an upload thrown away is not
/// cheap, so the target is asked first and the content goes up only when
/// the direct way will publish it — a new file, or one whose attributes
/// are those this world's uploads are known to get. The guard is checked
/// before the upload (a write the direct way takes that cannot commit sends
/// nothing; one it does not take is staged, which checks the guard after
/// its upload) and again against the state right before the commit, as
/// the staged path does.
async fn write_large<T: EnvdTransport>(
    attempt: Attempt<T>,
    op: Op<'_>,
    content: &Bytes,
    guard: &WriteGuard,
) -> Result<Option<Version>> {
    let current = match attempt.target().await {
        Some(None) => None,
        Some(Some(entry)) if attempt.world.upload_attrs.get().is_some() => Some(entry),
        _ => return Ok(None),
    };
    check_guard(op, current.as_ref(), guard)?;
    if !attempt.upload(op, content).await {
        return attempt.conclude(op, Ok(None)).await;
    }
    let now = match guard {
        // Nothing to check: the rename itself refuses a directory that
        // appeared meanwhile, as on the staged path.
        WriteGuard::Overwrite => Some(current),
        _ => attempt.target().await,
    };
    let decided = match now {
        None => Ok(None),
        Some(now) => check_guard(op, now.as_ref(), guard).map(|()| Some(now)),
    };
    attempt.conclude(op, decided).await
}

/// `edit` the direct way: `Ok(None)` as for [`write`]; the edit's own
/// refusals (no unique match, a stale guard) are its errors, as on the
/// staged path.
pub(crate) async fn edit<T: EnvdTransport>(
    world: &Arc<World<T>>,
    op: Op<'_>,
    path: &str,
    edits: &[Edit],
    guard: &WriteGuard,
) -> Result<Option<EditOutcome>> {
    let Some(attempt) = Attempt::start(world, op, path).await? else {
        return Ok(None);
    };
    let entry = match attempt.target().await {
        Some(Some(entry)) if entry.size <= DIRECT_LIMIT as u64 => entry,
        // No file to edit (the staged path says so), or a large one.
        _ => return Ok(None),
    };
    check_guard(op, Some(&entry), guard)?;
    let read_version = version_of(&entry);
    let original = read_all(world, op, path, entry.size).await?;
    let applied = literal::apply(&original, edits)
        .map_err(|failure| op.error(ErrorKind::InvalidInput, failure))?;
    drop(original);
    let content = Bytes::from(applied.text);
    let (now, uploaded) =
        futures::future::join(attempt.target(), attempt.upload(op, &content)).await;
    let decided = match now {
        None => Ok(None),
        Some(now) => check_guard(op, now.as_ref(), &WriteGuard::IfVersion(read_version))
            .map(|()| uploaded.then_some(now)),
    };
    Ok(attempt
        .conclude(op, decided)
        .await?
        .map(|version| EditOutcome {
            version,
            replacements: applied.replacements,
        }))
}

/// One direct attempt: the target's lock and the staged file beside it.
/// Dropped unpublished, it releases the lock and removes the staged file if
/// an upload made it (from a task of the provider; see [`Staged`]).
struct Attempt<T: EnvdTransport> {
    world: Arc<World<T>>,
    staged: Staged<T>,
    lock: TargetLock,
}

impl<T: EnvdTransport> Attempt<T> {
    /// `None` when the direct way does not apply to `path` in this world.
    async fn start(world: &Arc<World<T>>, op: Op<'_>, path: &str) -> Result<Option<Attempt<T>>> {
        if world.envd_file_access(op).await? != EnvdFileAccess::AsUser {
            return Ok(None);
        }
        let Some((parent, name)) = dsh_provider_kit::paths::split_canonical(path) else {
            return Ok(None);
        };
        if name.is_empty() {
            return Ok(None);
        }
        let lock = locks::lock(&world.sandbox_id, path).await;
        let stage = format!(
            "{}/{STAGING_PREFIX}{:032x}",
            parent.trim_end_matches('/'),
            rand::random::<u128>()
        );
        Ok(Some(Attempt {
            world: Arc::clone(world),
            staged: Staged::direct(world, path, stage),
            lock,
        }))
    }

    /// The target as envd sees it now, when the direct way may replace it:
    /// `Some(None)` when absent, `Some(Some(entry))` for a regular file that
    /// has (or, while this world has not learned them, may have) the
    /// upload's attributes; `None` for anything else, and when envd cannot
    /// say.
    async fn target(&self) -> Option<Option<EntryInfo>> {
        match self.world.stat(&self.staged.target).await {
            Ok(entry) => {
                let fits = kind_of(&entry) == FileKind::File
                    && self
                        .world
                        .upload_attrs
                        .get()
                        .is_none_or(|attrs| *attrs == UploadAttrs::of(&entry));
                fits.then_some(Some(entry))
            }
            Err(err) if err.is_not_found() => Some(None),
            Err(_) => None,
        }
    }

    /// Uploads `content` as the staged file; `false` when envd refused it
    /// (the staged path will say why).
    async fn upload(&self, op: Op<'_>, content: &Bytes) -> bool {
        match self
            .staged
            .upload(op, WriteContent::Whole(content.clone()))
            .await
        {
            Ok(()) => true,
            Err(err) => {
                tracing::debug!(target = %self.staged.target, %err, "direct upload refused; staging instead");
                false
            }
        }
    }

    /// Ends an attempt whose upload ran (or was tried): `decided` is the
    /// target to publish over (as [`Attempt::publish_over`] takes it), or
    /// `Ok(None)` when the direct way declines, or the operation's refusal.
    /// Declined or refused, the staged file is removed before the answer
    /// (so neither the error nor the staged way that follows leaves a
    /// [`STAGING_PREFIX`] name beside the target for the caller to see);
    /// only a dropped operation leaves that to a task ([`Staged`]).
    async fn conclude(
        self,
        op: Op<'_>,
        decided: Result<Option<Option<EntryInfo>>>,
    ) -> Result<Option<Version>> {
        match decided {
            Ok(Some(current)) => self.publish_over(op, current.as_ref()).await,
            declined => {
                self.staged.discard().await;
                declined.map(|_| None)
            }
        }
    }

    /// Publishes the uploaded staged file over `current` (a regular file
    /// as [`Attempt::target`] found it; `None`: absent). Replacing a file
    /// while this world does not know the upload's attributes first learns
    /// them (one `Stat` of the staged file) and publishes only if they are
    /// the file's. `Ok(None)`: not published, the staged file removed.
    async fn publish_over(
        mut self,
        op: Op<'_>,
        current: Option<&EntryInfo>,
    ) -> Result<Option<Version>> {
        let attrs = &self.world.upload_attrs;
        if let Some(current) = current {
            if attrs.get().is_none() {
                match self.world.stat(&self.staged.file).await {
                    Ok(staged) => {
                        let _ = attrs.set(UploadAttrs::of(&staged));
                    }
                    Err(_) => {
                        self.staged.discard().await;
                        return Ok(None);
                    }
                }
            }
            if attrs.get() != Some(&UploadAttrs::of(current)) {
                self.staged.discard().await;
                return Ok(None);
            }
        }
        // A large replaced file is then freed after the write, not in it.
        self.staged.existing = current.map(|current| Existing {
            mode: mode_of(current),
            size: current.size,
        });
        let world = Arc::clone(&self.world);
        let published = self.staged.publish_entry(op, self.lock).await?;
        if current.is_none() {
            // A new file has exactly what the upload gave it.
            let _ = world.upload_attrs.set(UploadAttrs::of(&published));
        }
        Ok(Some(version_of(&published)))
    }
}
