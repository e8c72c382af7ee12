//! The freezer cgroup that holds every process of one sandbox world: pause freezes it, resume
//! thaws it, teardown kills whatever it still holds. cgroup v1 (`/sys/fs/cgroup/freezer`) and v2
//! (`cgroup.freeze`, on `/sys/fs/cgroup` or `/sys/fs/cgroup/unified`) are both supported; v1
//! wins when both exist because hybrid hosts keep processes' v2 membership elsewhere.

use std::io;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// Which freezer interface a cgroup uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FreezerKind {
    V1,
    V2,
}

/// The freezer hierarchy available on this host, and where e2b-local's cgroups live in it.
#[derive(Debug, Clone)]
pub struct FreezerRoot {
    kind: FreezerKind,
    /// `<hierarchy>/e2b-local/<instance>`: this server's parent cgroup.
    base: PathBuf,
}

const V1_ROOT: &str = "/sys/fs/cgroup/freezer";
const V2_ROOTS: [&str; 2] = ["/sys/fs/cgroup", "/sys/fs/cgroup/unified"];

impl FreezerRoot {
    /// Finds a usable freezer — `only` that kind when given, else v1 then v2 — and creates this
    /// server's parent cgroup `e2b-local/<instance>`. Cgroups left by servers that are gone are
    /// removed on the way.
    pub fn create(instance: &str, only: Option<FreezerKind>) -> io::Result<Self> {
        let (kind, hierarchy) = detect(only).ok_or_else(|| {
            let wanted = match only {
                Some(FreezerKind::V1) => format!("a cgroup v1 freezer hierarchy at {V1_ROOT}"),
                Some(FreezerKind::V2) => {
                    format!("a cgroup v2 hierarchy at {}", V2_ROOTS.join(" or "))
                }
                None => format!(
                    "a cgroup v1 freezer at {V1_ROOT} or a cgroup v2 hierarchy at {}",
                    V2_ROOTS.join(" or ")
                ),
            };
            io::Error::new(
                io::ErrorKind::Unsupported,
                format!("no cgroup freezer: found no {wanted}"),
            )
        })?;
        let parent = hierarchy.join("e2b-local");
        std::fs::create_dir_all(&parent).map_err(|e| annotate(e, "create cgroup", &parent))?;
        sweep_empty(&parent);
        let base = parent.join(instance);
        std::fs::create_dir_all(&base).map_err(|e| annotate(e, "create cgroup", &base))?;
        Ok(Self { kind, base })
    }

    pub fn kind(&self) -> FreezerKind {
        self.kind
    }

    /// Creates the (empty) cgroup of one sandbox.
    pub fn sandbox(&self, sandbox_id: &str) -> io::Result<Cgroup> {
        let path = self.base.join(sandbox_id);
        std::fs::create_dir(&path).map_err(|e| annotate(e, "create cgroup", &path))?;
        Ok(Cgroup {
            kind: self.kind,
            path,
        })
    }

    /// Removes this server's parent cgroup; its sandbox cgroups must already be gone.
    pub fn remove(&self) -> io::Result<()> {
        // Empty leftovers (a world whose start failed before its cgroup could be removed).
        if let Ok(children) = std::fs::read_dir(&self.base) {
            for child in children
                .flatten()
                .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
            {
                let _ = std::fs::remove_dir(child.path());
            }
        }
        match std::fs::remove_dir(&self.base) {
            Err(e) if e.kind() != io::ErrorKind::NotFound => {
                Err(annotate(e, "remove cgroup", &self.base))
            }
            _ => Ok(()),
        }
    }
}

fn detect(only: Option<FreezerKind>) -> Option<(FreezerKind, PathBuf)> {
    if only != Some(FreezerKind::V2)
        && (Path::new(V1_ROOT).join("freezer.state").exists()
            || is_v1_freezer_root(Path::new(V1_ROOT)))
    {
        return Some((FreezerKind::V1, PathBuf::from(V1_ROOT)));
    }
    if only == Some(FreezerKind::V1) {
        return None;
    }
    V2_ROOTS
        .iter()
        .map(Path::new)
        .find(|root| root.join("cgroup.controllers").exists() && root.join("cgroup.procs").exists())
        .map(|root| (FreezerKind::V2, root.to_path_buf()))
}

/// The v1 root cgroup has no `freezer.state` (the root cannot be frozen); its `tasks` file and
/// its mount type identify it.
fn is_v1_freezer_root(path: &Path) -> bool {
    path.join("tasks").exists()
        && std::fs::read_to_string("/proc/self/mounts").is_ok_and(|mounts| {
            mounts.lines().any(|line| {
                let mut fields = line.split_whitespace();
                let (_dev, mount_point, fs_type, options) =
                    (fields.next(), fields.next(), fields.next(), fields.next());
                mount_point == path.to_str()
                    && fs_type == Some("cgroup")
                    && options.is_some_and(|o| o.split(',').any(|opt| opt == "freezer"))
            })
        })
}

/// Removes the cgroups of servers that are gone (instance dirs are named `<server pid>-<rand>`);
/// live servers' cgroups are never touched, even empty ones (another server may be between
/// creating a sandbox cgroup and moving a process into it). Busy ones fail `rmdir` and stay.
fn sweep_empty(parent: &Path) {
    let Ok(instances) = std::fs::read_dir(parent) else {
        return;
    };
    for instance in instances
        .flatten()
        .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
    {
        let name = instance.file_name();
        let server_pid = name
            .to_str()
            .and_then(|n| n.split('-').next())
            .and_then(|p| p.parse::<u32>().ok());
        if server_pid.is_none_or(process_alive) {
            continue;
        }
        if let Ok(children) = std::fs::read_dir(instance.path()) {
            for child in children
                .flatten()
                .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
            {
                let _ = std::fs::remove_dir(child.path());
            }
        }
        let _ = std::fs::remove_dir(instance.path());
    }
}

/// Whether `pid` is a running process (a zombie — exited, not yet reaped — counts as gone).
fn process_alive(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| {
        stat.rsplit(')')
            .next()
            .and_then(|rest| rest.split_whitespace().next())
            != Some("Z")
    })
}

fn annotate(err: io::Error, op: &str, path: &Path) -> io::Error {
    io::Error::new(err.kind(), format!("{op} {}: {err}", path.display()))
}

/// One sandbox's cgroup.
#[derive(Debug, Clone)]
pub struct Cgroup {
    kind: FreezerKind,
    path: PathBuf,
}

impl Cgroup {
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Moves process `pid` (and, from then on, its future descendants) into this cgroup.
    pub fn add(&self, pid: u32) -> io::Result<()> {
        let file = self.path.join("cgroup.procs");
        std::fs::write(&file, pid.to_string())
            .map_err(|e| annotate(e, &format!("add pid {pid} to"), &file))
    }

    /// Host pids of every process currently in the cgroup.
    pub fn pids(&self) -> io::Result<Vec<i32>> {
        let file = self.path.join("cgroup.procs");
        let text = std::fs::read_to_string(&file).map_err(|e| annotate(e, "read", &file))?;
        Ok(text.lines().filter_map(|l| l.trim().parse().ok()).collect())
    }

    /// Freezes every process and returns once the kernel reports the cgroup frozen.
    pub fn freeze(&self) -> io::Result<()> {
        match self.kind {
            FreezerKind::V1 => {
                self.write("freezer.state", "FROZEN")?;
                self.wait_for(
                    || Ok(self.read("freezer.state")?.trim() == "FROZEN"),
                    "freeze",
                )
            }
            FreezerKind::V2 => {
                self.write("cgroup.freeze", "1")?;
                self.wait_for(
                    || Ok(self.read("cgroup.events")?.lines().any(|l| l == "frozen 1")),
                    "freeze",
                )
            }
        }
    }

    /// Thaws every process.
    pub fn thaw(&self) -> io::Result<()> {
        match self.kind {
            FreezerKind::V1 => self.write("freezer.state", "THAWED"),
            FreezerKind::V2 => self.write("cgroup.freeze", "0"),
        }
    }

    /// SIGKILLs every process (thawing so frozen ones can die) until the cgroup is empty, then
    /// removes it. `spare` (the world's keeper, in the host PID namespace) is left to exit by
    /// itself once the processes below it died, so it can reap them: a killed keeper would leave
    /// its child a zombie for the host's init. It is killed too if it lingers past half of
    /// `deadline`. Fails only if processes survive `deadline`.
    pub fn kill_all_and_remove(&self, deadline: Duration, spare: Option<i32>) -> io::Result<()> {
        let start = Instant::now();
        self.kill_all(deadline, spare)?;
        // rmdir can race the last exiting task's release; retry briefly.
        let mut pause = Backoff::new();
        loop {
            match std::fs::remove_dir(&self.path) {
                Ok(()) => return Ok(()),
                Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
                Err(e) if start.elapsed() > deadline => {
                    return Err(annotate(e, "remove cgroup", &self.path));
                }
                Err(_) => pause.sleep(),
            }
        }
    }

    /// [`Self::kill_all_and_remove`] without the removal: the cgroup stays, empty and thawed,
    /// for the processes of a rebooted world.
    pub fn kill_all(&self, deadline: Duration, spare: Option<i32>) -> io::Result<()> {
        let start = Instant::now();
        // Killed processes are usually gone within a millisecond: look again soon, then less
        // and less often (a fixed 5 ms made every kill take 5 ms).
        let mut pause = Backoff::new();
        loop {
            let pids = match self.pids() {
                Ok(pids) => pids,
                Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
                Err(e) => return Err(e),
            };
            if pids.is_empty() {
                break;
            }
            let spare = spare.filter(|_| start.elapsed() < deadline / 2);
            for pid in pids.iter().filter(|pid| Some(**pid) != spare) {
                // SAFETY: kill(2) has no memory-safety preconditions.
                unsafe { libc::kill(*pid, libc::SIGKILL) };
            }
            let _ = self.thaw();
            if start.elapsed() > deadline {
                return Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    format!(
                        "kill cgroup {}: processes {pids:?} survive SIGKILL",
                        self.path.display()
                    ),
                ));
            }
            pause.sleep();
        }
        Ok(())
    }

    fn write(&self, file: &str, value: &str) -> io::Result<()> {
        let path = self.path.join(file);
        std::fs::write(&path, value).map_err(|e| annotate(e, &format!("write {value:?} to"), &path))
    }

    fn read(&self, file: &str) -> io::Result<String> {
        let path = self.path.join(file);
        std::fs::read_to_string(&path).map_err(|e| annotate(e, "read", &path))
    }

    fn wait_for(&self, mut done: impl FnMut() -> io::Result<bool>, what: &str) -> io::Result<()> {
        let start = Instant::now();
        let mut pause = Backoff::new();
        while !done()? {
            if start.elapsed() > Duration::from_secs(10) {
                return Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    format!(
                        "{what} cgroup {}: not settled after 10 s",
                        self.path.display()
                    ),
                ));
            }
            pause.sleep();
        }
        Ok(())
    }
}

/// Pauses between polls of a state the kernel settles soon: 100 µs first, doubling up to 5 ms.
struct Backoff(Duration);

impl Backoff {
    const FIRST: Duration = Duration::from_micros(100);
    const MOST: Duration = Duration::from_millis(5);

    fn new() -> Backoff {
        Backoff(Self::FIRST)
    }

    fn sleep(&mut self) {
        std::thread::sleep(self.0);
        self.0 = (self.0 * 2).min(Self::MOST);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn liveness_of_servers_for_the_sweep() {
        assert!(process_alive(std::process::id()));
        assert!(!process_alive(u32::MAX));
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let pid = child.id();
        // Exited but not yet reaped: a zombie, which counts as gone.
        std::thread::sleep(Duration::from_millis(200));
        assert!(!process_alive(pid));
        child.wait().unwrap();
    }
}
