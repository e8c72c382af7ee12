//! The hostile-input corpus (`tests/hostile/`, see its README): malformed
//! manifests, hostile command lines and `fs` paths, each with its expected
//! exit code and message. Bad input gets a clear error and loses nothing.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::support::{Scratch, dsh, require, text};

const LOCAL: [&str; 2] = ["dsh-fs-local", "dsh-subprocess-local"];

/// Every refusal of hostile input is prompt; a generous bound that only a
/// hang or a runaway read (the `/dev/zero` manifest) breaks.
const PROMPT: Duration = Duration::from_secs(30);

fn corpus() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/hostile")
}

/// Runs `dsh args…` with stdin closed, killing it past [`PROMPT`]; returns
/// its exit code and stderr.
fn run(args: &[&str]) -> (Option<i32>, String) {
    let mut child = dsh()
        .args(args)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("spawn dsh");
    let started = Instant::now();
    while child.try_wait().expect("wait dsh").is_none() {
        if started.elapsed() > PROMPT {
            child.kill().expect("kill dsh");
            child.wait().expect("reap dsh");
            panic!("dsh {args:?} still running after {PROMPT:?}");
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    let output = child.wait_with_output().expect("dsh output");
    (output.status.code(), text(&output).1)
}

/// `dsh --config path check` must exit `exit` with a message naming the
/// file and containing `needle`.
fn refused(path: &Path, exit: i32, needle: &str) {
    let path = path.display().to_string();
    let (code, stderr) = run(&["--config", &path, "check"]);
    assert_eq!(code, Some(exit), "{path}: {stderr}");
    assert!(
        stderr.starts_with(&format!("dsh: {path}")),
        "{path}: the message names the file: {stderr}"
    );
    assert!(
        stderr.contains(needle),
        "{path}: {needle:?} not in {stderr}"
    );
}

#[test]
fn corpus_manifests_are_refused_with_their_expected_messages() {
    require(&["dsh-example-fs-readonly"]);
    let dir = corpus().join("manifests");
    let expected = std::fs::read_to_string(dir.join("expected.tsv")).expect("expected.tsv");
    let mut listed = Vec::new();
    for line in expected.lines().filter(|line| !line.starts_with('#')) {
        let mut fields = line.splitn(3, '\t');
        let (Some(file), Some(exit), Some(needle)) = (fields.next(), fields.next(), fields.next())
        else {
            panic!("expected.tsv: not `file<TAB>exit<TAB>substring`: {line:?}");
        };
        refused(&dir.join(file), exit.parse().expect("exit code"), needle);
        listed.push(file.to_owned());
    }
    // Every manifest in the corpus has an expectation.
    for entry in std::fs::read_dir(&dir).expect("read corpus") {
        let name = entry
            .expect("entry")
            .file_name()
            .into_string()
            .expect("name");
        if name != "expected.tsv" {
            assert!(listed.contains(&name), "{name} has no line in expected.tsv");
        }
    }
}

#[test]
fn generated_hostile_manifests_are_refused_promptly() {
    let scratch = Scratch::new();
    // Beyond the 1 MiB cap: a valid-looking manifest padded with comments.
    let huge = scratch.path("huge.yaml");
    std::fs::write(&huge, "# padding\n".repeat(210_000)).expect("write");
    refused(&huge, 2, ": read: larger than the 1 MiB manifest limit");
    // Devices, FIFOs and directories are refused without reading or waiting.
    let zero = scratch.path("zero.toml");
    std::os::unix::fs::symlink("/dev/zero", &zero).expect("symlink");
    refused(&zero, 2, ": read: not a regular file (a character device)");
    let fifo = scratch.path("fifo.yaml");
    let made = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .expect("mkfifo");
    assert!(made.success());
    refused(&fifo, 2, ": read: not a regular file (a FIFO)");
    let dir = scratch.path("dir.yml");
    std::fs::create_dir(&dir).expect("mkdir");
    refused(&dir, 2, ": read: not a regular file (a directory)");
    // 10,000 levels of nesting in both syntaxes.
    let deep = format!("{}{}", "[".repeat(10_000), "]".repeat(10_000));
    let yaml = scratch.path("deep.yaml");
    std::fs::write(
        &yaml,
        format!("- {{id: a, name: x, config: {{k: {deep}}}}}\n"),
    )
    .expect("write");
    refused(&yaml, 2, ":1: invalid YAML: recursion limit exceeded");
    let toml = scratch.path("deep.toml");
    std::fs::write(
        &toml,
        format!("[[plugins]]\nid = \"a\"\nname = \"x\"\nconfig = {{ k = {deep} }}\n"),
    )
    .expect("write");
    refused(&toml, 2, ":4: invalid TOML: cannot recurse further");
    let json = scratch.path("m.json");
    std::fs::write(&json, "{}").expect("write");
    refused(&json, 2, ": unknown manifest format");
}

#[test]
fn corpus_command_lines_and_fs_paths_get_clear_errors_and_lose_nothing() {
    require(&LOCAL);
    let cases: Vec<serde_json::Value> = serde_json::from_str(
        &std::fs::read_to_string(corpus().join("cli.json")).expect("cli.json"),
    )
    .expect("cli.json is JSON");
    assert!(!cases.is_empty());
    let scratch = Scratch::new();
    let root = scratch.dir.path().display().to_string();
    let file = scratch.write("file", "precious\n");
    let long = "a".repeat(5_000);
    let fill = |text: &str| text.replace("{scratch}", &root).replace("{long}", &long);
    for case in &cases {
        let args: Vec<String> = case["args"]
            .as_array()
            .expect("args")
            .iter()
            .map(|arg| fill(arg.as_str().expect("string arg")))
            .collect();
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let exit = case["exit"].as_i64().expect("exit");
        let needle = fill(case["stderr"].as_str().expect("stderr"));
        let (code, stderr) = run(&args);
        assert_eq!(code.map(i64::from), Some(exit), "dsh {args:?}: {stderr}");
        assert!(
            stderr.contains(&needle),
            "dsh {args:?}: {needle:?} not in {stderr}"
        );
        assert_eq!(
            std::fs::read_to_string(&file).expect("file survives"),
            "precious\n",
            "dsh {args:?} changed {file}"
        );
    }
    // A non-UTF-8 argument is a usage error, not a panic.
    let output = dsh()
        .args([std::ffi::OsStr::new("fs"), "stat".as_ref()])
        .arg(<std::ffi::OsStr as std::os::unix::ffi::OsStrExt>::from_bytes(b"\xff"))
        .output()
        .expect("run dsh");
    let (_, stderr) = text(&output);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("invalid UTF-8"), "{stderr}");
}
