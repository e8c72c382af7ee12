//! The `e2b-local` command line: refusals with reasons, and the help text.

use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::process::{Command, Output};

use crate::common::LocalServer;

fn binary() -> std::path::PathBuf {
    std::path::PathBuf::from(env!("CARGO_BIN_EXE_e2b-local"))
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

#[test]
fn refuses_to_start_without_root_and_says_why() {
    // A copy the unprivileged user can reach (the target dir may not be world-readable).
    let dir = tempfile::tempdir().unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let copy = dir.path().join("e2b-local");
    std::fs::copy(binary(), &copy).unwrap();
    let output = Command::new(&copy)
        .args([
            "serve",
            "--api-port",
            "0",
            "--envd-port",
            "0",
            "--state-dir",
        ])
        .arg(dir.path().join("state"))
        .uid(65534)
        .gid(65534)
        .output()
        .unwrap();
    assert!(!output.status.success());
    let message = stderr(&output);
    assert!(
        message.contains("must run as root") && message.contains("namespaces"),
        "{message}"
    );
}

#[test]
fn refuses_an_api_key_the_sdks_would_not_send() {
    let dir = tempfile::tempdir().unwrap();
    let output = Command::new(binary())
        .args([
            "serve",
            "--api-port",
            "0",
            "--envd-port",
            "0",
            "--api-key",
            "secret",
            "--state-dir",
        ])
        .arg(dir.path())
        .output()
        .unwrap();
    assert!(!output.status.success());
    assert!(
        stderr(&output).contains("invalid --api-key \"secret\""),
        "{}",
        stderr(&output)
    );
}

#[test]
fn refuses_a_state_dir_another_server_uses() {
    let server = LocalServer::start();
    let output = Command::new(binary())
        .args([
            "serve",
            "--api-port",
            "0",
            "--envd-port",
            "0",
            "--state-dir",
        ])
        .arg(server.state_dir())
        .output()
        .unwrap();
    assert!(!output.status.success());
    assert!(
        stderr(&output).contains("in use by another e2b-local server"),
        "{}",
        stderr(&output)
    );
}

#[test]
fn refuses_a_taken_port() {
    let server = LocalServer::start();
    let port = server.api_url().rsplit(':').next().unwrap().to_owned();
    let dir = tempfile::tempdir().unwrap();
    let output = Command::new(binary())
        .args([
            "serve",
            "--api-port",
            &port,
            "--envd-port",
            "0",
            "--state-dir",
        ])
        .arg(dir.path())
        .output()
        .unwrap();
    assert!(!output.status.success());
    assert!(
        stderr(&output).contains(&format!("bind API port 127.0.0.1:{port}")),
        "{}",
        stderr(&output)
    );
}

#[test]
fn help_documents_serve_and_hides_internal_subcommands() {
    let output = Command::new(binary()).arg("--help").output().unwrap();
    let help = String::from_utf8_lossy(&output.stdout);
    assert!(help.contains("serve"), "{help}");
    assert!(
        !help.contains("__sandbox-init") && !help.contains("__namespace-probe"),
        "{help}"
    );
    let serve = Command::new(binary())
        .args(["serve", "--help"])
        .output()
        .unwrap();
    let serve = String::from_utf8_lossy(&serve.stdout);
    for flag in [
        "--api-port",
        "--envd-port",
        "--api-key",
        "--state-dir",
        "--host",
        "--freezer",
        "--envd-file-access",
    ] {
        assert!(serve.contains(flag), "{flag} in {serve}");
    }
}

#[test]
fn prints_the_client_environment_and_stops_cleanly_on_sigterm() {
    let server = LocalServer::start();
    let env = server.env();
    let names: Vec<&str> = env.iter().map(|(k, _)| k.as_str()).collect();
    assert_eq!(
        names,
        [
            "E2B_API_URL",
            "E2B_SANDBOX_URL",
            "E2B_API_KEY",
            "E2B_VOLUME_API_URL"
        ]
    );
    assert!(e2b_local::ids::is_valid_api_key(server.api_key()));
    assert!(
        server.api_url().starts_with("http://127.0.0.1:")
            && server.sandbox_url().starts_with("http://127.0.0.1:")
    );
    let status = server.stop();
    assert!(status.success(), "{status}");
}
