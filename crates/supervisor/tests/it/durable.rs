//! Durable commands end to end: the real helper binary, real processes,
//! state directories in temporary directories. Commands run as the test's
//! own uid and gid (root or not), which the helper takes without changing
//! its identity.

use std::io::Read;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::PathBuf;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use dsh_supervisor::wire::{
    self, DurableEntry, DurableStartRequest, DurableState, Identity, Launch,
};

const HELPER: &str = env!("CARGO_BIN_EXE_dsh-supervisor");

/// A temporary directory and the (not yet existing) state directory in it.
struct State {
    _temp: tempfile::TempDir,
    dir: PathBuf,
}

impl State {
    fn new() -> State {
        let temp = tempfile::tempdir().expect("tempdir");
        let dir = temp.path().join("durable");
        State { _temp: temp, dir }
    }

    fn dir(&self) -> &str {
        self.dir.to_str().expect("UTF-8 path")
    }

    fn request(&self, script: &str, retain: u64, timeout_ms: u64) -> DurableStartRequest {
        self.request_argv(&["sh", "-c", script], retain, timeout_ms)
    }

    fn request_argv(&self, argv: &[&str], retain: u64, timeout_ms: u64) -> DurableStartRequest {
        DurableStartRequest {
            id: format!("{:032x}", rand_id()),
            launch: Launch {
                identity: Identity {
                    uid: rustix::process::getuid().as_raw(),
                    gid: rustix::process::getgid().as_raw(),
                    groups: Vec::new(),
                },
                argv: argv.iter().map(|s| (*s).to_owned()).collect(),
                env: vec!["PATH=/usr/bin:/bin".to_owned()],
                cwd: "/".to_owned(),
                search: vec!["/usr/bin".to_owned(), "/bin".to_owned()],
            },
            dir: self.dir().to_owned(),
            retain,
            timeout_ms,
            drain_grace_ms: 500,
            hold: false,
            merge_stderr: false,
        }
    }

    /// Runs `durable-start` and returns its line.
    fn start_line(&self, request: &DurableStartRequest) -> String {
        let output = start_command(request).output().expect("durable-start");
        assert!(output.status.success(), "{output:?}");
        String::from_utf8(output.stdout)
            .expect("UTF-8")
            .trim_end()
            .to_owned()
    }

    /// Starts `script`; returns its id and pid.
    fn start(&self, script: &str, retain: u64, timeout_ms: u64) -> (String, u32) {
        let line = self.start_line(&self.request(script, retain, timeout_ms));
        parse_ok(&line)
    }

    fn ctl(&self, args: &[&str]) -> String {
        let output = Command::new(HELPER).args(args).output().expect("helper");
        assert!(output.status.success(), "{args:?}: {output:?}");
        String::from_utf8(output.stdout)
            .expect("UTF-8")
            .trim_end()
            .to_owned()
    }

    fn info(&self, id: &str) -> DurableEntry {
        let line = self.ctl(&["durable-info", self.dir(), id]);
        let entry = line.strip_prefix("ok ").unwrap_or_else(|| panic!("{line}"));
        DurableEntry::parse_line(entry).expect("entry")
    }

    fn list(&self) -> Vec<DurableEntry> {
        let text = self.ctl(&["durable-list", self.dir()]);
        let mut lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.pop(), Some("end"), "{text}");
        lines
            .iter()
            .map(|line| {
                DurableEntry::parse_line(line.strip_prefix("entry ").expect("entry line"))
                    .expect("entry")
            })
            .collect()
    }

    fn follow(&self, id: &str, from: [u64; 2]) -> Output {
        Command::new(HELPER)
            .args([
                "durable-follow",
                self.dir(),
                id,
                &from[0].to_string(),
                &from[1].to_string(),
            ])
            .output()
            .expect("durable-follow")
    }

    /// Waits until `id` has ended; returns its entry.
    fn wait_ended(&self, id: &str) -> DurableEntry {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let entry = self.info(id);
            if matches!(entry.state, DurableState::Ended { .. }) {
                return entry;
            }
            assert!(Instant::now() < deadline, "never ended: {entry:?}");
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// The names in the state directory.
    fn names(&self) -> Vec<String> {
        match std::fs::read_dir(&self.dir) {
            Ok(read) => read
                .map(|d| d.unwrap().file_name().into_string().unwrap())
                .collect(),
            Err(_) => Vec::new(),
        }
    }

    fn supervisor_of(&self, id: &str) -> i32 {
        let record = std::fs::read_to_string(self.dir.join(id).join("command")).unwrap();
        record
            .lines()
            .find_map(|line| line.strip_prefix("supervisor "))
            .expect("supervisor")
            .parse()
            .unwrap()
    }
}

fn start_command(request: &DurableStartRequest) -> Command {
    let mut command = Command::new(HELPER);
    command
        .arg("durable-start")
        .env(wire::REQUEST_ENV, wire::base64_encode(&request.encode()));
    command
}

fn parse_ok(line: &str) -> (String, u32) {
    let words: Vec<&str> = line.split(' ').collect();
    match words.as_slice() {
        ["ok", id, pid] => {
            assert!(wire::valid_durable_id(id), "{line}");
            ((*id).to_owned(), pid.parse().expect("pid"))
        }
        _ => panic!("not started: {line}"),
    }
}

fn ended(entry: &DurableEntry) -> (Option<i32>, Option<i32>, bool) {
    match entry.state {
        DurableState::Ended {
            code,
            signal,
            timed_out,
        } => (code, signal, timed_out),
        ref other => panic!("not ended: {other:?}"),
    }
}

/// Live (non-zombie) processes whose process group is `pgid`.
fn group_members(pgid: u32) -> Vec<u32> {
    let mut found = Vec::new();
    for dirent in std::fs::read_dir("/proc").unwrap() {
        let name = dirent.unwrap().file_name();
        let Some(pid) = name.to_str().and_then(|n| n.parse::<u32>().ok()) else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue;
        };
        let rest = &stat[stat.rfind(')').unwrap() + 2..];
        let fields: Vec<&str> = rest.split(' ').collect();
        // fields[0] is the state, fields[2] the process group.
        if fields[0] != "Z" && fields[2] == pgid.to_string() {
            found.push(pid);
        }
    }
    found
}

const NUMBERED: &str = "i=0; while [ $i -lt 100 ]; do echo \"line $i\"; i=$((i+1)); sleep 0.01; done; \
                        echo done >&2; exit 3";

fn numbered_output() -> Vec<u8> {
    (0..100)
        .map(|i| format!("line {i}\n"))
        .collect::<String>()
        .into_bytes()
}

#[test]
fn output_is_followed_from_any_offset_and_the_exit_is_mirrored() {
    let state = State::new();
    let began = Instant::now();
    let (id, pid) = state.start(NUMBERED, 1 << 20, 0);
    // The starter returns as soon as the command runs, not when it ends.
    assert!(
        began.elapsed() < Duration::from_millis(700),
        "{:?}",
        began.elapsed()
    );
    let listed = state.list();
    assert_eq!(listed.len(), 1, "{listed:?}");
    assert_eq!(listed[0].id, id);
    assert_eq!(listed[0].pid, pid);
    assert_eq!(listed[0].state, DurableState::Running);
    assert_eq!(listed[0].argv, ["sh", "-c", NUMBERED]);
    assert_eq!(listed[0].cwd, "/");

    // A follow from 0 while it runs sees everything, then the exit.
    let live = state.follow(&id, [0, 0]);
    let expected = numbered_output();
    assert_eq!(live.stdout, expected);
    assert_eq!(live.stderr, b"done\n");
    assert_eq!(live.status.code(), Some(3), "{live:?}");

    let entry = state.wait_ended(&id);
    assert_eq!(ended(&entry), (Some(3), None, false));
    assert_eq!(entry.totals, [expected.len() as u64, 5]);
    assert_eq!(entry.retained_from, [0, 0]);

    // From a middle offset and from the end, after it finished.
    let mid = 333;
    let middle = state.follow(&id, [mid, 5]);
    assert_eq!(middle.status.code(), Some(3));
    assert_eq!(middle.stderr, b"");
    let end = state.follow(&id, entry.totals);
    assert_eq!(end.status.code(), Some(3));
    assert!(end.stdout.is_empty() && end.stderr.is_empty(), "{end:?}");
    let mut joined = expected[..mid as usize].to_vec();
    joined.extend_from_slice(&middle.stdout);
    joined.extend_from_slice(&end.stdout);
    assert_eq!(joined, expected);
}

#[test]
fn a_follow_of_a_command_killed_by_a_signal_dies_of_it() {
    let state = State::new();
    let (id, _) = state.start("echo before; kill -TERM $$; echo after", 1 << 20, 0);
    let out = state.follow(&id, [0, 0]);
    assert_eq!(out.status.signal(), Some(libc::SIGTERM), "{out:?}");
    assert!(!out.status.core_dumped());
    assert_eq!(out.stdout, b"before\n");
    let entry = state.wait_ended(&id);
    assert_eq!(ended(&entry), (None, Some(libc::SIGTERM), false));
}

#[test]
fn the_supervisor_outlives_the_session_that_started_it() {
    let state = State::new();
    let request = state.request("sleep 1; echo survived; exit 7", 1 << 20, 0);
    // The starter runs inside a shell that leads a session of its own;
    // once it printed its line the whole session is killed.
    let mut shell = Command::new("sh");
    shell
        .args(["-c", "\"$0\" durable-start; exec sleep 60", HELPER])
        .env(wire::REQUEST_ENV, wire::base64_encode(&request.encode()))
        .stdout(Stdio::piped());
    // SAFETY: setsid is async-signal-safe.
    unsafe {
        shell.pre_exec(|| {
            rustix::process::setsid()?;
            Ok(())
        });
    }
    let mut shell = shell.spawn().expect("spawn");
    let sid = shell.id() as i32;
    let mut stdout = shell.stdout.take().unwrap();
    let mut line = Vec::new();
    let mut byte = [0u8; 1];
    while stdout.read(&mut byte).expect("read") == 1 && byte[0] != b'\n' {
        line.push(byte[0]);
    }
    let (id, pid) = parse_ok(std::str::from_utf8(&line).unwrap());
    // SAFETY: no pointers.
    unsafe { libc::kill(-sid, libc::SIGKILL) };
    shell.wait().expect("reap");
    // Nothing of the helper holds the starter's stdout: it ends although
    // the command still runs.
    let mut rest = Vec::new();
    stdout.read_to_end(&mut rest).expect("read to end");
    assert!(rest.is_empty());
    assert_eq!(state.info(&id).state, DurableState::Running);
    assert!(!group_members(pid).is_empty());
    let out = state.follow(&id, [0, 0]);
    assert_eq!(out.stdout, b"survived\n");
    assert_eq!(out.status.code(), Some(7));
    assert_eq!(ended(&state.wait_ended(&id)), (Some(7), None, false));
}

#[test]
fn only_the_last_retain_bytes_are_guaranteed_and_follow_starts_there() {
    let state = State::new();
    let retain = 1000;
    let (id, _) = state.start("seq 1 200000; seq 1 10 >&2", retain, 0);
    let entry = state.wait_ended(&id);
    let expected: Vec<u8> = (1..=200_000)
        .map(|i| format!("{i}\n"))
        .collect::<String>()
        .into_bytes();
    assert_eq!(entry.totals[0], expected.len() as u64);
    let from = entry.retained_from[0];
    assert!(from > 0, "{entry:?}");
    assert!(entry.totals[0] - from >= retain, "{entry:?}");
    assert_eq!(entry.retained_from[1], 0);
    let out = state.follow(&id, [0, 0]);
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(out.stdout, expected[from as usize..]);
    assert_eq!(
        out.stderr,
        (1..=10)
            .map(|i| format!("{i}\n"))
            .collect::<String>()
            .as_bytes()
    );
}

#[test]
fn a_timeout_terminates_the_group_and_is_recorded() {
    let state = State::new();
    let (polite, _) = state.start("sleep 30", 1 << 20, 200);
    // Ignores SIGTERM (and so does its sleep): SIGKILL 2 s later.
    let (stubborn, _) = state.start("trap '' TERM; sleep 30", 1 << 20, 200);
    let entry = state.wait_ended(&polite);
    assert_eq!(ended(&entry), (None, Some(libc::SIGTERM), true));
    let entry = state.wait_ended(&stubborn);
    assert_eq!(ended(&entry), (None, Some(libc::SIGKILL), true));
    let (quick, _) = state.start("exit 0", 1 << 20, 5000);
    assert_eq!(ended(&state.wait_ended(&quick)), (Some(0), None, false));
}

#[test]
fn forged_and_unknown_ids_are_refused() {
    let state = State::new();
    let (id, _) = state.start("exit 0", 1 << 20, 0);
    state.wait_ended(&id);
    std::fs::create_dir(state.dir.join("x")).unwrap();
    let upper = id.to_uppercase();
    for forged in ["../x", "x", &id[..31], &format!("{id}0"), &upper] {
        for args in [
            vec!["durable-info", state.dir(), forged],
            vec!["durable-forget", state.dir(), forged],
            vec!["durable-terminate", state.dir(), forged, "10", "10"],
        ] {
            let line = state.ctl(&args);
            assert!(line.starts_with("error 22 "), "{args:?}: {line}");
        }
        let out = state.follow(forged, [0, 0]);
        assert_eq!(out.status.code(), Some(125), "{forged}");
        // Silent: its stderr would be the command's.
        assert!(out.stdout.is_empty() && out.stderr.is_empty(), "{out:?}");
    }
    let unknown = "0123456789abcdef0123456789abcdef";
    let line = state.ctl(&["durable-info", state.dir(), unknown]);
    assert!(line.starts_with("error 2 "), "{line}");
    assert_eq!(state.follow(unknown, [0, 0]).status.code(), Some(125));
    // Still there, untouched.
    assert!(state.dir.join("x").is_dir());
    assert_eq!(state.list().len(), 1);
}

#[test]
fn forget_waits_for_the_supervisor_then_removes_everything() {
    let state = State::new();
    let (id, _) = state.start("sleep 30", 1 << 20, 0);
    let line = state.ctl(&["durable-forget", state.dir(), &id]);
    assert!(
        line.starts_with(&format!("error {} ", libc::EBUSY)),
        "{line}"
    );
    assert!(state.dir.join(&id).join("command").is_file());
    assert_eq!(
        state.ctl(&["durable-terminate", state.dir(), &id, "2000", "2000"]),
        "empty"
    );
    let entry = state.wait_ended(&id);
    assert_eq!(ended(&entry), (None, Some(libc::SIGTERM), false));
    // Its supervisor may still be between its status and its exit.
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let line = state.ctl(&["durable-forget", state.dir(), &id]);
        if line == "ok" {
            break;
        }
        assert!(Instant::now() < deadline, "{line}");
        std::thread::sleep(Duration::from_millis(10));
    }
    assert!(state.names().is_empty(), "{:?}", state.names());
    assert!(state.list().is_empty());
    let line = state.ctl(&["durable-forget", state.dir(), &id]);
    assert!(line.starts_with("error 2 "), "{line}");
    // An ended command terminates as empty, signalling nothing.
    let (done, _) = state.start("exit 0", 1 << 20, 0);
    state.wait_ended(&done);
    assert_eq!(
        state.ctl(&["durable-terminate", state.dir(), &done, "10", "10"]),
        "empty"
    );
}

#[test]
fn terminate_leaves_nothing_of_the_group() {
    let state = State::new();
    let (id, pid) = state.start(
        "sleep 30 & trap '' TERM; sleep 30 & echo started; wait",
        1 << 20,
        0,
    );
    // Wait until the shell has forked its children.
    let deadline = Instant::now() + Duration::from_secs(10);
    while state.info(&id).totals[0] == 0 {
        assert!(Instant::now() < deadline);
        std::thread::sleep(Duration::from_millis(10));
    }
    assert!(group_members(pid).len() >= 3, "{:?}", group_members(pid));
    let line = state.ctl(&["durable-terminate", state.dir(), &id, "200", "3000"]);
    assert_eq!(line, "empty");
    assert!(group_members(pid).is_empty(), "{:?}", group_members(pid));
    let (_, signal, timed_out) = ended(&state.wait_ended(&id));
    assert!(signal.is_some() && !timed_out);
}

#[test]
fn a_lost_supervisor_makes_follow_fail() {
    let state = State::new();
    // `exec`: the command is the sleep itself (a shell's forked children
    // would not get the parent-death signal).
    let (id, pid) = state.start("exec sleep 30", 1 << 20, 0);
    let supervisor = state.supervisor_of(&id);
    // SAFETY: no pointers.
    unsafe { libc::kill(supervisor, libc::SIGKILL) };
    let out = state.follow(&id, [0, 0]);
    assert_eq!(out.status.code(), Some(125), "{out:?}");
    assert!(out.stderr.is_empty(), "silent: {out:?}");
    assert_eq!(state.info(&id).state, DurableState::Lost);
    // The command died with its supervisor (the parent-death signal; a
    // zombie if nothing reaps orphans here).
    let deadline = Instant::now() + Duration::from_secs(10);
    while group_members(pid).contains(&pid) {
        assert!(Instant::now() < deadline);
        std::thread::sleep(Duration::from_millis(10));
    }
    assert_eq!(state.ctl(&["durable-forget", state.dir(), &id]), "ok");
}

#[test]
fn a_program_that_does_not_exist_leaves_nothing() {
    let state = State::new();
    let request = state.request_argv(&["dsh-no-such-program"], 1 << 20, 0);
    let line = state.start_line(&request);
    assert_eq!(
        line,
        format!("failed 5 {} dsh-no-such-program", libc::ENOENT)
    );
    // The state directory was made; nothing is in it.
    assert!(state.dir.is_dir());
    assert!(state.names().is_empty(), "{:?}", state.names());
    let mut bad_cwd = state.request("exit 0", 1 << 20, 0);
    bad_cwd.launch.cwd = "/dsh-no-such-dir".into();
    assert_eq!(
        state.start_line(&bad_cwd),
        format!("failed 4 {} /dsh-no-such-dir", libc::ENOENT)
    );
    assert!(state.names().is_empty());
}

#[test]
fn a_state_directory_others_can_enter_is_refused() {
    let state = State::new();
    assert!(state.list().is_empty(), "a missing directory lists nothing");
    std::fs::create_dir(&state.dir).unwrap();
    std::fs::set_permissions(&state.dir, std::fs::Permissions::from_mode(0o755)).unwrap();
    let line = state.start_line(&state.request("exit 0", 1 << 20, 0));
    assert!(
        line.starts_with(&format!("error {} ", libc::EPERM)),
        "{line}"
    );
    let line = state.ctl(&["durable-list", state.dir()]);
    assert!(
        line.starts_with(&format!("error {} ", libc::EPERM)),
        "{line}"
    );
    assert!(state.names().is_empty());
    // A symlink to a private directory is not one either.
    let private = state.dir.with_file_name("private");
    std::fs::create_dir(&private).unwrap();
    std::fs::set_permissions(&private, std::fs::Permissions::from_mode(0o700)).unwrap();
    let link = state.dir.with_file_name("link");
    std::os::unix::fs::symlink(&private, &link).unwrap();
    let mut request = state.request("exit 0", 1 << 20, 0);
    request.dir = link.to_str().unwrap().to_owned();
    let line = state.start_line(&request);
    assert!(
        line.starts_with(&format!("error {} ", libc::EPERM)),
        "{line}"
    );
    // The parent of a missing directory must exist.
    request.dir = state.dir.join("a/b").to_str().unwrap().to_owned();
    let line = state.start_line(&request);
    assert!(
        line.starts_with(&format!("error {} ", libc::ENOENT)),
        "{line}"
    );
}

#[test]
fn the_drain_grace_bounds_waiting_for_a_background_writer() {
    let state = State::new();
    for grace in [0, 300] {
        let mut request = state.request("echo hi; sleep 30 & exit 4", 1 << 20, 0);
        request.drain_grace_ms = grace;
        let (id, pid) = parse_ok(&state.start_line(&request));
        let began = Instant::now();
        let out = state.follow(&id, [0, 0]);
        assert!(
            began.elapsed() < Duration::from_secs(5),
            "{:?}",
            began.elapsed()
        );
        assert_eq!(out.status.code(), Some(4), "{out:?}");
        assert_eq!(out.stdout, b"hi\n");
        // The background sleep is still in the group: the test's to end.
        // SAFETY: no pointers.
        unsafe { libc::kill(-(pid as i32), libc::SIGKILL) };
    }
}

/// 128 bits that differ per call (the ids of test requests).
fn rand_id() -> u128 {
    use std::hash::BuildHasher;
    let state = std::collections::hash_map::RandomState::new();
    (u128::from(state.hash_one(1u8)) << 64) | u128::from(state.hash_one(2u8))
}

/// A follower started before its command (`wait`), holding from 0, with
/// output far beyond the retention: everything arrives, and it exits as
/// the command did.
#[test]
fn a_waiting_holding_follower_started_first_gets_every_byte() {
    let state = State::new();
    let mut request = state.request("seq 1 200000; exit 4", 64 * 1024, 0);
    request.hold = true;
    // The state directory exists before the follower looks for the command.
    std::fs::create_dir(&state.dir).expect("state dir");
    std::fs::set_permissions(
        &state.dir,
        std::os::unix::fs::PermissionsExt::from_mode(0o700),
    )
    .expect("mode");
    let follower = Command::new(HELPER)
        .args([
            "durable-follow",
            state.dir(),
            &request.id,
            "0",
            "0",
            "hold",
            "wait",
        ])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("durable-follow");
    std::thread::sleep(std::time::Duration::from_millis(50));
    let (id, _) = parse_ok(&state.start_line(&request));
    assert_eq!(id, request.id, "the caller's id");
    let out = follower.wait_with_output().expect("follow");
    let expected: String = (1..=200_000).map(|i| format!("{i}\n")).collect();
    assert_eq!(out.stdout.len(), expected.len());
    assert!(out.stdout == expected.as_bytes(), "every byte, in order");
    assert_eq!(out.status.code(), Some(4));
    // The same id again is refused.
    let again = state.start_line(&request);
    assert!(again.starts_with("error 17 "), "{again}");
}
