//! The scripted agent episode (issue 26, `tests/sdk-peers/python/mcp_peer/episode.py`) through
//! `dsh mcp` with the official MCP Python SDK, on the local composition and on a fresh e2b-local:
//! a package with a bug is created, grepped, read, tested (failing), fixed, diagnosed by pyright,
//! tested (passing), served by a background dev server whose log is read and which is fetched and
//! stopped, and used in a Python REPL in a terminal. The script checks every step as an agent
//! would, so a broken tool fails it; this test prints the figures — calls, characters returned to
//! the model, wall time — per composition and per step (CI shows them: .config/nextest.toml).

use std::path::Path;
use std::time::Duration;

use e2b_local::harness::LocalServer;
use serde_json::Value;

use crate::e2b_shutdown::sandboxes;
use crate::mcp::{Client, E2B, LOCAL, Transport, processes_under, run_client};
use crate::support::{config_dir, require, wait_until};

/// Runs the episode over stdio (`dsh mcp ARGS…` started by the client in `cwd`) and returns its
/// figures.
fn episode(args: &[String], cwd: &Path, envs: &[(String, String)], label: &str) -> Value {
    let mut command = Client::Python.script("episode");
    command.env("DSH_EPISODE_LABEL", label);
    run_client(
        command,
        Client::Python,
        &Transport::Stdio { args, cwd },
        envs,
    )
}

/// The step names of an episode's figures, each step checked to have made calls and the totals
/// to be there.
fn steps(figures: &Value, what: &str) -> Vec<String> {
    for key in [
        "calls",
        "chars",
        "episode_ms",
        "connect_ms",
        "listing_chars",
    ] {
        assert!(figures[key].is_number(), "{what}: {key} in {figures}");
    }
    figures["steps"]
        .as_array()
        .unwrap_or_else(|| panic!("{what}: figures with steps: {figures}"))
        .iter()
        .map(|step| {
            assert!(step["calls"].as_u64() > Some(0), "{what}: {step}");
            step["step"].as_str().expect("a step name").to_owned()
        })
        .collect()
}

/// The figures of each composition, then each step's.
fn table(runs: &[(&str, &Value)]) -> String {
    let profile = if cfg!(debug_assertions) {
        "debug"
    } else {
        "release"
    };
    let number = |value: &Value| value.as_f64().unwrap_or_default();
    let mut out = format!(
        "agent episode through dsh mcp (issue 26), {profile} build\n\
         {:<30}{:>7}{:>12}{:>10}{:>10}{:>12}\n",
        "composition", "calls", "characters", "episode", "connect", "tools/list"
    );
    for (name, figures) in runs {
        out += &format!(
            "{name:<30}{:>7}{:>12}{:>8.2} s{:>8.2} s{:>12}\n",
            number(&figures["calls"]),
            number(&figures["chars"]),
            number(&figures["episode_ms"]) / 1000.0,
            number(&figures["connect_ms"]) / 1000.0,
            number(&figures["listing_chars"]),
        );
    }
    out += &format!("\n{:<30}", "");
    for (name, _) in runs {
        out += &format!("{name:>27}");
    }
    out += &format!("\n{:<30}", "step");
    for _ in runs {
        out += &format!("{:>9}{:>9}{:>9}", "calls", "chars", "ms");
    }
    out += "\n";
    let steps = runs[0].1["steps"].as_array().expect("steps");
    for (i, step) in steps.iter().enumerate() {
        out += &format!("{:<30}", step["step"].as_str().unwrap_or_default());
        for (_, figures) in runs {
            let step = &figures["steps"][i];
            out += &format!(
                "{:>9}{:>9}{:>9.0}",
                number(&step["calls"]),
                number(&step["chars"]),
                number(&step["ms"])
            );
        }
        out += "\n";
    }
    out
}

#[test]
fn an_agent_episode_runs_through_dsh_mcp_on_both_compositions() {
    require(&LOCAL);
    require(&E2B);
    let dir = tempfile::tempdir().expect("tempdir");
    let local = episode(&[], dir.path(), &[], "local");
    assert!(
        wait_until(Duration::from_secs(10), || processes_under(dir.path())
            .is_empty()),
        "local: processes outlived dsh mcp: {:?}",
        processes_under(dir.path())
    );

    let server = LocalServer::start();
    let config = [
        "--config".to_owned(),
        config_dir().join("e2b-local.yaml").display().to_string(),
    ];
    let scratch = tempfile::tempdir().expect("tempdir");
    let e2b = episode(&config, scratch.path(), &server.env(), "e2b-local");
    assert!(
        wait_until(Duration::from_secs(10), || sandboxes(&server) == 0),
        "e2b-local: the sandbox outlived dsh mcp"
    );

    assert_eq!(
        steps(&local, "local"),
        steps(&e2b, "e2b-local"),
        "the same episode on both"
    );
    println!("{}", table(&[("local", &local), ("e2b-local", &e2b)]));
}
