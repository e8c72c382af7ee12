//! `dsh template`: the build context it writes builds with E2B's own
//! `Template()` builder (the official JS SDK) against e2b-local, and in a
//! sandbox from that template both E2B providers run the template's helper
//! instead of uploading their own; in a sandbox from `base` they upload it.
//! The owner finds the runtime root the recipe made — or one an earlier
//! `dsh` left with only durable commands' state in it — without its script.
//!
//! Needs root (e2b-local) and the SDK peers (`scripts/install-sdk-peers.sh`).

use std::path::Path;
use std::process::{Command as Process, Output};

use e2b_local::harness::LocalServer;

use crate::e2b_fs::left_sandbox;
use crate::mcp::peers;
use crate::support::{Scratch, config_dir, dsh, require};

/// Runs `dsh` with `server`'s variables.
fn dsh_on(server: &LocalServer, args: &[&str]) -> Output {
    dsh()
        .envs(server.env())
        .args(args)
        .output()
        .expect("run dsh")
}

/// The shipped e2b-local manifest with its sandbox made from `template`.
fn manifest(dir: &Path, template: &str) -> String {
    let text = std::fs::read_to_string(config_dir().join("e2b-local.yaml")).expect("read");
    let path = dir.join(format!("{template}.yaml"));
    std::fs::write(
        &path,
        text.replace("template: base", &format!("template: {template}")),
    )
    .expect("write");
    path.display().to_string()
}

/// The argv of every process in the sandbox while a program ran that used
/// both providers' helpers: a search (`dsh-fs-e2b`'s world-side process)
/// and a command (`dsh-subprocess-e2b`'s supervisor) listing the processes.
fn helpers_seen(server: &LocalServer, manifest: &str, dir: &Path) -> String {
    let program = dir.join("ps.py");
    std::fs::write(
        &program,
        "dsh.write_file(path='t.txt', content='needle\\n')\n\
         assert dsh.grep(pattern='needle', path='.')['matches']\n\
         print(dsh.run(command='ps -eo args')['output'])\n",
    )
    .expect("write the program");
    let output = dsh_on(
        server,
        &[
            "--config",
            manifest,
            "code",
            "run",
            &program.display().to_string(),
        ],
    );
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    assert!(output.status.success(), "{output:?}");
    stdout
}

/// The envd calls (`/process.Process/Start`, …) a `dsh exec -- true` made,
/// in order, as its debug log names them.
fn envd_calls_of_exec(server: &LocalServer, manifest: &str) -> Vec<String> {
    let output = dsh_on(
        server,
        &[
            "--log",
            "e2b_client::transport=debug",
            "--config",
            manifest,
            "exec",
            "--",
            "true",
        ],
    );
    assert!(output.status.success(), "{output:?}");
    String::from_utf8_lossy(&output.stderr)
        .lines()
        .filter(|line| line.contains("envd request"))
        .filter_map(|line| line.split(" path=").nth(1))
        .map(|rest| {
            rest.split_whitespace()
                .next()
                .unwrap_or_default()
                .to_owned()
        })
        .collect()
}

fn count(calls: &[String], path: &str) -> usize {
    calls.iter().filter(|call| *call == path).count()
}

#[test]
fn a_reconnect_to_a_runtime_root_holding_only_durable_state_runs_no_setup_script() {
    let server = LocalServer::start();
    let scratch = Scratch::new();
    // Left by a `dsh exec --detach`: its durable command's state stays in
    // the runtime root; the helper it uploaded went with its disposal.
    let again = left_sandbox(&server, &scratch);
    let calls = envd_calls_of_exec(&server, &again.display().to_string());
    // The owner's look (one listing), then the helper's install script and
    // probe and the command: no script of the owner's.
    assert_eq!(
        count(&calls, "/filesystem.Filesystem/ListDir"),
        1,
        "{calls:?}"
    );
    assert_eq!(count(&calls, "/process.Process/Start"), 2, "{calls:?}");
}

#[test]
fn a_template_from_dsh_template_spares_both_providers_the_upload() {
    require(&["dsh-e2b-owner", "dsh-fs-e2b", "dsh-subprocess-e2b"]);
    let server = LocalServer::start();
    let dir = tempfile::tempdir().expect("tempdir");
    let context = dir.path().join("context");

    let name = format!("dsh-helper-{}", std::process::id());
    let built = build_template(&server, &context, &name, |_| {});
    assert!(built.status.success(), "node build.mjs: {built:?}");
    assert!(
        !String::from_utf8_lossy(&built.stdout).trim().is_empty(),
        "the recipe prints the template's id"
    );

    let template_dir = "/var/lib/dsh-e2b/template/";
    let uploaded = [
        "/var/lib/dsh-e2b/fs-e2b-",
        "/var/lib/dsh-e2b/subprocess-e2b-",
    ];
    let seen = helpers_seen(&server, &manifest(dir.path(), &name), dir.path());
    let from_template: Vec<&str> = seen
        .lines()
        .filter(|line| line.starts_with(template_dir))
        .collect();
    assert!(
        from_template
            .iter()
            .any(|line| line.ends_with("dsh-supervisor world")),
        "dsh-fs-e2b runs the template's helper: {seen}"
    );
    assert!(
        from_template.iter().any(|line| !line.ends_with(" world")),
        "dsh-subprocess-e2b runs the template's helper: {seen}"
    );
    assert!(
        !uploaded.iter().any(|dir| seen.contains(dir)),
        "nothing uploaded runs: {seen}"
    );

    // A cold `dsh exec -- true` from the template starts one process, the
    // command, which learns the sandbox itself (no install script, no probe
    // of its own): the owner finds its runtime root made by the recipe and
    // runs no script for it — and, having uploaded nothing and spilled
    // nothing, removes nothing at disposal.
    let calls = envd_calls_of_exec(&server, &manifest(dir.path(), &name));
    assert_eq!(count(&calls, "/process.Process/Start"), 1, "{calls:?}");
    // The owner's look alone (the runtime root and its three ancestors): the
    // helper's copy, inside the runtime root the look vouched for, is run
    // with no look of its own.
    assert_eq!(count(&calls, "/filesystem.Filesystem/Stat"), 4, "{calls:?}");
    assert_eq!(
        count(&calls, "/filesystem.Filesystem/Remove"),
        0,
        "{calls:?}"
    );
    // Its stdin is /dev/null: the command gets a null stdin, with no pipe to
    // close.
    assert_eq!(count(&calls, "/process.Process/CloseStdin"), 0, "{calls:?}");

    // From `base`, both upload their own; the owner's script makes the
    // runtime root, and the upload is removed at disposal.
    let seen = helpers_seen(&server, &manifest(dir.path(), "base"), dir.path());
    assert!(!seen.contains(template_dir), "{seen}");
    assert!(
        uploaded.iter().all(|dir| seen.contains(dir)),
        "both run their upload: {seen}"
    );
    let calls = envd_calls_of_exec(&server, &manifest(dir.path(), "base"));
    assert_eq!(count(&calls, "/process.Process/Start"), 3, "{calls:?}");
    assert_eq!(
        count(&calls, "/filesystem.Filesystem/Remove"),
        1,
        "{calls:?}"
    );

    // The build checks the copy it put in (sandboxes run it unhashed): a
    // helper damaged on its way into the template fails the build.
    let damaged = build_template(
        &server,
        &dir.path().join("damaged"),
        &format!("{name}-damaged"),
        |helper| {
            let mut bytes = std::fs::read(helper).expect("read the helper");
            bytes.extend_from_slice(b"damage");
            std::fs::write(helper, bytes).expect("damage the helper");
        },
    );
    assert!(!damaged.status.success(), "{damaged:?}");
    let said = String::from_utf8_lossy(&damaged.stderr);
    assert!(said.contains("does not match its BLAKE3 digest"), "{said}");
}

/// Writes `dsh template CONTEXT`, lets `alter` change the helper in it, and
/// builds it as a user would (`node build.mjs NAME`, the SDK where node
/// finds it) on `server`; the build's output.
fn build_template(
    server: &LocalServer,
    context: &Path,
    name: &str,
    alter: impl FnOnce(&Path),
) -> Output {
    let written = dsh()
        .arg("template")
        .arg(context)
        .output()
        .expect("dsh template");
    assert!(written.status.success(), "{written:?}");
    let recipe = context.join("build.mjs");
    assert_eq!(
        String::from_utf8_lossy(&written.stdout).trim(),
        recipe.display().to_string()
    );
    let helper = context.join("dsh-supervisor");
    assert!(helper.is_file());
    alter(&helper);
    std::os::unix::fs::symlink(
        peers().join("js/node_modules"),
        context.join("node_modules"),
    )
    .expect("link the SDK");
    Process::new("node")
        .arg(&recipe)
        .arg(name)
        .envs(server.env())
        .output()
        .expect("run node")
}
