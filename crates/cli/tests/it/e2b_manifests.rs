//! The shipped E2B manifests and the seeds' entry list, through `dsh`:
//! they name the three E2B plugins, load as written (the seeds' old owner
//! name with a deprecation warning), and the local one works against an
//! e2b-local server configured by the variables it prints.
//!
//! Needs root (e2b-local).

use std::process::{Command as Process, Output};

use e2b_local::harness::LocalServer;

use crate::support::{config_dir, dsh as dsh_command, require};

const E2B_PLUGINS: [&str; 3] = ["dsh-e2b-owner", "dsh-subprocess-e2b", "dsh-fs-e2b"];

/// The entry list of the reference design's notes (seed 003), verbatim: it
/// names the owner by its old name, `dsh-e2b`.
const SEED_ENTRIES: &str = "\
- id: e2b
  name: '@deepseek-ai/dsh-e2b'
  config:
    cwd: /home/user/workspace
    timeoutMs: 300000

- id: subprocess-e2b
  name: '@deepseek-ai/dsh-subprocess-e2b'

- id: fs-e2b
  name: '@deepseek-ai/dsh-fs-e2b'
";

fn require_libraries() {
    require(&E2B_PLUGINS);
}

/// `dsh` with exactly `env` added (no `E2B_*` of this process leaks in).
fn dsh(env: &[(String, String)]) -> Process {
    let mut command = dsh_command();
    for (name, _) in std::env::vars() {
        if name.starts_with("E2B_") {
            command.env_remove(name);
        }
    }
    command.envs(env.iter().cloned());
    command
}

fn run(env: &[(String, String)], args: &[&str]) -> String {
    run_with_stderr(env, args).0
}

/// A successful run's stdout and stderr.
fn run_with_stderr(env: &[(String, String)], args: &[&str]) -> (String, String) {
    let output: Output = dsh(env).args(args).output().expect("run dsh");
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    assert!(output.status.success(), "dsh {args:?}: {stderr}");
    (
        String::from_utf8(output.stdout).expect("UTF-8 output"),
        stderr,
    )
}

/// The ids of `server`'s sandboxes, running or paused (its API, as a
/// client sees them).
fn sandboxes(server: &LocalServer) -> Vec<String> {
    let output = Process::new("curl")
        .args(["-sSf", "-m", "10", "-H"])
        .arg(format!("X-API-Key: {}", server.api_key()))
        .arg(format!(
            "{}/v2/sandboxes?state=running,paused",
            server.api_url()
        ))
        .output()
        .expect("run curl");
    assert!(output.status.success(), "list sandboxes: {output:?}");
    let list: serde_json::Value = serde_json::from_slice(&output.stdout).expect("sandbox list");
    list.as_array()
        .expect("a list")
        .iter()
        .map(|sandbox| sandbox["sandboxID"].as_str().expect("an id").to_owned())
        .collect()
}

fn shipped(name: &str) -> String {
    config_dir().join(name).display().to_string()
}

#[test]
fn the_shipped_manifests_name_the_three_e2b_plugins() {
    require_libraries();
    let yaml = run(
        &[],
        &["--config", &shipped("e2b-local.yaml"), "plugins", "--json"],
    );
    let toml = run(
        &[],
        &["--config", &shipped("e2b-local.toml"), "plugins", "--json"],
    );
    assert_eq!(yaml, toml, "e2b-local.yaml and .toml are one composition");
    let cloud = run(
        &[],
        &["--config", &shipped("e2b.yaml"), "plugins", "--json"],
    );
    assert_eq!(yaml, cloud, "e2b.yaml is the same composition");

    let listed: serde_json::Value = serde_json::from_str(&yaml).unwrap();
    let names: Vec<&str> = listed
        .as_array()
        .unwrap()
        .iter()
        .map(|entry| entry["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        names[0], "dsh-e2b-owner",
        "the owner loads first: {names:?}"
    );
    let mut sorted = names.clone();
    sorted.sort_unstable();
    let mut expected = E2B_PLUGINS.to_vec();
    expected.sort_unstable();
    assert_eq!(sorted, expected);
    for manifest in ["e2b-local.yaml", "e2b-local.toml", "e2b.yaml"] {
        let (_, stderr) = run_with_stderr(&[], &["--config", &shipped(manifest), "check"]);
        assert!(
            !stderr.contains("deprecated"),
            "{manifest} uses current names: {stderr}"
        );
    }
}

#[test]
fn the_seed_entry_list_loads_as_written() {
    require_libraries();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("seed.yaml");
    std::fs::write(&path, SEED_ENTRIES).unwrap();
    let path = path.display().to_string();
    let (_, stderr) = run_with_stderr(&[], &["--config", &path, "check"]);
    assert!(
        stderr.contains(
            "entry \"e2b\" (line 1): plugin name \"@deepseek-ai/dsh-e2b\" is deprecated, the \
             plugin is now \"dsh-e2b-owner\""
        ),
        "the old owner name warns, naming the new one: {stderr}"
    );
    let listed: serde_json::Value =
        serde_json::from_str(&run(&[], &["--config", &path, "plugins", "--json"])).unwrap();
    assert!(
        listed[0]["library"]
            .as_str()
            .unwrap()
            .ends_with("/libdsh_e2b_owner.so"),
        "the old name loads the owner: {listed}"
    );
    let ids: Vec<&str> = listed
        .as_array()
        .unwrap()
        .iter()
        .map(|entry| entry["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids[0], "e2b", "{ids:?}");
    assert_eq!(ids.len(), 3, "{ids:?}");
}

#[test]
fn the_local_manifest_works_against_e2b_local_and_leaves_nothing() {
    require_libraries();
    let server = LocalServer::start();
    let env = server.env();
    let manifest = shipped("e2b-local.yaml");

    let written = run(
        &env,
        &[
            "--config",
            &manifest,
            "fs",
            "write",
            "/home/user/workspace/note.txt",
            "hello\n",
        ],
    );
    assert!(!written.trim().is_empty(), "write prints the version");
    assert!(sandboxes(&server).is_empty(), "gone when dsh exits");
    let listing = run(&env, &["--config", &manifest, "fs", "ls"]);
    assert!(
        sandboxes(&server).is_empty(),
        "gone when dsh exits: {listing}"
    );

    // Across runs in one sandbox: the shipped manifest with `pause`, then
    // reconnecting by id.
    let dir = tempfile::tempdir().unwrap();
    let text = std::fs::read_to_string(&manifest).unwrap();
    let pausing = dir.path().join("pause.yaml");
    std::fs::write(
        &pausing,
        text.replace("onDispose: kill", "onDispose: pause"),
    )
    .unwrap();
    let pausing = pausing.display().to_string();
    run(
        &env,
        &[
            "--config",
            &pausing,
            "fs",
            "write",
            "/home/user/workspace/note.txt",
            "hello world\n",
        ],
    );
    let listed = sandboxes(&server);
    assert_eq!(listed.len(), 1, "pause keeps the sandbox");
    let id = listed[0].clone();
    let again = dir.path().join("again.yaml");
    std::fs::write(
        &again,
        text.replace("onDispose: kill", "onDispose: pause").replace(
            "      template: base\n",
            &format!("      sandboxId: {id}\n"),
        ),
    )
    .unwrap();
    let again = again.display().to_string();
    assert_eq!(
        run(
            &env,
            &[
                "--config",
                &again,
                "fs",
                "cat",
                "/home/user/workspace/note.txt"
            ]
        ),
        "hello world\n"
    );
    run(
        &env,
        &[
            "--config",
            &again,
            "fs",
            "edit",
            "/home/user/workspace/note.txt",
            "world",
            "there",
        ],
    );
    assert_eq!(
        run(&env, &["--config", &again, "fs", "cat", "note.txt"]),
        "hello there\n"
    );
    let listing = run(&env, &["--config", &again, "fs", "ls"]);
    assert!(listing.contains("note.txt"), "{listing}");
    let killing = dir.path().join("kill.yaml");
    std::fs::write(
        &killing,
        text.replace(
            "      template: base\n",
            &format!("      sandboxId: {id}\n"),
        ),
    )
    .unwrap();
    run(
        &env,
        &[
            "--config",
            &killing.display().to_string(),
            "fs",
            "stat",
            "note.txt",
        ],
    );
    assert!(sandboxes(&server).is_empty(), "killed at the last exit");
}
