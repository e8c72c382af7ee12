//! `probe USER UPLOAD DIGEST`: what `dsh-subprocess-e2b` learns of the sandbox
//! once per provider, in the one process the install script ends in (each
//! program a shell would run for it costs a fork and an exec, milliseconds
//! each in a sandbox) — or in the provider's first command itself
//! ([`launch_for`], a `run` with a [`ProbeFor`]).
//!
//! First it checks that its own executable (the installed copy) has the
//! BLAKE3 digest the provider expects, and does nothing else if not (exit
//! 3): a helper damaged or cut short on its way goes no further. The check
//! is here rather than in a `sha256sum` before the exec because that
//! program hashed a 1.5 MB helper in about 15 ms; BLAKE3 because the check
//! is on a cold start's critical path, and it hashes the 4 MB helper in
//! ~0.65 ms where SHA-256, even with the CPU's SHA instructions, took ~2.4.
//! A template's copy is checked once, when the template is built (`dsh
//! template`'s recipe runs this `probe` with the digest), not at every
//! start: its digest is `-` then (and its upload `-`: an upload is always
//! checked), and a `run` that learns the sandbox itself ([`launch_for`]),
//! which only a template's copy runs, carries none.
//!
//! Then it prints, NUL-terminated: `dsh-supervisor <wire version>`, the
//! user's uid, gid, groups (space-separated, the primary group first, as
//! `id -G`), login home; then the ambient environment as `env -0` prints it
//! (this process's, as envd gave it). It removes `UPLOAD`, the uploaded
//! file the helper was installed from, once the check passed (`-`: none,
//! the helper is a template's copy). The account
//! comes from `/etc/passwd` and `/etc/group`: a static program has no NSS,
//! and sandboxes keep their accounts in files.

use std::collections::BTreeMap;
use std::io::Write;
use std::os::unix::ffi::OsStrExt;

use dsh_supervisor::ambient::{Ambient, search_dirs};
use dsh_supervisor::wire::{self, Identity, Launch, ProbeFor};

/// Exit status when the user has no account (the install script's).
const NO_SUCH_USER: i32 = 5;

/// A user's account as `id` and `getent passwd` report it.
#[derive(Debug, PartialEq, Eq)]
pub struct Account {
    pub uid: u32,
    pub gid: u32,
    pub groups: Vec<u32>,
    pub home: String,
}

/// `user`'s account in the `passwd` and `group` databases (file contents).
/// Groups are the primary group, then every group that lists `user` as a
/// member, in file order, without repeats (`getgrouplist`'s answer).
pub fn lookup(user: &str, passwd: &str, group: &str) -> Result<Account, String> {
    let entry = passwd
        .lines()
        .map(|line| line.split(':').collect::<Vec<_>>())
        .find(|fields| fields.len() >= 7 && fields[0] == user)
        .ok_or_else(|| format!("the sandbox has no user {user}"))?;
    let number = |text: &str, what: &str| {
        text.parse::<u32>()
            .map_err(|_| format!("the {what} of {user} in /etc/passwd is {text:?}"))
    };
    let (uid, gid) = (number(entry[2], "uid")?, number(entry[3], "gid")?);
    if entry[5].is_empty() {
        return Err(format!("user {user} has no passwd entry with a home"));
    }
    let mut groups = vec![gid];
    for fields in group
        .lines()
        .map(|line| line.split(':').collect::<Vec<_>>())
    {
        let [_, _, id, members] = fields.as_slice() else {
            continue;
        };
        let Ok(id) = id.parse::<u32>() else { continue };
        if members.split(',').any(|member| member == user) && !groups.contains(&id) {
            groups.push(id);
        }
    }
    Ok(Account {
        uid,
        gid,
        groups,
        home: entry[5].to_owned(),
    })
}

/// Exit status when the executable is not the one the provider sent.
const DAMAGED: i32 = 3;

/// The BLAKE3 digest (hex) of the file at `path`, hashed where the page
/// cache holds it (mapped, not read: copying the helper out cost about as
/// much as hashing it).
fn digest_of(path: &str) -> std::io::Result<String> {
    let file = std::fs::File::open(path)?;
    let len = usize::try_from(file.metadata()?.len()).map_err(std::io::Error::other)?;
    let mut hasher = blake3::Hasher::new();
    if len > 0 {
        // SAFETY: a private read-only mapping of a whole regular file,
        // unmapped below; the file is this very executable, which nothing
        // writes while it runs (the kernel refuses writes to a running
        // program's file).
        unsafe {
            let map = rustix::mm::mmap(
                std::ptr::null_mut(),
                len,
                rustix::mm::ProtFlags::READ,
                rustix::mm::MapFlags::PRIVATE,
                &file,
                0,
            )?;
            hasher.update(std::slice::from_raw_parts(map.cast::<u8>(), len));
            rustix::mm::munmap(map, len)?;
        }
    }
    Ok(hasher.finalize().to_hex().to_string())
}

/// What `probe` is given for the digest of a template's copy, which the
/// template's build checked: nothing to hash.
const CHECKED_AT_BUILD: &str = "-";

/// Checks this executable against the BLAKE3 digest `expected` (hex, or
/// [`CHECKED_AT_BUILD`]); the message and exit status for a mismatch or an
/// unreadable executable.
fn check_own_digest(expected: &str) -> Result<(), (i32, String)> {
    if expected == CHECKED_AT_BUILD {
        return Ok(());
    }
    match digest_of("/proc/self/exe") {
        Ok(digest) if digest == expected => Ok(()),
        Ok(digest) => Err((
            DAMAGED,
            format!(
                "the installed helper does not match its BLAKE3 digest (expected {expected}, found {digest}): it was damaged on its way into the sandbox (the upload, or the template's copy)"
            ),
        )),
        Err(err) => Err((
            DAMAGED,
            format!("reading the installed helper to check its digest: {err}"),
        )),
    }
}

/// `user`'s account, from `/etc/passwd` and `/etc/group`.
fn account_of(user: &str) -> Result<Account, (i32, String)> {
    let read = |path: &str| std::fs::read_to_string(path).map_err(|err| format!("{path}: {err}"));
    // Without a group file, the user is in its primary group only.
    read("/etc/passwd")
        .and_then(|passwd| lookup(user, &passwd, &read("/etc/group").unwrap_or_default()))
        .map_err(|message| (NO_SUCH_USER, message))
}

/// This process's environment as `env -0` prints it.
fn env0() -> Vec<u8> {
    let mut out = Vec::new();
    for (name, value) in std::env::vars_os() {
        out.extend_from_slice(name.as_bytes());
        out.push(b'=');
        out.extend_from_slice(value.as_bytes());
        out.push(0);
    }
    out
}

/// What `probe` prints for `account`: the fields, then `env0`.
fn record(account: &Account, env0: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    let groups: Vec<String> = account.groups.iter().map(u32::to_string).collect();
    for field in [
        format!("dsh-supervisor {}", wire::VERSION),
        account.uid.to_string(),
        account.gid.to_string(),
        groups.join(" "),
        account.home.clone(),
    ] {
        out.extend_from_slice(field.as_bytes());
        out.push(0);
    }
    out.extend_from_slice(env0);
    out
}

/// The launch of a `run` that learns the sandbox itself (`probe` of a
/// template's copy, so no digest to check): `probe.user`'s identity, the
/// command's environment composed from this process's (envd's) and the
/// request's explicit entries as the host would ([`Ambient`]), the search
/// path from its `PATH`; and the record `probe` would print, for the host.
/// An error is the message to report.
pub fn launch_for(probe: &ProbeFor, launch: &Launch) -> Result<(Launch, Vec<u8>), String> {
    let account = account_of(&probe.user).map_err(|(_, message)| message)?;
    let env0 = env0();
    let ambient = Ambient::from_probe(&env0, &probe.user, &account.home)?;
    let mut explicit = BTreeMap::new();
    for entry in &launch.env {
        let (name, value) = entry
            .split_once('=')
            .ok_or_else(|| format!("the explicit environment entry {entry:?} has no '='"))?;
        explicit.insert(name.to_owned(), value.to_owned());
    }
    let env = ambient.for_command(&explicit, &launch.cwd);
    let learned = Launch {
        identity: Identity {
            uid: account.uid,
            gid: account.gid,
            groups: account.groups.clone(),
        },
        argv: launch.argv.clone(),
        search: search_dirs(&env.path),
        env: env.entries,
        cwd: launch.cwd.clone(),
    };
    Ok((learned, record(&account, &env0)))
}

/// Runs `probe`; the process's exit status. An upload (`upload` not `-`)
/// is always checked: `expected` may be [`CHECKED_AT_BUILD`] only for a
/// template's copy, which has none.
pub fn main(user: &str, upload: &str, expected: &str) -> i32 {
    if upload != "-" && expected == CHECKED_AT_BUILD {
        eprintln!("dsh: probe: the uploaded helper {upload} must be checked against its digest");
        return DAMAGED;
    }
    if let Err((status, message)) = check_own_digest(expected) {
        eprintln!("dsh: {message}");
        return status;
    }
    if upload != "-"
        && let Err(err) = std::fs::remove_file(upload)
        && err.kind() != std::io::ErrorKind::NotFound
    {
        eprintln!("dsh: removing the uploaded helper {upload}: {err}");
        return 3;
    }
    let account = match account_of(user) {
        Ok(account) => account,
        Err((status, message)) => {
            eprintln!("dsh: {message}");
            return status;
        }
    };
    match std::io::stdout()
        .lock()
        .write_all(&record(&account, &env0()))
    {
        Ok(()) => 0,
        Err(err) => {
            eprintln!("dsh: writing the probe: {err}");
            3
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const PASSWD: &str = "root:x:0:0:root:/root:/bin/bash\n\
        user:x:1000:1000::/home/user:/bin/bash\n\
        nohome:x:1001:1001:::/bin/sh\n\
        broken:x:uid:1:::/bin/sh\n";
    const GROUP: &str = "root:x:0:\n\
        sudo:x:27:admin,user\n\
        user:x:1000:\n\
        docker:x:999:user\n\
        again:x:27:user\n\
        odd line\n";

    #[test]
    fn the_account_is_the_primary_group_then_memberships_in_file_order() {
        assert_eq!(
            lookup("user", PASSWD, GROUP).unwrap(),
            Account {
                uid: 1000,
                gid: 1000,
                groups: vec![1000, 27, 999],
                home: "/home/user".into(),
            }
        );
        assert_eq!(lookup("root", PASSWD, GROUP).unwrap().groups, vec![0]);
    }

    #[test]
    fn missing_or_broken_accounts_are_named() {
        let err = |user| lookup(user, PASSWD, GROUP).unwrap_err();
        assert_eq!(err("ghost"), "the sandbox has no user ghost");
        assert_eq!(err("nohome"), "user nohome has no passwd entry with a home");
        assert!(err("broken").contains("uid of broken"), "{}", err("broken"));
        // A prefix of a name is not the name.
        assert_eq!(err("use"), "the sandbox has no user use");
    }
}
