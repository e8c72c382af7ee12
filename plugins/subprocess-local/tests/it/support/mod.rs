//! Helpers shared by the integration tests (each test binary includes this
//! module and uses part of it).

use std::time::Duration;

use dsh_plugin_api::stream::collect_bytes;
use dsh_plugin_api::subprocess::{OutputMode, OutputStream, Process, SpawnSpec};
use dsh_subprocess_local::{Config, LocalSubprocess};

/// A provider with default configuration and a short kill grace.
pub fn provider() -> LocalSubprocess {
    LocalSubprocess::new(&Config {
        kill_grace_ms: Some(300),
        ..Config::default()
    })
    .expect("provider")
}

/// `sh -c script` with both outputs piped.
pub fn sh(script: &str) -> SpawnSpec {
    SpawnSpec::new(["sh", "-c", script])
}

/// `sh -c script` with both outputs collected (1 MiB tails).
pub fn sh_collect(script: &str) -> SpawnSpec {
    let mut spec = sh(script);
    spec.stdout = OutputMode::Collect { limit: 1 << 20 };
    spec.stderr = OutputMode::Collect { limit: 1 << 20 };
    spec
}

/// Everything retained of one collected stream.
pub async fn retained(process: &dyn Process, stream: OutputStream) -> Vec<u8> {
    Vec::from(
        process
            .read_output(stream, 0, usize::MAX)
            .await
            .expect("read_output")
            .bytes,
    )
}

/// Reads a piped stdout to its end.
pub async fn stdout_of(process: &dyn Process) -> Vec<u8> {
    collect_bytes(process.take_stdout().expect("piped stdout"))
        .await
        .expect("stdout")
}

/// Whether `pid` is a live (non-zombie) process.
pub fn alive(pid: i32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| {
        let state = stat
            .rsplit_once(')')
            .map(|(_, rest)| rest.trim_start().chars().next());
        !matches!(state, Some(Some('Z' | 'X')) | None)
    })
}

/// Live processes whose process group is `pgid`.
pub fn group_members(pgid: i32) -> Vec<i32> {
    field_matches(2, pgid)
}

/// Live processes whose session is `sid`.
pub fn session_members(sid: i32) -> Vec<i32> {
    field_matches(3, sid)
}

/// Live pids whose `/proc/<pid>/stat` field `index`, counted from 0 after
/// the command name (0 state, 1 ppid, 2 pgrp, 3 session), equals `value`.
fn field_matches(index: usize, value: i32) -> Vec<i32> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").expect("/proc") {
        let name = entry.expect("entry").file_name();
        let Some(pid) = name.to_str().and_then(|n| n.parse::<i32>().ok()) else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue;
        };
        let Some((_, rest)) = stat.rsplit_once(')') else {
            continue;
        };
        // rest: " S ppid pgrp session ..." → fields[0] = state.
        let fields: Vec<&str> = rest.split_whitespace().collect();
        let live = !matches!(fields.first(), Some(&"Z") | Some(&"X"));
        if live && fields.get(index).and_then(|f| f.parse::<i32>().ok()) == Some(value) {
            found.push(pid);
        }
    }
    found
}

/// Polls `check` every 10 ms until it holds or `limit` passes.
pub async fn eventually(limit: Duration, mut check: impl FnMut() -> bool) -> bool {
    let deadline = tokio::time::Instant::now() + limit;
    loop {
        if check() {
            return true;
        }
        if tokio::time::Instant::now() >= deadline {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// Kills a stray process a test made on purpose (e.g. one that escaped its
/// group with setsid).
pub fn kill(pid: i32) {
    // SAFETY: kill has no memory-safety preconditions.
    unsafe {
        libc::kill(pid, libc::SIGKILL);
    }
}

/// Stops every process of group `pgid` (SIGSTOP).
pub fn stop_group(pgid: i32) {
    // SAFETY: kill has no memory-safety preconditions.
    unsafe {
        libc::kill(-pgid, libc::SIGSTOP);
    }
}
