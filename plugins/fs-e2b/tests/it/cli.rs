//! `dsh --config config/e2b-local.yaml fs …`: the shipped manifest drives
//! files in an e2b-local sandbox through every `fs` subcommand; and `dsh
//! --config config/e2b-local.yaml conformance` passes exactly the fs cases
//! the local composition (`config/local.yaml`) runs.
//!
//! The shipped manifest kills its sandbox when `dsh` exits, so one run is
//! checked with it as shipped; the chain of runs that must share a sandbox
//! uses the same file with the sandbox reconnected by id and left running.
//!
//! Needs `dsh` and the three E2B plugin libraries built into `target/debug`
//! (`cargo build -p dsh-cli -p dsh-e2b -p dsh-fs-e2b -p
//! dsh-subprocess-e2b`), root and the built server (`cargo build -p
//! e2b-local`).

use std::path::PathBuf;
use std::process::{Command, Output, Stdio};

use crate::support::{CWD, Env};

/// `target/debug`, where `dsh` and the plugins are.
fn build_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("the test executable");
    exe.parent()
        .and_then(|deps| deps.parent())
        .expect("the test runs from target/<profile>/deps")
        .to_path_buf()
}

fn artifact(name: &str, how: &str) -> PathBuf {
    let path = build_dir().join(name);
    assert!(path.is_file(), "{} is missing: {how}", path.display());
    path
}

fn shipped(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../config")
        .join(name)
        .canonicalize()
        .unwrap_or_else(|err| panic!("config/{name}: {err}"))
}

fn shipped_manifest() -> PathBuf {
    shipped("e2b-local.yaml")
}

/// Runs `dsh --config <manifest> fs <args>` with exactly the server's
/// `E2B_*` variables.
fn dsh(env: &Env, manifest: &PathBuf, args: &[&str]) -> Output {
    dsh_command(env, manifest, "fs", args)
}

/// Runs `dsh --config <manifest> <subcommand> <args>`.
fn dsh_command(env: &Env, manifest: &PathBuf, subcommand: &str, args: &[&str]) -> Output {
    let binary = artifact("dsh", "build it with `cargo build -p dsh-cli`");
    for package in ["dsh-e2b", "dsh-fs-e2b", "dsh-subprocess-e2b"] {
        artifact(
            &format!("lib{}.so", package.replace('-', "_")),
            &format!("build it with `cargo build -p {package}`"),
        );
    }
    let mut command = Command::new(binary);
    for (name, _) in std::env::vars() {
        if name.starts_with("E2B_") || name == "DSH_PLUGIN_PATH" {
            command.env_remove(name);
        }
    }
    command
        .envs(env.server().env())
        .env_remove("RUST_LOG")
        .arg("--config")
        .arg(manifest)
        .arg(subcommand)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .expect("run dsh")
}

/// A run that must succeed; its stdout.
fn ok(env: &Env, manifest: &PathBuf, args: &[&str]) -> String {
    let output = dsh(env, manifest, args);
    assert!(
        output.status.success(),
        "dsh fs {args:?}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout).expect("UTF-8 output")
}

/// A run that must fail with `code`; its stderr.
fn fails(env: &Env, manifest: &PathBuf, args: &[&str], code: i32) -> String {
    let output = dsh(env, manifest, args);
    assert_eq!(output.status.code(), Some(code), "dsh fs {args:?}");
    String::from_utf8(output.stderr).expect("UTF-8 errors")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_shipped_manifest_writes_reads_lists_and_edits_sandbox_files() {
    // The test's own sandbox is the one the chained runs reconnect to.
    let env = Env::start().await;
    let shipped = shipped_manifest();
    let version = ok(&env, &shipped, &["write", "as-shipped.txt", "one run\n"]);
    assert_eq!(
        version.trim().len(),
        32,
        "write prints the version: {version:?}"
    );

    let dir = tempfile::tempdir().unwrap();
    let text = std::fs::read_to_string(&shipped).unwrap();
    assert!(
        text.contains("template: base\n") && text.contains("onDispose: kill"),
        "{text}"
    );
    let reconnecting = dir.path().join("reconnect.yaml");
    std::fs::write(
        &reconnecting,
        text.replace(
            "template: base",
            &format!("sandboxId: {}", env.info.sandbox_id),
        )
        .replace("onDispose: kill", "onDispose: leave"),
    )
    .unwrap();
    let m = &reconnecting;

    let written = ok(&env, m, &["write", "notes/a.txt", "hello\r\nworld\r\n"]);
    assert_eq!(ok(&env, m, &["cat", "notes/a.txt"]), "hello\r\nworld\r\n");
    assert_eq!(
        env.sh(r#"cat -- "$1""#, &[&format!("{CWD}/notes/a.txt")])
            .await,
        "hello\r\nworld\r\n",
        "the sandbox holds what dsh wrote"
    );
    let stat: serde_json::Value =
        serde_json::from_str(&ok(&env, m, &["--json", "stat", "notes/a.txt"])).unwrap();
    assert_eq!(stat["kind"], "file");
    assert_eq!(stat["size"], 14);
    assert_eq!(stat["version"].as_str(), Some(written.trim()));

    // A guarded edit at that version; the line ending stays CRLF.
    ok(
        &env,
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
        ok(&env, m, &["cat", "notes/a.txt"]),
        "hello\r\nthere\r\nagain\r\n"
    );
    let stale = fails(
        &env,
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
    let exists = fails(&env, m, &["write", "notes/a.txt", "x", "--create-new"], 1);
    assert!(exists.contains("already exists"), "{exists}");

    let name = "line\nbreak 名.txt";
    ok(&env, m, &["write", &format!("notes/{name}"), "odd name"]);
    ok(&env, m, &["mkdir", "notes/sub/deeper"]);
    let listing = ok(&env, m, &["ls", "notes"]);
    assert_eq!(listing, format!("a.txt\n{name}\nsub/\n"));
    ok(&env, m, &["mv", "notes/a.txt", "moved/a.txt"]);
    assert_eq!(
        ok(&env, m, &["cat", "moved/a.txt"]),
        "hello\r\nthere\r\nagain\r\n"
    );
    ok(&env, m, &["rm", "notes"]);
    let missing = fails(&env, m, &["cat", "notes/a.txt"], 1);
    assert!(missing.contains("not found"), "{missing}");
    let directory = fails(&env, m, &["cat", "moved"], 1);
    assert!(directory.contains("is a directory"), "{directory}");
    assert_eq!(
        ok(&env, m, &["ls"])
            .lines()
            .filter(|l| *l == "moved/")
            .count(),
        1
    );
}

/// `fs` acts as the sandbox's user, as `exec` does: the shipped manifest
/// can neither read a root-only file nor replace one, and says so naming
/// the path; the sandbox keeps what it had.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_shipped_manifest_reads_and_writes_as_the_sandbox_user() {
    let env = Env::start().await;
    let shipped = shipped_manifest();
    let shadow = fails(&env, &shipped, &["cat", "/etc/shadow"], 1);
    assert!(
        shadow.contains("/etc/shadow") && shadow.to_lowercase().contains("permission denied"),
        "{shadow}"
    );
    let passwd = fails(&env, &shipped, &["write", "/etc/passwd", "x"], 1);
    assert!(
        passwd.contains("/etc/passwd") && passwd.to_lowercase().contains("permission denied"),
        "{passwd}"
    );
    let kept = env
        .run_as(
            "root",
            "head -c 5 /etc/passwd; ls -a /etc | grep -c dsh-stage",
            &[],
        )
        .await;
    assert_eq!(kept.stdout, b"root:0\n", "{}", kept.stderr_text());
}

/// The case names and outcomes of `dsh --json conformance --filter fs.`.
fn fs_conformance(env: &Env, manifest: &PathBuf) -> Vec<(String, String)> {
    let output = dsh_command(env, manifest, "--json", &["conformance", "--filter", "fs."]);
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_shipped_manifest_passes_the_fs_cases_the_local_composition_runs() {
    let env = Env::start().await;
    let local = fs_conformance(&env, &shipped("local.yaml"));
    let e2b = fs_conformance(&env, &shipped_manifest());
    let names = |cases: &[(String, String)]| {
        cases
            .iter()
            .map(|(name, _)| name.clone())
            .collect::<Vec<_>>()
    };
    assert!(!local.is_empty());
    assert_eq!(names(&e2b), names(&local), "the same fs cases run on both");
    let not_passed: Vec<String> = e2b
        .iter()
        .filter(|(_, outcome)| outcome != "passed")
        .map(|(name, outcome)| format!("{name}: {outcome}"))
        .collect();
    assert!(not_passed.is_empty(), "{}", not_passed.join("\n"));
}
