//! Every way a user ends `dsh` cleans up, on the local composition and over
//! the probe plugins: SIGHUP, SIGQUIT, SIGINT and SIGTERM during a start,
//! a command and a terminal leave no process behind and exit 128+signal; a
//! shutdown is bounded and a second signal abandons it; a closed stdout
//! ends the command as a shell pipeline does; end of piped input ends
//! `dsh sh`; the documented exit codes; a disposal error keeps the
//! command's status.

use std::io::Read;
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use crate::support::pty::PtySession;
use crate::support::{Scratch, dsh, require, run_dsh, text, wait_until};

const LOCAL: [&str; 2] = ["dsh-fs-local", "dsh-subprocess-local"];
const PROBES: [&str; 3] = ["dsh-probe-e2b", "dsh-probe-fs", "dsh-probe-subprocess"];
const SIGNALS: [i32; 4] = [libc::SIGHUP, libc::SIGQUIT, libc::SIGINT, libc::SIGTERM];
const LIMIT: Duration = Duration::from_secs(20);

/// Host processes whose argv contains `marker`.
pub fn processes_with(marker: &str) -> Vec<u32> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter_map(|entry| {
            let pid: u32 = entry.file_name().to_str()?.parse().ok()?;
            let cmdline = std::fs::read(entry.path().join("cmdline")).ok()?;
            let found = cmdline
                .windows(marker.len())
                .any(|window| window == marker.as_bytes());
            found.then_some(pid)
        })
        .filter(|pid| *pid != std::process::id())
        .collect()
}

pub fn send(pid: u32, signal: i32) {
    rustix::process::kill_process(
        rustix::process::Pid::from_raw(pid as i32).expect("pid"),
        rustix::process::Signal::from_named_raw(signal).expect("signal"),
    )
    .expect("signal dsh");
}

/// Waits (bounded) for `child` to exit; its exit code.
pub fn exit_within(child: &mut Child, limit: Duration) -> Option<i32> {
    let deadline = Instant::now() + limit;
    loop {
        if let Some(status) = child.try_wait().expect("try_wait") {
            return status.code();
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("dsh did not exit within {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A marker unique to this test process and `tag`, for a child's argv.
fn marker(tag: &str) -> String {
    format!("dsh-hostile-{}-{tag}", std::process::id())
}

#[test]
fn every_shutdown_signal_during_a_command_leaves_no_process() {
    require(&LOCAL);
    for signal in SIGNALS {
        let marker = marker(&format!("command-{signal}"));
        let mut child = dsh()
            .args(["exec", "--", "sh", "-c", &format!("sleep 1000; : {marker}")])
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn dsh");
        assert!(
            wait_until(LIMIT, || processes_with(&marker).len() >= 2),
            "the command did not start"
        );
        send(child.id(), signal);
        assert_eq!(exit_within(&mut child, LIMIT), Some(128 + signal));
        assert!(
            wait_until(Duration::from_secs(5), || processes_with(&marker)
                .is_empty()),
            "signal {signal}: left {:?}",
            processes_with(&marker)
        );
    }
}

#[test]
fn every_shutdown_signal_during_a_terminal_leaves_no_process() {
    require(&LOCAL);
    for signal in SIGNALS {
        let marker = marker(&format!("terminal-{signal}"));
        let mut command = dsh();
        command
            .args(["sh", "--", "sh", "-c", &format!("sleep 1000; : {marker}")])
            .env("TERM", "xterm");
        let mut session = PtySession::spawn(command, 80, 24);
        assert!(
            wait_until(LIMIT, || processes_with(&marker).len() >= 2),
            "the terminal did not start"
        );
        send(session.pid(), signal);
        assert_eq!(session.wait(LIMIT), Some(128 + signal));
        assert!(
            wait_until(Duration::from_secs(5), || processes_with(&marker)
                .is_empty()),
            "signal {signal}: left {:?}",
            processes_with(&marker)
        );
    }
}

/// A probe composition whose `subprocess` plugin takes `create_delay_ms`
/// to create and `dispose_delay_ms` to dispose; its record path.
fn slow_probes(scratch: &Scratch, create_delay_ms: u64, dispose_delay_ms: u64) -> String {
    let record = scratch.record("events.jsonl");
    scratch.write(
        "slow.yaml",
        &format!(
            "- {{id: e2b, name: dsh-probe-e2b, config: {{record: {record}}}}}\n\
             - {{id: fs, name: dsh-probe-fs, config: {{record: {record}}}}}\n\
             - {{id: subprocess, name: dsh-probe-subprocess, config: {{record: {record}, \
             createDelayMs: {create_delay_ms}, disposeDelayMs: {dispose_delay_ms}}}}}\n"
        ),
    )
}

#[test]
fn every_shutdown_signal_during_the_start_cancels_it_and_disposes_what_was_created() {
    require(&PROBES);
    for signal in SIGNALS {
        let scratch = Scratch::new();
        let manifest = slow_probes(&scratch, 60_000, 0);
        let record = scratch.record("events.jsonl");
        let mut child = dsh()
            .args(["--config", &manifest, "exec", "--", "sleep"])
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn dsh");
        // e2b and fs are created; subprocess is creating (it records its
        // create before the delay).
        assert!(
            wait_until(LIMIT, || crate::support::read_record(&record).len() == 3),
            "probes not created"
        );
        let started = Instant::now();
        send(child.id(), signal);
        assert_eq!(exit_within(&mut child, LIMIT), Some(128 + signal));
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "signal {signal}: took {:?}",
            started.elapsed()
        );
        let disposed: Vec<String> = crate::support::read_record(&record)
            .iter()
            .filter(|event| event["event"] == "dispose")
            .map(|event| event["id"].as_str().expect("id").to_owned())
            .collect();
        assert_eq!(disposed, ["fs", "e2b"], "signal {signal}");
    }
}

#[test]
fn a_disposal_that_hangs_is_bounded_and_a_second_interrupt_abandons_it() {
    require(&PROBES);
    for second in [false, true] {
        let scratch = Scratch::new();
        let manifest = slow_probes(&scratch, 0, 600_000);
        let mut child = dsh()
            .args(["--config", &manifest, "exec", "--", "sleep"])
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn dsh");
        let record = scratch.record("events.jsonl");
        assert!(
            wait_until(LIMIT, || crate::support::read_record(&record).len() == 3),
            "probes not created"
        );
        std::thread::sleep(Duration::from_millis(300));
        let started = Instant::now();
        send(child.id(), libc::SIGINT);
        if second {
            std::thread::sleep(Duration::from_millis(700));
            send(child.id(), libc::SIGINT);
        }
        assert_eq!(exit_within(&mut child, LIMIT), Some(130));
        let took = started.elapsed();
        let limit = if second { 2 } else { 5 };
        assert!(took < Duration::from_secs(limit), "took {took:?}");
        let mut stderr = String::new();
        child
            .stderr
            .take()
            .expect("stderr")
            .read_to_string(&mut stderr)
            .expect("read stderr");
        assert!(
            stderr.contains("waiting for its plugins to release"),
            "{stderr}"
        );
        let why = if second {
            "SIGINT: disposal of"
        } else {
            "did not finish within"
        };
        assert!(stderr.contains(why), "{stderr}");
        assert!(stderr.contains("may be left running"), "{stderr}");
    }
}

#[test]
fn a_disposal_error_keeps_the_commands_exit_status() {
    require(&PROBES);
    let scratch = Scratch::new();
    let record = scratch.record("events.jsonl");
    let manifest = scratch.write(
        "fail.yaml",
        &format!(
            "- {{id: e2b, name: dsh-probe-e2b, config: {{record: {record}, failDispose: true}}}}\n\
             - {{id: fs, name: dsh-probe-fs, config: {{record: {record}}}}}\n\
             - {{id: subprocess, name: dsh-probe-subprocess, config: {{record: {record}}}}}\n"
        ),
    );
    for (argv, code) in [(vec!["exit", "0"], 0), (vec!["exit", "5"], 5)] {
        let mut args = vec!["--config", manifest.as_str(), "exec", "--"];
        args.extend(argv);
        let output = run_dsh(&args);
        let (_, stderr) = text(&output);
        assert_eq!(output.status.code(), Some(code), "{stderr}");
        assert!(stderr.contains("disposal of "), "{stderr}");
        assert!(stderr.contains("failed (\"e2b\")"), "{stderr}");
    }
}

/// `dsh ARGS… | head -c 10`, as a shell runs it: dsh's stdout is a pipe
/// whose reader closes after 10 bytes. dsh's exit code and how long it took.
pub fn piped_into_head(mut command: std::process::Command) -> (Option<i32>, Duration) {
    let mut child = command
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn dsh");
    let mut stdout = child.stdout.take().expect("stdout");
    let mut head = [0u8; 10];
    stdout.read_exact(&mut head).expect("read the first bytes");
    let closed = Instant::now();
    drop(stdout);
    let code = exit_within(&mut child, LIMIT);
    (code, closed.elapsed())
}

#[test]
fn a_closed_stdout_ends_exec_like_a_shell_pipeline() {
    require(&LOCAL);
    let marker = marker("yes");
    let mut command = dsh();
    command.args(["exec", "--", "sh", "-c", &format!("exec yes {marker}")]);
    let (code, took) = piped_into_head(command);
    // `yes` dies of SIGPIPE; dsh exits with its status.
    assert_eq!(code, Some(141));
    assert!(took < Duration::from_secs(5), "took {took:?}");
    assert!(processes_with(&marker).is_empty());
}

#[test]
fn a_closed_stdout_ends_sh_like_a_shell_pipeline() {
    require(&LOCAL);
    let marker = marker("sh-yes");
    let mut command = dsh();
    command.args(["sh", "--", "sh", "-c", &format!("exec yes {marker}")]);
    let (code, took) = piped_into_head(command);
    assert_eq!(code, Some(141));
    assert!(took < Duration::from_secs(5), "took {took:?}");
    assert!(
        wait_until(Duration::from_secs(5), || processes_with(&marker)
            .is_empty()),
        "left {:?}",
        processes_with(&marker)
    );
}

#[test]
fn piped_input_ends_an_interactive_shell_at_end_of_input() {
    require(&LOCAL);
    let mut child = dsh()
        .args(["sh", "--", "bash", "--norc", "--noprofile", "-i"])
        .env("TERM", "xterm")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn dsh sh");
    std::io::Write::write_all(
        &mut child.stdin.take().expect("stdin"),
        b"echo a-$((1+1))\n",
    )
    .expect("write");
    let mut stdout = child.stdout.take().expect("stdout");
    let reader = std::thread::spawn(move || {
        let mut screen = Vec::new();
        let _ = stdout.read_to_end(&mut screen);
        String::from_utf8_lossy(&screen).into_owned()
    });
    assert_eq!(exit_within(&mut child, LIMIT), Some(0));
    let screen = reader.join().expect("reader");
    assert!(screen.contains("a-2"), "{screen}");
}

#[test]
fn exit_codes_are_the_documented_ones() {
    require(&LOCAL);
    let scratch = Scratch::new();
    let output = run_dsh(&["exec", "--", "/tmp"]);
    assert_eq!(output.status.code(), Some(126), "{}", text(&output).1);

    let garbage = scratch.path("garbage");
    std::fs::write(
        &garbage,
        [0x7fu8, b'E', b'L', b'F', 0xde, 0xad, 0xbe, 0xef, 1, 2, 3],
    )
    .expect("write garbage");
    std::fs::set_permissions(
        &garbage,
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )
    .expect("chmod");
    let output = run_dsh(&["exec", "--", garbage.to_str().expect("utf-8")]);
    assert_eq!(output.status.code(), Some(126), "{}", text(&output).1);

    let empty = scratch.write("empty.yaml", "plugins: []\n");
    let output = run_dsh(&["--config", &empty, "check"]);
    assert_eq!(output.status.code(), Some(0), "{}", text(&output).1);
    let output = run_dsh(&["--config", &empty, "exec", "--", "true"]);
    let (_, stderr) = text(&output);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("provides subprocess"), "{stderr}");
}

/// A `dsh` command line for a shell (tmux runs its command through one).
pub fn dsh_command_line(args: &[&str]) -> String {
    let quote = |word: &str| format!("'{}'", word.replace('\'', r"'\''"));
    let mut line = format!(
        "env -u RUST_LOG DSH_PLUGIN_PATH={} {}",
        quote(&crate::support::plugin_dir().display().to_string()),
        quote(&crate::support::dsh_binary().display().to_string())
    );
    for arg in args {
        line.push(' ');
        line.push_str(&quote(arg));
    }
    line
}

/// Runs `command_line` in a detached tmux session on a tmux server of its
/// own, waits for `started`, then kills the session — the terminal closes
/// under dsh, as when a user closes the window or an SSH link drops.
pub fn close_the_terminal_under(command_line: &str, started: impl FnMut() -> bool) {
    let socket = format!("dsh-test-{}", std::process::id());
    let tmux = |args: &[&str]| {
        std::process::Command::new("tmux")
            .args(["-L", &socket])
            .args(args)
            .status()
            .expect("run tmux")
    };
    assert!(tmux(&["new-session", "-d", "-s", "t", command_line]).success());
    assert!(wait_until(LIMIT, started), "the command did not start");
    assert!(tmux(&["kill-session", "-t", "t"]).success());
    let _ = tmux(&["kill-server"]);
}

#[test]
fn closing_the_terminal_leaves_no_process() {
    require(&LOCAL);
    let marker = marker("tmux");
    let line = dsh_command_line(&["exec", "--", "sh", "-c", &format!("sleep 1000; : {marker}")]);
    close_the_terminal_under(&line, || processes_with(&marker).len() >= 3);
    assert!(
        wait_until(Duration::from_secs(10), || processes_with(&marker)
            .is_empty()),
        "left {:?}",
        processes_with(&marker)
    );
}
