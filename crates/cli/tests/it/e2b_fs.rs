//! `dsh fs …` on the E2B composition, as a user runs it against a real
//! e2b-local server: the shipped manifest drives files in a sandbox through
//! every `fs` subcommand, as the sandbox's user, and passes exactly the fs
//! cases of the conformance kit the local composition (`config/local.yaml`)
//! runs.
//!
//! The shipped manifest kills its sandbox when `dsh` exits, so one run is
//! checked with it as shipped; the chain of runs that must share a sandbox
//! uses the same file with `onDispose: leave`, then the sandbox reconnected
//! by id in place of `template`.

use std::path::{Path, PathBuf};
use std::process::Output;

use e2b_local::harness::LocalServer;

use crate::e2b_shutdown::{dsh_e2b, sandboxes};
use crate::fs::assert_streamed_write;
use crate::support::{Scratch, config_dir, dsh, require};

const E2B: [&str; 3] = ["dsh-e2b-owner", "dsh-fs-e2b", "dsh-subprocess-e2b"];

/// The world's cwd in the shipped manifest.
const CWD: &str = "/home/user/workspace";

#[test]
fn stdin_streams_into_a_sandbox_file_in_bounded_memory() {
    let server = LocalServer::start();
    let command = dsh_e2b(&server, &["fs", "write", "--json", "big.dat"]);
    assert_streamed_write(command, 256 << 20);
}

/// Runs `dsh --config <manifest> ARGS…` against `server`.
fn run(server: &LocalServer, manifest: &Path, args: &[&str]) -> Output {
    require(&E2B);
    dsh()
        .arg("--config")
        .arg(manifest)
        .args(args)
        .envs(server.env())
        .output()
        .expect("run dsh")
}

/// A run that must succeed; its stdout.
fn ok(server: &LocalServer, manifest: &Path, args: &[&str]) -> String {
    let output = run(server, manifest, args);
    assert!(
        output.status.success(),
        "dsh {args:?}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout).expect("UTF-8 output")
}

/// A run that must fail with `code`; its stderr.
fn fails(server: &LocalServer, manifest: &Path, args: &[&str], code: i32) -> String {
    let output = run(server, manifest, args);
    assert_eq!(output.status.code(), Some(code), "dsh {args:?}: {output:?}");
    String::from_utf8(output.stderr).expect("UTF-8 errors")
}

fn fs(server: &LocalServer, manifest: &Path, args: &[&str]) -> String {
    ok(server, manifest, &[&["fs"][..], args].concat())
}

fn fs_fails(server: &LocalServer, manifest: &Path, args: &[&str], code: i32) -> String {
    fails(server, manifest, &[&["fs"][..], args].concat(), code)
}

fn shipped() -> PathBuf {
    config_dir().join("e2b-local.yaml")
}

/// A sandbox of `server` that outlives each `dsh`: created by a first
/// `dsh` through the shipped manifest with `onDispose: leave`, then reached
/// by the manifest this returns (its id in place of `template: base`).
pub(crate) fn left_sandbox(server: &LocalServer, scratch: &Scratch) -> PathBuf {
    let text = std::fs::read_to_string(shipped()).expect("read the shipped manifest");
    assert!(
        text.contains("template: base\n") && text.contains("onDispose: kill"),
        "{text}"
    );
    let leave = text.replace("onDispose: kill", "onDispose: leave");
    let first = scratch.write("leave.yaml", &leave);
    let started: serde_json::Value = serde_json::from_str(&ok(
        server,
        Path::new(&first),
        &["--json", "exec", "--detach", "--", "true"],
    ))
    .expect("exec --detach --json prints JSON");
    let sandbox = started["sandboxId"].as_str().expect("a sandboxId");
    PathBuf::from(scratch.write(
        "reconnect.yaml",
        &leave.replace("template: base", &format!("sandboxId: {sandbox}")),
    ))
}

#[test]
fn the_shipped_manifest_writes_reads_lists_and_edits_sandbox_files() {
    let server = LocalServer::start();
    let version = fs(
        &server,
        &shipped(),
        &["write", "as-shipped.txt", "one run\n"],
    );
    assert_eq!(
        version.trim().len(),
        32,
        "write prints the version: {version:?}"
    );
    assert_eq!(
        sandboxes(&server),
        0,
        "the shipped manifest kills its sandbox"
    );

    let scratch = Scratch::new();
    let m = &left_sandbox(&server, &scratch);
    let written = fs(&server, m, &["write", "notes/a.txt", "hello\r\nworld\r\n"]);
    assert_eq!(
        fs(&server, m, &["cat", "notes/a.txt"]),
        "hello\r\nworld\r\n"
    );
    assert_eq!(
        ok(
            &server,
            m,
            &["exec", "--", "cat", "--", &format!("{CWD}/notes/a.txt")]
        ),
        "hello\r\nworld\r\n",
        "the sandbox holds what dsh wrote"
    );
    let stat: serde_json::Value =
        serde_json::from_str(&fs(&server, m, &["--json", "stat", "notes/a.txt"])).unwrap();
    assert_eq!(stat["kind"], "file");
    assert_eq!(stat["size"], 14);
    assert_eq!(stat["version"].as_str(), Some(written.trim()));

    // A guarded edit at that version; the line ending stays CRLF.
    fs(
        &server,
        m,
        &[
            "edit",
            "notes/a.txt",
            "world\n",
            "there\nagain\n",
            "--if-version",
            written.trim(),
        ],
    );
    assert_eq!(
        fs(&server, m, &["cat", "notes/a.txt"]),
        "hello\r\nthere\r\nagain\r\n"
    );
    let stale = fs_fails(
        &server,
        m,
        &[
            "write",
            "notes/a.txt",
            "lost",
            "--if-version",
            written.trim(),
        ],
        1,
    );
    assert!(stale.contains("stale version"), "{stale}");
    let exists = fs_fails(
        &server,
        m,
        &["write", "notes/a.txt", "x", "--create-new"],
        1,
    );
    assert!(exists.contains("already exists"), "{exists}");

    let name = "line\nbreak 名.txt";
    fs(&server, m, &["write", &format!("notes/{name}"), "odd name"]);
    // Several edits in two files as one patch: all written, or (one not matching) none.
    let both = serde_json::json!([
        {"path": "notes/a.txt", "old_string": "again\n", "new_string": "again!\n"},
        {"path": format!("notes/{name}"), "old_string": "odd", "new_string": "odder"},
        {"path": "notes/a.txt", "old_string": "hello", "new_string": "hi"},
    ]);
    let diff = fs(&server, m, &["edits", &both.to_string()]);
    assert!(diff.contains("-again\n+again!\n"), "{diff}");
    assert_eq!(
        fs(&server, m, &["cat", &format!("notes/{name}")]),
        "odder name"
    );
    let none = serde_json::json!([
        {"path": "notes/a.txt", "old_string": "hi", "new_string": "lost"},
        {"path": format!("notes/{name}"), "old_string": "nowhere", "new_string": "x"},
    ]);
    let refused = fs_fails(&server, m, &["edits", &none.to_string()], 1);
    assert!(
        refused.contains("edit 2: old_string was not found"),
        "{refused}"
    );
    fs(&server, m, &["mkdir", "notes/sub/deeper"]);
    let listing = fs(&server, m, &["ls", "notes"]);
    assert_eq!(listing, format!("a.txt\n{name}\nsub/\n"));
    fs(&server, m, &["mv", "notes/a.txt", "moved/a.txt"]);
    assert_eq!(
        fs(&server, m, &["cat", "moved/a.txt"]),
        "hi\r\nthere\r\nagain!\r\n",
        "edited once, by the patch that applied, CRLF kept"
    );
    fs(&server, m, &["rm", "notes"]);
    let missing = fs_fails(&server, m, &["cat", "notes/a.txt"], 1);
    // The reason once, as the local world says it (not `stat: not found: file not found: …`).
    assert_eq!(
        missing.matches("No such file or directory").count(),
        1,
        "{missing}"
    );
    assert!(!missing.contains("not found"), "{missing}");
    let directory = fs_fails(&server, m, &["cat", "moved"], 1);
    assert!(directory.contains("is a directory"), "{directory}");
    assert_eq!(
        fs(&server, m, &["ls"])
            .lines()
            .filter(|l| *l == "moved/")
            .count(),
        1
    );
    assert_eq!(sandboxes(&server), 1, "one sandbox throughout");
}

/// `fs` acts as the sandbox's user, as `exec` does: the shipped manifest
/// can neither read a root-only file nor replace one, and says so naming
/// the path; the sandbox keeps what it had.
#[test]
fn the_shipped_manifest_reads_and_writes_as_the_sandbox_user() {
    let server = LocalServer::start();
    let scratch = Scratch::new();
    let m = &left_sandbox(&server, &scratch);
    let shadow = fs_fails(&server, m, &["cat", "/etc/shadow"], 1);
    assert!(
        shadow.contains("/etc/shadow") && shadow.to_lowercase().contains("permission denied"),
        "{shadow}"
    );
    let passwd = fs_fails(&server, m, &["write", "/etc/passwd", "x"], 1);
    assert!(
        passwd.contains("/etc/passwd") && passwd.to_lowercase().contains("permission denied"),
        "{passwd}"
    );
    let kept = ok(
        &server,
        m,
        &[
            "exec",
            "--",
            "sh",
            "-c",
            "head -c 5 /etc/passwd; ls -a /etc | grep -c dsh-stage || true",
        ],
    );
    assert_eq!(kept, "root:0\n");
}

/// The case names and outcomes of `dsh --json conformance --filter fs.`.
fn fs_conformance(server: &LocalServer, manifest: &Path) -> Vec<(String, String)> {
    let output = run(
        server,
        manifest,
        &["--json", "conformance", "--filter", "fs."],
    );
    let report: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap_or_else(|err| {
        panic!(
            "conformance --json printed no report ({err}); stderr: {}",
            String::from_utf8_lossy(&output.stderr)
        )
    });
    report["cases"]
        .as_array()
        .expect("a case list")
        .iter()
        .map(|case| {
            let name = case["name"].as_str().unwrap().to_owned();
            let outcome = match case["message"].as_str() {
                Some(message) => format!("{}: {message}", case["outcome"].as_str().unwrap()),
                None => case["outcome"].as_str().unwrap().to_owned(),
            };
            (name, outcome)
        })
        .collect()
}

#[test]
fn the_shipped_manifest_passes_the_fs_cases_the_local_composition_runs() {
    require(&["dsh-fs-local", "dsh-subprocess-local"]);
    let server = LocalServer::start();
    let local = fs_conformance(&server, &config_dir().join("local.yaml"));
    let e2b = fs_conformance(&server, &shipped());
    let names = |cases: &[(String, String)]| {
        cases
            .iter()
            .map(|(name, _)| name.clone())
            .collect::<Vec<_>>()
    };
    assert!(!local.is_empty());
    assert_eq!(names(&e2b), names(&local), "the same fs cases run on both");
    // dsh-fs-e2b answers the world-side operations in the sandbox (dsh-supervisor world),
    // confined there by the kernel: every case passes on both, the beneath race case included.
    assert!(
        local
            .iter()
            .any(|(name, _)| name == "fs.beneath.symlink_races"),
        "the beneath race case runs"
    );
    let not_passed: Vec<String> = local
        .iter()
        .map(|case| ("local", case))
        .chain(e2b.iter().map(|case| ("e2b", case)))
        .filter(|(_, (_, outcome))| outcome != "passed")
        .map(|(world, (name, outcome))| format!("{world}: {name}: {outcome}"))
        .collect();
    assert!(not_passed.is_empty(), "{}", not_passed.join("\n"));
}
