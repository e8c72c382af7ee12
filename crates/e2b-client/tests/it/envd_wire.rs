//! `Envd` against a scripted transport: what goes on the wire (paths,
//! headers, encodings) and how every response shape is classified.

/// A predicate over an error, for tables of expected classifications.
type Check = fn(&Error) -> bool;

use std::time::Duration;

use bytes::Bytes;
use e2b_client::{
    ByteRange, CallOptions, Command, DownloadOptions, Envd, EnvdOptions, Error, ErrorCode,
    ProcessEvent, Selector, Signal, StreamOptions, UploadOptions, UploadPart, WatchOptions,
    WireFormat,
};
use envd_proto::filesystem as fs;
use envd_proto::process as pb;
use futures::StreamExt;

use crate::fake::{self, Canned, Chunk, Fake};

fn envd(fake: &Fake) -> Envd<Fake> {
    Envd::new(fake.clone(), EnvdOptions::new("sbx1"))
}

fn entry(path: &str) -> fs::EntryInfo {
    fs::EntryInfo {
        name: path.rsplit('/').next().unwrap().to_owned(),
        r#type: fs::FileType::FILE_TYPE_FILE.into(),
        path: path.to_owned(),
        size: 3,
        mode: 0o644,
        ..Default::default()
    }
}

fn start_event(pid: u32) -> Bytes {
    use envd_proto::process::__buffa::oneof::process_event::Event;
    let message = pb::StartResponse {
        event: buffa::MessageField::some(pb::ProcessEvent {
            event: Some(Event::Start(Box::new(pb::process_event::StartEvent {
                pid,
                ..Default::default()
            }))),
            ..Default::default()
        }),
        ..Default::default()
    };
    Bytes::from(buffa::Message::encode_to_vec(&message))
}

fn data_event(stdout: bool, bytes: &[u8]) -> Bytes {
    use envd_proto::process::__buffa::oneof::process_event::{Event, data_event::Output};
    let output = if stdout {
        Output::Stdout(bytes.to_vec())
    } else {
        Output::Stderr(bytes.to_vec())
    };
    let message = pb::StartResponse {
        event: buffa::MessageField::some(pb::ProcessEvent {
            event: Some(Event::Data(Box::new(pb::process_event::DataEvent {
                output: Some(output),
                ..Default::default()
            }))),
            ..Default::default()
        }),
        ..Default::default()
    };
    Bytes::from(buffa::Message::encode_to_vec(&message))
}

fn keepalive_event() -> Bytes {
    use envd_proto::process::__buffa::oneof::process_event::Event;
    let message = pb::StartResponse {
        event: buffa::MessageField::some(pb::ProcessEvent {
            event: Some(Event::Keepalive(Box::default())),
            ..Default::default()
        }),
        ..Default::default()
    };
    Bytes::from(buffa::Message::encode_to_vec(&message))
}

fn end_event(exit_code: i32) -> Bytes {
    use envd_proto::process::__buffa::oneof::process_event::Event;
    let message = pb::StartResponse {
        event: buffa::MessageField::some(pb::ProcessEvent {
            event: Some(Event::End(Box::new(pb::process_event::EndEvent {
                exit_code,
                exited: true,
                status: format!("exit status {exit_code}"),
                ..Default::default()
            }))),
            ..Default::default()
        }),
        ..Default::default()
    };
    Bytes::from(buffa::Message::encode_to_vec(&message))
}

#[tokio::test]
async fn stat_sends_proto_with_user_and_timeout_headers() {
    let fake = Fake::always(Canned::proto(&fs::StatResponse {
        entry: buffa::MessageField::some(entry("/home/user/a.txt")),
        ..Default::default()
    }));
    let info = envd(&fake)
        .stat("/home/user/a.txt", &CallOptions::default().user("root"))
        .await
        .unwrap();
    assert_eq!(info.path, "/home/user/a.txt");
    assert_eq!(info.size, 3);
    let seen = fake.last();
    assert_eq!(seen.uri.to_string(), "/filesystem.Filesystem/Stat");
    assert_eq!(seen.headers["content-type"], "application/proto");
    assert_eq!(seen.headers["connect-protocol-version"], "1");
    assert_eq!(seen.headers["authorization"], "Basic cm9vdDo=");
    assert_eq!(seen.headers["connect-timeout-ms"], "60000");
    let request: fs::StatRequest = buffa::Message::decode_from_slice(&seen.body.unwrap()).unwrap();
    assert_eq!(request.path, "/home/user/a.txt");
}

#[tokio::test]
async fn no_user_means_no_authorization_header_and_default_user_is_used() {
    let fake = Fake::always(Canned::proto(&fs::RemoveResponse::default()));
    envd(&fake)
        .remove("/tmp/x", &CallOptions::default().no_timeout())
        .await
        .unwrap();
    let seen = fake.last();
    assert!(seen.headers.get("authorization").is_none());
    assert!(seen.headers.get("connect-timeout-ms").is_none());

    let mut options = EnvdOptions::new("sbx1");
    options.default_user = Some("user".into());
    let with_default = Envd::new(fake.clone(), options);
    with_default
        .remove("/tmp/x", &CallOptions::default())
        .await
        .unwrap();
    assert_eq!(fake.last().headers["authorization"], "Basic dXNlcjo=");
}

#[tokio::test]
async fn json_wire_format_sends_json() {
    let fake = Fake::always(Canned::new(
        200,
        "application/json",
        r#"{"entry":{"path":"/x","size":"7","type":"FILE_TYPE_FILE"}}"#,
    ));
    let mut options = EnvdOptions::new("sbx1");
    options.wire_format = WireFormat::Json;
    let client = Envd::new(fake.clone(), options);
    let info = client.stat("/x", &CallOptions::default()).await.unwrap();
    assert_eq!(info.size, 7);
    let seen = fake.last();
    assert_eq!(seen.headers["content-type"], "application/json");
    assert_eq!(seen.body.unwrap(), Bytes::from_static(br#"{"path":"/x"}"#));
}

#[tokio::test]
async fn connect_codes_become_typed_errors_naming_op_and_subject() {
    let cases: [(u16, &str, Check); 7] = [
        (404, "not_found", |e| matches!(e, Error::NotFound { .. })),
        (400, "invalid_argument", |e| {
            matches!(e, Error::InvalidArgument { .. })
        }),
        (409, "already_exists", |e| {
            matches!(e, Error::AlreadyExists { .. })
        }),
        (403, "permission_denied", |e| {
            matches!(e, Error::PermissionDenied { .. })
        }),
        (401, "unauthenticated", |e| {
            matches!(e, Error::Authentication { .. })
        }),
        (504, "deadline_exceeded", |e| {
            matches!(e, Error::Timeout { .. })
        }),
        (500, "internal", |e| {
            matches!(
                e,
                Error::Rpc {
                    code: ErrorCode::Internal,
                    ..
                }
            )
        }),
    ];
    for (status, code, check) in cases {
        let fake = Fake::always(Canned::connect_error(status, code, "file not found: /x"));
        let err = envd(&fake)
            .stat("/x", &CallOptions::default())
            .await
            .unwrap_err();
        assert!(check(&err), "{code}: {err:?}");
        assert!(err.to_string().starts_with("stat /x: "), "{err}");
        assert!(!err.is_sandbox_gone());
    }
}

#[tokio::test]
async fn edge_502_on_a_unary_call_is_sandbox_not_found() {
    let fake = Fake::always(Canned::edge_502("sbx1"));
    let err = envd(&fake)
        .stat("/x", &CallOptions::default())
        .await
        .unwrap_err();
    match &err {
        Error::SandboxNotFound {
            sandbox_id,
            message,
            ..
        } => {
            assert_eq!(sandbox_id, "sbx1");
            assert_eq!(message, "The sandbox was not found");
        }
        other => panic!("expected SandboxNotFound, got {other:?}"),
    }
    assert!(err.is_sandbox_gone());
}

#[tokio::test]
async fn http_429_without_a_connect_body_is_rate_limited() {
    let fake = Fake::always(Canned::new(429, "text/plain", "slow down"));
    let err = envd(&fake)
        .list_processes(&CallOptions::default())
        .await
        .unwrap_err();
    assert!(matches!(err, Error::RateLimited { .. }), "{err:?}");
    assert!(err.to_string().contains("slow down"), "{err}");
}

#[tokio::test]
async fn envd_401_for_a_missing_token_is_authentication() {
    let fake = Fake::always(Canned::new(
        401,
        "application/json",
        r#"{"code":401,"message":"unauthorized access, please provide a valid access token"}"#,
    ));
    let err = envd(&fake)
        .stat("/x", &CallOptions::default())
        .await
        .unwrap_err();
    assert!(matches!(err, Error::Authentication { .. }), "{err:?}");
}

#[tokio::test]
async fn start_streams_events_and_sends_stream_headers() {
    let fake = Fake::always(Canned::proto_stream(
        &[
            start_event(42),
            keepalive_event(),
            data_event(true, b"out"),
            data_event(false, b"err"),
            end_event(3),
        ],
        "{}",
    ));
    let command = Command::shell("echo hi").env("A", "1");
    let mut stream = envd(&fake)
        .start(
            &command,
            &StreamOptions::default()
                .user("root")
                .timeout(Duration::from_secs(5)),
        )
        .await
        .unwrap();
    assert_eq!(stream.pid(), 42);
    let mut events = Vec::new();
    while let Some(event) = stream.next().await {
        events.push(event.unwrap());
    }
    assert_eq!(events.len(), 3, "keepalives are consumed: {events:?}");
    assert_eq!(events[0], ProcessEvent::Stdout(Bytes::from_static(b"out")));
    assert_eq!(events[1], ProcessEvent::Stderr(Bytes::from_static(b"err")));
    match &events[2] {
        ProcessEvent::End(status) => {
            assert_eq!(status.exit_code, 3);
            assert!(!status.success());
        }
        other => panic!("expected End, got {other:?}"),
    }

    let seen = fake.last();
    assert_eq!(seen.uri.to_string(), "/process.Process/Start");
    assert_eq!(seen.headers["content-type"], "application/connect+proto");
    assert_eq!(seen.headers["keepalive-ping-interval"], "50");
    assert_eq!(seen.headers["connect-timeout-ms"], "5000");
    assert_eq!(seen.headers["authorization"], "Basic cm9vdDo=");
    // One envelope carrying the StartRequest.
    let body = seen.body.unwrap();
    assert_eq!(body[0], 0);
    let request: pb::StartRequest = buffa::Message::decode_from_slice(&body[5..]).unwrap();
    let process = request.process.as_option().unwrap();
    assert_eq!(process.cmd, "/bin/bash");
    assert_eq!(process.args, ["-l", "-c", "echo hi"]);
}

#[tokio::test]
async fn wait_returns_the_exit_status() {
    let fake = Fake::always(Canned::proto_stream(
        &[start_event(1), data_event(true, b"x"), end_event(0)],
        "{}",
    ));
    let stream = envd(&fake)
        .start(&Command::new("true"), &StreamOptions::default())
        .await
        .unwrap();
    let status = stream.wait().await.unwrap();
    assert!(status.success());
}

#[tokio::test]
async fn unavailable_before_the_first_event_is_sandbox_not_found() {
    let fake = Fake::always(Canned::proto_stream(
        &[],
        r#"{"error":{"code":"unavailable","message":"sandbox gone"}}"#,
    ));
    let err = envd(&fake)
        .start(&Command::new("true"), &StreamOptions::default())
        .await
        .unwrap_err();
    assert!(err.is_sandbox_gone(), "{err:?}");
    assert!(
        err.to_string()
            .starts_with("start process true: sandbox sbx1 not found"),
        "{err}"
    );
}

#[tokio::test]
async fn unavailable_after_the_first_event_is_an_unavailable_rpc_error() {
    let fake = Fake::always(Canned::proto_stream(
        &[start_event(9)],
        r#"{"error":{"code":"unavailable","message":"shutting down"}}"#,
    ));
    let mut stream = envd(&fake)
        .start(&Command::new("sleep"), &StreamOptions::default())
        .await
        .unwrap();
    let err = stream.next().await.unwrap().unwrap_err();
    assert!(
        matches!(
            err,
            Error::Rpc {
                code: ErrorCode::Unavailable,
                ..
            }
        ),
        "{err:?}"
    );
    assert!(err.is_unavailable() && !err.is_sandbox_gone());
    assert!(stream.next().await.is_none(), "errors end the stream");
}

#[tokio::test]
async fn edge_502_on_a_stream_is_sandbox_not_found() {
    let fake = Fake::always(Canned::edge_502("sbx1"));
    let err = envd(&fake)
        .connect_process(7, &StreamOptions::default())
        .await
        .unwrap_err();
    assert!(err.is_sandbox_gone(), "{err:?}");
    let err = envd(&fake)
        .watch_dir("/tmp", WatchOptions::default(), &StreamOptions::default())
        .await
        .unwrap_err();
    assert!(err.is_sandbox_gone(), "{err:?}");
}

#[tokio::test]
async fn a_stream_that_breaks_off_is_a_transport_failure() {
    let mut canned = Canned::proto_stream(&[start_event(5)], "{}");
    let Chunk::Data(full) = canned.chunks[0].clone() else {
        unreachable!()
    };
    // Only the start event arrives, then the connection dies.
    let first = fake::envelope(0, &start_event(5));
    assert!(full.starts_with(&first));
    canned = canned.chunks(vec![
        Chunk::Data(first),
        Chunk::Fail("connection reset by peer"),
    ]);
    let fake = Fake::always(canned);
    let mut stream = envd(&fake)
        .start(&Command::new("sleep"), &StreamOptions::default())
        .await
        .unwrap();
    let err = stream.next().await.unwrap().unwrap_err();
    assert!(matches!(err, Error::Transport { .. }), "{err:?}");
    assert!(err.is_unavailable());
    assert!(
        err.to_string().contains("connection reset by peer"),
        "{err}"
    );
}

#[tokio::test]
async fn a_stream_without_an_end_event_is_a_protocol_error() {
    let fake = Fake::always(Canned::proto_stream(
        &[start_event(5), data_event(true, b"x")],
        "{}",
    ));
    let mut stream = envd(&fake)
        .start(&Command::new("x"), &StreamOptions::default())
        .await
        .unwrap();
    assert!(matches!(
        stream.next().await,
        Some(Ok(ProcessEvent::Stdout(_)))
    ));
    let err = stream.next().await.unwrap().unwrap_err();
    assert!(matches!(err, Error::Protocol { .. }), "{err:?}");
}

#[tokio::test]
async fn a_first_event_that_is_not_start_is_a_protocol_error() {
    let fake = Fake::always(Canned::proto_stream(&[data_event(true, b"x")], "{}"));
    let err = envd(&fake)
        .start(&Command::new("x"), &StreamOptions::default())
        .await
        .unwrap_err();
    assert!(matches!(err, Error::Protocol { .. }), "{err:?}");
}

#[tokio::test]
async fn a_silent_server_hits_the_handshake_timeout() {
    let fake = Fake::always(
        Canned::new(200, "application/connect+proto", Bytes::new()).chunks(vec![Chunk::Hang]),
    );
    let started = std::time::Instant::now();
    let err = envd(&fake)
        .start(
            &Command::new("x"),
            &StreamOptions::default().handshake_timeout(Duration::from_millis(200)),
        )
        .await
        .unwrap_err();
    assert!(err.is_timeout(), "{err:?}");
    assert!(started.elapsed() < Duration::from_secs(5));
    assert!(
        fake.body_dropped.load(std::sync::atomic::Ordering::SeqCst),
        "the request is dropped"
    );
}

#[tokio::test]
async fn dropping_a_process_stream_drops_the_response() {
    let mut canned = Canned::proto_stream(&[start_event(5)], "{}");
    canned = canned.chunks(vec![
        Chunk::Data(fake::envelope(0, &start_event(5))),
        Chunk::Hang,
    ]);
    let fake = Fake::always(canned);
    let stream = envd(&fake)
        .start(&Command::new("sleep"), &StreamOptions::default())
        .await
        .unwrap();
    assert!(!fake.body_dropped.load(std::sync::atomic::Ordering::SeqCst));
    drop(stream);
    assert!(fake.body_dropped.load(std::sync::atomic::Ordering::SeqCst));
}

#[tokio::test]
async fn calls_that_do_not_act_as_a_user_reject_one_before_sending() {
    let fake = Fake::always(Canned::proto(&pb::SendSignalResponse::default()));
    let client = envd(&fake);
    let as_root = CallOptions::default().user("root");
    let err = client
        .send_signal(3, Signal::Kill, &as_root)
        .await
        .unwrap_err();
    assert!(matches!(err, Error::InvalidArgument { .. }), "{err:?}");
    assert!(
        err.to_string()
            .starts_with("signal process pid 3: invalid argument"),
        "{err}"
    );
    let err = client
        .connect_process(3, &StreamOptions::default().user("root"))
        .await
        .unwrap_err();
    assert!(matches!(err, Error::InvalidArgument { .. }), "{err:?}");
    let err = client
        .send_stdin(3, Bytes::from_static(b"x"), &as_root)
        .await
        .unwrap_err();
    assert!(matches!(err, Error::InvalidArgument { .. }), "{err:?}");
    assert!(fake.requests().is_empty());
}

#[tokio::test]
async fn bad_input_is_rejected_before_sending() {
    let fake = Fake::always(Canned::proto(&fs::ListDirResponse::default()));
    let client = envd(&fake);
    let err = client
        .list_dir("/tmp", 0, &CallOptions::default())
        .await
        .unwrap_err();
    assert!(
        err.to_string()
            .starts_with("list directory /tmp: invalid argument: depth"),
        "{err}"
    );
    let err = client
        .stat("/x", &CallOptions::default().user("a:b"))
        .await
        .unwrap_err();
    assert!(matches!(err, Error::InvalidArgument { .. }), "{err:?}");
    let err = client
        .start(&Command::new(""), &StreamOptions::default())
        .await
        .unwrap_err();
    assert!(matches!(err, Error::InvalidArgument { .. }), "{err:?}");
    let err = client
        .send_signal(
            Selector::Tag(String::new()),
            Signal::Term,
            &CallOptions::default(),
        )
        .await
        .unwrap_err();
    assert!(matches!(err, Error::InvalidArgument { .. }), "{err:?}");
    let err = client
        .download("", &DownloadOptions::default())
        .await
        .unwrap_err();
    assert!(matches!(err, Error::InvalidArgument { .. }), "{err:?}");
    let err = client
        .download(
            "/x",
            &DownloadOptions::default().range(ByteRange::new(5, 2)),
        )
        .await
        .unwrap_err();
    assert!(matches!(err, Error::InvalidArgument { .. }), "{err:?}");
    let err = client
        .upload_files(
            vec![
                UploadPart::bytes("/a", Bytes::new()),
                UploadPart::bytes("/a", Bytes::new()),
            ],
            &UploadOptions::default(),
        )
        .await
        .unwrap_err();
    assert!(err.to_string().contains("appears twice"), "{err}");
    let err = client
        .upload(
            "/x",
            futures::stream::empty::<Result<Bytes, std::io::Error>>(),
            &UploadOptions::default().metadata("k", "é"),
        )
        .await
        .unwrap_err();
    assert!(matches!(err, Error::InvalidArgument { .. }), "{err:?}");
    assert!(fake.requests().is_empty(), "nothing may be sent");
}

#[tokio::test]
async fn process_rpcs_use_their_paths_and_selectors() {
    let fake = Fake::new(|seen| match seen.uri.path() {
        "/process.Process/List" => Canned::proto(&pb::ListResponse {
            processes: vec![pb::ProcessInfo {
                pid: 4,
                tag: Some("t".into()),
                config: buffa::MessageField::some(pb::ProcessConfig {
                    cmd: "/bin/bash".into(),
                    args: vec!["-l".into()],
                    cwd: Some("/tmp".into()),
                    ..Default::default()
                }),
                ..Default::default()
            }],
            ..Default::default()
        }),
        "/process.Process/SendInput" => Canned::proto(&pb::SendInputResponse::default()),
        "/process.Process/SendSignal" => Canned::proto(&pb::SendSignalResponse::default()),
        "/process.Process/CloseStdin" => Canned::proto(&pb::CloseStdinResponse::default()),
        "/process.Process/Update" => Canned::proto(&pb::UpdateResponse::default()),
        other => panic!("unexpected path {other}"),
    });
    let client = envd(&fake);
    let options = CallOptions::default();
    let list = client.list_processes(&options).await.unwrap();
    assert_eq!(list[0].pid, 4);
    assert_eq!(list[0].tag.as_deref(), Some("t"));
    assert_eq!(list[0].cwd.as_deref(), Some("/tmp"));
    client
        .send_stdin(4, Bytes::from_static(b"abc"), &options)
        .await
        .unwrap();
    let input: pb::SendInputRequest =
        buffa::Message::decode_from_slice(&fake.last().body.unwrap()).unwrap();
    assert!(
        format!("{input:?}").contains("Stdin([97, 98, 99])"),
        "{input:?}"
    );
    client
        .send_pty_input(
            Selector::Tag("t".into()),
            Bytes::from_static(b"x"),
            &options,
        )
        .await
        .unwrap();
    client.send_signal(4, Signal::Term, &options).await.unwrap();
    let signal: pb::SendSignalRequest =
        buffa::Message::decode_from_slice(&fake.last().body.unwrap()).unwrap();
    assert_eq!(signal.signal, pb::Signal::SIGNAL_SIGTERM);
    client.close_stdin(4, &options).await.unwrap();
    client
        .resize_pty(
            4,
            e2b_client::PtySize {
                cols: 100,
                rows: 30,
            },
            &options,
        )
        .await
        .unwrap();
    let paths: Vec<String> = fake
        .requests()
        .iter()
        .map(|s| s.uri.path().to_owned())
        .collect();
    assert_eq!(
        paths,
        [
            "/process.Process/List",
            "/process.Process/SendInput",
            "/process.Process/SendInput",
            "/process.Process/SendSignal",
            "/process.Process/CloseStdin",
            "/process.Process/Update"
        ]
    );
    assert!(
        fake.requests()
            .iter()
            .all(|s| s.headers.get("authorization").is_none())
    );
}

#[tokio::test]
async fn stream_input_sends_a_start_then_data_envelopes() {
    let fake = Fake::always(Canned::proto_stream(
        &[Bytes::from(buffa::Message::encode_to_vec(
            &pb::StreamInputResponse::default(),
        ))],
        "{}",
    ));
    let input = futures::stream::iter(vec![
        e2b_client::ProcessInput::Stdin(Bytes::from_static(b"a")),
        e2b_client::ProcessInput::Stdin(Bytes::from_static(b"b")),
    ]);
    envd(&fake)
        .stream_input(8, input, &CallOptions::default())
        .await
        .unwrap();
    let seen = fake.last();
    assert_eq!(seen.uri.path(), "/process.Process/StreamInput");
    assert!(
        seen.headers.get("connect-timeout-ms").is_none(),
        "unbounded by default"
    );
    let body = seen.body.unwrap();
    let mut offset = 0;
    let mut frames = 0;
    while offset < body.len() {
        let len = u32::from_be_bytes(body[offset + 1..offset + 5].try_into().unwrap()) as usize;
        offset += 5 + len;
        frames += 1;
    }
    assert_eq!(frames, 3, "start + two data events");
}

#[tokio::test]
async fn watch_dir_waits_for_start_and_yields_events() {
    use envd_proto::filesystem::__buffa::oneof::watch_dir_response::Event;
    let message = |event: Event| {
        Bytes::from(buffa::Message::encode_to_vec(&fs::WatchDirResponse {
            event: Some(event),
            ..Default::default()
        }))
    };
    let fake = Fake::always(Canned::proto_stream(
        &[
            message(Event::Start(Box::default())),
            message(Event::Keepalive(Box::default())),
            message(Event::Filesystem(Box::new(fs::FilesystemEvent {
                name: "nested/f.txt".into(),
                r#type: fs::EventType::EVENT_TYPE_CREATE.into(),
                entry: buffa::MessageField::some(entry("/tmp/nested/f.txt")),
                ..Default::default()
            }))),
        ],
        r#"{"error":{"code":"deadline_exceeded","message":"context deadline exceeded"}}"#,
    ));
    let watch = WatchOptions {
        recursive: true,
        include_entry: true,
        ..Default::default()
    };
    let mut stream = envd(&fake)
        .watch_dir("/tmp", watch, &StreamOptions::default())
        .await
        .unwrap();
    let event = stream.next().await.unwrap().unwrap();
    assert_eq!(event.name, "nested/f.txt");
    assert_eq!(event.kind, e2b_client::FsEventKind::Create);
    assert_eq!(event.entry.unwrap().path, "/tmp/nested/f.txt");
    let err = stream.next().await.unwrap().unwrap_err();
    assert!(err.is_timeout(), "{err:?}");
    assert!(stream.next().await.is_none());
    let request: fs::WatchDirRequest =
        buffa::Message::decode_from_slice(&fake.last().body.unwrap()[5..]).unwrap();
    assert!(request.recursive && request.include_entry);
}

#[tokio::test]
async fn download_streams_and_reports_length() {
    let fake = Fake::always(
        Canned::new(200, "text/plain", "")
            .header("content-length", "6")
            .chunks(vec![
                Chunk::Data(Bytes::from_static(b"abc")),
                Chunk::Data(Bytes::from_static(b"def")),
            ]),
    );
    let download = envd(&fake)
        .download("/home/user/f.txt", &DownloadOptions::default().user("user"))
        .await
        .unwrap();
    assert_eq!(download.content_length(), Some(6));
    assert_eq!(download.content_type(), Some("text/plain"));
    assert_eq!(
        download.into_bytes(1024).await.unwrap(),
        Bytes::from_static(b"abcdef")
    );
    let too_big = envd(&fake)
        .download("/home/user/f.txt", &DownloadOptions::default())
        .await
        .unwrap()
        .into_bytes(5)
        .await
        .unwrap_err();
    assert!(
        too_big.to_string().starts_with(
            "download /home/user/f.txt: invalid argument: the content exceeds the 5-byte limit"
        ),
        "{too_big}"
    );
    let seen = fake.requests()[0].clone();
    assert_eq!(seen.method, http::Method::GET);
    assert_eq!(
        seen.uri.to_string(),
        "/files?path=%2Fhome%2Fuser%2Ff.txt&username=user"
    );
    assert!(
        seen.headers.get("authorization").is_none(),
        "/files carries the user in the query"
    );
}

#[tokio::test]
async fn download_ranges_use_206_or_are_cut_on_the_client() {
    let partial = Fake::always(
        Canned::new(206, "application/octet-stream", "cde")
            .header("content-range", "bytes 2-4/10")
            .header("content-length", "3"),
    );
    let range = ByteRange::new(2, 4);
    let download = envd(&partial)
        .download("/f", &DownloadOptions::default().range(range))
        .await
        .unwrap();
    assert_eq!(
        download.into_bytes(100).await.unwrap(),
        Bytes::from_static(b"cde")
    );
    assert_eq!(partial.last().headers["range"], "bytes=2-4");

    let ignoring = Fake::always(
        Canned::new(200, "application/octet-stream", "")
            .header("content-length", "10")
            .chunks(vec![
                Chunk::Data(Bytes::from_static(b"abc")),
                Chunk::Data(Bytes::from_static(b"defghij")),
            ]),
    );
    let download = envd(&ignoring)
        .download("/f", &DownloadOptions::default().range(range))
        .await
        .unwrap();
    assert_eq!(download.content_length(), Some(3));
    assert_eq!(
        download.into_bytes(100).await.unwrap(),
        Bytes::from_static(b"cde")
    );

    let beyond = Fake::always(Canned::new(416, "text/plain", "bad range"));
    let download = envd(&beyond)
        .download(
            "/f",
            &DownloadOptions::default().range(ByteRange::from(100)),
        )
        .await
        .unwrap();
    assert!(download.into_bytes(100).await.unwrap().is_empty());
}

#[tokio::test]
async fn download_statuses_are_classified() {
    let json = |code: u16, message: &str| {
        Canned::new(
            code,
            "application/json",
            format!(r#"{{"code":{code},"message":"{message}"}}"#),
        )
    };
    let cases: [(Canned, Check); 5] = [
        (json(404, "path '/f' does not exist"), |e| {
            matches!(e, Error::NotFound { .. })
        }),
        (json(400, "path is a directory"), |e| {
            matches!(e, Error::InvalidArgument { .. })
        }),
        (json(401, "invalid user"), |e| {
            matches!(e, Error::Authentication { .. })
        }),
        (Canned::edge_502("sbx1"), |e| e.is_sandbox_gone()),
        (json(500, "boom"), |e| {
            matches!(e, Error::Http { status: 500, .. })
        }),
    ];
    for (canned, check) in cases {
        let fake = Fake::always(canned);
        let err = envd(&fake)
            .download("/f", &DownloadOptions::default())
            .await
            .unwrap_err();
        assert!(check(&err), "{err:?}");
        assert!(err.to_string().starts_with("download /f: "), "{err}");
    }
}

#[tokio::test]
async fn a_download_that_breaks_off_is_a_transport_failure() {
    let fake = Fake::always(
        Canned::new(200, "application/octet-stream", "").chunks(vec![
            Chunk::Data(Bytes::from_static(b"abc")),
            Chunk::Fail("connection reset"),
        ]),
    );
    let mut download = envd(&fake)
        .download("/f", &DownloadOptions::default())
        .await
        .unwrap();
    assert_eq!(
        download.next().await.unwrap().unwrap(),
        Bytes::from_static(b"abc")
    );
    let err = download.next().await.unwrap().unwrap_err();
    assert!(
        matches!(err, Error::Transport { .. }) && err.is_unavailable(),
        "{err:?}"
    );
}

#[tokio::test]
async fn upload_streams_octet_stream_with_metadata() {
    let fake = Fake::always(Canned::new(
        200,
        "",
        r#"[{"path":"/home/user/f.txt","name":"f.txt","type":"file","metadata":{"owner":"dsh"}}]"#,
    ));
    let body = futures::stream::iter(vec![
        Ok::<_, std::io::Error>(Bytes::from_static(b"hello ")),
        Ok(Bytes::from_static(b"world")),
    ]);
    let written = envd(&fake)
        .upload(
            "/home/user/f.txt",
            body,
            &UploadOptions::default()
                .user("user")
                .metadata("owner", "dsh")
                .content_length(11),
        )
        .await
        .unwrap();
    assert_eq!(written.path, "/home/user/f.txt");
    assert_eq!(written.metadata.unwrap()["owner"], "dsh");
    let seen = fake.last();
    assert_eq!(seen.method, http::Method::POST);
    assert_eq!(
        seen.uri.to_string(),
        "/files?path=%2Fhome%2Fuser%2Ff.txt&username=user"
    );
    assert_eq!(seen.headers["content-type"], "application/octet-stream");
    assert_eq!(seen.headers["x-metadata-owner"], "dsh");
    assert_eq!(seen.headers["content-length"], "11");
    assert_eq!(seen.body.unwrap(), Bytes::from_static(b"hello world"));
}

#[tokio::test]
async fn upload_errors_are_classified() {
    let fake = Fake::always(Canned::new(
        507,
        "application/json",
        r#"{"code":507,"message":"no space left on device"}"#,
    ));
    let err = envd(&fake)
        .upload(
            "/f",
            futures::stream::once(async { Ok::<_, std::io::Error>(Bytes::from_static(b"x")) }),
            &UploadOptions::default(),
        )
        .await
        .unwrap_err();
    assert!(matches!(err, Error::NotEnoughSpace { .. }), "{err:?}");

    let wrong_count = Fake::always(Canned::new(200, "", "[]"));
    let err = envd(&wrong_count)
        .upload(
            "/f",
            futures::stream::empty::<Result<Bytes, std::io::Error>>(),
            &UploadOptions::default(),
        )
        .await
        .unwrap_err();
    assert!(matches!(err, Error::Protocol { .. }), "{err:?}");

    let garbage = Fake::always(Canned::new(200, "", "<html>"));
    let err = envd(&garbage)
        .upload(
            "/f",
            futures::stream::empty::<Result<Bytes, std::io::Error>>(),
            &UploadOptions::default(),
        )
        .await
        .unwrap_err();
    assert!(matches!(err, Error::Protocol { .. }), "{err:?}");
}

#[tokio::test]
async fn a_failing_upload_source_is_reported_as_such() {
    let fake = Fake::always(Canned::new(200, "", r#"[{"path":"/f","name":"f"}]"#));
    let body = futures::stream::iter(vec![
        Ok(Bytes::from_static(b"partial")),
        Err(std::io::Error::other("source disk failed")),
    ]);
    let err = envd(&fake)
        .upload("/f", body, &UploadOptions::default())
        .await
        .unwrap_err();
    match &err {
        Error::UploadSource { message, .. } => assert_eq!(message, "source disk failed"),
        other => panic!("expected UploadSource, got {other:?}"),
    }
    assert!(
        err.to_string()
            .starts_with("upload /f: upload source failed"),
        "{err}"
    );
}

#[tokio::test]
async fn multi_file_upload_is_multipart_without_a_path_query() {
    let fake = Fake::always(Canned::new(
        200,
        "",
        r#"[{"path":"/tmp/a","name":"a","type":"file"},{"path":"/home/user/b","name":"b","type":"file"}]"#,
    ));
    let written = envd(&fake)
        .upload_files(
            vec![
                UploadPart::bytes("/tmp/a", Bytes::from_static(b"A")),
                UploadPart::new(
                    "b",
                    futures::stream::iter(vec![
                        Ok::<_, std::io::Error>(Bytes::from_static(b"B1")),
                        Ok(Bytes::from_static(b"B2")),
                    ]),
                ),
            ],
            &UploadOptions::default().user("user"),
        )
        .await
        .unwrap();
    assert_eq!(written.len(), 2);
    let seen = fake.last();
    assert_eq!(seen.uri.to_string(), "/files?username=user");
    let content_type = seen.headers["content-type"].to_str().unwrap().to_owned();
    let boundary = content_type
        .strip_prefix("multipart/form-data; boundary=")
        .unwrap()
        .to_owned();
    let body = seen.body.unwrap();
    let mut multipart = multer::Multipart::new(
        futures::stream::once(async move { Ok::<_, std::io::Error>(body) }),
        boundary,
    );
    let mut parts = Vec::new();
    while let Some(field) = multipart.next_field().await.unwrap() {
        let name = field.file_name().unwrap().to_owned();
        parts.push((name, field.bytes().await.unwrap()));
    }
    assert_eq!(
        parts,
        [
            ("/tmp/a".to_owned(), Bytes::from_static(b"A")),
            ("b".to_owned(), Bytes::from_static(b"B1B2"))
        ]
    );

    let none = envd(&fake)
        .upload_files(Vec::new(), &UploadOptions::default())
        .await
        .unwrap();
    assert!(none.is_empty());
    assert_eq!(fake.requests().len(), 1, "an empty list sends nothing");
}

#[tokio::test]
async fn health_maps_502_to_false() {
    let up = Fake::always(Canned::new(204, "", ""));
    assert!(envd(&up).health().await.unwrap());
    assert_eq!(up.last().uri.to_string(), "/health");
    let down = Fake::always(Canned::edge_502("sbx1"));
    assert!(!envd(&down).health().await.unwrap());
    let broken = Fake::always(Canned::new(500, "", "boom"));
    assert!(matches!(
        envd(&broken).health().await,
        Err(Error::Http { status: 500, .. })
    ));
}

#[tokio::test]
async fn filesystem_unary_rpcs() {
    let fake = Fake::new(|seen| match seen.uri.path() {
        "/filesystem.Filesystem/MakeDir" => Canned::proto(&fs::MakeDirResponse {
            entry: buffa::MessageField::some(entry("/tmp/d")),
            ..Default::default()
        }),
        "/filesystem.Filesystem/Move" => Canned::proto(&fs::MoveResponse {
            entry: buffa::MessageField::some(entry("/tmp/e")),
            ..Default::default()
        }),
        "/filesystem.Filesystem/ListDir" => Canned::proto(&fs::ListDirResponse {
            entries: vec![entry("/tmp/a"), entry("/tmp/b")],
            ..Default::default()
        }),
        "/filesystem.Filesystem/CreateWatcher" => Canned::proto(&fs::CreateWatcherResponse {
            watcher_id: "wabc".into(),
            ..Default::default()
        }),
        "/filesystem.Filesystem/GetWatcherEvents" => Canned::proto(&fs::GetWatcherEventsResponse {
            events: vec![fs::FilesystemEvent {
                name: "a".into(),
                r#type: fs::EventType::EVENT_TYPE_REMOVE.into(),
                ..Default::default()
            }],
            ..Default::default()
        }),
        "/filesystem.Filesystem/RemoveWatcher" => {
            Canned::proto(&fs::RemoveWatcherResponse::default())
        }
        "/filesystem.Filesystem/Stat" => Canned::proto(&fs::StatResponse::default()),
        other => panic!("unexpected {other}"),
    });
    let client = envd(&fake);
    let options = CallOptions::default();
    assert_eq!(
        client.make_dir("/tmp/d", &options).await.unwrap().path,
        "/tmp/d"
    );
    assert_eq!(
        client
            .rename("/tmp/d", "/tmp/e", &options)
            .await
            .unwrap()
            .path,
        "/tmp/e"
    );
    let moved: fs::MoveRequest =
        buffa::Message::decode_from_slice(&fake.last().body.unwrap()).unwrap();
    assert_eq!(
        (moved.source.as_str(), moved.destination.as_str()),
        ("/tmp/d", "/tmp/e")
    );
    assert_eq!(client.list_dir("/tmp", 2, &options).await.unwrap().len(), 2);
    let listed: fs::ListDirRequest =
        buffa::Message::decode_from_slice(&fake.last().body.unwrap()).unwrap();
    assert_eq!(listed.depth, 2);
    let id = client
        .create_watcher("/tmp", WatchOptions::default(), &options)
        .await
        .unwrap();
    assert_eq!(id, "wabc");
    let events = client.watcher_events(&id, &options).await.unwrap();
    assert_eq!(events[0].kind, e2b_client::FsEventKind::Remove);
    client.remove_watcher(&id, &options).await.unwrap();
    // A Stat response without an entry is malformed.
    let err = client.stat("/x", &options).await.unwrap_err();
    assert!(matches!(err, Error::Protocol { .. }), "{err:?}");
}

fn gzip_bytes(data: &[u8]) -> Bytes {
    use std::io::Write;
    let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    encoder.write_all(data).unwrap();
    Bytes::from(encoder.finish().unwrap())
}

fn gunzip(data: &[u8]) -> Vec<u8> {
    use std::io::Read;
    let mut out = Vec::new();
    flate2::read::GzDecoder::new(data)
        .read_to_end(&mut out)
        .unwrap();
    out
}

#[tokio::test]
async fn gzip_uploads_compress_on_the_fly() {
    let fake = Fake::always(Canned::new(200, "", r#"[{"path":"/f","name":"f"}]"#));
    envd(&fake)
        .upload(
            "/f",
            bytes_chunks(vec![b"hello ", b"gzip ", b"world"]),
            &UploadOptions::default().gzip(true),
        )
        .await
        .unwrap();
    let seen = fake.last();
    assert_eq!(seen.headers["content-encoding"], "gzip");
    assert_eq!(gunzip(&seen.body.unwrap()), b"hello gzip world");

    envd(&fake)
        .upload_files(
            vec![UploadPart::bytes("/a", Bytes::from_static(b"A"))],
            &UploadOptions::default().gzip(true),
        )
        .await
        .unwrap();
    let seen = fake.last();
    assert_eq!(seen.headers["content-encoding"], "gzip");
    assert!(
        String::from_utf8(gunzip(&seen.body.unwrap()))
            .unwrap()
            .contains("filename=\"/a\"")
    );

    let err = envd(&fake)
        .upload(
            "/f",
            bytes_chunks(vec![b"x"]),
            &UploadOptions::default().gzip(true).content_length(1),
        )
        .await
        .unwrap_err();
    assert!(matches!(err, Error::InvalidArgument { .. }), "{err:?}");
    assert_eq!(
        fake.requests().len(),
        2,
        "the bad combination sends nothing"
    );
}

#[tokio::test]
async fn gzip_downloads_are_decompressed_as_they_stream() {
    let compressed = gzip_bytes(b"a fairly compressible text text text text");
    let (first, second) = compressed.split_at(10);
    let fake = Fake::always(
        Canned::new(200, "text/plain", "")
            .header("content-encoding", "gzip")
            .header("content-length", &compressed.len().to_string())
            .chunks(vec![
                Chunk::Data(Bytes::copy_from_slice(first)),
                Chunk::Data(Bytes::copy_from_slice(second)),
            ]),
    );
    let download = envd(&fake)
        .download("/f", &DownloadOptions::default().gzip(true))
        .await
        .unwrap();
    assert_eq!(
        download.content_length(),
        None,
        "the wire length is the compressed one"
    );
    assert_eq!(
        download.into_bytes(1024).await.unwrap(),
        Bytes::from_static(b"a fairly compressible text text text text")
    );
    assert_eq!(fake.last().headers["accept-encoding"], "gzip");

    let corrupt =
        Fake::always(Canned::new(200, "text/plain", "not gzip").header("content-encoding", "gzip"));
    let err = envd(&corrupt)
        .download("/f", &DownloadOptions::default())
        .await
        .unwrap()
        .into_bytes(1024)
        .await
        .unwrap_err();
    assert!(matches!(err, Error::Protocol { .. }), "{err:?}");

    let brotli = Fake::always(Canned::new(200, "text/plain", "x").header("content-encoding", "br"));
    let err = envd(&brotli)
        .download("/f", &DownloadOptions::default())
        .await
        .unwrap_err();
    assert!(matches!(err, Error::Protocol { .. }), "{err:?}");
}

fn bytes_chunks(
    chunks: Vec<&'static [u8]>,
) -> impl futures::Stream<Item = Result<Bytes, std::io::Error>> + Send {
    futures::stream::iter(chunks.into_iter().map(|c| Ok(Bytes::from_static(c))))
}

/// Every unary call's future is `Send`, so plugins can await them in code that must be `Send`
/// (a plugin's `create`, `tokio::spawn`). A compile-time check: it fails to build otherwise.
#[test]
fn unary_call_futures_are_send() {
    fn send<T: Send>(_: &T) {}
    let fake = Fake::always(Canned::new(200, "application/proto", Bytes::new()));
    let envd = envd(&fake);
    let options = CallOptions::default();
    send(&envd.stat("/x", &options));
    send(&envd.make_dir("/x", &options));
    send(&envd.rename("/x", "/y", &options));
    send(&envd.remove("/x", &options));
    send(&envd.list_processes(&options));
}
