//! Durable commands as a user drives them (`dsh exec --detach`, `ps`,
//! `attach`, `kill`, `forget`), each `dsh` a new host: on the local
//! composition (state under `XDG_STATE_HOME`) and on e2b-local (a sandbox
//! left running by `onDispose: leave`, reconnected by `sandboxId`).

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Duration;

use e2b_local::harness::LocalServer;
use serde_json::Value;

use crate::e2b_shutdown::sandboxes;
use crate::shutdown::processes_with;
use crate::support::{Scratch, config_dir, dsh, require, wait_until};

const LIMIT: Duration = Duration::from_secs(60);

/// `line 1` … `line 150`, one every 10 ms, then `done` on stderr, exit 7.
const NUMBERED: &str = r#"i=1
while [ "$i" -le 150 ]; do echo "line $i"; i=$((i + 1)); sleep 0.01; done
echo done >&2
exit 7"#;

fn numbered() -> Vec<u8> {
    (1..=150)
        .map(|i| format!("line {i}\n"))
        .collect::<String>()
        .into_bytes()
}

/// A world reached by fresh `dsh` processes, and where its durable state
/// lives on this machine.
trait World {
    fn dsh(&self, args: &[&str]) -> Command;
    /// The directories named `id` anywhere in the world's durable state.
    fn state_of(&self, id: &str) -> Vec<PathBuf>;
    /// The sandbox that is the world, if it is one.
    fn sandbox(&self) -> Option<String>;
}

fn run(world: &dyn World, args: &[&str]) -> Output {
    world.dsh(args).output().expect("run dsh")
}

fn detach(world: &dyn World, argv: &[&str]) -> String {
    let mut args = vec!["exec", "--detach", "--"];
    args.extend_from_slice(argv);
    let output = run(world, &args);
    assert!(output.status.success(), "exec --detach: {output:?}");
    let id = String::from_utf8(output.stdout)
        .expect("UTF-8")
        .trim()
        .to_owned();
    assert_eq!(id.len(), 32, "an id alone on stdout: {id:?}");
    // Where it runs, for the next dsh to reconnect: said on stderr.
    let stderr = String::from_utf8_lossy(&output.stderr);
    match world.sandbox() {
        Some(sandbox) => assert!(
            stderr.contains(&format!("runs in sandbox {sandbox}"))
                && stderr.contains(&format!("`sandboxId: {sandbox}`")),
            "{stderr}"
        ),
        None => assert!(!stderr.contains("sandbox"), "{stderr}"),
    }
    id
}

fn listed(world: &dyn World, id: &str) -> Option<Value> {
    let output = run(world, &["--json", "ps"]);
    assert!(output.status.success(), "ps: {output:?}");
    let rows: Value = serde_json::from_slice(&output.stdout).expect("ps --json");
    rows.as_array()
        .expect("a list")
        .iter()
        .find(|row| row["id"] == id)
        .cloned()
}

fn ended(world: &dyn World, id: &str) -> bool {
    listed(world, id).is_some_and(|row| row["state"] == "ended")
}

fn attach(world: &dyn World, id: &str, from: u64) -> Output {
    run(world, &["attach", id, "--from", &from.to_string()])
}

/// `tag` keeps this scenario's processes apart from a concurrent one's.
fn scenario(world: &dyn World, tag: u32) {
    // Offsets: from 0 while it runs, from the middle and the end after it
    // ended, each from a new host.
    let id = detach(world, &["sh", "-c", NUMBERED]);
    let row = listed(world, &id).expect("listed right after the start");
    assert_eq!(row["state"], "running", "{row}");
    let expected = numbered();
    let whole = attach(world, &id, 0);
    assert_eq!(
        whole.status.code(),
        Some(7),
        "attach exits as the command did: {whole:?}"
    );
    assert_eq!(whole.stdout, expected, "everything from 0");
    assert_eq!(whole.stderr, b"done\n");
    let middle = expected.len() / 2;
    let rest = attach(world, &id, middle as u64);
    assert_eq!(rest.status.code(), Some(7));
    let mut joined = expected[..middle].to_vec();
    joined.extend_from_slice(&rest.stdout);
    assert_eq!(joined, expected, "no gap, no duplicate at the middle");
    let end = attach(world, &id, expected.len() as u64);
    assert_eq!((end.status.code(), end.stdout.len()), (Some(7), 0));
    let row = listed(world, &id).expect("listed");
    assert_eq!(row["status"]["code"], 7, "{row}");
    assert_eq!(row["stdoutBytes"], expected.len(), "{row}");

    // The true status of a command that ended with no host attached.
    let quiet = detach(world, &["sh", "-c", "sleep 0.3; exit 9"]);
    assert!(
        wait_until(LIMIT, || ended(world, &quiet)),
        "ends unattended"
    );
    assert_eq!(listed(world, &quiet).expect("listed")["status"]["code"], 9);
    assert_eq!(attach(world, &quiet, 0).status.code(), Some(9));

    // Terminate from a new host: nothing of the group is left (counted).
    let marker = format!("300.{}{tag}", std::process::id());
    let script = format!("sleep {marker} & sleep {marker} & wait");
    let busy = detach(world, &["sh", "-c", &script]);
    assert!(
        wait_until(LIMIT, || processes_with(&marker).len() == 3),
        "the shell and two sleeps run: {:?}",
        processes_with(&marker)
    );
    let forget = run(world, &["forget", &busy]);
    assert_eq!(
        forget.status.code(),
        Some(1),
        "forget refuses a running command: {forget:?}"
    );
    let kill = run(world, &["kill", &busy, "--grace-ms", "200"]);
    assert!(kill.status.success(), "kill: {kill:?}");
    assert_eq!(
        String::from_utf8_lossy(&kill.stdout).trim(),
        "killed SIGTERM"
    );
    assert_eq!(
        processes_with(&marker),
        Vec::<u32>::new(),
        "nothing of the group"
    );

    // Retention: what was dropped is reported, what is kept is exact.
    let flood = detach(world, &["sh", "-c", "seq 1 100000"]);
    let detached = run(
        world,
        &[
            "exec", "--detach", "--retain", "65536", "--", "seq", "1", "100000",
        ],
    );
    assert!(detached.status.success(), "{detached:?}");
    let bounded = String::from_utf8(detached.stdout)
        .expect("UTF-8")
        .trim()
        .to_owned();
    assert!(wait_until(LIMIT, || ended(world, &bounded) && ended(world, &flood)));
    let all: Vec<u8> = (1..=100_000)
        .map(|i| format!("{i}\n"))
        .collect::<String>()
        .into_bytes();
    assert_eq!(
        attach(world, &flood, 0).stdout,
        all,
        "16 MiB default keeps it all"
    );
    let row = listed(world, &bounded).expect("listed");
    let kept_from = row["stdoutRetainedFrom"].as_u64().expect("a number") as usize;
    assert!(kept_from > 0 && all.len() - kept_from >= 65536, "{row}");
    let tail = attach(world, &bounded, 0);
    assert_eq!(tail.stdout, all[kept_from..], "the retained tail, exactly");
    let warning = String::from_utf8_lossy(&tail.stderr);
    assert!(
        warning.contains(&format!(
            "{kept_from} bytes before offset {kept_from} are no longer retained"
        )),
        "{warning}"
    );

    // Forged and foreign ids.
    let forged = run(world, &["attach", "../../etc"]);
    assert_eq!(forged.status.code(), Some(2), "{forged:?}");
    let foreign = run(world, &["attach", &"0".repeat(32)]);
    assert_eq!(foreign.status.code(), Some(1), "{foreign:?}");
    assert!(String::from_utf8_lossy(&foreign.stderr).contains("no durable command"));

    // Forget removes everything.
    for id in [&id, &quiet, &busy, &flood, &bounded] {
        assert!(!world.state_of(id).is_empty(), "state of {id} exists");
        let forget = run(world, &["forget", id]);
        assert!(forget.status.success(), "forget {id}: {forget:?}");
        assert_eq!(
            world.state_of(id),
            Vec::<PathBuf>::new(),
            "nothing of {id} left"
        );
        assert!(listed(world, id).is_none());
    }
}

/// Every directory named `name` under `root` (not following symlinks).
fn dirs_named(root: &Path, name: &str) -> Vec<PathBuf> {
    let output = Command::new("find")
        .arg(root)
        .args(["-xdev", "-type", "d", "-name", name])
        .output()
        .expect("run find");
    String::from_utf8_lossy(&output.stdout)
        .lines()
        .map(PathBuf::from)
        .collect()
}

struct Local {
    state: tempfile::TempDir,
}

impl World for Local {
    fn dsh(&self, args: &[&str]) -> Command {
        let mut command = dsh();
        command.args(args).env("XDG_STATE_HOME", self.state.path());
        command
    }

    fn state_of(&self, id: &str) -> Vec<PathBuf> {
        dirs_named(self.state.path(), id)
    }

    fn sandbox(&self) -> Option<String> {
        None
    }
}

#[test]
fn durable_commands_outlive_their_host_on_the_local_composition() {
    require(&["dsh-fs-local", "dsh-subprocess-local"]);
    let world = Local {
        state: tempfile::tempdir().expect("tempdir"),
    };
    scenario(&world, 1);
    let durable = world.state.path().join("dsh/durable");
    let mode = std::os::unix::fs::PermissionsExt::mode(
        &std::fs::metadata(&durable)
            .expect("state dir")
            .permissions(),
    );
    assert_eq!(mode & 0o777, 0o700, "the state directory is private");
}

struct E2b {
    server: LocalServer,
    manifest: String,
    _scratch: Scratch,
}

impl World for E2b {
    fn dsh(&self, args: &[&str]) -> Command {
        let mut command = dsh();
        command
            .arg("--config")
            .arg(&self.manifest)
            .args(args)
            .envs(self.server.env());
        command
    }

    fn state_of(&self, id: &str) -> Vec<PathBuf> {
        dirs_named(self.server.state_dir(), id)
    }

    fn sandbox(&self) -> Option<String> {
        Some(sandbox_id(&self.server))
    }
}

#[test]
fn durable_commands_outlive_their_host_on_e2b_local() {
    require(&["dsh-e2b-owner", "dsh-fs-e2b", "dsh-subprocess-e2b"]);
    let server = LocalServer::start();
    let scratch = Scratch::new();
    let shipped = std::fs::read_to_string(config_dir().join("e2b-local.yaml")).expect("manifest");
    let leave = scratch.write(
        "leave.yaml",
        &shipped.replace("onDispose: kill", "onDispose: leave"),
    );
    let mut first = E2b {
        server,
        manifest: leave,
        _scratch: scratch,
    };
    // The first host creates the sandbox and leaves it; every later one
    // reconnects to it.
    let started = first
        .dsh(&["exec", "--", "true"])
        .output()
        .expect("run dsh");
    assert!(started.status.success(), "{started:?}");
    assert_eq!(sandboxes(&first.server), 1);
    let id = sandbox_id(&first.server);
    let reconnect = shipped
        .replace(
            "onDispose: kill",
            &format!("onDispose: leave\n      sandboxId: {id}"),
        )
        .lines()
        .filter(|line| !line.contains("template:") && !line.contains("timeoutMs:"))
        .collect::<Vec<_>>()
        .join("\n");
    first.manifest = first._scratch.write("reconnect.yaml", &reconnect);
    scenario(&first, 2);
    assert_eq!(sandboxes(&first.server), 1, "one sandbox throughout");
}

/// The id of the one sandbox `server` lists.
pub fn sandbox_id(server: &LocalServer) -> String {
    let output = Command::new("curl")
        .args(["-sSf", "-m", "10", "-H"])
        .arg(format!("X-API-Key: {}", server.api_key()))
        .arg(format!("{}/sandboxes", server.api_url()))
        .output()
        .expect("run curl");
    let list: Value = serde_json::from_slice(&output.stdout).expect("sandbox list");
    list[0]["sandboxID"].as_str().expect("an id").to_owned()
}
