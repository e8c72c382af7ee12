//! The client against a real e2b-local (needs root and
//! `cargo build -p e2b-local`): every RPC and `/files` path in both wire
//! formats and both plain-HTTP versions, secured sandboxes, lifecycle, and
//! the faults (sandbox gone, killed under a running stream, dropped
//! streams).

use std::time::Duration;

use bytes::Bytes;
use e2b_client::{
    Api, ByteRange, CallOptions, Command, DownloadOptions, Envd, EnvdOptions, Error, FileOperation,
    FileType, FsEventKind, ListQuery, NewSandbox, PlainHttp, ProcessEvent, ProcessInput, PtySize,
    Sandbox, SandboxRoute, SandboxState, SandboxTransport, Selector, Signal, StreamOptions,
    UploadOptions, UploadPart, WatchOptions, WireFormat,
};
use futures::StreamExt;

use crate::world::World;

/// Everything a process stream delivered.
#[derive(Debug, Default)]
struct Output {
    stdout: Vec<u8>,
    stderr: Vec<u8>,
    pty: Vec<u8>,
    status: Option<e2b_client::ExitStatus>,
}

async fn drain(mut stream: e2b_client::ProcessStream) -> Output {
    let mut output = Output::default();
    let deadline = Duration::from_secs(60);
    while let Some(event) = tokio::time::timeout(deadline, stream.next())
        .await
        .expect("the process stream makes progress")
    {
        match event.expect("no stream error") {
            ProcessEvent::Stdout(b) => output.stdout.extend_from_slice(&b),
            ProcessEvent::Stderr(b) => output.stderr.extend_from_slice(&b),
            ProcessEvent::Pty(b) => output.pty.extend_from_slice(&b),
            ProcessEvent::End(status) => output.status = Some(status),
        }
    }
    output
}

async fn run(envd: &Envd<SandboxTransport>, command: Command, options: StreamOptions) -> Output {
    drain(envd.start(&command, &options).await.expect("start")).await
}

/// Reads stdout until it contains `needle`.
async fn read_until(stream: &mut e2b_client::ProcessStream, needle: &str) -> String {
    let mut seen = Vec::new();
    loop {
        let event = tokio::time::timeout(Duration::from_secs(30), stream.next())
            .await
            .unwrap_or_else(|_| {
                panic!(
                    "no {needle:?} within 30 s; got {:?}",
                    String::from_utf8_lossy(&seen)
                )
            })
            .expect("the stream has not ended")
            .expect("no stream error");
        match event {
            ProcessEvent::Stdout(b) | ProcessEvent::Pty(b) => seen.extend_from_slice(&b),
            ProcessEvent::Stderr(_) => {}
            ProcessEvent::End(status) => panic!("ended ({status:?}) before {needle:?}"),
        }
        let text = String::from_utf8_lossy(&seen).into_owned();
        if text.contains(needle) {
            return text;
        }
    }
}

fn bytes_stream(
    chunks: Vec<&'static [u8]>,
) -> impl futures::Stream<Item = Result<Bytes, std::io::Error>> + Send {
    futures::stream::iter(chunks.into_iter().map(|c| Ok(Bytes::from_static(c))))
}

macro_rules! in_every_variant {
    ($suite:ident: $($name:ident => ($wire:expr, $plain:expr)),* $(,)?) => {
        $(
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $name() {
                $suite($wire, $plain).await;
            }
        )*
    };
}

async fn process_suite(wire: WireFormat, plain: PlainHttp) {
    let world = World::start();
    let api = world.api_with(wire, plain);
    let sandbox = world.sandbox(&api).await;
    let envd = sandbox.envd();
    let none = StreamOptions::default();
    let call = CallOptions::default();

    // Output, exit status, environment and working directory.
    let out = run(
        envd,
        Command::shell("echo out; echo err >&2; exit 3"),
        none.clone(),
    )
    .await;
    assert_eq!(out.stdout, b"out\n");
    assert_eq!(out.stderr, b"err\n");
    let status = out.status.unwrap();
    assert_eq!((status.exit_code, status.exited), (3, true));
    let out = run(
        envd,
        Command::new("/bin/sh")
            .args(["-c", "echo $FOO; pwd"])
            .env("FOO", "bar baz")
            .cwd("/tmp"),
        none.clone(),
    )
    .await;
    assert_eq!(String::from_utf8_lossy(&out.stdout), "bar baz\n/tmp\n");

    // The default user, and root on request.
    let out = run(envd, Command::new("/usr/bin/id").arg("-un"), none.clone()).await;
    assert_eq!(out.stdout, b"user\n");
    let out = run(
        envd,
        Command::new("/usr/bin/id").arg("-un"),
        none.clone().user("root"),
    )
    .await;
    assert_eq!(out.stdout, b"root\n");

    // Raw bytes survive both encodings.
    let out = run(
        envd,
        Command::new("/usr/bin/printf").arg("\\000\\377\\n"),
        none.clone(),
    )
    .await;
    assert_eq!(out.stdout, b"\x00\xff\n");

    // Stdin: a pipe fed by SendInput and closed by CloseStdin; List and a
    // tag find the process.
    let mut cat = envd
        .start(&Command::new("/bin/cat").stdin(true).tag("cat-1"), &none)
        .await
        .unwrap();
    let listed = envd.list_processes(&call).await.unwrap();
    let entry = listed
        .iter()
        .find(|p| p.pid == cat.pid())
        .expect("cat is listed");
    assert_eq!(entry.tag.as_deref(), Some("cat-1"));
    assert_eq!(entry.cmd, "/bin/cat");
    envd.send_stdin(
        Selector::Tag("cat-1".into()),
        Bytes::from_static(b"hello\n"),
        &call,
    )
    .await
    .unwrap();
    read_until(&mut cat, "hello\n").await;
    envd.close_stdin(cat.pid(), &call).await.unwrap();
    assert!(cat.wait().await.unwrap().success());

    // StreamInput, then CloseStdin.
    let cat = envd
        .start(&Command::new("/bin/cat").stdin(true), &none)
        .await
        .unwrap();
    let pid = cat.pid();
    let input = futures::stream::iter(vec![
        ProcessInput::Stdin(Bytes::from_static(b"ab")),
        ProcessInput::Stdin(Bytes::from_static(b"cd\n")),
    ]);
    envd.stream_input(pid, input, &call).await.unwrap();
    envd.close_stdin(pid, &call).await.unwrap();
    let out = drain(cat).await;
    assert_eq!(out.stdout, b"abcd\n");

    // Connect attaches a second stream to a running process.
    let mut reader = envd
        .start(
            &Command::new("/bin/sh")
                .args(["-c", "read x; echo got $x"])
                .stdin(true)
                .tag("reader"),
            &none,
        )
        .await
        .unwrap();
    let attached = envd
        .connect_process(Selector::Tag("reader".into()), &none)
        .await
        .unwrap();
    assert_eq!(attached.pid(), reader.pid());
    envd.send_stdin(reader.pid(), Bytes::from_static(b"1\n"), &call)
        .await
        .unwrap();
    read_until(&mut reader, "got 1").await;
    let out = drain(attached).await;
    assert_eq!(out.stdout, b"got 1\n");

    // SIGKILL ends the process with -1; SIGTERM too.
    for (signal, status_text) in [
        (Signal::Kill, "signal: killed"),
        (Signal::Term, "signal: terminated"),
    ] {
        let sleeper = envd
            .start(&Command::new("/bin/sleep").arg("600"), &none)
            .await
            .unwrap();
        envd.send_signal(sleeper.pid(), signal, &call)
            .await
            .unwrap();
        let status = drain(sleeper).await.status.unwrap();
        assert_eq!((status.exit_code, status.exited), (-1, false));
        assert_eq!(status.status, status_text);
    }

    // A PTY: output arrives as PTY bytes, resizing is visible inside.
    let mut shell = envd
        .start(
            &Command::new("/bin/sh")
                .pty(PtySize { cols: 80, rows: 24 })
                .env("TERM", "xterm"),
            &none,
        )
        .await
        .unwrap();
    envd.resize_pty(
        shell.pid(),
        PtySize {
            cols: 100,
            rows: 30,
        },
        &call,
    )
    .await
    .unwrap();
    envd.send_pty_input(shell.pid(), Bytes::from_static(b"stty size\n"), &call)
        .await
        .unwrap();
    read_until(&mut shell, "30 100").await;
    envd.send_pty_input(shell.pid(), Bytes::from_static(b"exit\n"), &call)
        .await
        .unwrap();
    assert!(drain(shell).await.status.unwrap().success());

    // Connect-Timeout-Ms on Start is the process's lifetime.
    let mut bounded = envd
        .start(
            &Command::new("/bin/sleep").arg("600"),
            &none.clone().timeout(Duration::from_millis(500)),
        )
        .await
        .unwrap();
    let err = tokio::time::timeout(Duration::from_secs(30), bounded.next())
        .await
        .unwrap()
        .unwrap()
        .unwrap_err();
    assert!(err.is_timeout(), "{err:?}");

    // Failures envd reports.
    let err = envd.connect_process(999_999, &none).await.unwrap_err();
    assert!(err.is_not_found(), "{err:?}");
    let err = envd
        .send_signal(999_999, Signal::Kill, &call)
        .await
        .unwrap_err();
    assert!(err.is_not_found(), "{err:?}");
    let err = envd
        .start(&Command::new("/bin/true").cwd("/does/not/exist"), &none)
        .await
        .unwrap_err();
    assert!(matches!(err, Error::InvalidArgument { .. }), "{err:?}");
    let err = envd
        .start(
            &Command::new("/bin/true"),
            &none.clone().user("nobody-here"),
        )
        .await
        .unwrap_err();
    assert!(matches!(err, Error::Authentication { .. }), "{err:?}");
    let err = envd
        .send_stdin(999_999, Bytes::from_static(b"x"), &call)
        .await
        .unwrap_err();
    assert!(err.is_not_found(), "{err:?}");
}

in_every_variant!(process_suite:
    process_rpcs_proto_http1 => (WireFormat::Proto, PlainHttp::Http1),
    process_rpcs_json_http1 => (WireFormat::Json, PlainHttp::Http1),
    process_rpcs_proto_h2c => (WireFormat::Proto, PlainHttp::H2cPriorKnowledge),
    process_rpcs_json_h2c => (WireFormat::Json, PlainHttp::H2cPriorKnowledge),
);

async fn filesystem_suite(wire: WireFormat, plain: PlainHttp) {
    let world = World::start();
    let api = world.api_with(wire, plain);
    let sandbox = world.sandbox(&api).await;
    let envd = sandbox.envd();
    let call = CallOptions::default();

    let dir = envd.make_dir("/home/user/d/e", &call).await.unwrap();
    assert_eq!(dir.file_type, FileType::Directory);
    assert_eq!(dir.path, "/home/user/d/e");
    assert_eq!(
        (dir.mode, dir.owner.as_str(), dir.group.as_str()),
        (0o755, "user", "user")
    );
    let err = envd.make_dir("/home/user/d/e", &call).await.unwrap_err();
    assert!(matches!(err, Error::AlreadyExists { .. }), "{err:?}");

    envd.upload(
        "/home/user/d/e/f.txt",
        bytes_stream(vec![b"12345"]),
        &UploadOptions::default(),
    )
    .await
    .unwrap();
    let file = envd.stat("d/e/f.txt", &call).await.unwrap();
    assert_eq!(file.path, "/home/user/d/e/f.txt");
    assert_eq!(
        (file.file_type, file.size, file.mode),
        (FileType::File, 5, 0o644)
    );
    assert!(file.modified.is_some());
    let err = envd.stat("/home/user/missing", &call).await.unwrap_err();
    assert!(err.is_not_found(), "{err:?}");
    assert!(
        err.to_string()
            .starts_with("stat /home/user/missing: not found"),
        "{err}"
    );

    let one = envd.list_dir("/home/user/d", 1, &call).await.unwrap();
    assert_eq!(
        one.iter().map(|e| e.name.as_str()).collect::<Vec<_>>(),
        ["e"]
    );
    let two = envd.list_dir("/home/user/d", 2, &call).await.unwrap();
    assert_eq!(
        two.iter().map(|e| e.path.as_str()).collect::<Vec<_>>(),
        ["/home/user/d/e", "/home/user/d/e/f.txt"]
    );
    let err = envd
        .list_dir("/home/user/d/e/f.txt", 1, &call)
        .await
        .unwrap_err();
    assert!(matches!(err, Error::InvalidArgument { .. }), "{err:?}");
    assert!(
        envd.list_dir("/nope", 1, &call)
            .await
            .unwrap_err()
            .is_not_found()
    );

    let moved = envd
        .rename("/home/user/d/e/f.txt", "/home/user/g/h.txt", &call)
        .await
        .unwrap();
    assert_eq!(moved.path, "/home/user/g/h.txt");
    assert!(
        envd.stat("/home/user/d/e/f.txt", &call)
            .await
            .unwrap_err()
            .is_not_found()
    );
    let err = envd
        .rename("/home/user/nope", "/home/user/x", &call)
        .await
        .unwrap_err();
    assert!(err.is_not_found(), "{err:?}");

    envd.remove("/home/user/d", &call).await.unwrap();
    assert!(
        envd.stat("/home/user/d", &call)
            .await
            .unwrap_err()
            .is_not_found()
    );
    envd.remove("/home/user/d", &call).await.unwrap();

    // Root on request: the directory belongs to root.
    let owned = envd
        .make_dir("/opt/rooted", &call.clone().user("root"))
        .await
        .unwrap();
    assert_eq!(owned.owner, "root");

    // Streaming watch.
    envd.make_dir("/home/user/w", &call).await.unwrap();
    let watch = WatchOptions {
        recursive: true,
        include_entry: true,
        ..Default::default()
    };
    let mut events = envd
        .watch_dir("/home/user/w", watch, &StreamOptions::default())
        .await
        .unwrap();
    envd.make_dir("/home/user/w/sub", &call).await.unwrap();
    envd.upload(
        "/home/user/w/sub/x.txt",
        bytes_stream(vec![b"x"]),
        &UploadOptions::default(),
    )
    .await
    .unwrap();
    let mut seen = Vec::new();
    while !seen.iter().any(|(name, kind): &(String, FsEventKind)| {
        name == "sub/x.txt" && *kind == FsEventKind::Write
    }) {
        let event = tokio::time::timeout(Duration::from_secs(30), events.next())
            .await
            .unwrap_or_else(|_| panic!("no write event for sub/x.txt; saw {seen:?}"))
            .unwrap()
            .unwrap();
        seen.push((event.name.clone(), event.kind));
    }
    assert!(
        seen.contains(&("sub".to_owned(), FsEventKind::Create)),
        "{seen:?}"
    );
    drop(events);
    let err = envd
        .watch_dir(
            "/home/user/none",
            WatchOptions::default(),
            &StreamOptions::default(),
        )
        .await
        .unwrap_err();
    assert!(err.is_not_found(), "{err:?}");

    // Polling watcher.
    let id = envd
        .create_watcher("/home/user/w", WatchOptions::default(), &call)
        .await
        .unwrap();
    envd.upload(
        "/home/user/w/polled.txt",
        bytes_stream(vec![b"p"]),
        &UploadOptions::default(),
    )
    .await
    .unwrap();
    let mut polled = Vec::new();
    for _ in 0..100 {
        polled.extend(envd.watcher_events(&id, &call).await.unwrap());
        if polled.iter().any(|e| e.name == "polled.txt") {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(polled.iter().any(|e| e.name == "polled.txt"), "{polled:?}");
    envd.remove_watcher(&id, &call).await.unwrap();
    assert!(
        envd.remove_watcher(&id, &call)
            .await
            .unwrap_err()
            .is_not_found()
    );
    assert!(
        envd.watcher_events(&id, &call)
            .await
            .unwrap_err()
            .is_not_found()
    );
}

in_every_variant!(filesystem_suite:
    filesystem_rpcs_proto_http1 => (WireFormat::Proto, PlainHttp::Http1),
    filesystem_rpcs_json_http1 => (WireFormat::Json, PlainHttp::Http1),
    filesystem_rpcs_proto_h2c => (WireFormat::Proto, PlainHttp::H2cPriorKnowledge),
    filesystem_rpcs_json_h2c => (WireFormat::Json, PlainHttp::H2cPriorKnowledge),
);

async fn files_suite(plain: PlainHttp) {
    let world = World::start();
    let api = world.api_with(WireFormat::Proto, plain);
    let sandbox = world.sandbox(&api).await;
    let envd = sandbox.envd();
    let read = DownloadOptions::default();

    let written = envd
        .upload(
            "/home/user/up/a.bin",
            bytes_stream(vec![b"hello ", b"\x00\xff ", b"world"]),
            &UploadOptions::default().metadata("owner", "dsh"),
        )
        .await
        .unwrap();
    assert_eq!(
        (written.path.as_str(), written.name.as_str()),
        ("/home/user/up/a.bin", "a.bin")
    );
    let content = envd.download("/home/user/up/a.bin", &read).await.unwrap();
    assert_eq!(content.content_length(), Some(14));
    assert_eq!(
        content.into_bytes(1 << 20).await.unwrap(),
        Bytes::from_static(b"hello \x00\xff world")
    );
    let stat = envd
        .stat("/home/user/up/a.bin", &CallOptions::default())
        .await
        .unwrap();
    assert_eq!(stat.metadata.get("owner").map(String::as_str), Some("dsh"));
    assert_eq!(stat.owner, "user");

    // Ranges.
    let part = envd
        .download(
            "/home/user/up/a.bin",
            &read.clone().range(ByteRange::new(6, 7)),
        )
        .await
        .unwrap();
    assert_eq!(
        part.into_bytes(100).await.unwrap(),
        Bytes::from_static(b"\x00\xff")
    );
    let tail = envd
        .download(
            "/home/user/up/a.bin",
            &read.clone().range(ByteRange::from(9)),
        )
        .await
        .unwrap();
    assert_eq!(
        tail.into_bytes(100).await.unwrap(),
        Bytes::from_static(b"world")
    );
    let past = envd
        .download(
            "/home/user/up/a.bin",
            &read.clone().range(ByteRange::from(100)),
        )
        .await
        .unwrap();
    assert!(past.into_bytes(100).await.unwrap().is_empty());

    // Empty files, declared lengths, root ownership.
    envd.upload(
        "/home/user/empty",
        futures::stream::empty::<Result<Bytes, std::io::Error>>(),
        &UploadOptions::default(),
    )
    .await
    .unwrap();
    assert!(
        envd.download("/home/user/empty", &read)
            .await
            .unwrap()
            .into_bytes(10)
            .await
            .unwrap()
            .is_empty()
    );
    envd.upload(
        "/root/owned.txt",
        bytes_stream(vec![b"abc"]),
        &UploadOptions::default().user("root").content_length(3),
    )
    .await
    .unwrap();
    let stat = envd
        .stat("/root/owned.txt", &CallOptions::default().user("root"))
        .await
        .unwrap();
    assert_eq!(stat.owner, "root");

    // gzip both ways.
    let text = Bytes::from("compressible line\n".repeat(10_000));
    let body = text.clone();
    envd.upload(
        "/home/user/up/text.txt",
        futures::stream::once(async move { Ok::<_, std::io::Error>(body) }),
        &UploadOptions::default().gzip(true),
    )
    .await
    .unwrap();
    assert_eq!(
        envd.stat("/home/user/up/text.txt", &CallOptions::default())
            .await
            .unwrap()
            .size,
        text.len() as u64
    );
    let back = envd
        .download("/home/user/up/text.txt", &read.clone().gzip(true))
        .await
        .unwrap();
    assert_eq!(back.into_bytes(1 << 20).await.unwrap(), text);

    // Several files in one multipart request; relative names resolve
    // against home.
    let written = envd
        .upload_files(
            vec![
                UploadPart::bytes("/tmp/multi/one.txt", Bytes::from_static(b"1")),
                UploadPart::new("multi/two \"q\".txt", bytes_stream(vec![b"2", b"2"])),
            ],
            &UploadOptions::default(),
        )
        .await
        .unwrap();
    assert_eq!(written[0].path, "/tmp/multi/one.txt");
    assert_eq!(written[1].path, "/home/user/multi/two \"q\".txt");
    let two = envd.download("multi/two \"q\".txt", &read).await.unwrap();
    assert_eq!(two.into_bytes(10).await.unwrap(), Bytes::from_static(b"22"));

    // Failures.
    let err = envd.download("/home/user/none", &read).await.unwrap_err();
    assert!(err.is_not_found(), "{err:?}");
    let err = envd.download("/home/user/up", &read).await.unwrap_err();
    assert!(matches!(err, Error::InvalidArgument { .. }), "{err:?}");
    let err = envd
        .download("/home/user/up/a.bin", &read.clone().user("nobody-here"))
        .await
        .unwrap_err();
    assert!(matches!(err, Error::Authentication { .. }), "{err:?}");
    let err = envd
        .upload(
            "/home/user/up",
            bytes_stream(vec![b"x"]),
            &UploadOptions::default(),
        )
        .await
        .unwrap_err();
    assert!(matches!(err, Error::InvalidArgument { .. }), "{err:?}");
    let failing = futures::stream::iter(vec![
        Ok(Bytes::from_static(b"partial")),
        Err(std::io::Error::other("source failed")),
    ]);
    let err = tokio::time::timeout(
        Duration::from_secs(30),
        envd.upload("/home/user/up/broken", failing, &UploadOptions::default()),
    )
    .await
    .expect("a failing source does not hang the upload")
    .unwrap_err();
    assert!(matches!(err, Error::UploadSource { .. }), "{err:?}");

    // Signed URLs work for a plain client without routing headers; an
    // expired one is refused (401), an unsigned one cannot even be routed
    // to this secured sandbox (502).
    let signed = sandbox
        .file_url("/home/user/up/a.bin", FileOperation::Read, None, None)
        .unwrap();
    let plain_client = e2b_client::HttpStack::new(PlainHttp::Http1, None);
    let body = plain_get(&plain_client, &signed).await;
    assert_eq!(body, (200, Bytes::from_static(b"hello \x00\xff world")));
    let later = std::time::SystemTime::now() + Duration::from_secs(600);
    let expiring = sandbox
        .file_url(
            "/home/user/up/a.bin",
            FileOperation::Read,
            Some("user"),
            Some(later),
        )
        .unwrap();
    assert_eq!(plain_get(&plain_client, &expiring).await.0, 200);
    let earlier = std::time::SystemTime::now() - Duration::from_secs(600);
    let expired = sandbox
        .file_url(
            "/home/user/up/a.bin",
            FileOperation::Read,
            None,
            Some(earlier),
        )
        .unwrap();
    assert_eq!(plain_get(&plain_client, &expired).await.0, 401);
    let unsigned = signed.split("&signature=").next().unwrap().to_owned();
    assert_eq!(plain_get(&plain_client, &unsigned).await.0, 502);
}

async fn plain_get(client: &e2b_client::HttpStack, url: &str) -> (u16, Bytes) {
    use e2b_client::ClientTransport;
    use http_body_util::BodyExt;
    let request = http::Request::get(url)
        .body(connectrpc::client::full_body(Bytes::new()))
        .unwrap();
    let response = client.send(request).await.unwrap();
    let status = response.status().as_u16();
    (
        status,
        response.into_body().collect().await.unwrap().to_bytes(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn files_http1() {
    files_suite(PlainHttp::Http1).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn files_h2c() {
    files_suite(PlainHttp::H2cPriorKnowledge).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn secured_sandboxes_need_their_token_and_open_ones_do_not() {
    let world = World::start();
    let api = world.api();
    let secured = world.sandbox(&api).await;
    assert!(secured.transport().is_secured());
    let tokenless = SandboxTransport::new(
        api.http().clone(),
        api.config(),
        SandboxRoute {
            sandbox_id: secured.id().to_owned(),
            domain: None,
            access_token: None,
        },
    )
    .unwrap();
    let envd = Envd::new(tokenless, EnvdOptions::new(secured.id()));
    let err = envd
        .stat("/home/user", &CallOptions::default())
        .await
        .unwrap_err();
    assert!(matches!(err, Error::Authentication { .. }), "{err:?}");
    let err = envd
        .start(&Command::new("/bin/true"), &StreamOptions::default())
        .await
        .unwrap_err();
    assert!(matches!(err, Error::Authentication { .. }), "{err:?}");

    let open = Sandbox::create(&api, &NewSandbox::new("base").secure(false))
        .await
        .unwrap();
    assert!(!open.transport().is_secured());
    let entry = open
        .envd()
        .stat("/home/user", &CallOptions::default())
        .await
        .unwrap();
    assert_eq!(entry.file_type, FileType::Directory);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lifecycle_list_pause_resume_kill() {
    let world = World::start();
    let api = world.api();
    let tagged = |n: &str| {
        NewSandbox::new("base")
            .metadata("suite", "lifecycle")
            .metadata("n", n)
    };
    let a = Sandbox::create(&api, &tagged("a")).await.unwrap();
    let b = Sandbox::create(&api, &tagged("b")).await.unwrap();
    let _other = world.sandbox(&api).await;

    let detail = a.detail().await.unwrap();
    assert_eq!(detail.sandbox_id, a.id());
    assert_eq!(detail.state, SandboxState::Running);
    assert_eq!(detail.metadata.as_ref().unwrap()["n"], "a");
    assert!(detail.end_at > detail.started_at);

    // Filtered listing, one per page.
    let query = ListQuery::default().metadata("suite", "lifecycle").limit(1);
    let mut ids: Vec<String> = api
        .list_sandboxes(query.clone())
        .into_stream()
        .map(|s| s.unwrap().sandbox_id)
        .collect()
        .await;
    ids.sort();
    let mut expected = vec![a.id().to_owned(), b.id().to_owned()];
    expected.sort();
    assert_eq!(ids, expected);
    let first = api.list_sandboxes_page(&query, None).await.unwrap();
    assert_eq!(first.sandboxes.len(), 1);
    assert!(first.next_token.is_some());

    a.set_timeout(Duration::from_secs(120)).await.unwrap();
    a.metrics().await.unwrap();

    // Paused: envd answers 502 and calls say the sandbox is gone.
    a.pause().await.unwrap();
    assert_eq!(a.detail().await.unwrap().state, SandboxState::Paused);
    assert!(matches!(
        a.pause().await.unwrap_err(),
        Error::Conflict { .. }
    ));
    assert!(!a.is_running().await.unwrap());
    let err = a
        .envd()
        .stat("/home/user", &CallOptions::default())
        .await
        .unwrap_err();
    assert!(err.is_sandbox_gone(), "{err:?}");
    let paused = api
        .list_sandboxes(ListQuery::default().state(SandboxState::Paused))
        .into_stream()
        .map(|s| s.unwrap().sandbox_id)
        .collect::<Vec<_>>()
        .await;
    assert_eq!(paused, [a.id().to_owned()]);

    // Connect resumes it; connecting again finds it running.
    let (resumed, was_paused) = Sandbox::connect(&api, a.id(), Duration::from_secs(60))
        .await
        .unwrap();
    assert!(was_paused);
    assert!(resumed.is_running().await.unwrap());
    resumed
        .envd()
        .stat("/home/user", &CallOptions::default())
        .await
        .unwrap();
    let (_, was_paused) = Sandbox::connect(&api, a.id(), Duration::from_secs(60))
        .await
        .unwrap();
    assert!(!was_paused);

    // Killed: every shape of "not found".
    a.kill().await.unwrap();
    assert!(a.kill().await.unwrap_err().is_sandbox_gone());
    assert!(a.detail().await.unwrap_err().is_sandbox_gone());
    assert!(
        Sandbox::connect(&api, a.id(), Duration::from_secs(5))
            .await
            .unwrap_err()
            .is_sandbox_gone()
    );
    let err = a
        .envd()
        .stat("/", &CallOptions::default())
        .await
        .unwrap_err();
    assert!(err.is_sandbox_gone(), "{err:?}");
    let err = a
        .envd()
        .start(&Command::new("/bin/true"), &StreamOptions::default())
        .await
        .unwrap_err();
    assert!(err.is_sandbox_gone(), "{err:?}");
    let err = a
        .envd()
        .download("/etc/hostname", &DownloadOptions::default())
        .await
        .unwrap_err();
    assert!(err.is_sandbox_gone(), "{err:?}");
    assert!(!a.is_running().await.unwrap());
    assert!(
        api.kill_sandbox("doesnotexist")
            .await
            .unwrap_err()
            .is_sandbox_gone()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_expired_sandbox_is_gone() {
    let world = World::start();
    let api = world.api();
    let sandbox = world.sandbox(&api).await;
    sandbox.set_timeout(Duration::from_secs(1)).await.unwrap();
    tokio::time::sleep(Duration::from_millis(2500)).await;
    let err = sandbox
        .envd()
        .stat("/", &CallOptions::default())
        .await
        .unwrap_err();
    assert!(err.is_sandbox_gone(), "{err:?}");
    assert!(sandbox.detail().await.unwrap_err().is_sandbox_gone());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killing_the_sandbox_ends_running_streams_promptly() {
    let world = World::start();
    let api = world.api();
    let sandbox = world.sandbox(&api).await;
    let envd = sandbox.envd();
    let mut ticker = envd
        .start(
            &Command::shell("while true; do echo tick; sleep 0.05; done"),
            &StreamOptions::default(),
        )
        .await
        .unwrap();
    read_until(&mut ticker, "tick").await;
    let mut silent = envd
        .start(
            &Command::new("/bin/sleep").arg("600"),
            &StreamOptions::default(),
        )
        .await
        .unwrap();
    envd.make_dir("/home/user/watched", &CallOptions::default())
        .await
        .unwrap();
    let mut watch = envd
        .watch_dir(
            "/home/user/watched",
            WatchOptions::default(),
            &StreamOptions::default(),
        )
        .await
        .unwrap();
    let big = Bytes::from(vec![7u8; 8 << 20]);
    envd.upload(
        "/home/user/big",
        futures::stream::once(async move { Ok::<_, std::io::Error>(big) }),
        &UploadOptions::default(),
    )
    .await
    .unwrap();
    let mut download = envd
        .download("/home/user/big", &DownloadOptions::default())
        .await
        .unwrap();
    download.next().await.unwrap().unwrap();

    sandbox.kill().await.unwrap();
    let deadline = Duration::from_secs(10);

    let ticker_end = tokio::time::timeout(deadline, async {
        loop {
            match ticker.next().await {
                Some(Ok(_)) => continue,
                Some(Err(err)) => return Some(err),
                None => return None,
            }
        }
    })
    .await
    .expect("the ticking stream ends within 10 s");
    let err = ticker_end.expect("the stream ends with an error, not cleanly");
    assert!(err.is_unavailable(), "{err:?}");

    let err = tokio::time::timeout(deadline, silent.next())
        .await
        .expect("the silent stream ends within 10 s")
        .expect("an error item")
        .unwrap_err();
    assert!(err.is_unavailable(), "{err:?}");

    let err = tokio::time::timeout(deadline, watch.next())
        .await
        .expect("the watch ends within 10 s")
        .expect("an error item")
        .unwrap_err();
    assert!(err.is_unavailable(), "{err:?}");

    let download_end = tokio::time::timeout(deadline, async {
        while let Some(chunk) = download.next().await {
            if let Err(err) = chunk {
                return Some(err);
            }
        }
        None
    })
    .await
    .expect("the download ends within 10 s");
    if let Some(err) = download_end {
        assert!(err.is_unavailable(), "{err:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dropped_stream_leaves_the_process_running_and_reattachable() {
    let world = World::start();
    let api = world.api();
    let sandbox = world.sandbox(&api).await;
    let envd = sandbox.envd();
    let mut counter = envd
        .start(
            &Command::shell(
                "i=0; while [ $i -lt 400 ]; do echo line$i; i=$((i+1)); sleep 0.02; done",
            ),
            &StreamOptions::default(),
        )
        .await
        .unwrap();
    let pid = counter.pid();
    read_until(&mut counter, "line1\n").await;
    drop(counter);
    let listed = envd.list_processes(&CallOptions::default()).await.unwrap();
    assert!(
        listed.iter().any(|p| p.pid == pid),
        "the process survives the dropped stream"
    );
    let mut again = envd
        .connect_process(pid, &StreamOptions::default())
        .await
        .unwrap();
    read_until(&mut again, "line").await;
    envd.send_signal(pid, Signal::Kill, &CallOptions::default())
        .await
        .unwrap();
    let status = drain(again).await.status.unwrap();
    assert!(!status.exited);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dropped_download_and_a_dropped_upload_free_the_connection() {
    let world = World::start();
    let api = world.api();
    let sandbox = world.sandbox(&api).await;
    let envd = sandbox.envd();
    let big = Bytes::from(vec![1u8; 4 << 20]);
    envd.upload(
        "/home/user/f",
        futures::stream::once(async move { Ok::<_, std::io::Error>(big) }),
        &UploadOptions::default(),
    )
    .await
    .unwrap();
    for _ in 0..20 {
        let mut download = envd
            .download("/home/user/f", &DownloadOptions::default())
            .await
            .unwrap();
        download.next().await.unwrap().unwrap();
        drop(download);
    }
    // An upload whose source never ends, abandoned.
    let options = UploadOptions::default();
    let pending = envd.upload(
        "/home/user/g",
        futures::stream::pending::<Result<Bytes, std::io::Error>>(),
        &options,
    );
    assert!(
        tokio::time::timeout(Duration::from_millis(300), pending)
            .await
            .is_err()
    );
    // The client still works.
    let content = envd
        .download("/home/user/f", &DownloadOptions::default())
        .await
        .unwrap();
    assert_eq!(content.into_bytes(8 << 20).await.unwrap().len(), 4 << 20);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unknown_sandboxes_and_templates_are_reported() {
    let world = World::start();
    let api = world.api();
    assert!(
        api.sandbox_info("nosuchsandbox")
            .await
            .unwrap_err()
            .is_sandbox_gone()
    );
    let route = SandboxRoute {
        sandbox_id: "nosuchsandbox".into(),
        domain: None,
        access_token: None,
    };
    let transport = SandboxTransport::new(api.http().clone(), api.config(), route).unwrap();
    let envd = Envd::new(transport, EnvdOptions::new("nosuchsandbox"));
    let err = envd.stat("/", &CallOptions::default()).await.unwrap_err();
    match &err {
        Error::SandboxNotFound { sandbox_id, .. } => assert_eq!(sandbox_id, "nosuchsandbox"),
        other => panic!("expected SandboxNotFound, got {other:?}"),
    }
    assert!(!envd.health().await.unwrap());

    let bad_key = Api::new(
        e2b_client::ConnectionOptions::default()
            .with_api_key("e2b_00")
            .with_api_url(world.server.api_url())
            .resolve_with(|_| None)
            .unwrap(),
    );
    let err = bad_key
        .list_sandboxes_page(&ListQuery::default(), None)
        .await
        .unwrap_err();
    assert!(matches!(err, Error::Authentication { .. }), "{err:?}");
}

/// envd sends every small write of a command as its own event, so its own
/// tiny HTTP/2 DATA frame. A caller that stops reading a chatty process
/// lets those frames queue in the client's receive buffer; h2 closes the
/// whole connection (GOAWAY `ENHANCE_YOUR_CALM`) once their framing
/// overhead exceeds a budget of half the connection window. The stack's
/// windows keep a fully stalled stream inside that budget: the stalled
/// stream delivers everything, and a second stream opened on the same
/// connection before the stall survives it too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stalled_reader_of_many_tiny_events_keeps_the_connection() {
    let world = World::start();
    let api = world.api_with(WireFormat::Proto, PlainHttp::H2cPriorKnowledge);
    let sandbox = world.sandbox(&api).await;
    let envd = sandbox.envd();
    // ~2.7 MB of output: enough to fill a 2 MiB stream window even when
    // envd, falling behind, reads several lines per event.
    let lines = 400_000;
    let chatty = envd
        .start(
            &Command::shell(format!("for i in $(seq 1 {lines}); do echo $i; done")),
            &StreamOptions::default(),
        )
        .await
        .expect("start the chatty process");
    // Open before the stall, on the same h2c connection: if the connection
    // were closed, this stream would break with it.
    let mut bystander = envd
        .start(
            &Command::shell("sleep 4; echo still here"),
            &StreamOptions::default(),
        )
        .await
        .expect("start the bystander");

    // Not reading: the chatty process fills the stream's receive window
    // with tiny frames meanwhile.
    tokio::time::sleep(Duration::from_secs(3)).await;

    let out = drain(chatty).await;
    let expected: String = (1..=lines).map(|i| format!("{i}\n")).collect();
    assert!(
        out.stdout == expected.as_bytes(),
        "stdout: {} of {} bytes, in order: {}",
        out.stdout.len(),
        expected.len(),
        expected.as_bytes().starts_with(&out.stdout)
    );
    let status = out.status.expect("the end event arrives");
    assert_eq!((status.exit_code, status.exited), (0, true));

    read_until(&mut bystander, "still here").await;
    let status = drain(bystander).await.status.expect("the bystander ends");
    assert_eq!((status.exit_code, status.exited), (0, true));
    let info = envd
        .stat("/home/user", &CallOptions::default())
        .await
        .expect("a call after the stall succeeds");
    assert_eq!(info.file_type, FileType::Directory);
}
