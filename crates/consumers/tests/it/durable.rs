//! Durable background commands across a restart of the tools: a new
//! `Tools` over a new provider instance of the same world finds them,
//! reads their output by cursor from any offset and kills them.

use std::time::{Duration, Instant};

use dsh_consumers::commands::{CommandInfo, CommandStatus, Commands, ReadOutputResult, RunResult};
use dsh_consumers::{Outcome, Tools};
use dsh_plugin_api::ErrorKind;
use dsh_plugin_api::subprocess::SubprocessProvider;
use serde_json::{Value, json};

use crate::world::LocalWorld;

fn request<T: serde::de::DeserializeOwned>(value: Value) -> T {
    serde_json::from_value(value).expect("a valid request")
}

async fn run(commands: &Commands, value: Value) -> RunResult {
    commands.run(request(value)).await.expect("run")
}

async fn read(commands: &Commands, value: Value) -> ReadOutputResult {
    commands
        .read_output(request(value))
        .await
        .expect("read_output")
}

async fn listed(commands: &Commands, id: &str) -> Option<CommandInfo> {
    commands
        .list_commands(request(json!({})))
        .await
        .expect("list_commands")
        .commands
        .into_iter()
        .find(|info| info.id == id)
}

const LINES: u32 = 200;

/// `line 1` … `line 200`, one every 10 ms, then a line on stderr, exit 7.
fn numbered() -> String {
    format!(
        "for i in $(seq 1 {LINES}); do echo \"line $i\"; sleep 0.01; done; echo gone >&2; exit 7"
    )
}

fn numbered_output() -> String {
    let mut expected: String = (1..=LINES).map(|i| format!("line {i}\n")).collect();
    expected.push_str("gone\n");
    expected
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn durable_commands_survive_a_restart_of_the_tools() {
    let world = LocalWorld::new();
    let env = world.marked_env();

    // The first server.
    let first = Tools::new(world.fs.clone(), world.subprocess.clone());
    let counter = run(
        &first.commands,
        json!({"command": numbered(), "background": true, "durable": true, "env": env}),
    )
    .await;
    assert!(counter.durable, "{counter:?}");
    let hex = counter.id.strip_prefix("cmd-").expect("a cmd- id");
    assert_eq!(hex.len(), 32, "the tool id carries the durable id: {hex}");
    let server = run(
        &first.commands,
        json!({"command": "tail -f /dev/null & tail -f /dev/null; wait", "background": true, "durable": true, "env": env}),
    )
    .await;
    assert!(server.durable);
    let early = read(
        &first.commands,
        json!({"id": counter.id, "cursor": 0, "pattern": "^line 5$", "wait_ms": 10000}),
    )
    .await;
    assert_eq!(early.matched, Some(true), "{early:?}");
    assert_eq!(early.status, CommandStatus::Running);
    world.until_running("tail", 2).await;

    // The server ends: its tools shut down, its provider is disposed.
    assert!(first.shutdown().await.is_empty());
    drop(first);
    world.dispose().await;
    assert_eq!(world.marked_running("tail"), 2, "durable commands run on");

    // A new server: a new provider instance of the same world.
    let subprocess = world.new_subprocess();
    let second = Tools::new(world.fs.clone(), subprocess.clone());
    let info = listed(&second.commands, &server.id)
        .await
        .expect("the new server lists the command it did not start");
    assert!(info.durable && info.background && !info.stdin_open);
    assert_eq!(info.status, CommandStatus::Running);
    assert_eq!(info.command, "tail -f /dev/null & tail -f /dev/null; wait");

    // The counter ends while nothing is attached to it.
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let info = listed(&second.commands, &counter.id).await.expect("listed");
        if info.status == CommandStatus::Exited {
            assert_eq!(info.exit.exit_code, Some(7));
            assert_eq!(info.total_bytes, numbered_output().len() as u64);
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the counter did not end: {info:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    // Its whole output by cursor, in small pieces: no gap, no duplicate.
    let mut got = String::new();
    let mut cursor = 0;
    loop {
        let piece = read(
            &second.commands,
            json!({"id": counter.id, "cursor": cursor, "max_bytes": 300}),
        )
        .await;
        assert_eq!(piece.dropped, 0, "{piece:?}");
        assert_eq!(piece.cursor, cursor + piece.output.len() as u64);
        got.push_str(&piece.output);
        cursor = piece.cursor;
        if piece.remaining_bytes == 0 {
            assert_eq!(piece.status, CommandStatus::Exited);
            assert_eq!(piece.exit.exit_code, Some(7), "the true exit status");
            break;
        }
    }
    assert_eq!(got, numbered_output());
    // Any offset again, e.g. the middle (a new attachment from there).
    let middle = read(
        &second.commands,
        json!({"id": counter.id, "cursor": 1000, "max_bytes": 100000}),
    )
    .await;
    assert_eq!(middle.output, numbered_output()[1000..]);

    // Kill after the restart: nothing of its group is left.
    let killed = second
        .commands
        .kill(request(json!({"id": server.id, "grace_ms": 300})))
        .await
        .expect("kill");
    assert_eq!(killed.status, CommandStatus::Exited);
    assert_eq!(killed.exit.signal.as_deref(), Some("SIGTERM"));
    assert_eq!(
        world.marked_processes_after(Duration::from_secs(5)).await,
        Vec::<u32>::new()
    );

    // The second server ends: the killed command's retained state is
    // removed, the one that ended on its own stays for a later server.
    assert!(second.shutdown().await.is_empty());
    let left: Vec<String> = subprocess
        .list_durable()
        .await
        .expect("list_durable")
        .into_iter()
        .map(|command| command.id)
        .collect();
    assert_eq!(left, [hex.to_owned()]);
    subprocess.forget(hex).await.expect("forget");
    subprocess.dispose().await.expect("dispose");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn what_is_not_durable_and_unknown_durable_ids() {
    let world = LocalWorld::new();
    let commands = world.commands();
    let fed = run(
        &commands,
        json!({"command": "cat", "background": true, "stdin": "x"}),
    )
    .await;
    assert!(!fed.durable, "stdin text: an ordinary command");
    let plain = run(
        &commands,
        json!({"command": "true", "background": true, "durable": false}),
    )
    .await;
    assert!(!plain.durable);
    // A background command is the session's unless durable: true is asked
    // for, and its result says so.
    let session = run(&commands, json!({"command": "true", "background": true})).await;
    assert!(!session.durable, "{session:?}");
    assert!(
        session
            .text()
            .contains("until it exits, kill, or this server ends"),
        "{}",
        session.text()
    );
    assert!(
        plain
            .id
            .strip_prefix("cmd-")
            .unwrap()
            .parse::<u64>()
            .is_ok()
    );
    let err = commands
        .run(request(
            json!({"command": "cat", "background": true, "durable": true, "keep_stdin": true}),
        ))
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidInput, "{err}");
    let unknown = format!("cmd-{}", "0".repeat(32));
    let err = commands
        .read_output(request(json!({"id": unknown})))
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::NotFound, "{err}");
    assert_eq!(err.subject(), Some(unknown.as_str()));
    assert!(commands.shutdown().await.is_empty());
    world.dispose().await;
}
