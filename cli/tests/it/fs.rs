//! `dsh fs …` on the embedded local composition.

use std::io::Write;
use std::process::Stdio;

use crate::exec::closed_pipe;
use crate::support::{dsh, require, run_dsh, text};

const LOCAL: [&str; 2] = ["dsh-fs-local", "dsh-subprocess-local"];

fn ok(args: &[&str]) -> String {
    let output = run_dsh(args);
    let (stdout, stderr) = text(&output);
    assert!(output.status.success(), "dsh {args:?}: {stderr}");
    stdout
}

fn fails(args: &[&str], code: i32, needle: &str) {
    let output = run_dsh(args);
    let (_, stderr) = text(&output);
    assert_eq!(output.status.code(), Some(code), "dsh {args:?}: {stderr}");
    assert!(
        stderr.contains(needle),
        "dsh {args:?}: {needle:?} not in {stderr}"
    );
}

#[test]
fn write_cat_stat_edit_ls_mv_rm_mkdir() {
    require(&LOCAL);
    let dir = tempfile::tempdir().expect("tempdir");
    let root = dir.path().display().to_string();
    let file = format!("{root}/a/b/note.txt");

    // write creates parents; prints the committed version.
    let version = ok(&["fs", "write", &file, "hello world\n"]);
    assert!(!version.trim().is_empty());
    assert_eq!(ok(&["fs", "cat", &file]), "hello world\n");

    // stat: human and JSON; the version matches the write's.
    let stat = ok(&["fs", "stat", &file]);
    assert!(stat.contains("kind:     file"), "{stat}");
    assert!(stat.contains("size:     12"), "{stat}");
    let json: serde_json::Value =
        serde_json::from_str(&ok(&["fs", "stat", &file, "--json"])).expect("JSON");
    assert_eq!(json["kind"], "file");
    assert_eq!(json["size"], 12);
    assert_eq!(json["version"], version.trim());

    // Guards: create-new on an existing file, a stale version.
    fails(
        &["fs", "write", "--create-new", &file, "x"],
        1,
        &format!("write {file}: "),
    );
    let edited = ok(&[
        "fs",
        "edit",
        "--if-version",
        version.trim(),
        &file,
        "world",
        "there",
    ]);
    assert_ne!(edited.trim(), version.trim());
    assert_eq!(ok(&["fs", "cat", &file]), "hello there\n");
    fails(
        &[
            "fs",
            "write",
            "--if-version",
            version.trim(),
            &file,
            "stale",
        ],
        1,
        &format!("write {file}: "),
    );
    // An edit that does not match is refused and changes nothing.
    fails(
        &["fs", "edit", &file, "absent", "x"],
        2,
        &format!("edit {file}: "),
    );
    assert_eq!(ok(&["fs", "cat", &file]), "hello there\n");

    // write from stdin
    let mut child = dsh()
        .args(["fs", "write", &format!("{root}/stdin.txt")])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("spawn");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(b"piped\n")
        .expect("write");
    assert!(child.wait_with_output().expect("wait").status.success());
    assert_eq!(ok(&["fs", "cat", &format!("{root}/stdin.txt")]), "piped\n");

    // mkdir, mv, ls
    ok(&["fs", "mkdir", &format!("{root}/x/y")]);
    ok(&["fs", "mv", &file, &format!("{root}/x/y/moved.txt")]);
    assert_eq!(ok(&["fs", "ls", &format!("{root}/x/y")]), "moved.txt\n");
    assert_eq!(ok(&["fs", "ls", &root]), "a/\nstdin.txt\nx/\n");
    let listing: serde_json::Value =
        serde_json::from_str(&ok(&["fs", "ls", &root, "--json"])).expect("JSON");
    assert_eq!(listing[0]["name"], "a");
    assert_eq!(listing[0]["kind"], "directory");

    // rm: recursive; a missing path fails unless --force.
    ok(&["fs", "rm", &format!("{root}/x")]);
    fails(
        &["fs", "rm", &format!("{root}/x")],
        1,
        "not found (use --force",
    );
    ok(&["fs", "rm", "--force", &format!("{root}/x")]);
}

#[test]
fn missing_paths_and_binary_files_are_clear_errors() {
    require(&LOCAL);
    let dir = tempfile::tempdir().expect("tempdir");
    let missing = format!("{}/missing", dir.path().display());
    fails(&["fs", "stat", &missing], 1, &format!("stat {missing}: "));
    fails(&["fs", "cat", &missing], 1, &format!("cat {missing}: "));
    fails(&["fs", "ls", &missing], 1, &format!("ls {missing}: "));
    // cat is byte-exact, binary included.
    let binary = dir.path().join("bin.dat");
    std::fs::write(&binary, [0u8, 159, 146, 150, 10]).expect("write");
    let output = run_dsh(&["fs", "cat", &binary.display().to_string()]);
    assert!(output.status.success());
    assert_eq!(output.stdout, [0u8, 159, 146, 150, 10]);
}

/// `dsh fs write PATH` with `len` bytes on stdin; the writer ignores the
/// pipe closing early (dsh stops reading past its cap).
fn write_from_stdin(path: &str, len: usize) -> std::process::Output {
    let mut child = dsh()
        .args(["fs", "write", path])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    let mut stdin = child.stdin.take().expect("stdin");
    let feeder = std::thread::spawn(move || {
        let chunk = vec![b'x'; 1 << 20];
        let mut left = len;
        while left > 0 {
            let n = left.min(chunk.len());
            if stdin.write_all(&chunk[..n]).is_err() {
                break;
            }
            left -= n;
        }
    });
    let output = child.wait_with_output().expect("wait");
    feeder.join().expect("feeder");
    output
}

#[test]
fn stdin_beyond_the_write_cap_is_refused_and_writes_nothing() {
    require(&LOCAL);
    let dir = tempfile::tempdir().expect("tempdir");
    let cap = 64 << 20;
    let big = format!("{}/big.dat", dir.path().display());
    let output = write_from_stdin(&big, cap + 1);
    let (_, stderr) = text(&output);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains(&format!(
            "write {big}: stdin is larger than the 64 MiB limit of `fs write`; nothing was written"
        )),
        "{stderr}"
    );
    assert!(!std::path::Path::new(&big).exists());
    // Exactly the cap is written whole.
    let output = write_from_stdin(&big, cap);
    assert!(output.status.success(), "{}", text(&output).1);
    assert_eq!(std::fs::metadata(&big).expect("stat").len(), cap as u64);
}

#[test]
fn a_closed_stdout_ends_dsh_quietly_with_141() {
    require(&LOCAL);
    let dir = tempfile::tempdir().expect("tempdir");
    for name in ["a", "b", "c"] {
        std::fs::write(dir.path().join(name), name).expect("write");
    }
    let path = dir.path().display().to_string();
    let file = format!("{path}/a");
    for args in [
        vec!["fs", "ls", &path],
        vec!["fs", "stat", &file],
        vec!["fs", "cat", &file],
        vec!["fs", "ls", "--json", &path],
        vec!["plugins"],
    ] {
        let output = dsh()
            .args(&args)
            .stdout(closed_pipe())
            .output()
            .expect("run dsh");
        let (_, stderr) = text(&output);
        // 128 + SIGPIPE, as a shell reports `ls | head` ending early; no
        // panic, no message.
        assert_eq!(output.status.code(), Some(141), "dsh {args:?}: {stderr}");
        assert_eq!(stderr, "", "dsh {args:?}");
    }
}

#[test]
fn stat_shows_rfc3339_times_and_json_keeps_raw_seconds() {
    require(&LOCAL);
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("old.txt");
    std::fs::write(&file, "x").expect("write");
    // 2001-09-09T01:46:40.250Z
    let modified = std::time::UNIX_EPOCH + std::time::Duration::from_millis(1_000_000_000_250);
    std::fs::File::options()
        .write(true)
        .open(&file)
        .and_then(|handle| handle.set_modified(modified))
        .expect("set mtime");
    let file = file.display().to_string();
    let stat = ok(&["fs", "stat", &file]);
    assert!(
        stat.contains("modified: 2001-09-09T01:46:40.250Z\n"),
        "{stat}"
    );
    let json: serde_json::Value =
        serde_json::from_str(&ok(&["fs", "stat", "--json", &file])).expect("JSON");
    assert_eq!(json["modified"], 1_000_000_000.25);
}
