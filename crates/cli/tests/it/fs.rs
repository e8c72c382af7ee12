//! `dsh fs …` on the embedded local composition.

use std::io::Write;
use std::process::{Command, Stdio};
use std::time::Duration;

use crate::exec::closed_pipe;
use crate::support::{dsh, require, run_dsh, text, wait_until};

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
    // An edit that does not match is refused and changes nothing: a failed
    // operation (1), not a usage error (2).
    fails(
        &["fs", "edit", &file, "absent", "x"],
        1,
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

/// `len` bytes of a pattern that changes every byte (so a dropped,
/// doubled or reordered chunk shows), from `offset`.
fn pattern(offset: usize, len: usize) -> Vec<u8> {
    (offset..offset + len).map(|i| (i % 251) as u8).collect()
}

/// The peak resident memory of process `pid` (`VmHWM`), in bytes.
fn peak_rss(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("status");
    let line = status
        .lines()
        .find(|line| line.starts_with("VmHWM:"))
        .expect("VmHWM");
    let kib: u64 = line
        .split_whitespace()
        .nth(1)
        .and_then(|kib| kib.parse().ok())
        .expect("VmHWM kB");
    kib * 1024
}

/// The most memory dsh may hold while streaming a write: its own baseline
/// plus a few chunks, far below the content.
const STREAMED_WRITE_PEAK: u64 = 96 << 20;

/// Feeds `len` bytes of [`pattern`] in 1 MiB pieces into `command` (a
/// `dsh … fs write --json PATH`), then checks that it succeeded, reported
/// `len` bytes, and that dsh's peak memory — measured once everything was
/// fed, before its stdin closes — stayed under [`STREAMED_WRITE_PEAK`].
pub fn assert_streamed_write(mut command: Command, len: usize) {
    let mut child = command
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    let mut stdin = child.stdin.take().expect("stdin");
    let mut fed = 0;
    while fed < len {
        let piece = pattern(fed, (len - fed).min(1 << 20));
        stdin.write_all(&piece).expect("feed dsh");
        fed += piece.len();
    }
    let peak = peak_rss(child.id());
    drop(stdin);
    let output = child.wait_with_output().expect("wait");
    let (stdout, stderr) = text(&output);
    assert!(output.status.success(), "{stderr}");
    let report: serde_json::Value = serde_json::from_str(&stdout).expect("json");
    assert_eq!(report["bytes"], len as u64, "{stdout}");
    assert!(
        peak < STREAMED_WRITE_PEAK,
        "dsh peaked at {} MiB while streaming {} MiB",
        peak >> 20,
        len >> 20
    );
}

#[test]
fn stdin_streams_into_an_atomic_write_of_any_size_in_bounded_memory() {
    require(&LOCAL);
    let dir = tempfile::tempdir().expect("tempdir");
    let big = format!("{}/big.dat", dir.path().display());
    let mut command = dsh();
    command.args(["fs", "write", "--json", &big]);
    assert_streamed_write(command, 256 << 20);
    let written = std::fs::read(&big).expect("read");
    assert_eq!(written.len(), 256 << 20);
    assert!(written == pattern(0, written.len()), "content differs");
}

#[test]
fn an_interrupted_stdin_write_publishes_nothing() {
    require(&LOCAL);
    let dir = tempfile::tempdir().expect("tempdir");
    let target = dir.path().join("target");
    std::fs::write(&target, "old").expect("write");
    let path = target.display().to_string();
    let mut child = dsh()
        .args(["fs", "write", &path])
        .stdin(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    let mut stdin = child.stdin.take().expect("stdin");
    stdin.write_all(&pattern(0, 8 << 20)).expect("feed dsh");
    // The staging directory holds what was fed so far.
    let staged = || {
        std::fs::read_dir(dir.path())
            .expect("list")
            .filter(|entry| entry.as_ref().is_ok_and(|e| e.file_name() != "target"))
            .count()
    };
    assert!(wait_until(Duration::from_secs(10), || staged() == 1));
    // SAFETY: kill(2) on a child we spawned and have not waited for.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let output = child.wait_with_output().expect("wait");
    assert_eq!(output.status.code(), Some(130), "{}", text(&output).1);
    drop(stdin);
    assert_eq!(std::fs::read(&target).expect("read"), b"old");
    assert_eq!(staged(), 0, "staging left behind");
}

#[test]
fn a_guarded_stdin_write_that_cannot_commit_reads_nothing() {
    require(&LOCAL);
    let dir = tempfile::tempdir().expect("tempdir");
    let target = dir.path().join("target");
    std::fs::write(&target, "old").expect("write");
    let path = target.display().to_string();
    // Stdin stays open and empty: a write that pulled before checking its
    // guard would wait forever.
    let mut child = dsh()
        .args(["fs", "write", "--create-new", &path])
        .stdin(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    let stdin = child.stdin.take().expect("stdin");
    assert!(
        wait_until(Duration::from_secs(20), || matches!(
            child.try_wait(),
            Ok(Some(_))
        )),
        "dsh waited for stdin"
    );
    let output = child.wait_with_output().expect("wait");
    drop(stdin);
    assert_eq!(output.status.code(), Some(1));
    assert!(text(&output).1.contains("exists"), "{}", text(&output).1);
    assert_eq!(std::fs::read(&target).expect("read"), b"old");
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

/// `fs grep`, `fs find`, `fs edit --dry-run` and `fs edits` are the agent tools' library from
/// the command line: grep's exit status is grep(1)'s, `.gitignore` is honoured, a dry run writes
/// nothing, several edits (from stdin) apply together or not at all.
#[test]
fn grep_find_and_a_dry_run_edit_come_from_the_tools_library() {
    require(&LOCAL);
    let dir = tempfile::tempdir().expect("tempdir");
    let root = dir.path();
    std::fs::create_dir_all(root.join("src")).expect("mkdir");
    std::fs::create_dir_all(root.join("build")).expect("mkdir");
    std::fs::write(root.join("src/a.txt"), "alpha\nbeta\n").expect("write");
    std::fs::write(root.join("build/a.txt"), "beta\n").expect("write");
    std::fs::write(root.join(".gitignore"), "build/\n").expect("write");
    let at = |args: &[&str]| {
        let output = dsh().args(args).current_dir(root).output().expect("dsh");
        let (stdout, stderr) = text(&output);
        (output.status.code(), stdout, stderr)
    };
    let (code, stdout, stderr) = at(&["fs", "grep", "be+ta"]);
    assert_eq!(code, Some(0), "{stderr}");
    assert!(stdout.starts_with("src/a.txt:2:beta\n"), "{stdout}");
    assert!(
        !stdout.contains("build/"),
        "ignored by .gitignore: {stdout}"
    );
    let (code, _, _) = at(&["fs", "grep", "nowhere"]);
    assert_eq!(code, Some(1), "no match is exit 1, as grep(1)");
    let (code, stdout, stderr) = at(&["--json", "fs", "find", "**/*.txt"]);
    assert_eq!(code, Some(0), "{stderr}");
    let found: serde_json::Value = serde_json::from_str(&stdout).expect("json");
    assert_eq!(found["matches"][0]["path"], "src/a.txt", "{stdout}");
    assert_eq!(
        found["matches"].as_array().map(Vec::len),
        Some(1),
        "{stdout}"
    );
    let (code, stdout, stderr) = at(&["fs", "edit", "src/a.txt", "beta", "BETA", "--dry-run"]);
    assert_eq!(code, Some(0), "{stderr}");
    assert!(stdout.contains("-beta\n+BETA\n"), "{stdout}");
    let content = std::fs::read_to_string(root.join("src/a.txt")).expect("read");
    assert_eq!(content, "alpha\nbeta\n", "a dry run writes nothing");
    let (code, _, stderr) = at(&["fs", "edit", "src/a.txt", "a", "A", "--dry-run"]);
    assert_eq!(
        code,
        Some(1),
        "an ambiguous edit is a refused operation, not a usage error: {stderr}"
    );
    assert!(stderr.contains("matches"), "{stderr}");

    let edits = |input: &str, args: &[&str]| {
        let mut child = dsh()
            .args(["fs", "edits"])
            .args(args)
            .current_dir(root)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("dsh fs edits");
        let mut stdin = child.stdin.take().expect("stdin");
        stdin.write_all(input.as_bytes()).expect("write stdin");
        drop(stdin);
        let output = child.wait_with_output().expect("dsh fs edits");
        let (stdout, stderr) = text(&output);
        (output.status.code(), stdout, stderr)
    };
    let two = r#"[{"path": "src/a.txt", "old_string": "beta", "new_string": "BETA"},
                  {"path": "build/a.txt", "old_string": "beta", "new_string": "gamma"}]"#;
    let (code, stdout, stderr) = edits(two, &["--dry-run"]);
    assert_eq!(code, Some(0), "{stderr}");
    assert!(
        stdout.starts_with("dry run, nothing written src/a.txt: 1"),
        "{stdout}"
    );
    assert!(stdout.contains("+++ build/a.txt\n"), "{stdout}");
    assert_eq!(
        std::fs::read_to_string(root.join("build/a.txt")).unwrap(),
        "beta\n"
    );
    let (code, _, stderr) = edits(two, &[]);
    assert_eq!(code, Some(0), "{stderr}");
    assert_eq!(
        std::fs::read_to_string(root.join("src/a.txt")).unwrap(),
        "alpha\nBETA\n"
    );
    assert_eq!(
        std::fs::read_to_string(root.join("build/a.txt")).unwrap(),
        "gamma\n"
    );
    let (code, _, stderr) = edits(two, &[]);
    assert_eq!(
        code,
        Some(1),
        "nothing matches now: refused, not a usage error: {stderr}"
    );
    assert!(
        stderr.contains("src/a.txt: edit_file: edit 1: old_string was not found"),
        "{stderr}"
    );
    let (code, _, stderr) = edits("{\"path\": 1}", &[]);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(stderr.contains("edits: not a JSON array"), "{stderr}");
    let (code, _, stderr) = edits("[]", &[]);
    assert_eq!(code, Some(1), "{stderr}");
    assert!(
        stderr.contains("dsh: edits: edit_file: edits has 0 entries; give 1 to 100"),
        "{stderr}"
    );
}
