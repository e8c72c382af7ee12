//! The command tools on the local world: real processes, real spill files.

use std::time::{Duration, Instant};

use dsh_consumers::Outcome;
use dsh_consumers::commands::{
    CommandStatus, Commands, HEAD_BYTES, MAX_COMMANDS, ReadOutputResult, RunResult, TAIL_BYTES,
};
use dsh_plugin_api::ErrorKind;
use serde_json::{Value, json};

use crate::world::LocalWorld;

/// A request as a client sends it (so the serde contract is exercised).
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exit_codes_signals_and_missing_programs() {
    let world = LocalWorld::new();
    let commands = world.commands();

    let done = run(&commands, json!({"command": "echo out; exit 3"})).await;
    assert_eq!(done.status, CommandStatus::Exited);
    assert_eq!(done.exit.exit_code, Some(3));
    assert_eq!(done.exit.signal, None);
    assert!(!done.exit.timed_out);
    assert_eq!(done.output.as_deref(), Some("out\n"));
    assert!(done.text().contains("exit 3"), "{}", done.text());

    let killed = run(&commands, json!({"command": "kill -TERM $$"})).await;
    assert_eq!(killed.exit.exit_code, None);
    assert_eq!(killed.exit.signal.as_deref(), Some("SIGTERM"));

    let argv = run(&commands, json!({"argv": ["false"]})).await;
    assert_eq!(argv.exit.exit_code, Some(1));

    let quoted = run(
        &commands,
        json!({"argv": ["printf", "%s|", "a b", "$HOME"]}),
    )
    .await;
    assert_eq!(
        quoted.output.as_deref(),
        Some("a b|$HOME|"),
        "argv is not re-parsed"
    );

    // argv reaches the seam as given (no shell in between): a missing
    // program is the seam's error, naming it; in a shell string it is
    // bash's exit 127.
    let missing = commands
        .run(request(json!({"argv": ["no-such-program-dsh"]})))
        .await
        .unwrap_err();
    assert_eq!(missing.kind(), ErrorKind::NotFound, "{missing}");
    assert_eq!(missing.subject(), Some("no-such-program-dsh"), "{missing}");
    assert!(missing.message().contains("not found"), "{missing}");
    let missing = run(&commands, json!({"command": "no-such-program-dsh"})).await;
    assert_eq!(missing.exit.exit_code, Some(127));

    // A relative program path is anchored to the run's cwd.
    std::fs::write(
        world.dir.path().join("cwd/hello.sh"),
        "#!/bin/sh\necho \"hello from $0\" >&2\n",
    )
    .unwrap();
    std::fs::set_permissions(
        world.dir.path().join("cwd/hello.sh"),
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )
    .unwrap();
    let relative = run(&commands, json!({"argv": ["./hello.sh"]})).await;
    assert_eq!(relative.exit.exit_code, Some(0), "{relative:?}");
    assert!(
        relative
            .output
            .as_deref()
            .is_some_and(|out| out.starts_with("hello from /") && out.ends_with("/hello.sh\n")),
        "stderr merged, program anchored: {relative:?}"
    );

    let env = run(
        &commands,
        json!({"command": "printf %s \"$GREETING\"; pwd", "env": {"GREETING": "hi"}, "cwd": ".."}),
    )
    .await;
    let parent = world.dir.path().to_str().unwrap();
    assert_eq!(
        env.output.as_deref(),
        Some(format!("hi{parent}\n").as_str())
    );

    let err = commands
        .run(request(json!({"command": "true", "cwd": "no-such-dir"})))
        .await
        .unwrap_err();
    assert!(err.message().starts_with("run: "), "{err}");
    world.dispose().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stdout_and_stderr_merge_in_write_order() {
    let world = LocalWorld::new();
    let commands = world.commands();
    let merged = run(&commands, json!({"command": "echo a; echo b >&2; echo c"})).await;
    assert_eq!(merged.output.as_deref(), Some("a\nb\nc\n"));
    let argv = run(
        &commands,
        json!({"argv": ["bash", "-c", "echo 1; echo 2 >&2; echo 3 >&2; echo 4"]}),
    )
    .await;
    assert_eq!(argv.output.as_deref(), Some("1\n2\n3\n4\n"));
    let syntax = run(&commands, json!({"command": "echo ("})).await;
    assert_eq!(syntax.exit.exit_code, Some(2));
    assert!(
        syntax
            .output
            .as_deref()
            .unwrap_or("")
            .contains("syntax error"),
        "a syntax error is output: {syntax:?}"
    );
    let stdin = run(
        &commands,
        json!({"command": "tr a-z A-Z", "stdin": "shout\n"}),
    )
    .await;
    assert_eq!(stdin.output.as_deref(), Some("SHOUT\n"));
    world.dispose().await;
}

/// `seq 1 n` as the command prints it.
fn seq_output(n: u64) -> String {
    (1..=n).map(|i| format!("{i}\n")).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn long_output_is_bounded_as_head_and_tail_and_the_rest_readable() {
    let world = LocalWorld::new();
    let commands = world.commands();
    let expected = seq_output(100_000);
    let result = run(&commands, json!({"command": "seq 1 100000"})).await;
    let output = result.output.clone().unwrap();
    let total = expected.len() as u64;
    assert_eq!(result.total_bytes, Some(total));

    let omitted = result.omitted_bytes.unwrap();
    assert_eq!(
        omitted,
        total - (HEAD_BYTES + TAIL_BYTES) as u64,
        "ASCII cuts exactly"
    );
    let (head, rest) = output.split_once("\n[… ").expect("a marker");
    let (marker, tail) = rest.split_once(" …]\n").expect("the marker ends");
    assert_eq!(head, &expected[..HEAD_BYTES]);
    assert_eq!(tail, &expected[expected.len() - TAIL_BYTES..]);
    assert!(
        marker.starts_with(&format!("{omitted} bytes omitted")),
        "{marker}"
    );
    assert!(marker.contains(&format!("cursor={HEAD_BYTES}")), "{marker}");

    // The spill file holds everything, and read_output continues exactly
    // where the head stopped.
    let spill = result.spill_path.clone().expect("a spill path");
    assert_eq!(std::fs::read_to_string(&spill).unwrap(), expected);
    let next = read(
        &commands,
        json!({"id": result.id, "cursor": HEAD_BYTES, "max_bytes": 1000}),
    )
    .await;
    assert_eq!(next.output, &expected[HEAD_BYTES..HEAD_BYTES + 1000]);
    assert_eq!(next.cursor, (HEAD_BYTES + 1000) as u64);
    assert_eq!(next.remaining_bytes, total - next.cursor);
    assert_eq!(next.dropped, 0);
    // Without a cursor, the next read goes on from there.
    let after = read(&commands, json!({"id": result.id, "max_bytes": 10})).await;
    assert_eq!(
        after.output,
        &expected[HEAD_BYTES + 1000..HEAD_BYTES + 1010]
    );
    world.dispose().await;
}

/// FNV-1a, to compare 20 MiB without keeping it.
#[derive(Default)]
struct Checksum(u64, u64);

impl Checksum {
    fn add(&mut self, bytes: &[u8]) {
        if self.0 == 0 {
            self.0 = 0xcbf2_9ce4_8422_2325;
        }
        for byte in bytes {
            self.0 = (self.0 ^ u64::from(*byte)).wrapping_mul(0x100_0000_01b3);
        }
        self.1 += bytes.len() as u64;
    }
}

fn rss_kib(field: &str) -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    status
        .lines()
        .find_map(|line| line.strip_prefix(field))
        .and_then(|rest| rest.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn twenty_mib_read_by_cursor_to_the_end_in_bounded_memory() {
    let world = LocalWorld::new();
    let commands = world.commands();
    // Lines of 1 KiB: 20480 of them are 20 MiB.
    let line = format!("{}\n", "x".repeat(1018));
    let script = "for i in $(seq -w 1 20480); do printf '%s%s\\n' \"$i\" \"$L\"; done";
    let mut expected = Checksum::default();
    for i in 1..=20480 {
        expected.add(format!("{i:05}{line}").as_bytes());
    }

    let before = rss_kib("VmRSS:");
    let started = run(
        &commands,
        json!({"command": script, "env": {"L": line.trim_end()}, "background": true}),
    )
    .await;
    assert_eq!(started.status, CommandStatus::Running);
    let mut got = Checksum::default();
    let mut cursor = 0;
    loop {
        let piece = read(
            &commands,
            json!({"id": started.id, "cursor": cursor, "max_bytes": 1 << 20, "wait_ms": 2000}),
        )
        .await;
        assert_eq!(piece.dropped, 0);
        got.add(piece.output.as_bytes());
        assert_eq!(piece.cursor, cursor + piece.output.len() as u64);
        cursor = piece.cursor;
        if piece.status == CommandStatus::Exited && piece.remaining_bytes == 0 {
            assert_eq!(piece.exit.exit_code, Some(0));
            assert_eq!(piece.total_bytes, 20 << 20);
            break;
        }
    }
    assert_eq!(got.1, 20 << 20);
    assert_eq!(got.0, expected.0, "the bytes read are the bytes written");
    let peak = rss_kib("VmHWM:");
    assert!(
        peak.saturating_sub(before) < 16 * 1024,
        "reading 20 MiB grew the peak RSS by {} KiB",
        peak - before
    );
    world.dispose().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_timeout_kills_a_group_that_ignores_sigterm() {
    let world = LocalWorld::new();
    let commands = world.commands();
    let started = Instant::now();
    let result = run(
        &commands,
        json!({
            "command": "trap '' TERM; sleep 100 & sleep 100 & echo started; wait",
            "env": world.marked_env(),
            "timeout_ms": 1000,
        }),
    )
    .await;
    assert!(result.exit.timed_out, "{result:?}");
    assert_eq!(result.exit.signal.as_deref(), Some("SIGKILL"));
    assert_eq!(result.output.as_deref(), Some("started\n"));
    assert!(started.elapsed() < Duration::from_secs(10));
    assert!(result.text().contains("(timed out)"), "{}", result.text());
    assert_eq!(
        world.marked_processes_after(Duration::from_secs(2)).await,
        Vec::<u32>::new(),
        "the whole group is gone"
    );
    world.dispose().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn background_stdin_is_written_and_closed() {
    let world = LocalWorld::new();
    let commands = world.commands();
    let cat = run(
        &commands,
        json!({"command": "cat", "background": true, "keep_stdin": true}),
    )
    .await;
    assert!(!cat.durable, "a command with an open stdin is not durable");
    let written = commands
        .write_stdin(request(json!({"id": cat.id, "data": "hello\n"})))
        .await
        .unwrap();
    assert_eq!(written.bytes_written, 6);
    let echoed = read(
        &commands,
        json!({"id": cat.id, "pattern": "hello", "wait_ms": 5000}),
    )
    .await;
    assert_eq!(echoed.matched, Some(true));
    assert_eq!(echoed.output, "hello\n");
    assert_eq!(echoed.status, CommandStatus::Running);

    let listed = commands.list_commands(request(json!({}))).await.unwrap();
    let info = listed
        .commands
        .iter()
        .find(|info| info.id == cat.id)
        .unwrap();
    assert!(info.stdin_open && info.background);
    assert_eq!(info.command, "cat");

    let closed = commands
        .close_stdin(request(json!({"id": cat.id})))
        .await
        .unwrap();
    assert!(closed.was_open);
    let again = commands
        .close_stdin(request(json!({"id": cat.id})))
        .await
        .unwrap();
    assert!(!again.was_open, "closing twice is a no-op");
    let exited = read(
        &commands,
        json!({"id": cat.id, "until": "exit", "wait_ms": 5000}),
    )
    .await;
    assert_eq!(exited.status, CommandStatus::Exited);
    assert_eq!(exited.exit.exit_code, Some(0));
    assert_eq!(exited.output, "", "the previous read consumed the output");
    let err = commands
        .write_stdin(request(json!({"id": cat.id, "data": "late"})))
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Closed);

    // A foreground command, or one given stdin text, has no open stdin.
    let fed = run(
        &commands,
        json!({"command": "cat", "background": true, "stdin": "fed"}),
    )
    .await;
    let fed_out = read(&commands, json!({"id": fed.id, "until": "exit"})).await;
    assert_eq!(fed_out.output, "fed");
    let err = commands
        .write_stdin(request(json!({"id": fed.id, "data": "x"})))
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidInput);
    assert!(err.message().starts_with("write_stdin: "), "{err}");
    world.dispose().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn until_pattern_waits_for_a_line_and_kill_ends_the_group() {
    let world = LocalWorld::new();
    let commands = world.commands();
    let server = run(
        &commands,
        json!({
            "command": "echo starting; sleep 0.3; echo ready; sleep 100",
            "background": true,
            "env": world.marked_env(),
        }),
    )
    .await;
    let not_yet = read(
        &commands,
        json!({"id": server.id, "cursor": 0, "until": "pattern", "pattern": "^never$", "wait_ms": 100}),
    )
    .await;
    assert_eq!(not_yet.matched, Some(false));
    let ready = read(
        &commands,
        json!({"id": server.id, "cursor": 0, "pattern": "^ready$", "wait_ms": 10000}),
    )
    .await;
    assert_eq!(ready.matched, Some(true));
    assert_eq!(ready.output, "starting\nready\n");
    assert_eq!(ready.status, CommandStatus::Running);

    let killed = commands
        .kill(request(json!({"id": server.id, "grace_ms": 200})))
        .await
        .unwrap();
    assert_eq!(killed.status, CommandStatus::Exited);
    assert_eq!(killed.exit.signal.as_deref(), Some("SIGTERM"));
    assert!(world.marked_processes().is_empty());
    // Killing again is harmless; the output stays readable.
    commands
        .kill(request(json!({"id": server.id})))
        .await
        .unwrap();
    let all = read(&commands, json!({"id": server.id, "cursor": 0})).await;
    assert_eq!(all.output, "starting\nready\n");
    world.dispose().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn waits_return_progress_within_their_bound() {
    let world = LocalWorld::new();
    let commands = world.commands();
    let sleeper = run(
        &commands,
        json!({"command": "sleep 0.3; echo woke", "background": true}),
    )
    .await;
    // A wait beyond the cap is accepted (and capped), and ends with the exit.
    let started = Instant::now();
    let exited = read(
        &commands,
        json!({"id": sleeper.id, "until": "exit", "wait_ms": 10_000_000u64}),
    )
    .await;
    assert!(started.elapsed() < Duration::from_secs(5));
    assert_eq!(exited.status, CommandStatus::Exited);
    assert_eq!(exited.output, "woke\n");

    // Nothing happens: the wait ends after wait_ms with progress, not an error.
    let quiet = run(
        &commands,
        json!({"command": "sleep 100", "background": true, "durable": false}),
    )
    .await;
    let started = Instant::now();
    let waited = read(&commands, json!({"id": quiet.id, "wait_ms": 300})).await;
    let elapsed = started.elapsed();
    assert!(elapsed >= Duration::from_millis(300), "{elapsed:?}");
    assert!(elapsed < Duration::from_secs(3), "{elapsed:?}");
    assert_eq!(waited.status, CommandStatus::Running);
    assert_eq!(waited.output, "");
    assert!(waited.text().contains("running"), "{}", waited.text());
    assert!(commands.shutdown().await.is_empty());
    world.dispose().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unknown_ids_and_cursors_past_the_end() {
    let world = LocalWorld::new();
    let commands = world.commands();
    let err = commands
        .read_output(request(json!({"id": "cmd-999"})))
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::NotFound);
    assert_eq!(err.subject(), Some("cmd-999"));
    assert!(err.message().starts_with("read_output: "), "{err}");
    for err in [
        commands
            .kill(request(json!({"id": "nope"})))
            .await
            .unwrap_err(),
        commands
            .write_stdin(request(json!({"id": "cmd-0", "data": "x"})))
            .await
            .unwrap_err(),
        commands
            .close_stdin(request(json!({"id": "term-1"})))
            .await
            .unwrap_err(),
    ] {
        assert_eq!(err.kind(), ErrorKind::NotFound, "{err}");
    }

    let hi = run(&commands, json!({"command": "echo hi"})).await;
    let past = read(&commands, json!({"id": hi.id, "cursor": 1000})).await;
    assert_eq!(past.output, "");
    assert_eq!(past.cursor, 3, "the cursor comes back as the end");
    assert_eq!(past.remaining_bytes, 0);
    assert_eq!(past.dropped, 0);

    let bad: Result<dsh_consumers::commands::ReadOutputRequest, _> =
        serde_json::from_value(json!({"id": hi.id, "bogus": 1}));
    assert!(bad.is_err(), "unknown fields are refused");
    let err = commands
        .read_output(request(json!({"id": hi.id, "max_bytes": 0})))
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidInput);
    world.dispose().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reads_by_cursor_never_split_a_character() {
    let world = LocalWorld::new();
    let commands = world.commands();
    let text = "é€😀".repeat(50);
    let result = run(&commands, json!({"argv": ["printf", "%s", text.clone()]})).await;
    let mut cursor = 0;
    let mut got = String::new();
    loop {
        let piece = read(
            &commands,
            json!({"id": result.id, "cursor": cursor, "max_bytes": 5}),
        )
        .await;
        assert!(!piece.output.contains('\u{FFFD}'), "{piece:?}");
        got.push_str(&piece.output);
        cursor = piece.cursor;
        if piece.remaining_bytes == 0 {
            break;
        }
    }
    assert_eq!(got, text);
    world.dispose().await;
}

/// A foreground command that outlasts the wait hands itself over: its id, the
/// output so far and `running`, a background command from then on, continued by
/// `read_output` from the cursor and ended by `kill` or shutdown (issue 26).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_foreground_run_past_its_wait_goes_on_in_the_background() {
    let world = LocalWorld::new();
    let commands = world.commands();
    // The second line waits for a file the test creates after the hand-over,
    // so a loaded machine cannot print it (or miss "begun") inside the wait.
    let gate = world.dir.path().join("cwd/gate");
    let started = Instant::now();
    let handed = run(
        &commands,
        json!({"command": "echo begun; until [ -e gate ]; do sleep 0.05; done; echo more; sleep 100", "wait_ms": 1500, "env": world.marked_env()}),
    )
    .await;
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(handed.status, CommandStatus::Running, "{handed:?}");
    assert_eq!(handed.output.as_deref(), Some("begun\n"));
    assert_eq!(handed.cursor, Some(6));
    assert!(handed.text().contains("still running"), "{}", handed.text());
    assert!(
        handed
            .text()
            .contains(&format!("read_output id={} cursor=6", handed.id)),
        "{}",
        handed.text()
    );
    let listed = commands.list_commands(request(json!({}))).await.unwrap();
    assert!(listed.commands[0].background, "{listed:?}");
    std::fs::write(&gate, "").unwrap();
    let more = read(
        &commands,
        json!({"id": handed.id, "cursor": 6, "until": "pattern", "pattern": "^more$", "wait_ms": 10000}),
    )
    .await;
    assert_eq!(more.output, "more\n");
    assert_eq!(more.status, CommandStatus::Running);

    // The server's default wait, when the call gives none.
    commands.set_run_wait(Duration::from_millis(1000));
    let handed = run(
        &commands,
        json!({"command": "sleep 100", "env": world.marked_env()}),
    )
    .await;
    assert_eq!(handed.status, CommandStatus::Running);
    assert_eq!(handed.cursor, Some(0));
    let quick = run(&commands, json!({"command": "echo done"})).await;
    assert_eq!(quick.status, CommandStatus::Exited);
    assert_eq!(quick.cursor, None);

    assert!(commands.shutdown().await.is_empty());
    assert_eq!(
        world.marked_processes_after(Duration::from_secs(5)).await,
        Vec::<u32>::new(),
        "handed-over commands end with the tools"
    );
    world.dispose().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dropping_a_foreground_run_kills_its_group() {
    let world = LocalWorld::new();
    let commands = world.commands();
    let run = commands.run(request(json!({
        "command": "sleep 100 & sleep 100; wait",
        "env": world.marked_env(),
    })));
    assert!(
        tokio::time::timeout(Duration::from_millis(500), run)
            .await
            .is_err()
    );
    assert_eq!(
        world.marked_processes_after(Duration::from_secs(5)).await,
        Vec::<u32>::new()
    );
    // The command stays visible, ended by the tools' signal.
    let listed = commands.list_commands(request(json!({}))).await.unwrap();
    let info = &listed.commands[0];
    let ended = read(
        &commands,
        json!({"id": info.id, "until": "exit", "wait_ms": 5000}),
    )
    .await;
    assert_eq!(ended.status, CommandStatus::Exited);
    assert!(ended.exit.signal.is_some(), "{ended:?}");
    world.dispose().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_ends_every_group_and_removes_the_spill_files() {
    let world = LocalWorld::new();
    let commands = world.commands();
    let env = world.marked_env();
    run(
        &commands,
        json!({"command": "sleep 100", "background": true, "env": env, "durable": false}),
    )
    .await;
    run(
        &commands,
        json!({"command": "trap '' TERM; sleep 100", "background": true, "env": env, "durable": false}),
    )
    .await;
    run(
        &commands,
        json!({"command": "cat", "background": true, "env": env, "keep_stdin": true}),
    )
    .await;
    // A finished command that left a descendant in its group.
    let left = run(
        &commands,
        json!({"command": "sleep 100 >/dev/null 2>&1 & echo left", "env": env}),
    )
    .await;
    assert_eq!(left.output.as_deref(), Some("left\n"));
    let spill = left.spill_path.clone().unwrap();
    assert!(std::path::Path::new(&spill).exists());
    world.until_running("sleep", 3).await;
    world.until_running("cat", 1).await;

    let failures = commands.shutdown().await;
    assert!(failures.is_empty(), "{failures:?}");
    assert_eq!(world.marked_processes(), Vec::<u32>::new());
    assert!(
        !std::path::Path::new(&spill).exists(),
        "spill files removed"
    );
    let err = commands
        .run(request(json!({"command": "true"})))
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Closed);
    assert!(commands.shutdown().await.is_empty(), "idempotent");
    world.dispose().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_oldest_finished_command_is_forgotten_beyond_the_bound() {
    let world = LocalWorld::new();
    let commands = world.commands();
    let first = run(&commands, json!({"command": "echo first"})).await;
    let first_spill = first.spill_path.clone().unwrap();
    let running = run(
        &commands,
        json!({"command": "sleep 100", "background": true, "durable": false}),
    )
    .await;
    for _ in 0..MAX_COMMANDS - 1 {
        run(&commands, json!({"argv": ["true"]})).await;
    }
    let err = commands
        .read_output(request(json!({"id": first.id})))
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::NotFound);
    // The running one is never pushed out.
    read(&commands, json!({"id": running.id})).await;
    let listed = commands.list_commands(request(json!({}))).await.unwrap();
    assert_eq!(listed.commands.len(), MAX_COMMANDS);
    // Its spill file goes with it (removed by a task of its own).
    let deadline = Instant::now() + Duration::from_secs(5);
    while std::path::Path::new(&first_spill).exists() && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(!std::path::Path::new(&first_spill).exists());
    assert!(commands.shutdown().await.is_empty());
    world.dispose().await;
}
