//! `dsh code` as a user drives it: a program from a file or stdin, its output and returned
//! value on stdout, several files in one session, a raise as exit 1 with the traceback on
//! stderr, the bindings' declaration, and Ctrl-C in the middle of a program.

use std::io::Write;
use std::process::Stdio;
use std::time::Duration;

use crate::shutdown::{exit_within, processes_with, send};
use crate::support::{dsh, require, wait_until};

#[test]
fn programs_run_from_files_and_stdin_and_say_how_they_ended() {
    let dir = tempfile::tempdir().expect("temp dir");
    std::fs::write(dir.path().join("notes.txt"), "alpha\nbeta\nalpha again\n").expect("write");
    std::fs::write(
        dir.path().join("set.py"),
        "count = len(dsh.grep(pattern='alpha', path='notes.txt')['matches'])\n",
    )
    .expect("write");
    std::fs::write(dir.path().join("get.py"), "print('counted')\ncount + 1\n").expect("write");
    let output = dsh()
        .args(["code", "run", "set.py", "get.py"])
        .current_dir(dir.path())
        .output()
        .expect("dsh code run");
    assert!(output.status.success(), "{output:?}");
    assert_eq!(String::from_utf8_lossy(&output.stdout), "counted\n3\n");

    let mut child = dsh()
        .args(["code", "run", "--lang", "typescript", "-"])
        .current_dir(dir.path())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("dsh code run -");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(
            b"const n: number = 2;\nif (n > 1) {\n  throw new RangeError(`too many: ${n}`);\n}\n",
        )
        .expect("write the program");
    let output = child.wait_with_output().expect("wait");
    assert_eq!(output.status.code(), Some(1), "{output:?}");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("RangeError: too many: 2"), "{stderr}");
    assert!(stderr.contains("run-1.ts:3"), "the user's line: {stderr}");

    let output = dsh()
        .args(["code", "types", "--lang", "python"])
        .output()
        .expect("dsh code types");
    assert!(output.status.success());
    assert!(String::from_utf8_lossy(&output.stdout).contains("def read_file(*, path: str"));
}

/// Ctrl-C while a program runs: dsh exits 130 (interrupted), and the program, its child, a
/// process it started that left its group and session (setsid), and the runner programs'
/// directory in the world are all gone.
#[test]
fn ctrl_c_ends_the_program_and_everything_it_started() {
    require(&["dsh-fs-local", "dsh-subprocess-local"]);
    let dir = tempfile::tempdir().expect("temp dir");
    let marker = format!("86395.{}", std::process::id());
    let record = dir.path().join("runner-dir");
    // The escaped sleep is waited for (its shell returns before it runs).
    let program = format!(
        "import os, subprocess, sys, time\n\
         subprocess.Popen(['sleep', '{marker}'])\n\
         escaped = subprocess.run('setsid sleep {marker}1 > /dev/null 2>&1 < /dev/null & echo $!', shell=True, capture_output=True, text=True)\n\
         cmdline = f'/proc/{{int(escaped.stdout)}}/cmdline'\n\
         while not (os.path.exists(cmdline) and b'{marker}1' in open(cmdline, 'rb').read()):\n    time.sleep(0.01)\n\
         with open({partial:?}, 'w') as f:\n    f.write(os.path.dirname(os.path.abspath(sys.argv[0])))\n\
         os.rename({partial:?}, {record:?})\n\
         time.sleep(300)\n",
        partial = dir.path().join("partial"),
        record = record,
    );
    std::fs::write(dir.path().join("wait.py"), program).expect("write");
    let mut child = dsh()
        .args(["code", "run", "wait.py"])
        .current_dir(dir.path())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("dsh code run");
    let limit = Duration::from_secs(20);
    assert!(
        wait_until(limit, || record.exists()),
        "the program did not start"
    );
    let runner_dir = std::fs::read_to_string(&record).expect("the runner's directory");
    assert!(runner_dir.starts_with("/tmp/dsh-code-"), "{runner_dir}");
    assert_eq!(
        processes_with(&marker).len(),
        2,
        "the child and the escaped process run"
    );
    send(child.id(), libc::SIGINT);
    assert_eq!(
        exit_within(&mut child, limit),
        Some(130),
        "exit code: interrupted"
    );
    assert!(
        wait_until(Duration::from_secs(3), || processes_with(&marker)
            .is_empty()),
        "left running: {:?}",
        processes_with(&marker)
    );
    assert!(
        !std::path::Path::new(&runner_dir).exists(),
        "the runner programs' directory {runner_dir} was left"
    );
}
