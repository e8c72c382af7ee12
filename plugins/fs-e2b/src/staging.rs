//! Staging: new content is uploaded into a private directory beside its
//! target, so publishing it is one same-filesystem rename (envd `Move`).
//!
//! Everything here acts as the world's user (docs/design.md §5.1), so a
//! write succeeds exactly where that user may write: one internal command
//! (see [`World::control`]) prepares a write: it resolves the target's
//! canonical path (so a write through a symlink replaces the link's target
//! and keeps the link), refuses a directory, creates the staging directory
//! `<parent>/.dsh-stage-<random>` with mode 0700 *at creation* (before any
//! content exists; a parent the user may not write refuses it, as it
//! refuses `mv`: publishing is a rename in that directory), and, when a
//! regular file is replaced, creates the staged file as an attribute-only
//! copy of it (its mode, and its owner and group where the user may keep
//! them — only root may give a file away), so the upload — which truncates
//! the staged file in place — keeps them; a copy the user may not make or
//! write is left to the upload, and the mode is set afterwards. The upload
//! is made as the same user. Missing parents are created with envd's
//! `MakeDir` (owned by the user, as the SDKs create them) and the command
//! runs again.
//!
//! A [`Staged`] owns its directory: [`Staged::discard`] removes it, and
//! dropping it unpublished (an error, or a dropped operation) removes it
//! from a task on the provider's runtime — once at once and once more a
//! moment later, because a dropped upload may still be finishing in envd
//! and could recreate the directory.

use std::sync::{Arc, PoisonError};
use std::time::Duration;

use dsh_plugin_api::fs::{FileKind, Version};
use dsh_plugin_api::{ErrorKind, Result};
use dsh_provider_kit::content::WriteContent;
use e2b_client::EntryInfo;
use futures::StreamExt;
use tokio::runtime::Handle;

use crate::canonical::canonical_function;
use crate::errors::Op;
use crate::meta::{kind_of, mode_of};
use crate::version::{WRITE_TOKEN_KEY, new_write_token, version_of};
use crate::world::{EnvdTransport, World, command_failed, nul_fields};

/// Name prefix of staging directories (`.dsh-stage-<32 hex digits>`).
pub const STAGING_PREFIX: &str = ".dsh-stage-";

/// How long after the first clean-up of an abandoned staging directory the
/// second one runs.
const SECOND_CLEANUP_AFTER: Duration = Duration::from_secs(1);

/// Largest piece an upload body is cut into (cheap `Bytes` slices; each
/// crosses the owner's boundary as one chunk).
const UPLOAD_PIECE: usize = 1 << 20;

/// The preparing command, run as the world's user. Arguments: `$1` the
/// absolute path to write, `$2` the staging directory's random suffix.
/// Prints `target\0stage\0copied\0`, `copied` being `copied` when the
/// staged file was made from the file being replaced with its mode
/// (empty otherwise: then the mode is set after the upload); on the
/// refusals below prints the path concerned and exits with the code named
/// in [`Refusal`]; exits 96 when the staged copy cannot be made writable.
/// Forks at most `mkdir`, two `cp` and a `chmod` (plus `realpath` for a
/// path through a symlink).
const PREPARE: &str = concat!(
    canonical_function!(),
    r#"
canonical "$1" || exit 90
target=$canonical
name=${target##*/}
parent=${target%/*}
[[ -n $parent ]] || parent=/
if [[ -z $name || -d $target ]]; then printf '%s\0' "$target"; exit 91; fi
stage=${parent%/}/.dsh-stage-$2
if ! mkdir -m 0700 -- "$stage"; then
  if [[ ! -e $parent ]]; then printf '%s\0' "$parent"; exit 95; fi
  if [[ ! -d $parent ]]; then printf '%s\0' "$parent"; exit 93; fi
  printf '%s\0' "$parent"
  exit 94
fi
copied=
if [[ -f $target ]]; then
  staged=$stage/$name
  copied=copied
  if ! cp --attributes-only --preserve=mode,ownership -- "$target" "$staged" 2>/dev/null; then
    rm -f -- "$staged"
    cp --attributes-only --preserve=mode -- "$target" "$staged" 2>/dev/null || copied=
  fi
  if [[ -n $copied && ! -w $staged ]]; then
    chmod u+w -- "$staged" || { rm -rf -- "$stage"; exit 96; }
    copied=
  fi
fi
printf '%s\0%s\0%s\0' "$target" "$stage" "$copied"
"#
);

/// Exit codes of [`PREPARE`] that refuse the write.
struct Refusal;

impl Refusal {
    const UNRESOLVABLE: i32 = 90;
    const DIRECTORY: i32 = 91;
    const NOT_A_DIRECTORY: i32 = 93;
    const UNWRITABLE_PARENT: i32 = 94;
    const MISSING_PARENT: i32 = 95;
}

/// The regular file a write replaces, as envd's `Stat` saw it while the
/// write was prepared.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Existing {
    /// Permission bits (`0o7777` mask).
    pub mode: u32,
}

/// A staged file beside its target, not yet published.
pub(crate) struct Staged<T: EnvdTransport> {
    world: Arc<World<T>>,
    handle: Handle,
    /// The canonical target the content will replace.
    pub target: String,
    /// The staging directory (mode 0700); for a direct write
    /// ([`Staged::direct`]) the staged file itself.
    dir: String,
    /// The staged file.
    pub file: String,
    /// The file being replaced, as seen when staging.
    pub existing: Option<Existing>,
    /// The staged file's mode as this provider set it (`None`: as the
    /// upload created it).
    mode: Option<u32>,
    /// Whether the staging directory still has to be removed.
    armed: bool,
}

impl<T: EnvdTransport> std::fmt::Debug for Staged<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Staged")
            .field("target", &self.target)
            .field("dir", &self.dir)
            .field("existing", &self.existing)
            .finish_non_exhaustive()
    }
}

impl<T: EnvdTransport> Staged<T> {
    /// Prepares a write of the absolute `path` (see the module docs). The
    /// command runs to its end in a task of the provider even if this
    /// future is dropped; a staging directory it made is then removed.
    ///
    /// Refusals: a directory is `IsADirectory`, a non-directory in place
    /// of the parent `NotADirectory`, an unresolvable path (a symlink loop)
    /// `Io`.
    pub(crate) async fn prepare(
        world: &Arc<World<T>>,
        op: Op<'_>,
        path: &str,
    ) -> Result<Staged<T>> {
        let handle = World::<T>::handle();
        let work = {
            let world = Arc::clone(world);
            let handle = handle.clone();
            let op = op.to_owned();
            let path = path.to_owned();
            async move { prepare_now(world, handle, op.op(), &path).await }
        };
        world.tasks.spawn_on(work, &handle).await.map_err(|err| {
            op.error(
                ErrorKind::Io,
                format_args!("preparing the write failed: {err}"),
            )
        })?
    }

    /// A staged file of a direct write ([`crate::direct`]): `file`, beside
    /// `target`, with no staging directory around it. Nothing exists yet;
    /// until it is published, dropping it (or [`Staged::discard`]) removes
    /// `file` if an upload made it.
    pub(crate) fn direct(world: &Arc<World<T>>, target: &str, file: String) -> Staged<T> {
        Staged {
            world: Arc::clone(world),
            handle: World::<T>::handle(),
            target: target.to_owned(),
            dir: file.clone(),
            file,
            existing: None,
            mode: None,
            armed: true,
        }
    }

    /// Uploads `content` as the staged file, tagged with a fresh write
    /// token (see [`crate::version`]), as the world's user: whole content
    /// is sent in pieces that are slices of it (no copy) with its length
    /// declared; a stream is sent chunk by chunk as it yields them, with no
    /// length (so envd reads the body to its end). An error of the stream
    /// fails the upload with that error.
    /// Dropping the future abandons the upload; the staged file is then
    /// discarded with its directory.
    pub(crate) async fn upload(&self, op: Op<'_>, content: WriteContent) -> Result<()> {
        let options = self
            .world
            .upload_options()
            .metadata(WRITE_TOKEN_KEY, new_write_token());
        let uploaded = match content {
            WriteContent::Whole(content) => {
                let options = options.content_length(content.len() as u64);
                let pieces = (0..content.len())
                    .step_by(UPLOAD_PIECE)
                    .map(move |start| {
                        let end = (start + UPLOAD_PIECE).min(content.len());
                        Ok::<_, std::convert::Infallible>(content.slice(start..end))
                    })
                    .collect::<Vec<_>>();
                let body = futures::stream::iter(pieces);
                self.world.envd.upload(&self.file, body, &options).await
            }
            WriteContent::Stream(chunks) => {
                // The stream's own error is kept whole: the upload reports
                // only that its source failed.
                let source_error = Arc::new(std::sync::Mutex::new(None));
                let recorded = Arc::clone(&source_error);
                let body = chunks.map(move |chunk| {
                    chunk.map_err(|err| {
                        let message = err.to_string();
                        *recorded.lock().unwrap_or_else(PoisonError::into_inner) = Some(err);
                        message
                    })
                });
                let uploaded = self.world.envd.upload(&self.file, body, &options).await;
                let source_error = source_error
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .take();
                if let Some(err) = source_error {
                    return Err(err);
                }
                uploaded
            }
        };
        uploaded.map_err(|err| op.remote(&err))?;
        Ok(())
    }

    /// Gives the staged file the permission bits `mode` (special bits
    /// included) unless it already has them. Needed when the file being
    /// replaced has set-user-ID or set-group-ID bits (envd's upload chowns
    /// the file, which clears them) or changed mode since staging.
    pub(crate) async fn set_mode(&mut self, op: Op<'_>, mode: u32) -> Result<()> {
        let cleared_by_upload = mode & 0o6000 != 0;
        if self.mode == Some(mode) && !cleared_by_upload {
            return Ok(());
        }
        let command = self.world.shell.exec(
            "chmod",
            [format!("{mode:o}"), "--".to_owned(), self.file.clone()],
        );
        let output = self.world.control(op, &command).await?;
        if !output.status.success() {
            return Err(command_failed(
                op,
                "setting the staged file's mode",
                &output,
            ));
        }
        self.mode = Some(mode);
        Ok(())
    }

    /// Publishes the staged file as the target: envd's `Move` is the commit
    /// point, and its answer gives the committed version (no further
    /// metadata request that could fail after the commit). `lock` is held
    /// until the rename is done. The rename and the removal of the staging
    /// directory run in a task of the provider, so dropping this future
    /// never abandons a rename that was started.
    pub(crate) async fn publish<L: Send + 'static>(self, op: Op<'_>, lock: L) -> Result<Version> {
        self.publish_entry(op, lock)
            .await
            .map(|entry| version_of(&entry))
    }

    /// [`Staged::publish`], answering envd's description of the published
    /// file. A direct write's staged file is consumed by the rename: there
    /// is nothing left to remove unless the rename failed.
    pub(crate) async fn publish_entry<L: Send + 'static>(
        mut self,
        op: Op<'_>,
        lock: L,
    ) -> Result<EntryInfo> {
        // From here the task owns the clean-up.
        self.armed = false;
        let world = Arc::clone(&self.world);
        let handle = self.handle.clone();
        let owned = op.to_owned();
        let work = async move {
            let _lock = lock;
            let moved = self
                .world
                .envd
                .rename(&self.file, &self.target, &self.world.fs_options)
                .await;
            // Empty after a successful rename; holding the content after a
            // failed one.
            if moved.is_err() || self.dir != self.file {
                self.remove_dir().await;
            }
            moved.map_err(|err| owned.op().remote(&err))
        };
        world
            .tasks
            .spawn_on(work, &handle)
            .await
            .map_err(|err| op.error(ErrorKind::Io, format_args!("publishing failed: {err}")))?
    }

    /// Removes the staging directory now (an error path of the operation).
    ///
    /// A failed upload (its source failed, or envd refused it mid-body) may
    /// still be finishing in envd and recreate the directory, so it is
    /// removed once more a moment later, from a tracked task.
    pub(crate) async fn discard(mut self) {
        self.remove_dir().await;
        self.armed = false;
        let (world, dir) = (Arc::clone(&self.world), std::mem::take(&mut self.dir));
        let tasks = world.tasks.clone();
        tasks.spawn_on(remove_again_later(world, dir), &self.handle);
    }

    async fn remove_dir(&self) {
        remove(&self.world, &self.dir).await;
    }
}

impl<T: EnvdTransport> Drop for Staged<T> {
    fn drop(&mut self) {
        if !self.armed {
            return;
        }
        let world = Arc::clone(&self.world);
        let dir = std::mem::take(&mut self.dir);
        let tasks = world.tasks.clone();
        tasks.spawn_on(
            async move {
                remove(&world, &dir).await;
                remove_again_later(world, dir).await;
            },
            &self.handle,
        );
    }
}

/// The second clean-up of an abandoned staging directory, after
/// [`SECOND_CLEANUP_AFTER`]: an upload abandoned in flight may have
/// recreated it meanwhile.
async fn remove_again_later<T: EnvdTransport>(world: Arc<World<T>>, dir: String) {
    tokio::time::sleep(SECOND_CLEANUP_AFTER).await;
    remove(&world, &dir).await;
}

/// Removes a staging directory and whatever is in it (or a direct write's
/// staged file); one that does not exist is fine. Failures are logged, not
/// returned: the operation's outcome is already decided, and a leftover is
/// recognisable by its [`STAGING_PREFIX`].
async fn remove<T: EnvdTransport>(world: &World<T>, dir: &str) {
    match world.envd.remove(dir, &world.fs_options).await {
        Ok(()) => {}
        Err(err) if err.is_not_found() => {}
        Err(err) => tracing::warn!(dir, %err, "could not remove a staging directory"),
    }
}

/// Runs [`PREPARE`], creating missing parents once, alongside the `Stat`
/// that finds the replaced file's owner.
async fn prepare_now<T: EnvdTransport>(
    world: Arc<World<T>>,
    handle: Handle,
    op: Op<'_>,
    path: &str,
) -> Result<Staged<T>> {
    let (prepared, existing) = futures::future::join(
        run_prepare(&world, op, path),
        existing_file(&world, op, path),
    )
    .await;
    let prepared = prepared?;
    Ok(Staged {
        // The copy has the replaced file's mode; without the `Stat`'s
        // answer it is unknown, and any mode asked for is then set.
        mode: existing
            .as_ref()
            .filter(|_| prepared.copied)
            .map(|existing| existing.mode),
        file: format!("{}/{}", prepared.dir, prepared.name),
        target: prepared.target,
        dir: prepared.dir,
        existing,
        world,
        handle,
        armed: true,
    })
}

/// The regular file `path` leads to, as envd describes it; `None` when
/// there is none, or when envd cannot say (the preparing command then
/// reports what is wrong with the path).
async fn existing_file<T: EnvdTransport>(
    world: &World<T>,
    op: Op<'_>,
    path: &str,
) -> Option<Existing> {
    let entry = world.stat(path).await.ok()?;
    let followed = world.follow(op, path, entry).await.ok()??;
    (kind_of(&followed.entry) == FileKind::File).then(|| Existing {
        mode: mode_of(&followed.entry),
    })
}

/// Runs [`PREPARE`] until it answers, creating missing parents once.
async fn run_prepare<T: EnvdTransport>(
    world: &World<T>,
    op: Op<'_>,
    path: &str,
) -> Result<Prepared> {
    let mut created_parent = false;
    loop {
        let suffix = format!("{:032x}", rand::random::<u128>());
        let command = world.shell.script(PREPARE, [path, suffix.as_str()]);
        let output = world.control(op, &command).await?;
        let fields = nul_fields(&output.stdout).unwrap_or_default();
        let named = || {
            fields
                .first()
                .map(|field| String::from_utf8_lossy(field).into_owned())
                .unwrap_or_default()
        };
        match output.status.exit_code {
            0 if output.status.exited => return parse(op, &fields),
            Refusal::DIRECTORY => {
                return Err(op.error(
                    ErrorKind::IsADirectory,
                    format_args!("{} is a directory", named()),
                ));
            }
            Refusal::NOT_A_DIRECTORY => {
                return Err(op.error(
                    ErrorKind::NotADirectory,
                    format_args!("{} exists and is not a directory", named()),
                ));
            }
            // The user may not create the staging sibling: publishing is a
            // rename in that directory, which the user may not do either.
            Refusal::UNWRITABLE_PARENT
                if output
                    .stderr_text()
                    .to_ascii_lowercase()
                    .contains("permission denied") =>
            {
                return Err(op.error(
                    ErrorKind::PermissionDenied,
                    format_args!(
                        "permission denied: the sandbox user may not create files in {}",
                        named()
                    ),
                ));
            }
            Refusal::MISSING_PARENT if !created_parent => {
                match world.envd.make_dir(&named(), &world.fs_options).await {
                    // Made meanwhile by someone else: fine.
                    Ok(_) | Err(e2b_client::Error::AlreadyExists { .. }) => {}
                    Err(err) => return Err(op.remote(&err)),
                }
                created_parent = true;
            }
            Refusal::UNRESOLVABLE => {
                return Err(command_failed(op, "resolving the canonical path", &output));
            }
            _ => {
                return Err(command_failed(
                    op,
                    "preparing the staging directory",
                    &output,
                ));
            }
        }
    }
}

/// What [`PREPARE`] printed.
#[derive(Debug, PartialEq, Eq)]
struct Prepared {
    target: String,
    name: String,
    dir: String,
    /// Whether the staged file was made as a copy of the replaced file.
    copied: bool,
}

fn parse(op: Op<'_>, fields: &[&[u8]]) -> Result<Prepared> {
    let bad = |why: &str| {
        op.error(
            ErrorKind::Io,
            format_args!("the staging command printed an unexpected answer: {why}"),
        )
    };
    let [target, dir, copied] = fields else {
        return Err(bad("not three NUL-terminated fields"));
    };
    let text = |field: &[u8], what: &str| {
        String::from_utf8(field.to_vec()).map_err(|_| {
            op.error(
                ErrorKind::InvalidInput,
                format_args!(
                    "the {what} {:?} is not valid UTF-8",
                    String::from_utf8_lossy(field)
                ),
            )
        })
    };
    let target = text(target, "resolved path")?;
    let dir = text(dir, "staging directory")?;
    let Some((_, name)) = dsh_provider_kit::paths::split_canonical(&target) else {
        return Err(bad("the resolved path has no final name"));
    };
    let copied = match *copied {
        b"copied" => true,
        b"" => false,
        _ => return Err(bad("the copy flag is neither `copied` nor empty")),
    };
    Ok(Prepared {
        name: name.to_owned(),
        target,
        dir,
        copied,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn op() -> Op<'static> {
        Op::new("write", "/w/a")
    }

    #[test]
    fn prepared_answers_parse() {
        let fields: Vec<&[u8]> = vec![b"/w/new\nline", b"/w/.dsh-stage-ab", b"copied"];
        let prepared = parse(op(), &fields).unwrap();
        assert_eq!(prepared.target, "/w/new\nline");
        assert_eq!(prepared.name, "new\nline");
        assert_eq!(prepared.dir, "/w/.dsh-stage-ab");
        assert!(prepared.copied);
        let fields: Vec<&[u8]> = vec![b"/f", b"/.dsh-stage-ab", b""];
        assert!(!parse(op(), &fields).unwrap().copied);
    }

    #[test]
    fn malformed_answers_are_io_errors() {
        for fields in [
            vec![&b"/f"[..], b"/s"],
            vec![&b"/f"[..], b"/s", b"maybe"],
            vec![&b"/"[..], b"/s", b""],
        ] {
            assert_eq!(
                parse(op(), &fields).unwrap_err().kind(),
                ErrorKind::Io,
                "{fields:?}"
            );
        }
    }

    #[test]
    fn the_script_names_its_refusal_codes() {
        for code in [
            Refusal::UNRESOLVABLE,
            Refusal::DIRECTORY,
            Refusal::NOT_A_DIRECTORY,
            Refusal::UNWRITABLE_PARENT,
            Refusal::MISSING_PARENT,
        ] {
            assert!(PREPARE.contains(&format!("exit {code}")), "{code}");
        }
        assert!(PREPARE.contains(STAGING_PREFIX));
    }
}
