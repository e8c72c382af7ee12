//! `dsh sh` in a real terminal: we allocate a PTY, run `dsh sh` as its
//! session leader, and type into it like a person.

use std::time::Duration;

use crate::support::pty::PtySession;
use crate::support::{dsh, require};

const LOCAL: [&str; 2] = ["dsh-fs-local", "dsh-subprocess-local"];
const LIMIT: Duration = Duration::from_secs(20);

fn start() -> PtySession {
    require(&LOCAL);
    let mut command = dsh();
    command
        .args(["sh", "--", "bash", "--norc", "--noprofile", "-i"])
        .env("TERM", "xterm")
        .env("PS1", "dsh-test$ ");
    let session = PtySession::spawn(command, 80, 24);
    session.expect_from(0, "$ ", LIMIT);
    session
}

#[test]
fn typed_input_echoes_and_runs() {
    let mut session = start();
    let mark = session.len();
    // The split quote proves the output comes from the shell, not the echo.
    session.send(b"echo hel''lo-from-sh\r");
    let echoed = session.expect_from(mark, "echo hel''lo-from-sh", LIMIT);
    session.expect_from(echoed, "hello-from-sh", LIMIT);
    session.send(b"exit 3\r");
    assert_eq!(session.wait(LIMIT), Some(3));
}

#[test]
fn a_resize_is_visible_to_tput_cols() {
    let mut session = start();
    let mark = session.len();
    session.send(b"echo cols=$(tput cols)\r");
    session.expect_from(mark, "cols=80", LIMIT);
    session.resize(123, 40);
    // SIGWINCH reaches dsh, which resizes the world's terminal; poll until
    // the shell sees it (the resize is asynchronous). The arithmetic keeps
    // the result ("now=1123") distinct from the echoed command line.
    let mut seen = false;
    for _ in 0..20 {
        let mark = session.len();
        session.send(b"echo now=$(( $(tput cols) + 1000 ))\r");
        if session
            .try_expect_from(mark, "now=1123", Duration::from_millis(500))
            .is_some()
        {
            seen = true;
            break;
        }
    }
    assert!(
        seen,
        "tput cols never reported 123; screen:\n{}",
        session.screen()
    );
    session.send(b"exit\r");
    assert_eq!(session.wait(LIMIT), Some(0));
}

#[test]
fn ctrl_c_interrupts_the_foreground_job_and_the_shell_survives() {
    let mut session = start();
    let mark = session.len();
    // An odd duration names this job among every process on the host.
    session.send(b"sleep 30.0421\r");
    session.expect_from(mark, "sleep 30.0421", LIMIT);
    // Interrupt only once the job runs sleep: between bash's tcsetpgrp and the exec, bash's
    // forked child would swallow the SIGINT.
    assert!(
        crate::support::wait_until(LIMIT, running_sleep_30_0421),
        "the job never ran sleep 30.0421"
    );
    let before = std::time::Instant::now();
    // Ctrl-C as a byte: the world's terminal turns it into SIGINT for its
    // foreground job; the shell prompts again and takes the next line.
    session.send(b"\x03");
    let mark = session.len();
    session.send(b"echo alive-$((40+2))\r");
    session.expect_from(mark, "alive-42", LIMIT);
    assert!(
        before.elapsed() < Duration::from_secs(10),
        "Ctrl-C did not interrupt sleep"
    );
    session.send(b"exit 0\r");
    assert_eq!(session.wait(LIMIT), Some(0));
}

#[test]
fn piped_input_ends_with_end_of_file_and_the_shell_exits() {
    require(&LOCAL);
    let mut child = dsh()
        .args(["sh", "--", "sh"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("spawn dsh sh");
    std::io::Write::write_all(
        &mut child.stdin.take().expect("stdin"),
        b"echo piped-$((1+1))\n",
    )
    .expect("write");
    let output = child.wait_with_output().expect("wait");
    let screen = String::from_utf8_lossy(&output.stdout);
    assert_eq!(output.status.code(), Some(0), "{screen}");
    assert!(screen.contains("piped-2"), "{screen}");
}

/// Whether some process on the host runs `sleep 30.0421`.
fn running_sleep_30_0421() -> bool {
    std::fs::read_dir("/proc").is_ok_and(|entries| {
        entries.flatten().any(|entry| {
            std::fs::read(entry.path().join("cmdline"))
                .is_ok_and(|cmdline| cmdline == b"sleep\x0030.0421\x00")
        })
    })
}
