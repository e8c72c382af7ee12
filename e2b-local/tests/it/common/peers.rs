//! Runs one of the official-SDK suites in `tests/sdk-peers/` against a fresh server and fails — never
//! skips — when the peers are missing, printing the runner's output when the suite fails.

use std::path::{Path, PathBuf};
use std::process::Command;

use super::LocalServer;

fn peers_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/sdk-peers")
}

const INSTALL_HINT: &str = "run scripts/install-sdk-peers.sh (scripts/setup.sh does it too)";

/// The E2B SDK releases every suite runs with, each against a fresh server: the newest (npm
/// `e2b`, PyPI `e2b` in `.venv`) and 2.29.1, the release e2b-local was first built against (the
/// npm alias `e2b-2.29.1`, chosen by `DSH_E2B_SDK` in `test/sdk.mjs`; the venv
/// `.venv-e2b-2.29.1`).
const RELEASES: [(&str, &str); 2] = [("e2b", ".venv"), ("e2b-2.29.1", ".venv-e2b-2.29.1")];

/// `node --test tests/sdk-peers/js/test/<file>` with the server's environment, once per release.
pub fn run_js(file: &str) {
    let dir = peers_dir().join("js");
    for (package, _) in RELEASES {
        assert!(
            dir.join(format!("node_modules/{package}/package.json"))
                .is_file(),
            "the JS SDK peer {package} is not installed in {}: {INSTALL_HINT}",
            dir.display()
        );
        let mut command = Command::new("node");
        command
            .current_dir(&dir)
            .env("DSH_E2B_SDK", package)
            .args(["--test", "--test-reporter=spec", "--test-concurrency=1"])
            .arg(format!("test/{file}"));
        run(command, &format!("node --test test/{file} ({package})"));
    }
}

/// `tests/sdk-peers/python/<venv>/bin/python -m pytest tests/<file>` with the server's environment,
/// once per release.
pub fn run_python(file: &str) {
    let dir = peers_dir().join("python");
    for (package, venv) in RELEASES {
        let python = dir.join(venv).join("bin/python");
        assert!(
            python.is_file(),
            "the Python SDK peer venv {venv} is missing ({}): {INSTALL_HINT}",
            python.display()
        );
        let mut command = Command::new(&python);
        command
            .current_dir(&dir)
            .args(["-m", "pytest", "-q", "-p", "no:cacheprovider"])
            .arg(format!("tests/{file}"));
        run(
            command,
            &format!("pytest tests/{file} ({package} in {venv})"),
        );
    }
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
