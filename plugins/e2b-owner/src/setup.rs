//! Preparing the world before the owner is handed out: the cwd exists, and
//! the private runtime root ([`RUNTIME_ROOT`], docs/design.md §6.4) is a
//! real directory, mode 0700, owned by root — verified with envd's own
//! metadata — whose every ancestor is a real directory owned by root and
//! writable by root only, and swept of the state of earlier owners that
//! were killed before their disposal.
//!
//! The runtime root is root's so that control state the adapters write
//! there (as root) cannot be read or forged by the sandbox user; its
//! ancestors are root's alone so that the user cannot rename it away or
//! replace a component of its path while dsh runs (a directory inside the
//! user's own cwd could be renamed by that user, failing the host's run).
//! Creating it with `mkdir` never follows a symlink planted at that path,
//! and the sweep runs only on a directory that root owns (`find -P` does
//! not follow one either); whatever the steps did, the final verification
//! decides — except when the script's own `mkdir -m 0700` made the
//! directory, which cannot have made anything else.
//!
//! A sandbox that already holds the runtime root as it must be (a template
//! made by `dsh template`'s recipe has it, with the helper's copy in it) and
//! nothing in it to sweep is found so by envd's metadata alone — the runtime
//! root, each ancestor and the root's entries, in one round of calls as
//! root — and runs no script: a process costs a sandbox several
//! milliseconds on a cold start's critical path. Anything else that look
//! finds (absent, an entry, a doubt, an error) is the script's to create,
//! sweep or refuse, as before.

use std::time::Duration;

use dsh_e2b_gateway::{CONTROL_USER, ControlShell, EnvdReadable, plugin_error, root_only};
use dsh_plugin_api::{Error, ErrorKind, Result};
use e2b_client::{CallOptions, EntryInfo, Envd, FileType};

use dsh_plugin_api::owner::DURABLE_STATE;
use dsh_supervisor_client::TEMPLATE_ENTRY;

use crate::config::RUNTIME_ROOT;

/// The bound on each setup command.
const SETUP_COMMAND_TIMEOUT: Duration = Duration::from_secs(60);
/// How much of a setup command's output is kept for messages.
const SETUP_OUTPUT_LIMIT: usize = 16 * 1024;
/// How old an entry of the runtime root must be (minutes since it last
/// changed) for a starting owner to sweep it: a day, longer than an E2B
/// sandbox runs without a pause, so no live owner's state is that old.
const STALE_AFTER_MINUTES: u32 = 24 * 60;
/// The mode of the runtime root.
const RUNTIME_ROOT_MODE: u32 = 0o700;
/// The owner of the runtime root (envd reports user names).
const RUNTIME_ROOT_OWNER: &str = "root";
/// The runtime root's entries kept whatever their age: durable commands'
/// state and a template's helper.
const KEPT: [&str; 2] = [DURABLE_STATE, TEMPLATE_ENTRY];

/// Creates the runtime root or, when it exists and is a real directory
/// owned by root, sweeps it of entries older than [`STALE_AFTER_MINUTES`]:
/// what owners killed before their disposal left. Younger entries may
/// belong to an owner running now on the same sandbox (two `dsh` processes
/// started together): removing its helper while it installs failed it.
/// `$1` is the runtime root, `$2` the age in minutes, `$3` and `$4` the
/// entries kept whatever their age (durable commands' state,
/// [`DURABLE_STATE`], and a template's helper, [`TEMPLATE_ENTRY`]). Exit 0: created;
/// 5: existed, swept (the removed names on stdout); 3: it exists but is not
/// a root-owned real directory, or mkdir failed (its error on stderr) —
/// the verification below says which; 4: the sweep failed; 6: an ancestor
/// is not a real directory that only root may write (named on stderr).
const PREPARE_RUNTIME_ROOT: &str = r#"r=$1
parent=${r%/*}
parent=${parent:-/}
[[ -d $parent ]] || mkdir -p -- "$parent" || exit 6
ancestors=() d=$parent
while :; do
  ancestors+=("$d")
  [[ $d == / ]] && break
  d=${d%/*}
  d=${d:-/}
done
# One stat for them all (every program run costs a fork and an exec).
i=0
while read -r uid mode kind; do
  d=${ancestors[i++]}
  if [[ $kind != directory ]]; then printf '%s is not a real directory\n' "$d" >&2; exit 6; fi
  if [[ $uid != 0 ]] || (( 8#$mode & 8#022 )); then
    printf '%s is not a directory only root may write (owner uid %s, mode %s)\n' "$d" "$uid" "$mode" >&2
    exit 6
  fi
done < <(stat -c '%u %a %F' -- "${ancestors[@]}")
(( i == ${#ancestors[@]} )) || { printf 'the ancestors of %s could not be checked\n' "$r" >&2; exit 6; }
mkdir -m 0700 -- "$r" 2>/dev/null && exit 0
# Again for its error message (rare: no capture's fork on the common path).
[[ -d $r && ! -L $r && -O $r ]] || { mkdir -m 0700 -- "$r"; exit 3; }
find -P "$r" -mindepth 1 -maxdepth 1 -mmin "+$2" ! -name "$3" ! -name "$4" -printf '%f\n' -exec rm -rf -- {} + || exit 4
exit 5"#;

/// Creates the missing components of `$1` as root, each mode 0755 and
/// owned by `$2` (`uid:gid`), as envd's `MakeDir` makes them for a user.
const CREATE_CWD: &str = r#"c=$1 owner=$2 p=
IFS=/ read -r -a parts <<< "${c#/}"
for part in "${parts[@]}"; do
  p=$p/$part
  [[ -e $p || -L $p ]] && continue
  mkdir -m 0755 -- "$p" && chown -- "$owner" "$p" || exit 1
done"#;

/// The prepared world.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Workspace {
    /// The cwd (as configured, normalised).
    pub cwd: String,
    /// [`RUNTIME_ROOT`].
    pub runtime_root: String,
    /// How many stale entries of earlier owners the sweep removed.
    pub swept: usize,
}

/// Prepares `cwd` and its runtime root in the sandbox behind `envd`.
/// `may_be_ready` says whether the runtime root may already be there as it
/// must be (a reconnect, a template other than `base`): only then does the
/// owner look before it runs its script, since a look that finds nothing
/// costs a round trip.
///
/// Runs on the caller's runtime. Dropping the future abandons the setup
/// midway; the sandbox is then the caller's to delete.
///
/// # Errors
/// `Config` (naming `config.cwd`) when the cwd exists as something other
/// than a real directory; `PermissionDenied` when the runtime root is a
/// symlink, not a directory, or not root's with mode 0700, or when one of
/// its ancestors is not a real directory only root may write (nothing is
/// changed through it); the mapped envd error when a call fails.
pub async fn prepare<T: EnvdReadable>(
    envd: &Envd<T>,
    cwd: &str,
    may_be_ready: bool,
) -> Result<Workspace> {
    // Independent: both at once.
    let (cwd_ready, swept) = tokio::join!(
        prepare_cwd(envd, cwd),
        prepare_runtime_root(envd, cwd, may_be_ready)
    );
    cwd_ready?;
    let swept = swept?;
    if swept > 0 {
        tracing::info!(
            runtime_root = RUNTIME_ROOT,
            swept,
            "removed stale adapter state"
        );
    }
    Ok(Workspace {
        cwd: cwd.to_owned(),
        runtime_root: RUNTIME_ROOT.to_owned(),
        swept,
    })
}

/// Creates `cwd` for envd's default user (unless it exists) and checks it
/// is a real directory.
async fn prepare_cwd<T: EnvdReadable>(envd: &Envd<T>, cwd: &str) -> Result<()> {
    let options = CallOptions::default();

    // As envd's default user: new components are created for (and owned
    // by) the sandbox user, so commands can work in the cwd.
    match envd.make_dir(cwd, &options).await {
        // Made just now (envd says so only of a directory it created): a
        // cold start saves the round trip of a stat, as long as the entry
        // it returned is that real directory.
        Ok(entry) if entry.file_type == FileType::Directory && entry.symlink_target.is_none() => {
            return Ok(());
        }
        Ok(_) => {}
        Err(e2b_client::Error::AlreadyExists { .. }) => {}
        // envd acts with that user's permissions, and the user may not
        // create it (under `/srv`, say): the owner creates it for the user.
        Err(e2b_client::Error::PermissionDenied { .. }) => create_cwd_for_user(envd, cwd).await?,
        // The world is gone or unreachable: not the cwd's fault.
        Err(err) if err.is_unavailable() => {
            return Err(step_failed(cwd, "create the cwd", &err));
        }
        // Anything else envd refuses is about the path (a component is a
        // file, a read-only place, …).
        Err(err) => {
            return Err(cwd_error(
                cwd,
                &format!("cannot be created as a directory: {err}"),
            ));
        }
    }
    let entry = match envd.stat(cwd, &options).await {
        Ok(entry) => entry,
        Err(err) => return Err(step_failed(cwd, "stat the cwd", &err)),
    };
    if let Some(target) = &entry.symlink_target {
        return Err(cwd_error(
            cwd,
            &format!(
                "is a symlink to {target}; configure a real directory (the link could be redirected under dsh)"
            ),
        ));
    }
    if entry.file_type == FileType::Symlink {
        return Err(cwd_error(cwd, "is a symlink; configure a real directory"));
    }
    if entry.file_type != FileType::Directory {
        return Err(cwd_error(cwd, "exists and is not a directory"));
    }

    Ok(())
}

/// Finds the runtime root ready ([`already_prepared`], when `may_be_ready`)
/// or creates or sweeps it ([`PREPARE_RUNTIME_ROOT`]) and verifies it; how
/// many stale entries the sweep removed.
async fn prepare_runtime_root<T: EnvdReadable>(
    envd: &Envd<T>,
    cwd: &str,
    may_be_ready: bool,
) -> Result<usize> {
    if may_be_ready && already_prepared(envd, cwd, RUNTIME_ROOT).await? {
        return Ok(0);
    }
    let runtime_root = RUNTIME_ROOT.to_owned();
    let shell = ControlShell::new(runtime_root.clone());
    let stale_after = STALE_AFTER_MINUTES.to_string();
    let command = shell.exec(
        dsh_e2b_gateway::CONTROL_SHELL,
        [
            "--noprofile",
            "--norc",
            "-c",
            PREPARE_RUNTIME_ROOT,
            "dsh-setup",
            runtime_root.as_str(),
            stale_after.as_str(),
            KEPT[0],
            KEPT[1],
        ],
    );
    let output = match shell
        .run(envd, &command, SETUP_COMMAND_TIMEOUT, SETUP_OUTPUT_LIMIT)
        .await
    {
        Ok(output) => output,
        Err(err) => return Err(step_failed(cwd, "prepare the runtime root", &err)),
    };
    let swept = match output.status.exit_code {
        // Made just now by `mkdir -m 0700` as root, which creates a real
        // directory with exactly that owner and mode or fails: nothing
        // left to verify, and a cold start saves the round trip.
        0 => return Ok(0),
        5 => String::from_utf8_lossy(&output.stdout).lines().count(),
        6 => {
            return Err(Error::new(
                ErrorKind::PermissionDenied,
                format!(
                    "set up {runtime_root}: {}; refusing to keep dsh's private state there",
                    output.stderr_text()
                ),
            ));
        }
        3 => {
            // Verification below names the problem; if it finds none, the
            // path changed under us.
            let entry = stat_runtime_root(envd, &runtime_root, &output.stderr_text()).await?;
            verify_runtime_root(&runtime_root, &entry)?;
            return Err(Error::new(
                ErrorKind::PermissionDenied,
                format!("set up {runtime_root}: it changed while it was being prepared; retry"),
            ));
        }
        _ => {
            return Err(Error::io(format!(
                "set up {runtime_root}: preparing it failed ({}): {}",
                output.status.status,
                output.stderr_text()
            )));
        }
    };
    let entry = stat_runtime_root(envd, &runtime_root, "").await?;
    verify_runtime_root(&runtime_root, &entry)?;
    Ok(swept)
}

/// Whether `runtime_root` is ready as it is: it verifies
/// ([`verify_runtime_root`]), every ancestor is a real directory owned by
/// root that only root may write (as [`PREPARE_RUNTIME_ROOT`] requires), and
/// it holds nothing but durable commands' state and a template's helper, so
/// there is nothing to sweep. Whatever the sandbox clock says of an entry's age, any other entry
/// leaves the sweep to the script, which judges ages by that clock. Asked of
/// envd as root, all at once; any other answer (absent, an error) is "no",
/// except an unreachable sandbox, which fails the setup (naming `cwd`'s)
/// rather than wait again for the script.
async fn already_prepared<T: EnvdReadable>(
    envd: &Envd<T>,
    cwd: &str,
    runtime_root: &str,
) -> Result<bool> {
    let options = CallOptions::default().user(CONTROL_USER);
    let ancestors = ancestors(runtime_root);
    let (root, entries, ancestors) = tokio::join!(
        envd.stat(runtime_root, &options),
        envd.list_dir(runtime_root, 1, &options),
        futures::future::join_all(ancestors.iter().map(|dir| envd.stat(dir, &options))),
    );
    let unavailable = [root.as_ref().err(), entries.as_ref().err()]
        .into_iter()
        .chain(ancestors.iter().map(|ancestor| ancestor.as_ref().err()))
        .flatten()
        .find(|err| err.is_unavailable());
    if let Some(err) = unavailable {
        return Err(step_failed(cwd, "look at the runtime root", err));
    }
    Ok(
        matches!(root, Ok(root) if verify_runtime_root(runtime_root, &root).is_ok())
            && matches!(entries, Ok(entries) if entries.iter().all(|entry| KEPT.contains(&entry.name.as_str())))
            && ancestors.iter().all(
                |ancestor| matches!(ancestor, Ok(entry) if root_only(entry, FileType::Directory)),
            ),
    )
}

/// The ancestors of the absolute path `path`, nearest first, `/` last.
fn ancestors(path: &str) -> Vec<&str> {
    debug_assert!(path.starts_with('/'), "{path} is not absolute");
    let mut found = Vec::new();
    let mut rest = path;
    while let Some((parent, _)) = rest.rsplit_once('/') {
        let parent = if parent.is_empty() { "/" } else { parent };
        found.push(parent);
        if parent == "/" {
            break;
        }
        rest = parent;
    }
    found
}

/// Creates `cwd` for envd's default user where that user may not: the
/// user's ids (a command as that user), then [`CREATE_CWD`] as root.
async fn create_cwd_for_user<T: EnvdReadable>(envd: &Envd<T>, cwd: &str) -> Result<()> {
    let shell = ControlShell::new(RUNTIME_ROOT);
    let as_user = shell.acting_for(None);
    let ids = as_user.script(
        r#"printf '%s:%s' "$(id -u)" "$(id -g)""#,
        Vec::<String>::new(),
    );
    let ids = match as_user
        .run(envd, &ids, SETUP_COMMAND_TIMEOUT, SETUP_OUTPUT_LIMIT)
        .await
    {
        Ok(output) if output.status.success() => {
            String::from_utf8_lossy(&output.stdout).into_owned()
        }
        Ok(output) => {
            return Err(Error::io(format!(
                "set up {cwd}: asking the sandbox user's ids failed ({}): {}",
                output.status.status,
                output.stderr_text()
            )));
        }
        Err(err) => return Err(step_failed(cwd, "ask the sandbox user's ids", &err)),
    };
    let command = shell.exec(
        dsh_e2b_gateway::CONTROL_SHELL,
        [
            "--noprofile",
            "--norc",
            "-c",
            CREATE_CWD,
            "dsh-setup",
            cwd,
            ids.as_str(),
        ],
    );
    match shell
        .run(envd, &command, SETUP_COMMAND_TIMEOUT, SETUP_OUTPUT_LIMIT)
        .await
    {
        Ok(output) if output.status.success() => Ok(()),
        Ok(output) => Err(cwd_error(
            cwd,
            &format!("cannot be created as a directory: {}", output.stderr_text()),
        )),
        Err(err) => Err(step_failed(cwd, "create the cwd", &err)),
    }
}

async fn stat_runtime_root<T: EnvdReadable>(
    envd: &Envd<T>,
    runtime_root: &str,
    mkdir_error: &str,
) -> Result<EntryInfo> {
    // As root: the runtime root is root's, and what it is must not depend
    // on what the sandbox user may see.
    let stat = envd
        .stat(runtime_root, &CallOptions::default().user(CONTROL_USER))
        .await;
    stat.map_err(|err| {
        let mapped = plugin_error(&err);
        if err.is_not_found() && !mkdir_error.is_empty() {
            Error::new(
                mapped.kind(),
                format!("set up {runtime_root}: it could not be created: {mkdir_error}"),
            )
        } else {
            mapped.context(format!("set up {runtime_root}: stat"))
        }
    })
}

/// The runtime root must be a real directory (envd reports a symlink as
/// its target's type with `symlink_target` set), mode 0700, owned by root.
fn verify_runtime_root(runtime_root: &str, entry: &EntryInfo) -> Result<()> {
    let refuse = |why: String| {
        Err(Error::new(
            ErrorKind::PermissionDenied,
            format!(
                "set up {runtime_root}: {why}; refusing to use it as dsh's private directory (remove it)"
            ),
        ))
    };
    if let Some(target) = &entry.symlink_target {
        return refuse(format!("it is a symlink to {target}"));
    }
    if entry.file_type == FileType::Symlink {
        return refuse("it is a symlink".to_owned());
    }
    if entry.file_type != FileType::Directory {
        return refuse("it is not a directory".to_owned());
    }
    if entry.owner != RUNTIME_ROOT_OWNER {
        return refuse(format!("it is owned by {}, not root", entry.owner));
    }
    if entry.mode & 0o7777 != RUNTIME_ROOT_MODE {
        return refuse(format!("its mode is {:04o}, not 0700", entry.mode & 0o7777));
    }
    Ok(())
}

/// A failed envd call of the setup, mapped, naming the step.
fn step_failed(cwd: &str, step: &str, err: &e2b_client::Error) -> Error {
    plugin_error(err).context(format!("set up {cwd}: {step}"))
}

fn cwd_error(cwd: &str, why: &str) -> Error {
    Error::config(format!("config.cwd: {cwd} {why}"))
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;

    fn entry(file_type: FileType, owner: &str, mode: u32, symlink: Option<&str>) -> EntryInfo {
        EntryInfo {
            name: ".dsh-e2b".into(),
            file_type,
            path: "/w/.dsh-e2b".into(),
            size: 0,
            mode,
            permissions: String::new(),
            owner: owner.into(),
            group: owner.into(),
            modified: None,
            symlink_target: symlink.map(str::to_owned),
            metadata: BTreeMap::new(),
        }
    }

    #[test]
    fn the_ancestors_are_every_parent_up_to_the_root() {
        assert_eq!(ancestors("/var/lib/dsh-e2b"), ["/var/lib", "/var", "/"]);
        assert_eq!(ancestors("/dsh"), ["/"]);
    }

    #[test]
    fn only_a_root_owned_0700_real_directory_passes() {
        verify_runtime_root(
            "/w/.dsh-e2b",
            &entry(FileType::Directory, "root", 0o700, None),
        )
        .unwrap();
        let cases = [
            (
                entry(FileType::Directory, "root", 0o700, Some("/etc")),
                "it is a symlink to /etc",
            ),
            (
                entry(FileType::Unspecified, "user", 0o777, Some("/nowhere")),
                "it is a symlink to /nowhere",
            ),
            (
                entry(FileType::Symlink, "root", 0o777, None),
                "it is a symlink",
            ),
            (
                entry(FileType::File, "root", 0o700, None),
                "it is not a directory",
            ),
            (
                entry(FileType::Directory, "user", 0o700, None),
                "it is owned by user, not root",
            ),
            (
                entry(FileType::Directory, "root", 0o755, None),
                "its mode is 0755, not 0700",
            ),
        ];
        for (entry, expected) in cases {
            let err = verify_runtime_root("/w/.dsh-e2b", &entry).unwrap_err();
            assert_eq!(err.kind(), ErrorKind::PermissionDenied);
            assert!(
                err.message()
                    .starts_with(&format!("set up /w/.dsh-e2b: {expected}")),
                "{err}"
            );
            assert!(err.message().contains("refusing"), "{err}");
        }
    }
}
