//! The unary `process.Process` RPCs and `StreamInput`: List, SendInput (every case of the
//! docs/e2b-protocol.md §5.4 table), StreamInput, SendSignal, Update and CloseStdin, with envd's
//! error codes.

use std::time::{Duration, Instant};

use connectrpc::ErrorCode;
use envd_proto::process::process_input::Input;
use envd_proto::process::stream_input_request::{self, Event as StreamEvent};
use envd_proto::process::{
    ListRequest, PTY, ProcessInput, SendInputRequest, SendSignalRequest, Signal, StartRequest,
    StreamInputRequest, UpdateRequest, pty,
};

use crate::common::process::{
    Outcome, by_pid, by_tag, close_stdin, finish, on_pty, record, send_input, shell, signal,
    started,
};
use crate::common::{self, TestDaemon, config, unary_json};

fn stdin(pid: u32, data: &[u8]) -> SendInputRequest {
    send_input(by_pid(pid), Input::Stdin(data.to_vec()))
}

fn pty_input(pid: u32, data: &[u8]) -> SendInputRequest {
    send_input(by_pid(pid), Input::Pty(data.to_vec()))
}

fn interactive(script: &str) -> StartRequest {
    let mut request = shell(script);
    request.stdin = Some(true);
    request
}

fn pty_shell() -> StartRequest {
    on_pty(shell("cat"), 80, 24)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn list_shows_live_processes_with_their_config_as_sent() {
    let daemon = TestDaemon::start(config()).await;
    let client = daemon.process(true);
    let mut request = common::process::with_envs(shell("sleep 30"), &[("K", "V")]);
    request.process.get_or_insert_default().cwd = Some("/tmp".to_owned());
    request.tag = Some("sleeper".to_owned());
    let (pid, stream) = started(&client, request.clone()).await;

    let listed = client
        .list(ListRequest::default())
        .await
        .expect("list")
        .into_owned();
    let info = listed
        .processes
        .iter()
        .find(|info| info.pid == pid)
        .expect("listed");
    assert_eq!(info.tag.as_deref(), Some("sleeper"));
    assert_eq!(*info.config, *request.process);

    // The wire shape the SDKs read.
    let raw = unary_json(&daemon.url("/process.Process/List"), "{}", &[]).await;
    assert_eq!(raw.status, 200);
    let entry = raw.json()["processes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|entry| entry["pid"] == pid)
        .cloned()
        .unwrap();
    assert_eq!(
        entry,
        serde_json::json!({
            "config": {"cmd": "/bin/bash", "args": ["-c", "sleep 30"], "envs": {"K": "V"}, "cwd": "/tmp"},
            "pid": pid,
            "tag": "sleeper"
        })
    );

    client
        .send_signal(signal(pid, Signal::SIGNAL_SIGKILL))
        .await
        .expect("kill");
    let outcome = finish(stream).await;
    assert_eq!(outcome.end().status, "signal: killed");
    let listed = client
        .list(ListRequest::default())
        .await
        .unwrap()
        .into_owned();
    assert!(
        listed.processes.iter().all(|info| info.pid != pid),
        "gone from List at exit"
    );
    daemon.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn send_input_cases() {
    let daemon = TestDaemon::start(config()).await;
    let client = daemon.process(false);

    // stdin on a process with stdin enabled: written to the pipe.
    let (pid, stream) = started(&client, interactive("head -c 6")).await;
    client
        .send_input(stdin(pid, b"abc"))
        .await
        .expect("stdin write");
    client
        .send_input(stdin(pid, b"def"))
        .await
        .expect("stdin write");
    let outcome = finish(stream).await;
    assert_eq!(outcome.stdout_text(), "abcdef");

    // pty input on a pipe process: internal. The process outlives cat's EOF, so the second
    // close and the late write below meet a live process (an ended one is not found).
    let (pid, mut stream) = started(&client, interactive("cat; echo eof:$?; exec sleep 30")).await;
    let err = client
        .send_input(pty_input(pid, b"x"))
        .await
        .expect_err("pty on pipes");
    assert_eq!(err.code, ErrorCode::Internal);
    assert!(
        err.message.as_deref().unwrap().contains("tty not assigned"),
        "{err:?}"
    );
    client
        .close_stdin(close_stdin(pid))
        .await
        .expect("close stdin");
    // Closing again is a no-op.
    client
        .close_stdin(close_stdin(pid))
        .await
        .expect("close stdin twice");
    let err = client
        .send_input(stdin(pid, b"late"))
        .await
        .expect_err("stdin closed");
    assert_eq!(err.code, ErrorCode::Internal);
    assert_eq!(
        err.message.as_deref(),
        Some("error writing to stdin: stdin not enabled or closed")
    );
    // cat saw EOF (and exited 0) before the process is killed.
    let mut seen = Outcome::default();
    tokio::time::timeout(Duration::from_secs(30), async {
        while !seen.stdout_text().ends_with('\n') {
            let message = stream.message().await.expect("stream").expect("an event");
            record(&mut seen, message.to_owned_message().event);
        }
    })
    .await
    .expect("cat's EOF within 30 s");
    assert_eq!(seen.stdout_text(), "eof:0\n", "cat saw EOF");
    client
        .send_signal(signal(pid, Signal::SIGNAL_SIGKILL))
        .await
        .expect("kill");
    finish(stream).await.end();

    // stdin disabled at start.
    let (pid, stream) = started(&client, shell("sleep 5")).await;
    let err = client
        .send_input(stdin(pid, b"x"))
        .await
        .expect_err("stdin disabled");
    assert_eq!(err.code, ErrorCode::Internal);
    client
        .close_stdin(close_stdin(pid))
        .await
        .expect("close of a disabled stdin is a no-op");
    client
        .send_signal(signal(pid, Signal::SIGNAL_SIGTERM))
        .await
        .expect("term");
    assert_eq!(finish(stream).await.end().status, "signal: terminated");

    // stdin on a PTY process: internal; CloseStdin on it: unknown.
    let (pid, stream) = started(&client, pty_shell()).await;
    let err = client
        .send_input(stdin(pid, b"x"))
        .await
        .expect_err("stdin on pty");
    assert_eq!(err.code, ErrorCode::Internal);
    let err = client
        .close_stdin(close_stdin(pid))
        .await
        .expect_err("close stdin on pty");
    assert_eq!(err.code, ErrorCode::Unknown);
    client
        .send_input(pty_input(pid, b"hello\n\x04"))
        .await
        .expect("pty input");
    let outcome = finish(stream).await;
    assert!(String::from_utf8_lossy(&outcome.pty).contains("hello"));
    assert_eq!(outcome.end().exit_code, 0);

    // Unknown pid and tag: not_found.
    let err = client
        .send_input(stdin(999_999, b"x"))
        .await
        .expect_err("unknown pid");
    assert_eq!(err.code, ErrorCode::NotFound);
    assert_eq!(
        err.message.as_deref(),
        Some("process with pid 999999 not found")
    );
    let err = client
        .send_input(send_input(by_tag("nope"), Input::Stdin(b"x".to_vec())))
        .await
        .expect_err("unknown tag");
    assert_eq!(err.code, ErrorCode::NotFound);
    assert_eq!(
        err.message.as_deref(),
        Some("process with tag nope not found")
    );
    daemon.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stream_input_feeds_stdin_over_a_client_stream() {
    let daemon = TestDaemon::start(config()).await;
    for json in [false, true] {
        let client = daemon.process(json);
        let (pid, stream) = started(&client, interactive("cat")).await;
        let events = vec![
            StreamInputRequest {
                event: Some(StreamEvent::Start(Box::new(
                    stream_input_request::StartEvent {
                        process: by_pid(pid).into(),
                        ..Default::default()
                    },
                ))),
                ..Default::default()
            },
            StreamInputRequest {
                event: Some(StreamEvent::Keepalive(Box::default())),
                ..Default::default()
            },
            StreamInputRequest {
                event: Some(StreamEvent::Data(Box::new(
                    stream_input_request::DataEvent {
                        input: ProcessInput {
                            input: Some(Input::Stdin(b"streamed\n".to_vec())),
                            ..Default::default()
                        }
                        .into(),
                        ..Default::default()
                    },
                ))),
                ..Default::default()
            },
        ];
        client
            .stream_input(futures::stream::iter(events))
            .await
            .expect("stream input");
        client.close_stdin(close_stdin(pid)).await.unwrap();
        assert_eq!(finish(stream).await.stdout_text(), "streamed\n");

        // Data before start is refused; an unknown process is not_found.
        let data_first = vec![StreamInputRequest {
            event: Some(StreamEvent::Data(Box::default())),
            ..Default::default()
        }];
        let err = client
            .stream_input(futures::stream::iter(data_first))
            .await
            .expect_err("data before start");
        assert_eq!(err.code, ErrorCode::FailedPrecondition);
        let unknown = vec![StreamInputRequest {
            event: Some(StreamEvent::Start(Box::new(
                stream_input_request::StartEvent {
                    process: by_pid(999_998).into(),
                    ..Default::default()
                },
            ))),
            ..Default::default()
        }];
        let err = client
            .stream_input(futures::stream::iter(unknown))
            .await
            .expect_err("unknown pid");
        assert_eq!(err.code, ErrorCode::NotFound);
    }
    daemon.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn signals_go_to_the_pid_only_and_end_comes_despite_orphans() {
    let daemon = TestDaemon::start(config()).await;
    let client = daemon.process(true);
    // The background sleep inherits stdout and outlives the shell.
    let (pid, stream) = started(&client, shell("sleep 60 & echo $!; wait")).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    let started_at = Instant::now();
    client
        .send_signal(signal(pid, Signal::SIGNAL_SIGKILL))
        .await
        .expect("kill");
    let outcome = finish(stream).await;
    assert!(
        started_at.elapsed() < Duration::from_secs(5),
        "end came promptly"
    );
    assert_eq!(outcome.end().status, "signal: killed");
    assert_eq!(outcome.end().exit_code, -1);
    let orphan: u32 = outcome
        .stdout_text()
        .trim()
        .parse()
        .expect("orphan pid printed");
    let status = std::fs::read_to_string(format!("/proc/{orphan}/status")).unwrap_or_default();
    assert!(
        !status.is_empty(),
        "the signal went to the pid only; the orphan survives"
    );
    // Clean up the orphan ourselves.
    // SAFETY: kill(2) takes no pointers; the pid is the orphan this test started.
    unsafe { libc::kill(orphan as i32, libc::SIGKILL) };

    // UNSPECIFIED is unimplemented; unknown pids are not_found.
    let (pid, stream) = started(&client, shell("sleep 30")).await;
    let err = client
        .send_signal(signal(pid, Signal::SIGNAL_UNSPECIFIED))
        .await
        .expect_err("unspecified");
    assert_eq!(err.code, ErrorCode::Unimplemented);
    assert_eq!(
        err.message.as_deref(),
        Some("invalid signal: SIGNAL_UNSPECIFIED")
    );
    let raw = unary_json(
        &daemon.url("/process.Process/SendSignal"),
        &format!(r#"{{"process":{{"pid":{pid}}},"signal":15}}"#),
        &[],
    )
    .await;
    assert_eq!(raw.status, 200, "{}", raw.text());
    assert_eq!(finish(stream).await.end().status, "signal: terminated");
    let err = client
        .send_signal(signal(999_997, Signal::SIGNAL_SIGKILL))
        .await
        .expect_err("unknown pid");
    assert_eq!(err.code, ErrorCode::NotFound);
    daemon.stop().await;
}

/// As envd's: a signal stops the reading of output but keeps the pipes open until the process
/// is reaped, so a process writing when it is signalled dies of the signal, never of a pipe
/// closed under it first (a helper that exits on a broken pipe would otherwise report its own
/// exit instead of the kill).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_signal_stops_reading_but_leaves_the_pipes_open_until_the_end() {
    let daemon = TestDaemon::start(config()).await;
    let client = daemon.process(true);
    // The shell ignores TERM, and `yes` writes until its pipe fails (SIGPIPE is ignored too);
    // a closed pipe would end the shell with status 7.
    let (pid, stream) = started(&client, shell("trap '' TERM PIPE; yes; exit 7")).await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    client
        .send_signal(signal(pid, Signal::SIGNAL_SIGTERM))
        .await
        .expect("term");
    tokio::time::sleep(Duration::from_secs(1)).await;
    client
        .send_signal(signal(pid, Signal::SIGNAL_SIGKILL))
        .await
        .expect("kill");
    let outcome = finish(stream).await;
    assert_eq!(outcome.end().status, "signal: killed");
    assert!(!outcome.stdout_text().is_empty(), "output before the TERM");
    daemon.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn update_resizes_ptys_only() {
    let daemon = TestDaemon::start(config()).await;
    let client = daemon.process(true);
    let (pid, stream) = started(&client, interactive("cat")).await;
    let resize = UpdateRequest {
        process: by_pid(pid).into(),
        pty: Some(PTY {
            size: pty::Size {
                cols: 10,
                rows: 10,
                ..Default::default()
            }
            .into(),
            ..Default::default()
        })
        .into(),
        ..Default::default()
    };
    let err = client.update(resize.clone()).await.expect_err("not a pty");
    assert_eq!(err.code, ErrorCode::Internal);
    assert_eq!(
        err.message.as_deref(),
        Some("error resizing tty: tty not assigned to process")
    );
    // Without pty it changes nothing.
    client
        .update(UpdateRequest {
            process: by_pid(pid).into(),
            ..Default::default()
        })
        .await
        .expect("no-op update");
    let err = client
        .update(UpdateRequest {
            process: by_pid(999_996).into(),
            ..resize
        })
        .await
        .expect_err("unknown");
    assert_eq!(err.code, ErrorCode::NotFound);
    client.close_stdin(close_stdin(pid)).await.unwrap();
    finish(stream).await;
    daemon.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn start_rejects_bad_requests() {
    let daemon = TestDaemon::start(config()).await;
    let client = daemon.process(true);
    let cases: Vec<(StartRequest, &str)> = vec![
        (
            common::process::command("", &[]),
            "start: process.cmd is required",
        ),
        (
            common::process::command("/bin/echo", &["a\0b"]),
            "start: process.cmd and process.args must not contain NUL bytes",
        ),
        (
            common::process::with_envs(common::process::command("/bin/true", &[]), &[("A=B", "1")]),
            "start: environment variable name \"A=B\" contains '=' or a NUL byte",
        ),
        (
            common::process::with_cwd(common::process::command("/bin/true", &[]), "~other/x"),
            "failed to expand path '~other/x' for user 'root': cannot expand user-specific home dir",
        ),
    ];
    for (request, message) in cases {
        let outcome = common::process::run(&client, request).await;
        let err = outcome.error.expect("rejected");
        assert_eq!(err.code, ErrorCode::InvalidArgument);
        assert_eq!(err.message.as_deref(), Some(message));
    }
    // Unknown Basic-auth user: unauthenticated, for any RPC.
    let stranger =
        daemon.process_with_headers(true, &[("authorization", &common::basic("stranger"))]);
    let outcome = common::process::run(&stranger, shell("true")).await;
    let err = outcome.error.expect("unknown user");
    assert_eq!(err.code, ErrorCode::Unauthenticated);
    assert_eq!(err.message.as_deref(), Some("invalid username: 'stranger'"));
    let err = stranger
        .list(ListRequest::default())
        .await
        .expect_err("list as stranger");
    assert_eq!(err.code, ErrorCode::Unauthenticated);
    // A selector is required.
    let err = client
        .send_signal(SendSignalRequest::default())
        .await
        .expect_err("no selector");
    assert_eq!(err.code, ErrorCode::InvalidArgument);
    daemon.stop().await;
}
