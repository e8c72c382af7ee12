//! `dsh exec` on the embedded local composition: output streamed, the
//! child's exit code, 128+signal, clear errors for missing programs.

use std::io::Write;
use std::process::Stdio;

use crate::support::{dsh, require, run_dsh, text};

const LOCAL: [&str; 2] = ["dsh-fs-local", "dsh-subprocess-local"];

#[test]
fn output_is_streamed_and_the_exit_code_is_the_childs() {
    require(&LOCAL);
    let output = run_dsh(&["exec", "--", "sh", "-c", "echo out; echo err >&2; exit 7"]);
    let (stdout, stderr) = text(&output);
    assert_eq!(output.status.code(), Some(7), "{stderr}");
    assert_eq!(stdout, "out\n");
    assert_eq!(stderr, "err\n");

    let output = run_dsh(&["exec", "--", "uname", "-s"]);
    assert_eq!(output.status.code(), Some(0));
    assert_eq!(text(&output).0, "Linux\n");
}

#[test]
fn a_signal_death_exits_128_plus_the_signal() {
    require(&LOCAL);
    let output = run_dsh(&["exec", "--", "sh", "-c", "kill -KILL $$"]);
    assert_eq!(output.status.code(), Some(128 + 9));
    let output = run_dsh(&["exec", "--", "sh", "-c", "kill -TERM $$"]);
    assert_eq!(output.status.code(), Some(128 + 15));
}

#[test]
fn a_missing_program_is_a_clear_error() {
    require(&LOCAL);
    let output = run_dsh(&["exec", "--", "dsh-no-such-program", "arg"]);
    let (stdout, stderr) = text(&output);
    assert_eq!(output.status.code(), Some(127), "{stderr}");
    assert!(stdout.is_empty());
    assert!(
        stderr.starts_with("dsh: exec dsh-no-such-program: "),
        "{stderr}"
    );
    // One line that names the program once.
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert_eq!(stderr.matches("dsh-no-such-program").count(), 1, "{stderr}");
    assert!(stderr.contains("command not found"), "{stderr}");
}

#[test]
fn a_closed_stderr_keeps_the_exit_code() {
    require(&LOCAL);
    let output = dsh()
        .args(["exec", "--", "dsh-no-such-program"])
        .stderr(closed_pipe())
        .output()
        .expect("run dsh");
    assert_eq!(output.status.code(), Some(127));
}

/// The write end of a pipe whose read end is already closed: every write
/// to it fails with EPIPE (dsh ignores SIGPIPE), deterministically.
pub fn closed_pipe() -> Stdio {
    let (read, write) = std::io::pipe().expect("pipe");
    drop(read);
    Stdio::from(write)
}

#[test]
fn invalid_argv_and_env_are_usage_errors() {
    require(&LOCAL);
    let output = run_dsh(&["exec", "--", "bin/relative"]);
    assert_eq!(output.status.code(), Some(2), "{}", text(&output).1);
    assert!(
        text(&output).1.contains("exec bin/relative: "),
        "{}",
        text(&output).1
    );
    let output = run_dsh(&["exec", "--env", "NOEQUALS", "--", "true"]);
    assert_eq!(output.status.code(), Some(2));
    assert!(
        text(&output)
            .1
            .contains("--env \"NOEQUALS\": expected NAME=VALUE")
    );
}

#[test]
fn stdin_env_and_cwd_reach_the_child() {
    require(&LOCAL);
    let dir = tempfile::tempdir().expect("tempdir");
    let mut child = dsh()
        .args(["exec", "--cwd"])
        .arg(dir.path())
        .args([
            "--env",
            "GREETING=hello",
            "--",
            "sh",
            "-c",
            "pwd; echo $GREETING; cat",
        ])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("spawn dsh");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(b"from stdin\n")
        .expect("write stdin");
    let output = child.wait_with_output().expect("wait");
    assert_eq!(output.status.code(), Some(0));
    assert_eq!(
        String::from_utf8_lossy(&output.stdout),
        format!(
            "{}\nhello\nfrom stdin\n",
            dir.path().canonicalize().expect("canonical").display()
        )
    );
}

#[test]
fn a_null_stdin_reaches_the_child_as_one_and_a_pipe_as_a_pipe() {
    require(&LOCAL);
    let stdin_of = |stdin: Stdio| {
        let output = dsh()
            .args(["exec", "--", "readlink", "/proc/self/fd/0"])
            .stdin(stdin)
            .output()
            .expect("run dsh");
        assert_eq!(output.status.code(), Some(0), "{output:?}");
        text(&output).0
    };
    assert_eq!(stdin_of(Stdio::null()), "/dev/null\n");
    assert!(stdin_of(Stdio::piped()).starts_with("pipe:["));
}
