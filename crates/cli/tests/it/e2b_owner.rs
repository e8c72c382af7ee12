//! The `e2b` owner through `dsh` against a real e2b-local server: the
//! sandbox lives exactly as long as `dsh` (as `onDispose` says), and a
//! command of the sandbox user cannot move the owner's private state away.

use std::process::Stdio;
use std::time::{Duration, Instant};

use e2b_local::harness::LocalServer;

use crate::durable::sandbox_id;
use crate::e2b_shutdown::sandboxes;
use crate::shutdown::send;
use crate::support::{Scratch, dsh, require};

/// `dsh` with `server`'s variables in its environment.
fn dsh_on(server: &LocalServer) -> std::process::Command {
    let mut command = dsh();
    command.envs(server.env());
    command
}

fn run(server: &LocalServer, args: &[&str]) -> std::process::Output {
    let output = dsh_on(server).args(args).output().expect("run dsh");
    assert!(
        output.status.success(),
        "dsh {args:?}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    output
}

/// A manifest with the owner (configured by the environment, as the
/// shipped ones are) and the local fs and subprocess.
fn local_world_manifest(scratch: &Scratch, on_dispose: &str) -> String {
    require(&["dsh-e2b-owner", "dsh-fs-local", "dsh-subprocess-local"]);
    scratch.write(
        &format!("owner-{on_dispose}.yaml"),
        &format!(
            "plugins:\n  - id: e2b\n    name: dsh-e2b-owner\n    config: {{ onDispose: {on_dispose} }}\n  - id: fs\n    name: dsh-fs-local\n  - id: subprocess\n    name: dsh-subprocess-local\n"
        ),
    )
}

#[test]
fn the_sandbox_lives_exactly_as_long_as_dsh() {
    let server = LocalServer::start();
    let scratch = Scratch::new();
    let kill = local_world_manifest(&scratch, "kill");
    let leave = local_world_manifest(&scratch, "leave");

    let listing = String::from_utf8(run(&server, &["--config", &kill, "plugins"]).stdout).unwrap();
    assert!(listing.contains("dsh-e2b-owner"), "{listing}");
    assert_eq!(sandboxes(&server), 0, "`plugins` creates nothing");

    run(&server, &["--config", &kill, "exec", "--", "true"]);
    assert_eq!(sandboxes(&server), 0, "the sandbox is gone after dsh");
    run(&server, &["--config", &leave, "exec", "--", "true"]);
    assert_eq!(sandboxes(&server), 1, "leave keeps it");

    // SIGTERM while a command runs: orderly disposal kills the sandbox.
    let before = sandboxes(&server);
    let mut child = dsh_on(&server)
        .args(["--config", &kill, "exec", "--", "sleep", "60"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    while sandboxes(&server) == before {
        assert!(Instant::now() < deadline, "dsh never created its sandbox");
        std::thread::sleep(Duration::from_millis(50));
    }
    send(child.id(), libc::SIGTERM);
    let status = child.wait().unwrap();
    assert!(!status.success());
    assert_eq!(sandboxes(&server), before, "SIGTERM disposed the sandbox");
}

/// The E2B composition, the owner left running, reconnecting to `sandbox`
/// when given.
fn e2b_world_manifest(scratch: &Scratch, sandbox: Option<&str>) -> String {
    require(&["dsh-e2b-owner", "dsh-fs-e2b", "dsh-subprocess-e2b"]);
    let reconnect = sandbox
        .map(|id| format!(", sandboxId: {id}"))
        .unwrap_or_default();
    scratch.write(
        &format!("e2b-{}.yaml", sandbox.unwrap_or("new")),
        &format!(
            "plugins:\n  - id: e2b\n    name: dsh-e2b-owner\n    config: {{ onDispose: leave{reconnect} }}\n  - id: fs\n    name: dsh-fs-e2b\n  - id: subprocess\n    name: dsh-subprocess-e2b\n"
        ),
    )
}

/// A command of the sandbox user cannot move the owner's private state
/// away (issue 9): `mv` fails on its own — dsh exits with the command's
/// status — and the next command and a reconnect to the same sandbox work.
#[test]
fn a_command_cannot_move_the_owners_state_away() {
    let server = LocalServer::start();
    let scratch = Scratch::new();
    let first = e2b_world_manifest(&scratch, None);
    let moved = dsh_on(&server)
        .args(["--config", &first, "exec", "--"])
        .args(["mv", "/var/lib/dsh-e2b", "/home/user/workspace/x"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&moved.stderr);
    assert_eq!(moved.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("Permission denied"), "{stderr}");
    assert_eq!(sandboxes(&server), 1, "onDispose: leave keeps it");
    // The next command, through a reconnect to the same sandbox: the
    // owner's state is where it was (mv may have left a partial copy of
    // what the user could read, across filesystems).
    let again = e2b_world_manifest(&scratch, Some(&sandbox_id(&server)));
    let script = "test -d /var/lib/dsh-e2b && echo still here";
    let out = run(
        &server,
        &["--config", &again, "exec", "--", "sh", "-c", script],
    );
    assert_eq!(String::from_utf8_lossy(&out.stdout), "still here\n");
}
