//! The terminal tools on the local world: real PTYs, real shells.

use std::time::{Duration, Instant};

use dsh_consumers::Outcome;
use dsh_consumers::terminals::{TerminalReadResult, Terminals};
use dsh_plugin_api::ErrorKind;
use serde_json::{Value, json};

use crate::world::LocalWorld;

fn request<T: serde::de::DeserializeOwned>(value: Value) -> T {
    serde_json::from_value(value).expect("a valid request")
}

/// A plain interactive bash (no rc files, a fixed prompt), marked.
async fn open_bash(world: &LocalWorld, terminals: &Terminals, extra: Value) -> String {
    let mut env = world.marked_env();
    env.insert("PS1".to_owned(), "$ ".to_owned());
    let mut value = json!({"argv": ["bash", "--noprofile", "--norc", "-i"], "env": env});
    if let (Value::Object(value), Value::Object(extra)) = (&mut value, extra) {
        value.extend(extra);
    }
    terminals
        .terminal_open(request(value))
        .await
        .expect("terminal_open")
        .id
}

async fn send(terminals: &Terminals, id: &str, text: &str, keys: &[&str]) {
    terminals
        .terminal_send(request(json!({"id": id, "text": text, "keys": keys})))
        .await
        .expect("terminal_send");
}

/// Reads until the screen has a line equal to `line` (or 10 s pass).
async fn screen_with_line(terminals: &Terminals, id: &str, line: &str) -> TerminalReadResult {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let read = terminals
            .terminal_read(request(json!({"id": id, "wait_ms": 500})))
            .await
            .expect("terminal_read");
        let screen = read.screen.clone().unwrap_or_default();
        if screen.lines().any(|l| l.trim_end() == line) || Instant::now() >= deadline {
            assert!(
                screen.lines().any(|l| l.trim_end() == line),
                "no line {line:?} on the screen:\n{screen}"
            );
            return read;
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_default_shell_runs_a_command_and_the_screen_shows_it() {
    let world = LocalWorld::new();
    let terminals = world.terminals();
    let opened = terminals
        .terminal_open(request(json!({"env": world.marked_env()})))
        .await
        .unwrap();
    assert_eq!((opened.cols, opened.rows), (80, 24));
    assert!(opened.command.ends_with(" -l"), "{}", opened.command);
    send(&terminals, &opened.id, "echo hi", &["Enter"]).await;
    let read = screen_with_line(&terminals, &opened.id, "hi").await;
    assert!(!read.exited);
    assert!(read.output.contains("hi"), "raw output: {:?}", read.output);
    assert!(read.text().contains("hi"), "{}", read.text());

    let listed = terminals.list_terminals(request(json!({}))).await.unwrap();
    assert_eq!(listed.terminals.len(), 1);
    assert!(!listed.terminals[0].exited);

    let closed = terminals
        .terminal_close(request(json!({"id": opened.id})))
        .await
        .unwrap();
    assert_eq!(closed.id, opened.id);
    assert_eq!(world.marked_processes(), Vec::<u32>::new());
    let err = terminals
        .terminal_read(request(json!({"id": opened.id})))
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::NotFound);
    world.dispose().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ctrl_c_interrupts_the_foreground_program() {
    let world = LocalWorld::new();
    let terminals = world.terminals();
    let id = open_bash(&world, &terminals, json!({})).await;
    send(&terminals, &id, "sleep 100", &["Enter"]).await;
    // Once sleep runs (exec'd), it is the terminal's foreground group.
    world.until_running("sleep", 1).await;
    assert_eq!(world.marked_processes().len(), 2, "bash and sleep");
    send(&terminals, &id, "", &["Ctrl-C"]).await;
    send(&terminals, &id, "echo status=$?", &["Enter"]).await;
    screen_with_line(&terminals, &id, "status=130").await;
    assert_eq!(world.marked_processes().len(), 1, "only bash is left");

    // terminal_signal reaches the foreground group the same way.
    send(&terminals, &id, "sleep 100", &["Enter"]).await;
    world.until_running("sleep", 1).await;
    let signalled = terminals
        .terminal_signal(request(json!({"id": id, "signal": "INT"})))
        .await
        .unwrap();
    assert_eq!(signalled.signal, "SIGINT");
    send(&terminals, &id, "echo again=$?", &["Enter"]).await;
    screen_with_line(&terminals, &id, "again=130").await;

    assert!(terminals.shutdown().await.is_empty());
    assert_eq!(world.marked_processes(), Vec::<u32>::new());
    world.dispose().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_resize_is_seen_by_the_program_and_the_screen() {
    let world = LocalWorld::new();
    let terminals = world.terminals();
    let id = open_bash(&world, &terminals, json!({"cols": 60, "rows": 20})).await;
    send(&terminals, &id, "stty size", &["Enter"]).await;
    screen_with_line(&terminals, &id, "20 60").await;
    let resized = terminals
        .terminal_resize(request(json!({"id": id, "cols": 100, "rows": 30})))
        .await
        .unwrap();
    assert_eq!((resized.cols, resized.rows), (100, 30));
    send(&terminals, &id, "stty size; tput cols", &["Enter"]).await;
    screen_with_line(&terminals, &id, "30 100").await;
    screen_with_line(&terminals, &id, "100").await;
    let listed = terminals.list_terminals(request(json!({}))).await.unwrap();
    assert_eq!(
        (listed.terminals[0].cols, listed.terminals[0].rows),
        (100, 30)
    );

    let err = terminals
        .terminal_resize(request(json!({"id": id, "cols": 0, "rows": 30})))
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidInput);
    assert!(terminals.shutdown().await.is_empty());
    world.dispose().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn close_ends_the_whole_session() {
    let world = LocalWorld::new();
    let terminals = world.terminals();
    let id = open_bash(&world, &terminals, json!({})).await;
    send(&terminals, &id, "sleep 100 & sleep 200 &", &["Enter"]).await;
    world.until_running("sleep", 2).await;
    assert_eq!(world.marked_processes().len(), 3, "bash and two sleeps");
    let closed = terminals
        .terminal_close(request(json!({"id": id})))
        .await
        .unwrap();
    assert_eq!(closed.signal.as_deref(), Some("SIGHUP"), "{closed:?}");
    assert_eq!(world.marked_processes(), Vec::<u32>::new());
    assert!(
        terminals
            .list_terminals(request(json!({})))
            .await
            .unwrap()
            .terminals
            .is_empty()
    );
    world.dispose().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_exited_program_reports_its_code_and_last_screen() {
    let world = LocalWorld::new();
    let terminals = world.terminals();
    let opened = terminals
        .terminal_open(request(json!({"command": "echo done; exit 3"})))
        .await
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    let read = loop {
        let read = terminals
            .terminal_read(request(
                json!({"id": opened.id, "cursor": 0, "wait_ms": 1000}),
            ))
            .await
            .unwrap();
        if read.exited || Instant::now() >= deadline {
            break read;
        }
    };
    assert!(read.exited);
    assert_eq!(read.exit_code, Some(3));
    assert_eq!(read.screen.as_deref(), Some("done"));
    assert_eq!(read.output, "done\r\n");
    assert_eq!((read.cursor_row, read.cursor_col), (1, 0));
    // A cursor past the end reads nothing and returns the end.
    let past = terminals
        .terminal_read(request(
            json!({"id": opened.id, "cursor": 999, "screen": false}),
        ))
        .await
        .unwrap();
    assert_eq!((past.output.as_str(), past.cursor), ("", 6));
    assert_eq!(past.screen, None);
    assert!(terminals.shutdown().await.is_empty());
    world.dispose().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_input_is_refused_with_a_hint() {
    let world = LocalWorld::new();
    let terminals = world.terminals();
    let id = open_bash(&world, &terminals, json!({})).await;
    let err = terminals
        .terminal_send(request(json!({"id": id, "keys": ["Enter", "Hyper-Q"]})))
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidInput);
    assert!(err.message().contains("Hyper-Q"), "{err}");
    assert!(
        err.message().contains("Ctrl-A"),
        "lists the known keys: {err}"
    );
    let err = terminals
        .terminal_send(request(json!({"id": id})))
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidInput);
    let err = terminals
        .terminal_signal(request(json!({"id": id, "signal": "BOGUS"})))
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidInput);
    let err = terminals
        .terminal_open(request(json!({"cols": 0})))
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidInput);
    let err = terminals
        .terminal_open(request(json!({"command": "x", "argv": ["y"]})))
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidInput);
    let err = terminals
        .terminal_close(request(json!({"id": "term-77"})))
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::NotFound);
    assert_eq!(err.subject(), Some("term-77"));
    assert!(terminals.shutdown().await.is_empty());
    assert_eq!(world.marked_processes(), Vec::<u32>::new());
    let err = terminals
        .terminal_open(request(json!({})))
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Closed);
    world.dispose().await;
}
