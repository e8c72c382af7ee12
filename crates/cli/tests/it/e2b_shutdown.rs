//! The same shutdown and pipeline guarantees on the E2B composition, as a
//! user runs it (`dsh --config config/e2b-local.yaml …`) against a real
//! e2b-local server: every shutdown signal at several moments leaves no
//! sandbox and no process (both counted), a frozen server cannot hold a
//! Ctrl-C for more than 5 s, and a closed stdout ends the command.

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use e2b_local::harness::LocalServer;

use crate::shutdown::{
    close_the_terminal_under, dsh_command_line, exit_within, piped_into_head, processes_with, send,
};
use crate::support::pty::PtySession;
use crate::support::{config_dir, dsh, require, wait_until};

const E2B: [&str; 3] = ["dsh-e2b-owner", "dsh-fs-e2b", "dsh-subprocess-e2b"];
const SIGNALS: [i32; 4] = [libc::SIGHUP, libc::SIGQUIT, libc::SIGINT, libc::SIGTERM];
const LIMIT: Duration = Duration::from_secs(60);

/// `dsh --config config/e2b-local.yaml ARGS…` against `server`.
pub fn dsh_e2b(server: &LocalServer, args: &[&str]) -> Command {
    require(&E2B);
    let mut command = dsh();
    command
        .arg("--config")
        .arg(config_dir().join("e2b-local.yaml"))
        .args(args)
        .envs(server.env());
    command
}

/// The sandboxes the server lists (its API, as a client sees them).
pub fn sandboxes(server: &LocalServer) -> usize {
    let output = Command::new("curl")
        .args(["-sSf", "-m", "10", "-H"])
        .arg(format!("X-API-Key: {}", server.api_key()))
        .arg(format!("{}/sandboxes", server.api_url()))
        .output()
        .expect("run curl");
    assert!(output.status.success(), "list sandboxes: {output:?}");
    let list: serde_json::Value = serde_json::from_slice(&output.stdout).expect("sandbox list");
    list.as_array().expect("a list").len()
}

/// Whether the world runs the command with `marker` (dsh's own argv
/// carries it too, so dsh is not counted).
fn running(marker: &str, dsh: u32) -> bool {
    processes_with(marker).iter().any(|pid| *pid != dsh)
}

/// Spawns `dsh exec -- sh -c 'sleep 1000; : MARKER'` against `server`.
fn spawn_marked_sleep(server: &LocalServer, marker: &str, stderr: Stdio) -> Child {
    dsh_e2b(
        server,
        &["exec", "--", "sh", "-c", &format!("sleep 1000; : {marker}")],
    )
    .stderr(stderr)
    .spawn()
    .expect("spawn dsh")
}

/// [`spawn_marked_sleep`], returned once the world runs the command.
fn start_marked_sleep(server: &LocalServer, marker: &str, stderr: Stdio) -> Child {
    let child = spawn_marked_sleep(server, marker, stderr);
    assert!(
        wait_until(LIMIT, || running(marker, child.id())),
        "the command did not start"
    );
    child
}

fn marker(tag: &str) -> String {
    format!("dsh-e2b-shutdown-{}-{tag}", std::process::id())
}

/// After dsh exited: the sandbox is gone and so is every process that ran
/// in it.
fn assert_nothing_left(server: &LocalServer, marker: &str, moment: &str) {
    assert!(
        wait_until(Duration::from_secs(10), || sandboxes(server) == 0),
        "{moment}: {} sandbox(es) left",
        sandboxes(server)
    );
    assert!(
        wait_until(Duration::from_secs(10), || processes_with(marker)
            .is_empty()),
        "{moment}: processes left: {:?}",
        processes_with(marker)
    );
}

#[test]
fn every_shutdown_signal_during_a_command_kills_the_sandbox() {
    let server = LocalServer::start();
    for signal in SIGNALS {
        let marker = marker(&format!("command-{signal}"));
        let mut child = start_marked_sleep(&server, &marker, Stdio::null());
        send(child.id(), signal);
        assert_eq!(exit_within(&mut child, LIMIT), Some(128 + signal));
        assert_nothing_left(
            &server,
            &marker,
            &format!("signal {signal} during a command"),
        );
    }
}

#[test]
fn every_shutdown_signal_during_the_start_leaves_no_sandbox() {
    let server = LocalServer::start();
    for signal in SIGNALS {
        for delay_ms in [50, 400] {
            let marker = marker(&format!("start-{signal}-{delay_ms}"));
            let mut child = spawn_marked_sleep(&server, &marker, Stdio::null());
            std::thread::sleep(Duration::from_millis(delay_ms));
            send(child.id(), signal);
            let code = exit_within(&mut child, LIMIT);
            // Before dsh installed its handlers the signal's default
            // action ends it, before anything was created.
            assert!(
                code == Some(128 + signal) || code.is_none(),
                "signal {signal} after {delay_ms} ms: exit {code:?}"
            );
            assert_nothing_left(
                &server,
                &marker,
                &format!("signal {signal} {delay_ms} ms into the start"),
            );
        }
    }
}

#[test]
fn every_shutdown_signal_during_a_terminal_kills_the_sandbox() {
    let server = LocalServer::start();
    for signal in SIGNALS {
        let marker = marker(&format!("terminal-{signal}"));
        let mut command = dsh_e2b(
            &server,
            &["sh", "--", "sh", "-c", &format!("sleep 1000; : {marker}")],
        );
        command.env("TERM", "xterm");
        let mut session = PtySession::spawn(command, 80, 24);
        assert!(
            wait_until(LIMIT, || running(&marker, session.pid())),
            "the terminal did not start"
        );
        send(session.pid(), signal);
        assert_eq!(session.wait(LIMIT), Some(128 + signal));
        assert_nothing_left(
            &server,
            &marker,
            &format!("signal {signal} during a terminal"),
        );
    }
}

/// SIGSTOPs the server while alive; SIGCONT on drop, so that the harness
/// can stop it.
struct Frozen(u32);

impl Frozen {
    fn freeze(server: &LocalServer) -> Frozen {
        send(server.pid(), libc::SIGSTOP);
        Frozen(server.pid())
    }
}

impl Drop for Frozen {
    fn drop(&mut self) {
        send(self.0, libc::SIGCONT);
    }
}

#[test]
fn a_frozen_server_cannot_hold_the_first_interrupt_beyond_5_seconds() {
    let server = LocalServer::start();

    // Frozen while a command runs: the disposal cannot reach the server.
    let marker = marker("frozen-command");
    let mut child = start_marked_sleep(&server, &marker, Stdio::piped());
    let frozen = Frozen::freeze(&server);
    let interrupted = Instant::now();
    send(child.id(), libc::SIGINT);
    assert_eq!(exit_within(&mut child, LIMIT), Some(130));
    assert!(
        interrupted.elapsed() < Duration::from_secs(5),
        "took {:?}",
        interrupted.elapsed()
    );
    let stderr = child.wait_with_output().expect("stderr").stderr;
    let stderr = String::from_utf8_lossy(&stderr);
    // It says what it waited for and what may be left: the sandbox by id.
    assert!(
        stderr.contains("waiting for its plugins to release sandbox "),
        "{stderr}"
    );
    assert!(stderr.contains("may be left running"), "{stderr}");
    drop(frozen);

    // Frozen before the start: the create never answers.
    let frozen = Frozen::freeze(&server);
    let mut child = dsh_e2b(&server, &["exec", "--", "true"])
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn dsh");
    std::thread::sleep(Duration::from_millis(1000));
    let interrupted = Instant::now();
    send(child.id(), libc::SIGINT);
    assert_eq!(exit_within(&mut child, LIMIT), Some(130));
    assert!(
        interrupted.elapsed() < Duration::from_secs(5),
        "took {:?}",
        interrupted.elapsed()
    );
    drop(frozen);
}

#[test]
fn a_closed_stdout_ends_an_e2b_command_like_a_shell_pipeline() {
    let server = LocalServer::start();
    let marker = marker("yes");
    let command = dsh_e2b(
        &server,
        &["exec", "--", "sh", "-c", &format!("exec yes {marker}")],
    );
    let (code, took) = piped_into_head(command);
    assert_eq!(code, Some(141));
    assert!(took < Duration::from_secs(5), "took {took:?}");
    assert_nothing_left(&server, &marker, "a closed stdout");
}

#[test]
fn a_server_killed_mid_command_is_one_clear_line() {
    let server = LocalServer::start();
    let marker = marker("killed-server");
    let mut child = start_marked_sleep(&server, &marker, Stdio::piped());
    send(server.pid(), libc::SIGKILL);
    assert_eq!(exit_within(&mut child, LIMIT), Some(1));
    let stderr = child.wait_with_output().expect("stderr").stderr;
    let stderr = String::from_utf8_lossy(&stderr);
    // What failed and the sandbox by id, once; the causes at --log debug.
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(stderr.starts_with("dsh: exec sh: "), "{stderr}");
    assert!(stderr.contains("; sandbox "), "{stderr}");
    assert!(stderr.contains("may be left running"), "{stderr}");
    assert!(stderr.contains("--log debug"), "{stderr}");
    assert!(stderr.len() < 600, "{} bytes: {stderr}", stderr.len());
    // The killed server cannot clean up its sandbox's processes.
    for pid in processes_with(&marker) {
        send(pid, libc::SIGKILL);
    }
}

#[test]
fn closing_the_terminal_kills_the_sandbox() {
    require(&E2B);
    let server = LocalServer::start();
    let marker = marker("tmux");
    let config = config_dir().join("e2b-local.yaml");
    let mut line = String::from("env");
    for (name, value) in server.env() {
        line.push_str(&format!(" {name}='{value}'"));
    }
    line.push(' ');
    line.push_str(&dsh_command_line(&[
        "--config",
        config.to_str().expect("utf-8 path"),
        "exec",
        "--",
        "sh",
        "-c",
        &format!("sleep 1000; : {marker}"),
    ]));
    // tmux's shell, dsh, and the command in the sandbox.
    close_the_terminal_under(&line, || processes_with(&marker).len() >= 3);
    assert_nothing_left(&server, &marker, "a closed terminal");
}

#[test]
fn a_closed_stdout_ends_an_e2b_terminal_and_piped_input_ends_it_at_end_of_input() {
    let server = LocalServer::start();
    let marker = marker("sh-yes");
    let command = dsh_e2b(
        &server,
        &["sh", "--", "sh", "-c", &format!("exec yes {marker}")],
    );
    let (code, took) = piped_into_head(command);
    assert_eq!(code, Some(141));
    assert!(took < Duration::from_secs(5), "took {took:?}");
    assert_nothing_left(&server, &marker, "a closed stdout of sh");

    let mut child = dsh_e2b(
        &server,
        &["sh", "--", "bash", "--norc", "--noprofile", "-i"],
    )
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
    assert_eq!(exit_within(&mut child, LIMIT), Some(0));
    let mut screen = String::new();
    std::io::Read::read_to_string(&mut child.stdout.take().expect("stdout"), &mut screen)
        .expect("read the screen");
    assert!(screen.contains("a-2"), "{screen}");
}
