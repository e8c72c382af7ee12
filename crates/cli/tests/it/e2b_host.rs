//! The shipped E2B composition through the `dsh` program, as a user runs
//! it: `dsh --config config/e2b-local.yaml exec`, `sh` and `conformance`
//! against a fresh e2b-local server.

use std::path::PathBuf;
use std::process::{Command, Output, Stdio};

use e2b_local::harness::LocalServer;

use crate::support::{config_dir, dsh_binary, require};

const E2B: [&str; 3] = ["dsh-e2b-owner", "dsh-fs-e2b", "dsh-subprocess-e2b"];

/// `dsh`, its E2B plugins checked built from their current sources.
fn dsh() -> PathBuf {
    require(&E2B);
    dsh_binary()
}

fn manifest() -> PathBuf {
    config_dir().join("e2b-local.yaml")
}

fn run(server: &LocalServer, args: &[&str], stdin: &[u8]) -> Output {
    let mut child = Command::new(dsh())
        .env("DSH_PLUGIN_PATH", crate::support::plugin_dir())
        .arg("--config")
        .arg(manifest())
        .args(args)
        .envs(server.env())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run dsh");
    let mut input = child.stdin.take().expect("stdin");
    let data = stdin.to_vec();
    let feeder = std::thread::spawn(move || {
        use std::io::Write;
        let _ = input.write_all(&data);
    });
    let output = child.wait_with_output().expect("dsh output");
    feeder.join().expect("stdin feeder");
    output
}

#[test]
fn dsh_exec_runs_in_the_sandbox_with_the_commands_exit_code_and_bytes() {
    let server = LocalServer::start();
    let out = run(
        &server,
        &[
            "exec",
            "--env",
            "GREETING=hé",
            "--",
            "sh",
            "-c",
            r#"printf '%s %s %s\n' "$(id -un)" "$PWD" "$GREETING"; cat; printf '\377' >&2; exit 7"#,
        ],
        b"piped \x00 input",
    );
    assert_eq!(out.status.code(), Some(7), "{out:?}");
    assert_eq!(
        out.stdout,
        "user /home/user/workspace hé\npiped \0 input".as_bytes()
    );
    assert_eq!(out.stderr, b"\xff");
    let missing = run(&server, &["exec", "--", "dsh-no-such-program"], b"");
    assert_eq!(missing.status.code(), Some(127), "{missing:?}");
    assert!(
        String::from_utf8_lossy(&missing.stderr).contains("command not found"),
        "{missing:?}"
    );
}

#[test]
fn dsh_sh_runs_an_interactive_shell_on_a_sandbox_terminal() {
    let server = LocalServer::start();
    // `script` gives dsh a terminal of its own, as a user's would be.
    let command = format!(
        "{} --config {} sh -- bash --norc --noprofile -i",
        dsh().display(),
        manifest().display()
    );
    let mut child = Command::new("script")
        .args(["-qec", &command, "/dev/null"])
        .env("DSH_PLUGIN_PATH", crate::support::plugin_dir())
        .envs(server.env())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run script (util-linux)");
    {
        use std::io::Write;
        let mut stdin = child.stdin.take().expect("stdin");
        stdin
            .write_all(b"echo typed-$((6*7)) $(tty)\nexit 5\n")
            .expect("type");
    }
    let out = child.wait_with_output().expect("output");
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(5), "{text}");
    assert!(text.contains("typed-42 /dev/pts/"), "{text}");
}

#[test]
fn dsh_conformance_passes_on_the_e2b_composition() {
    let server = LocalServer::start();
    let out = run(&server, &["conformance", "--json"], b"");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{text}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let report: serde_json::Value = serde_json::from_str(&text).expect("JSON report");
    let cases = report["cases"].as_array().expect("cases");
    let statuses: Vec<(&str, &str)> = cases
        .iter()
        .map(|case| {
            (
                case["name"].as_str().unwrap_or("?"),
                case["outcome"].as_str().unwrap_or("?"),
            )
        })
        .collect();
    // Every case passes, the beneath race case included: dsh-fs-e2b confines its world-side
    // operations in the sandbox (dsh-supervisor world).
    assert!(
        statuses
            .iter()
            .any(|(name, _)| *name == "fs.beneath.symlink_races"),
        "{statuses:?}"
    );
    assert!(
        statuses.iter().all(|(_, status)| *status == "passed"),
        "{statuses:?}"
    );
    for seam in ["fs.", "subprocess.", "terminal.", "coherence."] {
        assert!(
            statuses.iter().any(|(name, _)| name.starts_with(seam)),
            "no {seam} case ran: {statuses:?}"
        );
    }
}
