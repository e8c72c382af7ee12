//! `dsh code` as a user drives it: a program from a file or stdin, its output and returned
//! value on stdout, several files in one session, a raise as exit 1 with the traceback on
//! stderr, and the bindings' declaration.

use std::io::Write;
use std::process::Stdio;

use crate::support::dsh;

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
