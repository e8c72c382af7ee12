//! Runs one of the official-SDK suites in `sdk-peers/` against a fresh server and fails — never
//! skips — when the peers are missing, printing the runner's output when the suite fails.

use std::path::{Path, PathBuf};
use std::process::Command;

use super::LocalServer;

fn peers_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../sdk-peers")
}

const INSTALL_HINT: &str = "run scripts/install-sdk-peers.sh (scripts/setup.sh does it too)";

/// `node --test sdk-peers/js/test/<file>` with the server's environment.
pub fn run_js(file: &str) {
    let dir = peers_dir().join("js");
    assert!(
        dir.join("node_modules/e2b/package.json").is_file(),
        "the JS SDK peer is not installed in {}: {INSTALL_HINT}",
        dir.display()
    );
    let mut command = Command::new("node");
    command
        .current_dir(&dir)
        .args(["--test", "--test-reporter=spec", "--test-concurrency=1"])
        .arg(format!("test/{file}"));
    run(command, &format!("node --test test/{file}"));
}

/// `sdk-peers/python/.venv/bin/python -m pytest tests/<file>` with the server's environment.
pub fn run_python(file: &str) {
    let dir = peers_dir().join("python");
    let python = dir.join(".venv/bin/python");
    assert!(
        python.is_file(),
        "the Python SDK peer venv is missing ({}): {INSTALL_HINT}",
        python.display()
    );
    let mut command = Command::new(&python);
    command
        .current_dir(&dir)
        .args(["-m", "pytest", "-q", "-p", "no:cacheprovider"])
        .arg(format!("tests/{file}"));
    run(command, &format!("pytest tests/{file}"));
}

fn run(mut command: Command, what: &str) {
    let server = LocalServer::start();
    // The suites must only see this server, never a real E2B account.
    for name in ["E2B_ACCESS_TOKEN", "E2B_DOMAIN", "E2B_DEBUG"] {
        command.env_remove(name);
    }
    let output = command
        .envs(server.env())
        .output()
        .unwrap_or_else(|e| panic!("{what}: cannot run the runner ({e}); {INSTALL_HINT}"));
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success(),
        "{what} failed ({}):\n--- stdout ---\n{stdout}\n--- stderr ---\n{stderr}",
        output.status
    );
    // Print the runner's summary so a passing run shows what it ran.
    println!("{stdout}");
}
