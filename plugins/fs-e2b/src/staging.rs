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
//! Against an envd that acts as root, none of envd's file operations may
//! touch the staging directory (the user can swap it for a symlink at any
//! moment; [`crate::as_user`]): the preparing command ([`PREPARE_FED`])
//! makes the staged file itself, with the write token, and stays to write
//! the content fed to its stdin; publishing is `mv -T` as the user
//! ([`PUBLISH`]), missing parents `mkdir -p`, and clean-up `rm -rf`, all as
//! the user.
//!
//! A [`Staged`] owns its directory: [`Staged::discard`] removes it, and
//! dropping it unpublished (an error, or a dropped operation) removes it
//! from a task on the provider's runtime — once at once and once more a
//! moment later, because a dropped upload may still be finishing in envd
//! and could recreate the directory.

use std::convert::Infallible;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use bytes::Bytes;

use dsh_e2b_gateway::ControlOutput;
use dsh_plugin_api::fs::{FileKind, Version};
use dsh_plugin_api::{ErrorKind, Result};
use dsh_provider_kit::content::WriteContent;
use e2b_client::{EntryInfo, InputRoute, StdinError, StdinWriter};
use futures::StreamExt;
use tokio::runtime::Handle;

use crate::as_user::{Fed, close_input, token_archive};
use crate::canonical::canonical_function;
use crate::errors::Op;
use crate::identity::EnvdFileAccess;
use crate::meta::{kind_of, mode_of};
use crate::version::{WRITE_TOKEN_KEY, new_write_token, version_of};
use crate::world::{EnvdTransport, World, command_failed, nul_fields};

/// Name prefix of staging directories (`.dsh-stage-<32 hex digits>`).
pub const STAGING_PREFIX: &str = ".dsh-stage-";

/// How long after the first clean-up of an abandoned staging directory the
/// second one runs.
const SECOND_CLEANUP_AFTER: Duration = Duration::from_secs(1);

/// The size of a replaced file from which the sandbox helper holds it
/// while the staged file is renamed over it ([`crate::native::Hold`]):
/// freeing a file of 64 MiB took the rename 5–18 ms on this project's
/// machines (docs/design.md §6.1), a hold takes one round trip.
const HOLD_FROM: u64 = 8 << 20;

/// Largest piece an upload body is cut into (cheap `Bytes` slices; each
/// crosses the owner's boundary as one chunk).
const UPLOAD_PIECE: usize = 1 << 20;

/// The start of both preparing commands, run as the world's user.
/// Arguments: `$1` the absolute path to write, `$2` the staging
/// directory's random suffix. Resolves the target, refuses a directory and
/// makes the staging directory, 0700 at creation; on the refusals below
/// prints the path concerned and exits with the code named in [`Refusal`].
macro_rules! prepare_stage {
    () => {
        concat!(
            canonical_function!(),
            r#"
canonical "$1" || exit 90
target=$canonical
name=${target##*/}
parent=${target%/*}
[[ -n $parent ]] || parent=/
if [[ -z $name || -d $target ]]; then printf '%s\0' "$target"; exit 91; fi
stage=${parent%/}/.dsh-stage-$2
# Tried again when the parent is there by then: another write made it meanwhile.
if ! mkdir -m 0700 -- "$stage" 2>/dev/null && ! { [[ -d $parent ]] && mkdir -m 0700 -- "$stage"; }; then
  if [[ ! -e $parent ]]; then printf '%s\0' "$parent"; exit 95; fi
  if [[ ! -d $parent ]]; then printf '%s\0' "$parent"; exit 93; fi
  printf '%s\0' "$parent"
  exit 94
fi
"#
        )
    };
}

/// The preparing command of an envd that acts as the user ([`prepare_stage`]
/// first). Prints `target\0stage\0staged\0copied\0`, `copied` being
/// `copied` when the staged file was made from the file being replaced
/// with its mode (empty otherwise: then the mode is set after the upload);
/// exits 96 when the staged copy cannot be made writable. Forks at most
/// `mkdir`, two `cp` and a `chmod` (plus `realpath` for a path through a
/// symlink).
const PREPARE: &str = concat!(
    prepare_stage!(),
    r#"
copied=
staged=$stage/$name
if [[ -f $target ]]; then
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
printf '%s\0%s\0%s\0%s\0' "$target" "$stage" "$staged" "$copied"
"#
);

/// The preparing command of an envd that acts as root
/// ([`crate::as_user`]; [`prepare_stage`] first), fed its content on
/// stdin. `$3` is a `printf` format of the token archive
/// ([`token_archive`]): extracted first, it makes the empty staged file
/// with the write token; the replaced file's attributes are then copied
/// onto it (onto an existing file `cp` keeps its extended attributes);
/// the answer is printed as [`PREPARE`]'s, exit 96 as there, 97 when the
/// archive cannot be extracted; then `cat` writes stdin into the staged
/// file (truncating keeps owner, mode and attributes). Forks `mkdir`, a
/// subshell and `tar`, at most a `cp` and a `chmod`, and `cat`.
const PREPARE_FED: &str = concat!(
    prepare_stage!(),
    r#"
staged=$stage/.dsh-staged
printf "$3" | tar -x -m --xattrs --xattrs-include='user.e2b.*' -C "$stage" -f - || { rm -rf -- "$stage"; exit 97; }
copied=
if [[ -f $target ]]; then
  copied=copied
  cp --attributes-only --preserve=mode,ownership -- "$target" "$staged" 2>/dev/null || copied=
  if [[ -n $copied && ! -w $staged ]]; then
    chmod u+w -- "$staged" || { rm -rf -- "$stage"; exit 96; }
    copied=
  fi
fi
printf '%s\0%s\0%s\0%s\0' "$target" "$stage" "$staged" "$copied"
exec cat >"$staged"
"#
);

/// Publishing as the world's user (an envd that acts as root): `$1` the
/// staged file, `$2` the target, `$3` the staging directory, removed
/// whatever the rename did. `-T`: rename(2) onto the target itself.
const PUBLISH: &str = r#"mv -f -T -- "$1" "$2"; moved=$?; rm -rf -- "$3"; exit $moved"#;

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
    /// Its size in bytes.
    pub size: u64,
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
    /// Against an envd acting as root: the staging command waiting for the
    /// content on its stdin, until [`Staged::upload`] feeds it.
    fed: Mutex<Option<Fed>>,
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
            fed: Mutex::new(None),
            armed: true,
        }
    }

    /// Uploads `content` as the staged file, tagged with a fresh write
    /// token (see [`crate::version`]), as the world's user: whole content
    /// is sent in pieces that are slices of it (no copy) with its length
    /// declared; a stream is sent chunk by chunk as it yields them, with no
    /// length (so envd reads the body to its end). An error of the stream
    /// fails the upload with that error. Against an envd acting as root the
    /// same pieces are fed to the staging command's stdin instead (its
    /// token was set when it was prepared; see [`feed`]).
    /// Dropping the future abandons the upload; the staged file is then
    /// discarded with its directory.
    pub(crate) async fn upload(&self, op: Op<'_>, content: WriteContent) -> Result<()> {
        let fed = self.take_fed();
        if let Some(fed) = fed {
            return feed(&self.world, op, fed, content).await;
        }
        let options = self
            .world
            .upload_options()
            .metadata(WRITE_TOKEN_KEY, new_write_token());
        let uploaded = match content {
            WriteContent::Whole(content) => {
                let options = options.content_length(content.len() as u64);
                let body = futures::stream::iter(pieces(content).map(Ok::<_, Infallible>));
                self.world.envd.upload(&self.file, body, &options).await
            }
            WriteContent::Stream(chunks) => {
                // The stream's own error is kept whole: the upload reports
                // only that its source failed.
                let source_error = Arc::new(Mutex::new(None));
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
    /// never abandons a rename that was started. Against an envd acting as
    /// root the rename is [`PUBLISH`]'s `mv` as the world's user, and the
    /// version comes from envd's `Stat` of the target right after it.
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
            let op = owned.op();
            // Kept past the rename and the clean-up: the replaced file is
            // then freed by the helper once this write is done, not in its
            // time. Without one (no helper, a file gone) the rename frees it.
            let hold = match &self.existing {
                Some(existing) if existing.size >= HOLD_FROM => {
                    match self.world.hold_native(&self.target).await {
                        Ok(hold) => Some(hold),
                        Err(err) => {
                            tracing::debug!(target = %self.target, %err, "no hold on the replaced file");
                            None
                        }
                    }
                }
                _ => None,
            };
            if self.world.acts_as_root() {
                let args = [self.file.as_str(), self.target.as_str(), self.dir.as_str()];
                let output = self
                    .world
                    .control(op, &self.world.shell.script(PUBLISH, args))
                    .await?;
                drop(hold);
                if !output.status.success() {
                    return Err(command_failed(op, "publishing (mv)", &output));
                }
                return self
                    .world
                    .stat(&self.target)
                    .await
                    .map_err(|err| op.remote(&err));
            }
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
            drop(hold);
            moved.map_err(|err| op.remote(&err))
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

    /// The staging command still waiting for content, taken: whoever takes it feeds it or ends it.
    fn take_fed(&self) -> Option<Fed> {
        self.fed
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take()
    }

    async fn remove_dir(&self) {
        let fed = self.take_fed();
        remove(&self.world, &self.dir, fed.map(|fed| fed.pid)).await;
    }
}

impl<T: EnvdTransport> Drop for Staged<T> {
    fn drop(&mut self) {
        if !self.armed {
            return;
        }
        let world = Arc::clone(&self.world);
        let dir = std::mem::take(&mut self.dir);
        let fed = self.take_fed();
        let tasks = world.tasks.clone();
        tasks.spawn_on(
            async move {
                remove(&world, &dir, fed.map(|fed| fed.pid)).await;
                remove_again_later(world, dir).await;
            },
            &self.handle,
        );
    }
}

/// `content` cut into pieces of at most [`UPLOAD_PIECE`] bytes (slices of
/// it, no copy).
fn pieces(content: Bytes) -> impl Iterator<Item = Bytes> + Send {
    (0..content.len())
        .step_by(UPLOAD_PIECE)
        .map(move |start| content.slice(start..(start + UPLOAD_PIECE).min(content.len())))
}

/// Feeds `content` to the staging command `fed` and waits for it to have
/// written it all. An error of a streamed source stops the feed (the
/// command then ends with what it got, discarded by the caller) and is the
/// answer; so is the command's own failure.
///
/// The content travels on one `StreamInput` where envd serves it (E2B's
/// envd does): its pieces follow each other on one open request, paced by
/// flow control, where a `SendInput` per piece waited a round trip each —
/// 64 of them for 64 MiB, each a full round trip to E2B's cloud.
async fn feed<T: EnvdTransport>(
    world: &World<T>,
    op: Op<'_>,
    fed: Fed,
    content: WriteContent,
) -> Result<()> {
    let pid = fed.pid;
    let sending = async {
        match world.input_route.get(&world.envd, pid).await {
            Ok(route) => send_content(world, op, pid, route, content).await,
            Err(err) => {
                close_input(&world.envd, pid).await;
                Err(op.remote(&err))
            }
        }
    };
    let (sent, finished) = futures::future::join(
        sending,
        fed.finish(op, "writing the staged file as the sandbox user"),
    )
    .await;
    // The command's own failure explains a refused piece best; an error of
    // the source comes before a command that then ended well.
    finished?;
    sent
}

/// Writes `content` to `pid`'s stdin by `route`, then closes it (every
/// piece written into the pipe first), whatever the writes did.
async fn send_content<T: EnvdTransport>(
    world: &World<T>,
    op: Op<'_>,
    pid: u32,
    route: InputRoute,
    content: WriteContent,
) -> Result<()> {
    let (mut writer, request) = StdinWriter::new(world.envd.clone(), pid, route);
    // The stream's request runs beside the writes; how it ended reaches
    // them through the writer.
    let request = async {
        if let Some(request) = request {
            let _ = request.await;
        }
    };
    let writing = async {
        let written = match content {
            WriteContent::Whole(content) => writer.write(content).await,
            WriteContent::Stream(mut chunks) => {
                let mut written = Ok(());
                while let Some(chunk) = chunks.next().await {
                    match chunk {
                        Ok(chunk) => {
                            written = writer.write(chunk).await;
                            if written.is_err() {
                                break;
                            }
                        }
                        Err(err) => {
                            // The source's own error; the command ends
                            // with what it got once its stdin is closed.
                            let _ = writer.close().await;
                            return Err(err);
                        }
                    }
                }
                written
            }
        };
        let closed = writer.close().await;
        written.and(closed).map_err(|err| feed_failed(op, &err))
    };
    futures::future::join(writing, request).await.0
}

/// A piece of the content that did not reach the staging command.
fn feed_failed(op: Op<'_>, err: &StdinError) -> dsh_plugin_api::Error {
    match err {
        StdinError::Send(err) | StdinError::Stream(err) | StdinError::Close(err) => op.remote(err),
        StdinError::EndedEarly | StdinError::Abandoned | StdinError::Finished => op.error(
            ErrorKind::Io,
            format_args!("feeding the staged file to the sandbox user's command: {err}"),
        ),
    }
}

/// The second clean-up of an abandoned staging directory, after
/// [`SECOND_CLEANUP_AFTER`]: an upload abandoned in flight may have
/// recreated it meanwhile.
async fn remove_again_later<T: EnvdTransport>(world: Arc<World<T>>, dir: String) {
    tokio::time::sleep(SECOND_CLEANUP_AFTER).await;
    remove(&world, &dir, None).await;
}

/// Removes a staging directory and whatever is in it (or a direct write's
/// staged file); one that does not exist is fine. `feeding`: the staging
/// command still waiting for content, whose stdin is closed first so it
/// ends. Against an envd acting as root the removal is `rm -rf` as the
/// world's user. Failures are logged, not returned: the operation's
/// outcome is already decided, and a leftover is recognisable by its
/// [`STAGING_PREFIX`].
async fn remove<T: EnvdTransport>(world: &World<T>, dir: &str, feeding: Option<u32>) {
    if let Some(pid) = feeding {
        close_input(&world.envd, pid).await;
    }
    if world.acts_as_root() {
        let removed = world
            .mutate_as_user(
                Op::new("remove", dir),
                "removing a staging directory",
                "rm",
                &["-rf", "--", dir],
            )
            .await;
        if let Err(err) = removed {
            tracing::warn!(dir, %err, "could not remove a staging directory");
        }
        return;
    }
    match world.envd.remove(dir, &world.fs_options).await {
        Ok(()) => {}
        Err(err) if err.is_not_found() => {}
        Err(err) => tracing::warn!(dir, %err, "could not remove a staging directory"),
    }
}

/// Runs the preparing command ([`PREPARE`], or [`PREPARE_FED`] against an
/// envd acting as root), creating missing parents once, alongside the
/// `Stat` that finds the replaced file's owner.
async fn prepare_now<T: EnvdTransport>(
    world: Arc<World<T>>,
    handle: Handle,
    op: Op<'_>,
    path: &str,
) -> Result<Staged<T>> {
    let fed = world.envd_file_access(op).await? == EnvdFileAccess::AsRoot;
    let (prepared, existing) = futures::future::join(
        run_prepare(&world, op, path, fed),
        existing_file(&world, op, path),
    )
    .await;
    let (prepared, fed) = prepared?;
    Ok(Staged {
        // The copy has the replaced file's mode; without the `Stat`'s
        // answer it is unknown, and any mode asked for is then set.
        mode: existing
            .as_ref()
            .filter(|_| prepared.copied)
            .map(|existing| existing.mode),
        file: prepared.file,
        target: prepared.target,
        dir: prepared.dir,
        existing,
        fed: Mutex::new(fed),
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
        size: followed.entry.size,
    })
}

/// One run of a preparing command: ended (a refusal, or [`PREPARE`]'s
/// answer), or — [`PREPARE_FED`] — prepared and waiting for its content.
enum Ran {
    Ended(ControlOutput),
    Waiting(Vec<u8>, Fed),
}

/// Starts the preparing command once, with a fresh staging suffix.
async fn run_once<T: EnvdTransport>(
    world: &World<T>,
    op: Op<'_>,
    path: &str,
    fed: bool,
) -> Result<Ran> {
    let suffix = format!("{:032x}", rand::random::<u128>());
    if !fed {
        let command = world.shell.script(PREPARE, [path, suffix.as_str()]);
        return Ok(Ran::Ended(world.control(op, &command).await?));
    }
    let archive = token_archive(&new_write_token());
    let command = world
        .shell
        .script(PREPARE_FED, [path, suffix.as_str(), archive.as_str()])
        .stdin(true);
    let stream = world
        .envd
        .start(&command, &world.shell.options())
        .await
        .map_err(|err| op.remote(&err))?;
    let mut fed = Fed {
        pid: stream.pid(),
        stream,
        stderr: Vec::new(),
    };
    Ok(match fed.fields(op, 4).await? {
        Ok(stdout) => Ran::Waiting(stdout, fed),
        Err(output) => Ran::Ended(output),
    })
}

/// Runs the preparing command until it answers, creating missing parents
/// once; with `fed`, answers the command waiting for its content too.
async fn run_prepare<T: EnvdTransport>(
    world: &World<T>,
    op: Op<'_>,
    path: &str,
    fed: bool,
) -> Result<(Prepared, Option<Fed>)> {
    let mut created_parent = false;
    loop {
        let output = match run_once(world, op, path, fed).await? {
            Ran::Waiting(stdout, waiting) => {
                let fields = nul_fields(&stdout).unwrap_or_default();
                return match parse(op, &fields) {
                    Ok(prepared) => Ok((prepared, Some(waiting))),
                    Err(err) => {
                        let dir = fields.get(1).map(|dir| String::from_utf8_lossy(dir));
                        let dir = dir.unwrap_or_default();
                        remove(world, &dir, Some(waiting.pid)).await;
                        Err(err)
                    }
                };
            }
            Ran::Ended(output) => output,
        };
        let fields = nul_fields(&output.stdout).unwrap_or_default();
        let named = || {
            fields
                .first()
                .map(|field| String::from_utf8_lossy(field).into_owned())
                .unwrap_or_default()
        };
        match output.status.exit_code {
            0 if output.status.exited && !fed => return Ok((parse(op, &fields)?, None)),
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
                let parent = named();
                if fed {
                    // envd's `MakeDir` would create it as root, through
                    // whatever the user made of the path meanwhile.
                    let args = ["-p", "--", parent.as_str()];
                    world
                        .mutate_as_user(op, "creating the parent directories", "mkdir", &args)
                        .await?;
                } else {
                    match world.envd.make_dir(&parent, &world.fs_options).await {
                        // Made meanwhile by someone else: fine.
                        Ok(_) | Err(e2b_client::Error::AlreadyExists { .. }) => {}
                        Err(err) => return Err(op.remote(&err)),
                    }
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

/// What the preparing command printed.
#[derive(Debug, PartialEq, Eq)]
struct Prepared {
    target: String,
    dir: String,
    file: String,
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
    let [target, dir, file, copied] = fields else {
        return Err(bad("not four NUL-terminated fields"));
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
    let file = text(file, "staged file")?;
    if dsh_provider_kit::paths::split_canonical(&target).is_none_or(|(_, name)| name.is_empty()) {
        return Err(bad("the resolved path has no final name"));
    }
    if file
        .strip_prefix(dir.as_str())
        .and_then(|rest| rest.strip_prefix('/'))
        .is_none_or(|name| name.is_empty() || name.contains('/'))
    {
        return Err(bad(
            "the staged file is not directly in the staging directory",
        ));
    }
    let copied = match *copied {
        b"copied" => true,
        b"" => false,
        _ => return Err(bad("the copy flag is neither `copied` nor empty")),
    };
    Ok(Prepared {
        target,
        dir,
        file,
        copied,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::as_user::STAGED_NAME;

    fn op() -> Op<'static> {
        Op::new("write", "/w/a")
    }

    #[test]
    fn prepared_answers_parse() {
        let fields: Vec<&[u8]> = vec![
            b"/w/new\nline",
            b"/w/.dsh-stage-ab",
            b"/w/.dsh-stage-ab/new\nline",
            b"copied",
        ];
        let prepared = parse(op(), &fields).unwrap();
        assert_eq!(prepared.target, "/w/new\nline");
        assert_eq!(prepared.file, "/w/.dsh-stage-ab/new\nline");
        assert_eq!(prepared.dir, "/w/.dsh-stage-ab");
        assert!(prepared.copied);
        let fields: Vec<&[u8]> = vec![b"/f", b"/.dsh-stage-ab", b"/.dsh-stage-ab/.dsh-staged", b""];
        assert!(!parse(op(), &fields).unwrap().copied);
    }

    #[test]
    fn malformed_answers_are_io_errors() {
        for fields in [
            vec![&b"/f"[..], b"/s", b"/s/f"],
            vec![&b"/f"[..], b"/s", b"/s/f", b"maybe"],
            vec![&b"/"[..], b"/s", b"/s/f", b""],
            vec![&b"/f"[..], b"/s", b"/elsewhere/f", b""],
            vec![&b"/f"[..], b"/s", b"/s/a/f", b""],
            vec![&b"/f"[..], b"/s", b"/s/", b""],
        ] {
            assert_eq!(
                parse(op(), &fields).unwrap_err().kind(),
                ErrorKind::Io,
                "{fields:?}"
            );
        }
    }

    #[test]
    fn the_scripts_name_their_refusal_codes() {
        for script in [PREPARE, PREPARE_FED] {
            for code in [
                Refusal::UNRESOLVABLE,
                Refusal::DIRECTORY,
                Refusal::NOT_A_DIRECTORY,
                Refusal::UNWRITABLE_PARENT,
                Refusal::MISSING_PARENT,
            ] {
                assert!(script.contains(&format!("exit {code}")), "{code}");
            }
            assert!(script.contains(STAGING_PREFIX));
        }
        assert!(PREPARE_FED.contains(&format!("staged=$stage/{STAGED_NAME}\n")));
    }
}
