//! Stream behaviour of `Start` and `Connect`: keepalives, the request deadline as process lifetime,
//! client disconnects, fan-out to several subscribers, discarded unattached output, the exit
//! retention window, and PTYs (docs/e2b-protocol.md §5.4).

use std::time::{Duration, Instant};

use connectrpc::ErrorCode;
use e2b_local_envd::Envd;
use envd_proto::process::UpdateRequest;
use envd_proto::process::process_input::Input;

use crate::common::process::{
    Outcome, attach, by_pid, by_tag, command, finish, on_pty, record, run, send_input, shell,
    started, with_envs,
};
use crate::common::{self, RawStream, TestDaemon, config};

fn alive(pid: u32) -> bool {
    // Signal 0 to a reaped or foreign pid fails; a zombie of ours would still count, so also
    // check the process state.
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    !status.is_empty() && !status.contains("State:\tZ")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keepalives_are_sent_at_the_requested_interval_when_idle() {
    let daemon = TestDaemon::start(config()).await;
    let started = Instant::now();
    let stream = RawStream::open(
        &daemon.url("/process.Process/Start"),
        r#"{"process":{"cmd":"/bin/sleep","args":["2.5"]},"stdin":false}"#,
        &[("keepalive-ping-interval", "1")],
    )
    .await;
    assert_eq!(stream.status, 200);
    assert_eq!(
        stream.headers.get("content-type").unwrap(),
        "application/connect+json"
    );
    let envelopes = stream.collect().await;
    let kinds: Vec<String> = envelopes
        .iter()
        .map(|envelope| {
            if envelope.is_end() {
                return format!("end-stream:{}", envelope.json());
            }
            let json = envelope.json();
            json["event"]
                .as_object()
                .unwrap()
                .keys()
                .next()
                .unwrap()
                .clone()
        })
        .collect();
    assert!(started.elapsed() >= Duration::from_millis(2400));
    assert_eq!(kinds.first().map(String::as_str), Some("start"));
    assert_eq!(
        kinds.iter().filter(|kind| *kind == "keepalive").count(),
        2,
        "{kinds:?}"
    );
    assert_eq!(
        &kinds[kinds.len() - 2..],
        ["end".to_owned(), "end-stream:{}".to_owned()]
    );
    let end = envelopes[envelopes.len() - 2].json();
    assert_eq!(
        end["event"]["end"],
        serde_json::json!({"exited": true, "status": "exit status 0"})
    );
    daemon.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn request_deadline_kills_the_process_and_ends_the_stream() {
    let daemon = TestDaemon::start(config()).await;
    let mut stream = RawStream::open(
        &daemon.url("/process.Process/Start"),
        r#"{"process":{"cmd":"/bin/sleep","args":["30"]},"stdin":false}"#,
        &[("connect-timeout-ms", "700")],
    )
    .await;
    let start = stream
        .next_within(Duration::from_secs(5))
        .await
        .unwrap()
        .json();
    let pid = start["event"]["start"]["pid"].as_u64().unwrap() as u32;
    assert!(alive(pid));
    let end = stream.next_within(Duration::from_secs(5)).await.unwrap();
    assert!(end.is_end());
    assert_eq!(
        end.json(),
        serde_json::json!({"error": {"code": "deadline_exceeded", "message": "context deadline exceeded"}})
    );
    assert!(stream.next().await.is_none());
    let deadline = Instant::now() + Duration::from_secs(5);
    while alive(pid) {
        assert!(
            Instant::now() < deadline,
            "process {pid} survived its deadline"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    daemon.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn client_disconnect_does_not_kill_and_connect_reattaches() {
    let daemon = TestDaemon::start(config()).await;
    let client = daemon.process(true);
    let (pid, stream) = started(&client, shell("sleep 0.8; echo late; exit 4")).await;
    drop(stream);
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(alive(pid), "disconnect must not kill");

    let outcome = attach(&client, by_pid(pid)).await;
    assert_eq!(outcome.pid, pid);
    assert_eq!(outcome.stdout_text(), "late\n");
    assert_eq!(outcome.end().exit_code, 4);
    daemon.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn output_fans_out_to_every_subscriber_and_is_discarded_without_one() {
    let daemon = TestDaemon::start(config()).await;
    let client = daemon.process(false);
    // Stdout is written while nobody is attached, then again once two streams are.
    let (pid, stream) = started(&client, shell("echo early; sleep 1; echo shared")).await;
    drop(stream);
    tokio::time::sleep(Duration::from_millis(300)).await;
    let (first, second) = tokio::join!(attach(&client, by_pid(pid)), attach(&client, by_pid(pid)));
    for outcome in [first, second] {
        assert_eq!(
            outcome.stdout_text(),
            "shared\n",
            "early output must be gone"
        );
        assert_eq!(outcome.end().exit_code, 0);
    }
    daemon.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exits_are_retained_for_the_window_then_not_found() {
    let envd = Envd::new(config()).exit_retention(Duration::from_millis(800));
    let daemon = TestDaemon::start_with(envd).await;
    let client = daemon.process(true);
    let mut tagged = shell("exit 7");
    tagged.tag = Some("job".to_owned());
    let pid = run(&client, tagged).await.pid;

    for selector in [by_pid(pid), by_tag("job")] {
        let retained = attach(&client, selector).await;
        assert_eq!(retained.order, ["start", "end"]);
        assert_eq!(retained.pid, pid);
        assert_eq!(retained.end().exit_code, 7);
    }

    tokio::time::sleep(Duration::from_millis(1000)).await;
    let gone = attach(&client, by_pid(pid)).await;
    let err = gone.error.expect("not found after the window");
    assert_eq!(err.code, ErrorCode::NotFound);
    assert_eq!(
        err.message.as_deref(),
        Some(format!("process with pid {pid} not found").as_str())
    );
    let err = attach(&client, by_tag("job"))
        .await
        .error
        .expect("tag gone too");
    assert_eq!(
        err.message.as_deref(),
        Some("process with tag job not found")
    );
    daemon.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn default_exit_retention_is_thirty_seconds() {
    let daemon = TestDaemon::start(config()).await;
    let client = daemon.process(true);
    let outcome = run(&client, shell("exit 2")).await;
    // Well past any scheduling noise but inside envd's 30 s.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let retained = attach(&client, by_pid(outcome.pid)).await;
    assert_eq!(retained.end().exit_code, 2);
    daemon.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connect_timeout_ends_only_the_stream() {
    let daemon = TestDaemon::start(config()).await;
    let client = daemon.process(true);
    let (pid, _stream) = started(&client, shell("sleep 30")).await;
    let mut attached = RawStream::open(
        &daemon.url("/process.Process/Connect"),
        &format!(r#"{{"process":{{"pid":{pid}}}}}"#),
        &[("connect-timeout-ms", "400")],
    )
    .await;
    let start = attached
        .next_within(Duration::from_secs(5))
        .await
        .unwrap()
        .json();
    assert_eq!(start["event"]["start"]["pid"], pid);
    let end = attached.next_within(Duration::from_secs(5)).await.unwrap();
    assert_eq!(end.json()["error"]["code"], "deadline_exceeded");
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(alive(pid), "Connect's timeout must not kill");
    daemon.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pty_size_resize_input_and_chunking() {
    let daemon = TestDaemon::start(config()).await;
    let client = daemon.process(true);
    let request = on_pty(
        with_envs(
            command("/bin/bash", &["-i"]),
            &[("TERM", "xterm-256color"), ("PS1", "$ ")],
        ),
        91,
        27,
    );
    let (pid, mut stream) = started(&client, request).await;
    let mut outcome = Outcome::default();
    let typed = |text: &'static str| send_input(by_pid(pid), Input::Pty(text.as_bytes().to_vec()));
    client
        .send_input(typed(
            "stty size; tput cols; tty; echo SID $(ps -o sid= -p $$) PID $$\n",
        ))
        .await
        .expect("pty input");
    while !String::from_utf8_lossy(&outcome.pty).contains(&format!("PID {pid}")) {
        let message = tokio::time::timeout(Duration::from_secs(10), stream.message())
            .await
            .expect("pty output in time")
            .expect("stream")
            .expect("not ended");
        record(&mut outcome, message.to_owned_message().event);
    }
    let text = String::from_utf8_lossy(&outcome.pty).into_owned();
    assert!(text.contains("27 91"), "stty size: {text}");
    assert!(
        text.contains("\n91\r") || text.contains("91\r\n"),
        "tput cols: {text}"
    );
    assert!(text.contains("/dev/pts/"), "tty: {text}");
    assert!(
        text.contains(&format!("SID {pid} PID {pid}")),
        "own session: {text}"
    );

    client
        .update(UpdateRequest {
            process: by_pid(pid).into(),
            pty: on_pty(shell(""), 120, 40).pty,
            ..Default::default()
        })
        .await
        .expect("resize");
    client
        .send_input(typed("tput cols; stty size; exit 0\n"))
        .await
        .expect("pty input");
    let rest = finish(stream).await;
    let text = String::from_utf8_lossy(&rest.pty).into_owned();
    assert!(text.contains("40 120"), "after resize: {text}");
    assert_eq!(rest.end().exit_code, 0);
    assert!(
        outcome
            .chunks
            .iter()
            .chain(&rest.chunks)
            .all(|len| *len <= 16 * 1024)
    );
    assert!(rest.stdout.is_empty() && rest.stderr.is_empty());
    daemon.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pty_output_is_chunked_at_16_kib() {
    let daemon = TestDaemon::start(config()).await;
    let client = daemon.process(false);
    let request = on_pty(shell("head -c 200000 /dev/zero | tr '\\0' x"), 80, 24);
    let outcome = run(&client, request).await;
    assert_eq!(outcome.pty.iter().filter(|b| **b == b'x').count(), 200_000);
    assert!(
        outcome.chunks.iter().all(|len| *len <= 16 * 1024),
        "{:?}",
        outcome.chunks
    );
    assert_eq!(outcome.end().exit_code, 0);
    daemon.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn frames_are_flushed_as_produced() {
    let daemon = TestDaemon::start(config()).await;
    let mut stream = RawStream::open(
        &daemon.url("/process.Process/Start"),
        r#"{"process":{"cmd":"/bin/sh","args":["-c","echo first; sleep 3; echo second"]},"stdin":false}"#,
        &[],
    )
    .await;
    let started = Instant::now();
    let start = stream
        .next_within(Duration::from_secs(2))
        .await
        .unwrap()
        .json();
    assert!(start["event"].get("start").is_some());
    let data = stream
        .next_within(Duration::from_secs(2))
        .await
        .unwrap()
        .json();
    assert_eq!(data["event"]["data"]["stdout"], "Zmlyc3QK");
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "first output arrived while the process ran"
    );
    daemon.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pipe_processes_share_the_daemons_group_and_ptys_get_a_session() {
    let daemon = TestDaemon::start(config()).await;
    let client = daemon.process(true);
    let outcome = run(&client, shell("ps -o pgid= -o sid= -p $$")).await;
    let ids: Vec<i32> = outcome
        .stdout_text()
        .split_whitespace()
        .map(|id| id.parse().unwrap())
        .collect();
    // envd does not setsid/setpgid for pipe processes: they stay in the daemon's group.
    // SAFETY: getpgrp(2) takes no arguments and cannot fail.
    let group = unsafe { libc::getpgrp() };
    // SAFETY: getsid(2) takes no pointers; 0 is this process, which exists.
    let session = unsafe { libc::getsid(0) };
    assert_eq!(ids[0], group);
    assert_eq!(ids[1], session);

    let request = on_pty(shell("ps -o sid= -o tty= -p $$; echo PID $$"), 80, 24);
    let outcome = run(&client, request).await;
    let text = String::from_utf8_lossy(&outcome.pty).into_owned();
    let mut words = text.split_whitespace();
    assert_eq!(
        words.next(),
        Some(outcome.pid.to_string().as_str()),
        "{text}"
    );
    assert!(
        words.next().unwrap().starts_with("pts/"),
        "controlling terminal: {text}"
    );
    daemon.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn instantly_exiting_processes_never_linger_in_list() {
    let daemon = TestDaemon::start(config()).await;
    let client = daemon.process(false);
    for _ in 0..20 {
        let mut stream = client
            .start(common::process::command("/bin/true", &[]))
            .await
            .expect("start");
        drop(stream.message().await);
    }
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let listed = client
            .list(envd_proto::process::ListRequest::default())
            .await
            .unwrap()
            .into_owned();
        if listed.processes.is_empty() {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "still listed: {:?}",
            listed.processes
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    daemon.stop().await;
}
