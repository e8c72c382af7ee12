//! Every running e2b-local instance's state dir, listed under [`INSTANCES_DIR`] (one file per
//! instance, holding its state dir's path), so each world can hide them all: a sandbox's root is
//! an overlay of the live host root, and its root may read whatever that shows
//! (docs/design.md §7).

use std::collections::BTreeMap;
use std::ffi::CString;
use std::io;
use std::os::fd::AsRawFd;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

/// e2b-local's runtime dir on the host; hidden inside every world.
pub const RUN_DIR: &str = "/run/e2b-local";
/// Where instances list their state dirs (in [`RUN_DIR`]).
pub const INSTANCES_DIR: &str = "/run/e2b-local/state-dirs";
/// The default `--state-dir`, hidden in every world whether or not a server uses it now.
pub const DEFAULT_STATE_DIR: &str = "/var/lib/e2b-local";
/// The suffix of an entry being written (see [`register_in`]).
const STAGED: &str = ".staged";

/// This instance's entry in [`INSTANCES_DIR`]; removed on drop.
#[derive(Debug)]
pub struct Registration {
    file: PathBuf,
}

impl Registration {
    /// Lists `state_dir` as instance `instance`'s (named `<server pid>-<suffix>`), first removing
    /// the entries of servers that no longer run.
    pub fn register(instance: &str, state_dir: &Path) -> io::Result<Self> {
        register_in(Path::new(INSTANCES_DIR), instance, state_dir)
    }
}

impl Drop for Registration {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.file);
    }
}

fn register_in(dir: &Path, instance: &str, state_dir: &Path) -> io::Result<Registration> {
    let ctx = |what: &str, path: &Path| {
        let what = format!("{what} {}", path.display());
        move |e: io::Error| io::Error::new(e.kind(), format!("{what}: {e}"))
    };
    std::fs::create_dir_all(dir).map_err(ctx("create", dir))?;
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))
        .map_err(ctx("chmod", dir))?;
    for entry in std::fs::read_dir(dir).map_err(ctx("read", dir))?.flatten() {
        let name = entry.file_name();
        let pid = name
            .to_str()
            .and_then(|n| n.split('-').next())
            .and_then(|p| p.parse::<libc::pid_t>().ok());
        if pid.is_none_or(|pid| !Path::new(&format!("/proc/{pid}")).exists()) {
            let _ = std::fs::remove_file(entry.path());
        }
    }
    // Written beside its name, then renamed: an instance reading the list meanwhile sees the
    // whole path or nothing, never the empty file `write` creates first (an empty path would
    // name the world's root). The staged name starts with this pid, so a sweep keeps it.
    let file = dir.join(instance);
    let staged = dir.join(format!("{instance}{STAGED}"));
    std::fs::write(&staged, state_dir.as_os_str().as_encoded_bytes())
        .map_err(ctx("write", &staged))?;
    std::fs::rename(&staged, &file).map_err(ctx("rename into place", &file))?;
    Ok(Registration { file })
}

/// Hides `dir` from every world already running on this host (this server's or another
/// instance's): worlds built later hide it by themselves, through the list. Returns what failed,
/// one message per world.
pub fn hide_from_running_worlds(dir: &Path) -> Vec<String> {
    let mut failures = Vec::new();
    for (namespace, pid) in world_mount_namespaces() {
        if let Err(err) = hide_in(pid, dir) {
            failures.push(format!(
                "hide {} from the sandbox world of pid {pid} (mount namespace {namespace}): {err}",
                dir.display()
            ));
        }
    }
    failures
}

/// One process per distinct mount namespace among processes in an e2b-local cgroup.
fn world_mount_namespaces() -> BTreeMap<String, u32> {
    let host = std::fs::read_link("/proc/self/ns/mnt").ok();
    let mut found = BTreeMap::new();
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return found;
    };
    for pid in entries
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
    {
        let in_world = std::fs::read_to_string(format!("/proc/{pid}/cgroup"))
            .is_ok_and(|text| text.contains("/e2b-local/"));
        let Ok(namespace) = std::fs::read_link(format!("/proc/{pid}/ns/mnt")) else {
            continue;
        };
        if in_world && Some(&namespace) != host.as_ref() {
            found
                .entry(namespace.to_string_lossy().into_owned())
                .or_insert(pid);
        }
    }
    found
}

/// Mounts an empty read-only tmpfs on `dir` in the mount namespace of `pid`, from a forked child
/// (a multi-threaded process may not enter another mount namespace). Paths resolve inside that
/// namespace, against the world's root.
fn hide_in(pid: u32, dir: &Path) -> io::Result<()> {
    let namespace = match std::fs::File::open(format!("/proc/{pid}/ns/mnt")) {
        Ok(namespace) => namespace,
        // The world ended since it was listed: nothing left to hide from.
        Err(err) if err.kind() == io::ErrorKind::NotFound => return Ok(()),
        Err(err) => return Err(err),
    };
    let target = CString::new(dir.as_os_str().as_bytes())
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "path contains NUL"))?;
    let tmpfs = c"tmpfs";
    let options = c"size=4k,mode=0755";
    let flags = libc::MS_RDONLY | libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC;
    // SAFETY: the child only makes async-signal-safe calls (setns, stat, mount, _exit) on
    // memory prepared before the fork, then exits without returning.
    match unsafe { libc::fork() } {
        -1 => Err(io::Error::last_os_error()),
        // SAFETY: as above: the forked child's calls are async-signal-safe, on prepared memory.
        0 => unsafe {
            if libc::setns(namespace.as_raw_fd(), libc::CLONE_NEWNS) != 0 {
                libc::_exit(1);
            }
            let mut stat: libc::stat = std::mem::zeroed();
            if libc::stat(target.as_ptr(), &mut stat) != 0
                || stat.st_mode & libc::S_IFMT != libc::S_IFDIR
            {
                // Not there in this world (or not a directory): nothing to hide.
                libc::_exit(0);
            }
            if libc::mount(
                tmpfs.as_ptr(),
                target.as_ptr(),
                tmpfs.as_ptr(),
                flags,
                options.as_ptr().cast(),
            ) != 0
            {
                libc::_exit(2);
            }
            libc::_exit(0)
        },
        child => {
            let mut status = 0;
            // SAFETY: waitpid(2) on our own child with a valid status pointer.
            while unsafe { libc::waitpid(child, &mut status, 0) } == -1 {
                let err = io::Error::last_os_error();
                if err.kind() != io::ErrorKind::Interrupted {
                    return Err(err);
                }
            }
            match (libc::WIFEXITED(status), libc::WEXITSTATUS(status)) {
                (true, 0) => Ok(()),
                (true, 1) => Err(io::Error::other("setns failed")),
                (true, 2) => Err(io::Error::other("mount tmpfs failed")),
                _ => Err(io::Error::other(format!(
                    "helper ended with status {status}"
                ))),
            }
        }
    }
}

/// The state dirs of every listed instance, this one's included.
pub fn state_dirs() -> Vec<PathBuf> {
    state_dirs_in(Path::new(INSTANCES_DIR))
}

/// Only what can be a state dir is taken: an absolute path other than `/` (a world hides each by
/// covering it, and covering the root would leave it nothing), from an entry not being written.
fn state_dirs_in(dir: &Path) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter(|entry| !entry.file_name().as_bytes().ends_with(STAGED.as_bytes()))
        .filter_map(|entry| std::fs::read_to_string(entry.path()).ok())
        .map(PathBuf::from)
        .filter(|path| path.is_absolute() && path.parent().is_some())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_of_dead_servers_are_removed_and_live_ones_listed() {
        let dir = tempfile::tempdir().unwrap();
        let listed = dir.path().join("state-dirs");
        std::fs::create_dir(&listed).unwrap();
        // pid_max is at most 2^22, so this pid never runs.
        std::fs::write(listed.join("99999999-dead"), "/var/dead").unwrap();
        std::fs::write(listed.join("garbage"), "/var/garbage").unwrap();
        let own = format!("{}-live", std::process::id());
        let registration = register_in(&listed, &own, Path::new("/var/live")).unwrap();
        assert_eq!(state_dirs_in(&listed), [PathBuf::from("/var/live")]);
        drop(registration);
        assert_eq!(state_dirs_in(&listed), Vec::<PathBuf>::new());
    }

    /// What another instance may find while an entry is written, or what a stray file holds,
    /// never becomes a dir to hide: an empty path would have covered the world's root with an
    /// empty read-only tmpfs (a world then failed to start: "mkdir …/root/proc: Read-only file
    /// system").
    #[test]
    fn only_absolute_state_dirs_other_than_the_root_are_listed() {
        let dir = tempfile::tempdir().unwrap();
        let own = std::process::id();
        for (name, content) in [
            ("empty", ""),
            ("relative", "var/x"),
            ("root", "/"),
            ("written", "/var/written"),
        ] {
            std::fs::write(dir.path().join(format!("{own}-{name}")), content).unwrap();
        }
        std::fs::write(dir.path().join(format!("{own}-next{STAGED}")), "/var/half").unwrap();
        assert_eq!(state_dirs_in(dir.path()), [PathBuf::from("/var/written")]);
        let registration =
            register_in(dir.path(), &format!("{own}-next"), Path::new("/var/next")).unwrap();
        let mut listed = state_dirs_in(dir.path());
        listed.sort();
        assert_eq!(
            listed,
            [PathBuf::from("/var/next"), PathBuf::from("/var/written")]
        );
        drop(registration);
    }
}
