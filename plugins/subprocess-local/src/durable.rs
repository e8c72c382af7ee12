//! Durable commands on the host (docs/design.md §5.2.1): each runs under a
//! supervisor of its own — the helper `dsh-supervisor`, installed in the state
//! directory — so it survives this process; its record and output live in
//! its scope's directory inside the state directory (private to the user,
//! 0700), where a later `dsh` of the same scope (by default: of the same
//! cwd) lists it, and any `dsh` attaches to it by its id. A handle is a
//! `durable-follow` helper started like any command of this provider
//! ([`dsh_supervisor_client::FollowedProcess`]), so disposal ends attachments, never
//! durable commands.

use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use dsh_plugin_api::durable::{AttachSpec, Attached, DurableSpec, validate_id, validate_spawn};
use dsh_plugin_api::subprocess::{OutputMode, Process, SpawnSpec, SpillSpec};
use dsh_plugin_api::{Error, ErrorKind, Result};
use dsh_supervisor::wire::{self, DurableStartRequest, Identity, Launch};
use dsh_supervisor_client::control::{CONTROL_TIMEOUT, HelperRunner};
use dsh_supervisor_client::{HELPER, HELPER_DIGEST, follower_spec, holds, new_id, started};
use tokio::sync::OnceCell;

use crate::world::World;

/// The durable commands of one scope of a state directory.
pub struct Durable {
    /// The state directory: the helper, and a directory per scope.
    root: PathBuf,
    /// This scope's records and output: `<root>/scope-<16 hex digits>`.
    dir: PathBuf,
    /// The installed helper, once a durable operation needed it (shared
    /// by every scope of `root`).
    helper: Arc<OnceCell<PathBuf>>,
}

impl Durable {
    /// Durable commands of `scope` kept in state directory `root`
    /// (created on first use).
    pub fn new(root: PathBuf, scope: &str) -> Durable {
        Durable {
            dir: root.join(scope_name(scope)),
            root,
            helper: Arc::new(OnceCell::new()),
        }
    }

    /// This scope's directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The scope that holds command `id`: this one, or another scope of
    /// the same state directory (an explicit attach crosses scopes); this
    /// one when no scope has it (the caller's lookup says `NotFound`).
    fn holding(self: &Arc<Durable>, id: &str) -> Arc<Durable> {
        if self.dir.join(id).exists() {
            return Arc::clone(self);
        }
        let other = std::fs::read_dir(&self.root)
            .into_iter()
            .flatten()
            .flatten()
            .map(|entry| entry.path())
            .find(|scope| {
                scope
                    .file_name()
                    .and_then(|name| name.to_str())
                    .is_some_and(|name| name.starts_with(SCOPE_PREFIX))
                    && scope.join(id).exists()
            });
        match other {
            Some(dir) => Arc::new(Durable {
                root: self.root.clone(),
                dir,
                helper: Arc::clone(&self.helper),
            }),
            None => Arc::clone(self),
        }
    }

    /// The state directory (0700, created with its missing parents) and
    /// the helper installed in it: `helper-<digest>`, written through a
    /// private temporary file and renamed, verified by content when it was
    /// there already.
    async fn helper(&self) -> Result<&Path> {
        let installed = self
            .helper
            .get_or_try_init(|| {
                let dir = self.root.clone();
                async move {
                    tokio::task::spawn_blocking(move || install(&dir))
                        .await
                        .map_err(|err| Error::io(format!("durable: install the helper: {err}")))?
                }
            })
            .await?;
        Ok(installed)
    }
}

#[async_trait]
impl HelperRunner for Durable {
    fn state_dir(&self) -> Result<&str> {
        self.dir.to_str().ok_or_else(|| {
            Error::config(format!(
                "durable: the state directory {} is not UTF-8",
                self.dir.display()
            ))
        })
    }

    async fn run_helper(
        &self,
        operation: &str,
        args: &[&str],
        request: Option<&[u8]>,
        timeout: Duration,
    ) -> Result<String> {
        let helper = self.helper().await?;
        let mut command = tokio::process::Command::new(helper);
        command
            .args(args)
            .env_clear()
            .stdin(std::process::Stdio::null())
            .kill_on_drop(true);
        if let Some(request) = request {
            command.env(wire::REQUEST_ENV, wire::base64_encode(request));
        }
        let output = tokio::time::timeout(timeout, command.output())
            .await
            .map_err(|_| {
                Error::new(
                    ErrorKind::Timeout,
                    format!("{operation}: the durable helper did not answer within {timeout:?}"),
                )
            })?
            .map_err(|err| {
                Error::from_io(&format!("{operation}: run {}", helper.display()), &err)
            })?;
        if !output.status.success() {
            return Err(Error::io(format!(
                "{operation}: the durable helper failed ({}): {}",
                output.status,
                String::from_utf8_lossy(&output.stderr).trim_end()
            )));
        }
        Ok(String::from_utf8_lossy(&output.stdout)
            .trim_end_matches('\n')
            .to_owned())
    }
}

/// Names of scope directories start with it (never a command id).
const SCOPE_PREFIX: &str = "scope-";

/// `scope-<FNV-1a 64 of scope, 16 hex digits>`: a name of fixed length for
/// any scope text, the same in every build (std's hasher promises no
/// stability).
fn scope_name(scope: &str) -> String {
    let hash = scope.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |hash, byte| {
        (hash ^ u64::from(byte)).wrapping_mul(0x0000_0100_0000_01b3)
    });
    format!("{SCOPE_PREFIX}{hash:016x}")
}

fn install(dir: &Path) -> Result<PathBuf> {
    let fail = |what: &str, path: &Path, err: std::io::Error| {
        Error::from_io(&format!("durable: {what} {}", path.display()), &err)
    };
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .map_err(|err| fail("create the state directory", dir, err))?;
    let name = format!("helper-{}", &HELPER_DIGEST[..16]);
    let path = dir.join(&name);
    if std::fs::read(&path).is_ok_and(|bytes| bytes == HELPER) {
        return Ok(path);
    }
    remove_stale_helpers(dir, &name);
    let staged = dir.join(format!(".helper-{}", rand::random::<u64>()));
    let write = || -> std::io::Result<()> {
        use std::io::Write;
        let mut file = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o700)
            .open(&staged)?;
        file.write_all(HELPER)?;
        file.sync_all()?;
        std::fs::rename(&staged, &path)
    };
    write().map_err(|err| {
        let _ = std::fs::remove_file(&staged);
        fail("install the helper at", &path, err)
    })?;
    Ok(path)
}

/// How long another build's helper is kept: a `dsh` of that build may
/// still be running and start followers with it.
const STALE_HELPER: Duration = Duration::from_secs(24 * 60 * 60);

/// Removes other builds' helpers (and abandoned partial installs) not
/// touched for [`STALE_HELPER`], so upgrades do not pile them up.
fn remove_stale_helpers(dir: &Path, keep: &str) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(name) = name.to_str() else { continue };
        let helper = name.starts_with("helper-") || name.starts_with(".helper-");
        let old = entry
            .metadata()
            .and_then(|meta| meta.modified())
            .ok()
            .and_then(|modified| modified.elapsed().ok())
            .is_some_and(|age| age > STALE_HELPER);
        if helper && name != keep && old {
            let _ = std::fs::remove_file(entry.path());
        }
    }
}

/// `spawn_durable` on `world`.
pub async fn spawn(
    world: &World,
    durable: &Arc<Durable>,
    spec: SpawnSpec,
    keep: DurableSpec,
) -> Result<Attached> {
    const OP: &str = "spawn_durable";
    validate_spawn(&spec)?;
    let request = {
        let checked = crate::prepare::check(world, OP, &spec.argv, spec.cwd.as_deref(), &spec.env)?;
        let cwd = checked
            .cwd()
            .to_str()
            .ok_or_else(|| {
                Error::invalid_input(format!(
                    "{OP}: the working directory {} is not UTF-8",
                    checked.cwd().display()
                ))
            })?
            .to_owned();
        let env = checked
            .env()
            .entries()
            .iter()
            .filter_map(|entry| entry.to_str().ok().map(str::to_owned))
            .collect();
        let search = checked
            .env()
            .search_path()
            .as_bytes()
            .split(|b| *b == b':')
            .filter_map(|dir| std::str::from_utf8(dir).ok())
            .filter(|dir| dir.starts_with('/'))
            .map(str::to_owned)
            .collect();
        DurableStartRequest {
            id: new_id(),
            launch: Launch {
                identity: current_identity(),
                argv: spec.argv.clone(),
                env,
                cwd,
                search,
            },
            dir: durable.state_dir()?.to_owned(),
            retain: keep.retain,
            timeout_ms: spec
                .timeout
                .map_or(0, |timeout| timeout.as_millis().max(1) as u64),
            drain_grace_ms: spec.drain_grace.as_millis() as u64,
            hold: holds([spec.stdout, spec.stderr]),
            merge_stderr: spec.stderr == OutputMode::IntoStdout,
        }
    };
    // The follower starts first and waits for the command whose id we
    // chose, so it runs while `durable-start` does.
    let modes = [spec.stdout, spec.stderr];
    let follower =
        start_follower(world, durable, &request.id, [0, 0], modes, spec.spill, true).await;
    let answer = durable
        .run_helper(
            OP,
            &["durable-start"],
            Some(&request.encode()),
            CONTROL_TIMEOUT,
        )
        .await;
    let program = &spec.argv[0];
    started(
        request.id,
        answer,
        follower,
        durable.clone(),
        |stage, errno, detail| {
            Error::new(
                match errno {
                    libc::ENOENT => ErrorKind::NotFound,
                    libc::EACCES | libc::EPERM => ErrorKind::PermissionDenied,
                    libc::ENOTDIR => ErrorKind::NotADirectory,
                    _ => ErrorKind::Io,
                },
                format!(
                    "{OP}: {program}: could not start ({stage:?}): {} {detail}",
                    std::io::Error::from_raw_os_error(errno)
                ),
            )
            .with_subject(program.clone())
        },
    )
    .await
}

/// `attach` on `world`: to command `spec.id` of any scope.
pub async fn attach(world: &World, durable: &Arc<Durable>, spec: AttachSpec) -> Result<Attached> {
    world.check_open("attach")?;
    validate_id("attach", &spec.id)?;
    let durable = durable.holding(&spec.id);
    let id = spec.id.clone();
    dsh_supervisor_client::attach(durable.clone(), spec, |from, modes| {
        start_follower(world, &durable, &id, from, modes, None, false)
    })
    .await
}

/// A follower of command `id` from `from` (see [`follower_spec`]).
async fn start_follower(
    world: &World,
    durable: &Arc<Durable>,
    id: &str,
    from: [u64; 2],
    modes: [OutputMode; 2],
    spill: Option<SpillSpec>,
    starting: bool,
) -> Result<Arc<dyn Process>> {
    let helper = durable.helper().await?.to_string_lossy().into_owned();
    let dir = durable.state_dir()?;
    let spec = follower_spec(&helper, dir, id, from, modes, spill, starting);
    Ok(Arc::new(crate::command::start(world, &spec)?))
}

/// This process's identity: the helper keeps it (no change of user).
fn current_identity() -> Identity {
    // SAFETY: plain system calls without preconditions.
    let (uid, gid) = unsafe { (libc::getuid(), libc::getgid()) };
    Identity {
        uid,
        gid,
        groups: Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn install_keeps_one_helper_and_sweeps_old_builds_only() {
        let dir = tempfile::tempdir().unwrap();
        let state = dir.path().join("durable");
        let aged = |name: &str, age: Duration| {
            let path = state.join(name);
            let file = std::fs::File::create(&path).unwrap();
            file.set_modified(std::time::SystemTime::now() - age)
                .unwrap();
            path
        };
        let installed = install(&state).unwrap();
        assert_eq!(std::fs::read(&installed).unwrap(), HELPER);
        let mode = std::os::unix::fs::PermissionsExt::mode(
            &std::fs::metadata(&state).unwrap().permissions(),
        );
        assert_eq!(mode & 0o777, 0o700);
        let day = Duration::from_secs(24 * 60 * 60);
        let old = aged("helper-0123456789abcdef", 2 * day);
        let partial = aged(".helper-42", 2 * day);
        let recent = aged("helper-fedcba9876543210", Duration::from_secs(60));
        let command = aged("0123456789abcdef0123456789abcdef", 2 * day);
        // A damaged copy is replaced, and the sweep runs with the install.
        std::fs::write(&installed, b"not the helper").unwrap();
        assert_eq!(install(&state).unwrap(), installed);
        assert_eq!(std::fs::read(&installed).unwrap(), HELPER);
        assert!(!old.exists() && !partial.exists(), "old builds swept");
        assert!(
            recent.exists(),
            "a recent build's helper may still be in use"
        );
        assert!(command.exists(), "only helpers are swept");
    }
}
