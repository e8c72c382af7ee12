//! Staging: new content is uploaded into a private directory beside its
//! target, so publishing it is one same-filesystem rename (envd `Move`).
//!
//! One internal command (as root, see [`World::control`]) prepares a
//! write: it resolves the target's canonical path (`realpath -m`, so a
//! write through a symlink replaces the link's target and keeps the link),
//! refuses a directory, records the mode and owner of a file it will
//! replace, creates the staging directory `<parent>/.dsh-stage-<random>`
//! with mode 0700 *at creation* (before any content exists), and, when a
//! file is replaced, creates the staged file with that file's mode, so the
//! upload (which truncates it in place) keeps it. Missing parents are
//! created with envd's `MakeDir` (owned by the envd user, as the SDKs
//! create them) and the command runs again.
//!
//! A [`Staged`] owns its directory: [`Staged::discard`] removes it, and
//! dropping it unpublished (an error, or a dropped operation) removes it
//! from a task on the provider's runtime — once at once and once more a
//! moment later, because a dropped upload may still be finishing in envd
//! and could recreate the directory.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use dsh_plugin_api::fs::Version;
use dsh_plugin_api::{ErrorKind, Result};
use e2b_client::UploadOptions;
use tokio::runtime::Handle;

use crate::canonical::canonical_function;
use crate::errors::Op;
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

/// The preparing command. Arguments: `$1` the absolute path to write, `$2`
/// the staging directory's random suffix. Prints `target\0stage\0info\0`
/// where `info` is `<octal mode>:<owner>` of the file being replaced (empty
/// for a new file); on the refusals below prints the path concerned and
/// exits with the code named in [`Refusal`].
const PREPARE: &str = concat!(
    canonical_function!(),
    r#"
canonical "$1" || exit 90
target=$canonical
name=${target##*/}
parent=${target%/*}
[[ -n $parent ]] || parent=/
if [[ -z $name || -d $target ]]; then printf '%s\0' "$target"; exit 91; fi
info=
if [[ -e $target ]]; then
  info=$(stat -c '%a:%U' -- "$target") || exit 92
fi
stage=${parent%/}/.dsh-stage-$2
if ! mkdir -m 0700 -- "$stage"; then
  if [[ ! -e $parent ]]; then printf '%s\0' "$parent"; exit 95; fi
  if [[ ! -d $parent ]]; then printf '%s\0' "$parent"; exit 93; fi
  exit 94
fi
if [[ -n $info ]] && ! install -m "${info%%:*}" /dev/null "$stage/$name"; then
  rm -rf -- "$stage"
  exit 96
fi
printf '%s\0%s\0%s\0' "$target" "$stage" "$info"
"#
);

/// Exit codes of [`PREPARE`] that refuse the write.
struct Refusal;

impl Refusal {
    const UNRESOLVABLE: i32 = 90;
    const DIRECTORY: i32 = 91;
    const NOT_A_DIRECTORY: i32 = 93;
    const MISSING_PARENT: i32 = 95;
}

/// The file a write replaces, as the preparing command saw it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Existing {
    /// Permission bits (`0o7777` mask).
    pub mode: u32,
    /// The owner's user name (absent when the uid has no name): the upload
    /// is made as this user so the new file keeps its owner.
    pub owner: Option<String>,
}

/// A staged file beside its target, not yet published.
pub(crate) struct Staged<T: EnvdTransport> {
    world: Arc<World<T>>,
    handle: Handle,
    /// The canonical target the content will replace.
    pub target: String,
    /// The staging directory (mode 0700).
    dir: String,
    /// The staged file in it.
    file: String,
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

    /// Uploads `content` as the staged file, tagged with a fresh write
    /// token (see [`crate::version`]), as the replaced file's owner.
    /// Dropping the future abandons the upload; the staged file is then
    /// discarded with its directory.
    pub(crate) async fn upload(&self, op: Op<'_>, content: Vec<u8>) -> Result<()> {
        let content = Bytes::from(content);
        let mut options = UploadOptions::default()
            .content_length(content.len() as u64)
            .metadata(WRITE_TOKEN_KEY, new_write_token());
        if let Some(owner) = self
            .existing
            .as_ref()
            .and_then(|existing| existing.owner.clone())
        {
            options = options.user(owner);
        }
        let pieces = (0..content.len())
            .step_by(UPLOAD_PIECE)
            .map(move |start| {
                let end = (start + UPLOAD_PIECE).min(content.len());
                Ok::<_, std::convert::Infallible>(content.slice(start..end))
            })
            .collect::<Vec<_>>();
        self.world
            .envd
            .upload(&self.file, futures::stream::iter(pieces), &options)
            .await
            .map_err(|err| op.remote(&err))?;
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
    pub(crate) async fn publish<L: Send + 'static>(
        mut self,
        op: Op<'_>,
        lock: L,
    ) -> Result<Version> {
        // From here the task owns the clean-up.
        self.armed = false;
        let world = Arc::clone(&self.world);
        let handle = self.handle.clone();
        let owned = op.to_owned();
        let work = async move {
            let _lock = lock;
            let moved = self.world.fs.rename(&self.file, &self.target).await;
            // Empty after a successful rename; holding the content after a
            // failed one.
            self.remove_dir().await;
            moved
                .map(|entry| version_of(&entry))
                .map_err(|err| owned.op().remote(&err))
        };
        world
            .tasks
            .spawn_on(work, &handle)
            .await
            .map_err(|err| op.error(ErrorKind::Io, format_args!("publishing failed: {err}")))?
    }

    /// Removes the staging directory now (an error path of the operation).
    pub(crate) async fn discard(mut self) {
        self.remove_dir().await;
        self.armed = false;
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
                tokio::time::sleep(SECOND_CLEANUP_AFTER).await;
                remove(&world, &dir).await;
            },
            &self.handle,
        );
    }
}

/// Removes a staging directory and whatever is in it. Failures are logged,
/// not returned: the operation's outcome is already decided, and a leftover
/// directory is recognisable by its [`STAGING_PREFIX`].
async fn remove<T: EnvdTransport>(world: &World<T>, dir: &str) {
    if let Err(err) = world.fs.remove(dir).await {
        tracing::warn!(dir, %err, "could not remove a staging directory");
    }
}

/// Runs [`PREPARE`], creating missing parents once.
async fn prepare_now<T: EnvdTransport>(
    world: Arc<World<T>>,
    handle: Handle,
    op: Op<'_>,
    path: &str,
) -> Result<Staged<T>> {
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
            0 if output.status.exited => {
                let prepared = parse(op, &fields)?;
                return Ok(Staged {
                    world,
                    handle,
                    mode: prepared.existing.as_ref().map(|existing| existing.mode),
                    file: format!("{}/{}", prepared.dir, prepared.name),
                    target: prepared.target,
                    dir: prepared.dir,
                    existing: prepared.existing,
                    armed: true,
                });
            }
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
            Refusal::MISSING_PARENT if !created_parent => {
                let parent = named();
                let made = world.fs.make_dir(&parent).await;
                match made {
                    Ok(_) => {}
                    // Made meanwhile by someone else: fine.
                    Err(e2b_client::Error::AlreadyExists { .. }) => {}
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
    existing: Option<Existing>,
}

fn parse(op: Op<'_>, fields: &[&[u8]]) -> Result<Prepared> {
    let bad = |why: &str| {
        op.error(
            ErrorKind::Io,
            format_args!("the staging command printed an unexpected answer: {why}"),
        )
    };
    let [target, dir, info] = fields else {
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
    let Some((_, name)) = crate::paths::split_canonical(&target) else {
        return Err(bad("the resolved path has no final name"));
    };
    let existing = if info.is_empty() {
        None
    } else {
        let info = text(info, "file information")?;
        let (mode, owner) = info
            .split_once(':')
            .ok_or_else(|| bad("the mode and owner are not separated by ':'"))?;
        let mode = u32::from_str_radix(mode, 8)
            .ok()
            .filter(|mode| mode & !0o7777 == 0)
            .ok_or_else(|| bad("the mode is not octal permission bits"))?;
        let named = !owner.is_empty()
            && owner != "UNKNOWN"
            && !owner.bytes().all(|byte| byte.is_ascii_digit());
        Some(Existing {
            mode,
            owner: named.then(|| owner.to_owned()),
        })
    };
    Ok(Prepared {
        name: name.to_owned(),
        target,
        dir,
        existing,
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
        let fields: Vec<&[u8]> = vec![b"/w/new\nline", b"/w/.dsh-stage-ab", b"2755:user"];
        let prepared = parse(op(), &fields).unwrap();
        assert_eq!(prepared.target, "/w/new\nline");
        assert_eq!(prepared.name, "new\nline");
        assert_eq!(prepared.dir, "/w/.dsh-stage-ab");
        assert_eq!(
            prepared.existing,
            Some(Existing {
                mode: 0o2755,
                owner: Some("user".into())
            })
        );
        let fields: Vec<&[u8]> = vec![b"/f", b"/.dsh-stage-ab", b""];
        assert_eq!(parse(op(), &fields).unwrap().existing, None);
        for owner in ["UNKNOWN", "1001", ""] {
            let info = format!("644:{owner}");
            let fields: Vec<&[u8]> = vec![b"/f", b"/s", info.as_bytes()];
            assert_eq!(
                parse(op(), &fields).unwrap().existing.unwrap().owner,
                None,
                "{owner}"
            );
        }
    }

    #[test]
    fn malformed_answers_are_io_errors() {
        for fields in [
            vec![&b"/f"[..], b"/s"],
            vec![&b"/f"[..], b"/s", b"999:user"],
            vec![&b"/f"[..], b"/s", b"644"],
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
            Refusal::MISSING_PARENT,
        ] {
            assert!(PREPARE.contains(&format!("exit {code}")), "{code}");
        }
        assert!(PREPARE.contains(STAGING_PREFIX));
    }
}
