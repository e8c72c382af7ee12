//! Checks made before serving: root, Linux namespaces, overlayfs, a usable state dir. Each
//! failure says what is missing and why e2b-local needs it.

use std::fs::File;
use std::io;
use std::os::fd::AsRawFd;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};

/// Hidden CLI subcommand used to probe namespace creation in a child process.
pub const PROBE_SUBCOMMAND: &str = "__namespace-probe";
const OVERLAYFS_SUPER_MAGIC: i64 = 0x794c_7630;

/// Why the server refuses to start.
#[derive(Debug, thiserror::Error)]
#[error("e2b-local cannot start: {0}")]
pub struct PreflightError(pub String);

/// Root, namespaces, seccomp and overlayfs. `exe` is the e2b-local binary, run as [`PROBE_SUBCOMMAND`].
pub fn check_host(exe: &Path) -> Result<(), PreflightError> {
    // SAFETY: geteuid cannot fail.
    let euid = unsafe { libc::geteuid() };
    if euid != 0 {
        return Err(PreflightError(format!(
            "it must run as root (running as uid {euid}): every sandbox is built from mount and PID \
             namespaces, an overlay mount of the host root and a freezer cgroup"
        )));
    }
    for ns in ["mnt", "pid", "net"] {
        if !Path::new("/proc/self/ns").join(ns).exists() {
            return Err(PreflightError(format!(
                "the kernel has no {ns} namespaces (/proc/self/ns/{ns} is missing); sandboxes need them"
            )));
        }
    }
    let filesystems = std::fs::read_to_string("/proc/filesystems")
        .map_err(|e| PreflightError(format!("read /proc/filesystems: {e}")))?;
    if !filesystems
        .lines()
        .any(|l| l.split_whitespace().last() == Some("overlay"))
    {
        return Err(PreflightError(
            "the kernel does not support overlayfs (not in /proc/filesystems; try `modprobe overlay`); \
             each sandbox's root is an overlay of the host root"
                .to_owned(),
        ));
    }
    probe_namespaces(exe)
}

/// Starts `exe __namespace-probe` inside fresh namespaces of every kind a world has, where it
/// installs the worlds' seccomp filter: proves `unshare` works here (it fails in restricted
/// containers even as root) and so does seccomp (a kernel without `CONFIG_SECCOMP_FILTER`).
fn probe_namespaces(exe: &Path) -> Result<(), PreflightError> {
    let mut command = std::process::Command::new(exe);
    command.arg(PROBE_SUBCOMMAND);
    // SAFETY: only the async-signal-safe unshare(2) runs between fork and exec.
    unsafe {
        command.pre_exec(|| {
            if libc::unshare(crate::world::NAMESPACES) != 0 {
                return Err(io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let status = command.status().map_err(|e| {
        PreflightError(format!(
            "cannot create mount, PID, network, UTS and IPC namespaces (unshare(CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWNET | CLONE_NEWUTS | CLONE_NEWIPC) for {}): {e}",
            exe.display()
        ))
    })?;
    if !status.success() {
        return Err(PreflightError(format!(
            "namespace probe {} {PROBE_SUBCOMMAND} failed ({status}): sandboxes need \
             namespaces and a seccomp filter (its error is above)",
            exe.display()
        )));
    }
    Ok(())
}

/// Creates (mode 0700) and canonicalises the state dir and checks it can hold overlay layers:
/// not on overlayfs, and a path overlay mount options can carry.
pub fn prepare_state_dir(dir: &Path) -> Result<PathBuf, PreflightError> {
    std::fs::create_dir_all(dir)
        .map_err(|e| PreflightError(format!("create state dir {}: {e}", dir.display())))?;
    let dir = dir
        .canonicalize()
        .map_err(|e| PreflightError(format!("resolve state dir {}: {e}", dir.display())))?;
    let text = dir
        .to_str()
        .ok_or_else(|| PreflightError(format!("state dir {} is not UTF-8", dir.display())))?;
    if let Some(bad) = text
        .chars()
        .find(|c| matches!(c, ',' | ':' | '\\') || c.is_whitespace())
    {
        return Err(PreflightError(format!(
            "state dir {text:?} contains {bad:?}, which overlay mount options cannot carry; choose another path"
        )));
    }
    if is_overlayfs(&dir)? {
        return Err(PreflightError(format!(
            "state dir {text} is on overlayfs, which cannot hold overlay upper layers; pass --state-dir on a \
             real filesystem (ext4, xfs, btrfs, tmpfs)"
        )));
    }
    Ok(dir)
}

fn is_overlayfs(dir: &Path) -> Result<bool, PreflightError> {
    let c = std::ffi::CString::new(dir.as_os_str().as_bytes())
        .map_err(|_| PreflightError(format!("state dir {} contains NUL", dir.display())))?;
    // SAFETY: statfs is plain old data; zeroed is a valid bit pattern for it.
    let mut stat: libc::statfs = unsafe { std::mem::zeroed() };
    // SAFETY: valid NUL-terminated path and out-parameter.
    if unsafe { libc::statfs(c.as_ptr(), &mut stat) } != 0 {
        return Err(PreflightError(format!(
            "statfs {}: {}",
            dir.display(),
            io::Error::last_os_error()
        )));
    }
    Ok(stat.f_type as i64 == OVERLAYFS_SUPER_MAGIC)
}

/// An exclusive lock on `<state>/lock`, held for the server's lifetime: two servers sharing a
/// state dir would sweep each other's sandboxes.
#[derive(Debug)]
pub struct StateLock {
    _file: File,
}

impl StateLock {
    pub fn acquire(state_dir: &Path) -> Result<Self, PreflightError> {
        let path = state_dir.join("lock");
        let file = File::create(&path)
            .map_err(|e| PreflightError(format!("create {}: {e}", path.display())))?;
        // SAFETY: flock on a descriptor we own.
        if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } != 0 {
            return Err(PreflightError(format!(
                "state dir {} is in use by another e2b-local server ({}); pass a different --state-dir",
                state_dir.display(),
                io::Error::last_os_error()
            )));
        }
        Ok(Self { _file: file })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn state_dir_paths_overlay_cannot_carry_are_refused() {
        let base = tempfile::tempdir().unwrap();
        let err = prepare_state_dir(&base.path().join("a,b")).unwrap_err();
        assert!(err.to_string().contains("overlay mount options"), "{err}");
        let err = prepare_state_dir(&base.path().join("a b")).unwrap_err();
        assert!(err.to_string().contains("overlay mount options"), "{err}");
    }

    #[test]
    fn a_good_state_dir_is_created_and_canonical() {
        let base = tempfile::tempdir().unwrap();
        let dir = prepare_state_dir(&base.path().join("x/../state")).unwrap();
        assert!(dir.is_dir());
        assert!(!dir.to_string_lossy().contains(".."));
    }

    #[test]
    fn a_second_lock_on_one_state_dir_is_refused() {
        let base = tempfile::tempdir().unwrap();
        let _first = StateLock::acquire(base.path()).unwrap();
        let err = StateLock::acquire(base.path()).unwrap_err();
        assert!(
            err.to_string()
                .contains("in use by another e2b-local server"),
            "{err}"
        );
    }
}
