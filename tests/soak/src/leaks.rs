//! What a finished soak may not leave behind, counted from outside: sandboxes the API lists,
//! processes of this server's sandbox worlds (its freezer cgroups, `e2b-local/<server pid>-…/`),
//! other children of the server, processes carrying this run's marker (every `dsh` the soak
//! started, and anything they started), mounts under the server's state dir in the host's mount
//! table, this server's sandbox cgroups, and entries in its state dir's `sandboxes/`. After the
//! server stopped: its instance cgroup and its entry in `/run/e2b-local/state-dirs` too.
//!
//! Everything is scoped to this server and run, so other e2b-local servers on the machine (other
//! tests) neither count nor are touched.

use std::path::{Path, PathBuf};

use crate::control::Control;
use crate::dsh::RUN_MARKER_ENV;
use crate::procs;

/// Where freezer hierarchies may hold `e2b-local/` (v1, v2, hybrid v2).
const CGROUP_ROOTS: [&str; 3] = [
    "/sys/fs/cgroup/freezer",
    "/sys/fs/cgroup",
    "/sys/fs/cgroup/unified",
];
/// Where e2b-local lists running instances' state dirs.
const INSTANCES_DIR: &str = "/run/e2b-local/state-dirs";
/// Items listed per kind in a report.
const SHOWN: usize = 5;

/// What identifies this soak's leftovers.
#[derive(Debug, Clone)]
pub struct Scope {
    pub server_pid: u32,
    pub state_dir: PathBuf,
    pub run: String,
}

/// Leftovers by kind; each item described.
#[derive(Debug, Default, Clone)]
pub struct Leaks {
    pub sandboxes: Vec<String>,
    pub world_processes: Vec<String>,
    pub server_children: Vec<String>,
    pub dsh_processes: Vec<String>,
    pub mounts: Vec<String>,
    pub cgroups: Vec<String>,
    pub state_entries: Vec<String>,
}

impl Leaks {
    fn kinds(&self) -> [(&'static str, &Vec<String>); 7] {
        [
            ("sandboxes", &self.sandboxes),
            ("world processes", &self.world_processes),
            ("server children", &self.server_children),
            ("dsh processes", &self.dsh_processes),
            ("mounts", &self.mounts),
            ("cgroups", &self.cgroups),
            ("state entries", &self.state_entries),
        ]
    }

    pub fn total(&self) -> usize {
        self.kinds().iter().map(|(_, items)| items.len()).sum()
    }

    /// `sandboxes 0, world processes 0, …`.
    pub fn counts(&self) -> String {
        self.kinds()
            .iter()
            .map(|(kind, items)| format!("{kind} {}", items.len()))
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// The first few items of every non-empty kind, one per line.
    pub fn details(&self) -> String {
        let mut out = String::new();
        for (kind, items) in self.kinds() {
            for item in items.iter().take(SHOWN) {
                out.push_str(&format!("  leaked {kind}: {item}\n"));
            }
            if items.len() > SHOWN {
                out.push_str(&format!("  … and {} more {kind}\n", items.len() - SHOWN));
            }
        }
        out
    }
}

/// Counts while the server still runs (sandboxes through its API).
pub async fn while_serving(scope: &Scope, control: &Control) -> Leaks {
    let sandboxes = match control.list(&[]).await {
        Ok(listed) => listed
            .into_iter()
            .map(|l| format!("{} (endAt {}, metadata {:?})", l.id, l.end_at, l.metadata))
            .collect(),
        Err(err) => vec![format!("cannot list: {err:#}")],
    };
    let scope = scope.clone();
    let host = tokio::task::spawn_blocking(move || on_host(&scope, true))
        .await
        .unwrap_or_default();
    Leaks { sandboxes, ..host }
}

/// Counts after the server stopped: no API; the instance's own cgroup and registration count.
pub fn after_stop(scope: &Scope) -> Leaks {
    on_host(scope, false)
}

fn on_host(scope: &Scope, serving: bool) -> Leaks {
    let marker = format!("/e2b-local/{}-", scope.server_pid);
    let run_entry = format!("{RUN_MARKER_ENV}={}", scope.run);
    let me = std::process::id();
    let mut leaks = Leaks::default();
    for process in procs::scan() {
        if process.pid == me || process.pid == scope.server_pid {
            continue;
        }
        if process.cgroup.contains(&marker) {
            leaks.world_processes.push(process.describe());
        } else if serving && process.ppid == scope.server_pid {
            leaks.server_children.push(process.describe());
        } else if procs::environ_has(process.pid, &run_entry) {
            leaks.dsh_processes.push(process.describe());
        }
    }
    leaks.mounts = mounts_under(&scope.state_dir);
    leaks.cgroups = cgroups(scope.server_pid, serving);
    if serving {
        leaks.state_entries = entries(&scope.state_dir.join("sandboxes"));
    } else {
        leaks.state_entries = registrations(scope.server_pid);
        if scope.state_dir.exists() {
            leaks
                .state_entries
                .push(format!("{} still exists", scope.state_dir.display()));
        }
    }
    leaks
}

/// Mount points at or under `dir` in this (the host's) mount namespace.
fn mounts_under(dir: &Path) -> Vec<String> {
    let Ok(table) = std::fs::read_to_string("/proc/self/mountinfo") else {
        return vec!["cannot read /proc/self/mountinfo".to_owned()];
    };
    mount_points_under(&table, dir)
}

fn mount_points_under(mountinfo: &str, dir: &Path) -> Vec<String> {
    mountinfo
        .lines()
        .filter_map(|line| line.split(' ').nth(4))
        .map(unescape_octal)
        .filter(|point| Path::new(point).starts_with(dir))
        .collect()
}

/// mountinfo escapes space, tab, newline and backslash as `\NNN`.
fn unescape_octal(field: &str) -> String {
    let bytes = field.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'\\'
            && i + 3 < bytes.len()
            && bytes[i + 1..=i + 3]
                .iter()
                .all(|b| (b'0'..=b'7').contains(b))
        {
            let value = bytes[i + 1..=i + 3]
                .iter()
                .fold(0u32, |acc, b| acc * 8 + u32::from(b - b'0'));
            out.push(u8::try_from(value).unwrap_or(b'?'));
            i += 4;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// This server's cgroups: its sandboxes' while it serves; afterwards its instance cgroup too.
fn cgroups(server_pid: u32, serving: bool) -> Vec<String> {
    let prefix = format!("{server_pid}-");
    let mut found = Vec::new();
    for root in CGROUP_ROOTS {
        let parent = Path::new(root).join("e2b-local");
        for instance in dirs(&parent)
            .into_iter()
            .filter(|dir| name_starts_with(dir, &prefix))
        {
            if !serving {
                found.push(instance.display().to_string());
            }
            found.extend(
                dirs(&instance)
                    .into_iter()
                    .map(|dir| dir.display().to_string()),
            );
        }
    }
    found
}

/// This server's entries in the instance list (after it stopped).
fn registrations(server_pid: u32) -> Vec<String> {
    let prefix = format!("{server_pid}-");
    entries(Path::new(INSTANCES_DIR))
        .into_iter()
        .filter(|entry| {
            Path::new(entry)
                .file_name()
                .is_some_and(|name| name.to_string_lossy().starts_with(&prefix))
        })
        .collect()
}

fn name_starts_with(path: &Path, prefix: &str) -> bool {
    path.file_name()
        .is_some_and(|name| name.to_string_lossy().starts_with(prefix))
}

fn dirs(dir: &Path) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter(|entry| entry.file_type().is_ok_and(|t| t.is_dir()))
        .map(|entry| entry.path())
        .collect()
}

fn entries(dir: &Path) -> Vec<String> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    entries
        .flatten()
        .map(|entry| entry.path().display().to_string())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mount_points_under_a_dir_are_found_escaped_or_not() {
        let table = "\
22 1 0:21 / / rw - ext4 /dev/vda rw
90 22 0:50 / /tmp/e2b-local-test-x/sandboxes/a/root rw - overlay overlay rw
91 22 0:51 / /tmp/e2b-local-test-x/with\\040space rw - tmpfs tmpfs rw
92 22 0:52 / /tmp/e2b-local-test-xy rw - tmpfs tmpfs rw
";
        let found = mount_points_under(table, Path::new("/tmp/e2b-local-test-x"));
        assert_eq!(
            found,
            [
                "/tmp/e2b-local-test-x/sandboxes/a/root",
                "/tmp/e2b-local-test-x/with space"
            ]
        );
    }

    #[test]
    fn counts_and_details_name_every_kind() {
        let leaks = Leaks {
            mounts: (0..7).map(|i| format!("/m{i}")).collect(),
            ..Leaks::default()
        };
        assert_eq!(leaks.total(), 7);
        assert!(leaks.counts().starts_with("sandboxes 0, world processes 0"));
        assert!(leaks.counts().contains("mounts 7"));
        let details = leaks.details();
        assert!(details.contains("leaked mounts: /m4\n"), "{details}");
        assert!(details.contains("… and 2 more mounts"), "{details}");
    }

    #[test]
    fn nothing_is_found_for_a_server_that_never_ran() {
        let scope = Scope {
            server_pid: u32::MAX,
            state_dir: PathBuf::from("/nonexistent/dsh-soak-state"),
            run: "no-such-run".to_owned(),
        };
        let leaks = after_stop(&scope);
        assert_eq!(leaks.total(), 0, "{}", leaks.details());
    }
}
