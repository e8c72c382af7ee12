//! Both sides of the gateway against a real e2b-local sandbox: an
//! in-process owner serving through [`EnvdGateway`], and adapters' typed
//! `Envd<OwnerTransport>` over it. The owner here is a plain `Owner`
//! (the FFI boundary is `dsh-plugin-api`'s business and tested there).
//!
//! Needs root and the built server (`cargo build -p e2b-local`).

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use dsh_e2b_gateway::{
    ControlPlaneLiveness, ControlShell, EnvdGateway, GUARD_FAILED_EXIT, GatewayOwner, OwnerEnvd,
    envd_client,
};
use dsh_plugin_api::ErrorKind;
use dsh_plugin_api::owner::{DaemonRequest, Owner, SandboxInfo};
use dsh_plugin_api::stream::byte_stream_once;
use e2b_client::{
    Api, CallOptions, Command, ConnectionOptions, DownloadOptions, NewSandbox, ProcessEvent,
    Sandbox, SandboxRoute, SandboxTransport, StreamOptions, UploadOptions,
};
use e2b_local::harness::LocalServer;
use futures::StreamExt;

struct World {
    server: LocalServer,
}

impl World {
    fn start() -> World {
        World {
            server: LocalServer::start(),
        }
    }

    fn options(&self) -> ConnectionOptions {
        ConnectionOptions::default()
            .with_api_key(self.server.api_key())
            .with_api_url(self.server.api_url())
            .with_sandbox_url(self.server.sandbox_url())
    }

    fn api(&self) -> Api {
        Api::new(self.options().resolve_with(|_| None).unwrap())
    }

    async fn sandbox(&self, api: &Api) -> Sandbox {
        Sandbox::create(
            api,
            &NewSandbox::new("base").timeout(Duration::from_secs(600)),
        )
        .await
        .expect("create a sandbox")
    }
}

fn info_of(sandbox: &Sandbox) -> SandboxInfo {
    SandboxInfo {
        sandbox_id: sandbox.id().to_owned(),
        template_id: sandbox.info().template_id.clone(),
        daemon_version: sandbox.info().envd_version.to_string(),
        cwd: "/home/user".into(),
        runtime_root: "/root/dsh-test".into(),
    }
}

fn owner_of(sandbox: &Sandbox) -> Arc<GatewayOwner> {
    Arc::new(GatewayOwner::new(sandbox, info_of(sandbox)))
}

fn adapter(owner: &Arc<GatewayOwner>) -> OwnerEnvd {
    envd_client(owner.clone())
}

async fn read_until(stream: &mut e2b_client::ProcessStream, needle: &str) {
    let mut seen = Vec::new();
    while let Some(event) = stream.next().await {
        if let ProcessEvent::Stdout(bytes) = event.expect("event") {
            seen.extend_from_slice(&bytes);
            if String::from_utf8_lossy(&seen).contains(needle) {
                return;
            }
        }
    }
    panic!("{needle:?} never appeared");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn typed_calls_through_the_owner_behave_as_direct_ones() {
    let world = World::start();
    let api = world.api();
    let sandbox = world.sandbox(&api).await;
    let envd = adapter(&owner_of(&sandbox));
    let options = CallOptions::default();

    let made = envd.make_dir("/home/user/through", &options).await.unwrap();
    assert_eq!(made.path, "/home/user/through");
    assert_eq!(made.owner, "user");
    let stat = envd.stat("/home/user/through", &options).await.unwrap();
    assert_eq!(stat.mode, 0o755);

    // A missing file classifies exactly as a direct call does.
    let through = envd.stat("/home/user/missing", &options).await.unwrap_err();
    let direct = sandbox
        .envd()
        .stat("/home/user/missing", &options)
        .await
        .unwrap_err();
    assert!(through.is_not_found(), "{through:?}");
    assert_eq!(through.to_string(), direct.to_string());

    // Server streams flow through, event by event.
    let mut process = envd
        .start(
            &Command::shell("echo one; sleep 0.2; echo two >&2; exit 3"),
            &StreamOptions::default(),
        )
        .await
        .unwrap();
    assert!(process.pid() > 1);
    let mut stdout = Vec::new();
    let mut stderr = Vec::new();
    let mut status = None;
    while let Some(event) = process.next().await {
        match event.unwrap() {
            ProcessEvent::Stdout(bytes) => stdout.extend_from_slice(&bytes),
            ProcessEvent::Stderr(bytes) => stderr.extend_from_slice(&bytes),
            ProcessEvent::End(end) => status = Some(end),
            ProcessEvent::Pty(_) => unreachable!("no PTY was asked for"),
        }
    }
    assert_eq!(stdout, b"one\n");
    assert_eq!(stderr, b"two\n");
    assert_eq!(status.unwrap().exit_code, 3);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn files_stream_both_ways_through_the_owner() {
    let world = World::start();
    let api = world.api();
    let sandbox = world.sandbox(&api).await;
    let envd = adapter(&owner_of(&sandbox));

    // 16 MiB in 64 KiB chunks, with a declared length and without.
    let chunk = Bytes::from(vec![0x5a; 64 << 10]);
    let total = 256 * chunk.len();
    for declared in [true, false] {
        let piece = chunk.clone();
        let chunks =
            futures::stream::iter((0..256).map(move |_| Ok::<_, std::io::Error>(piece.clone())));
        let mut upload = UploadOptions::default();
        if declared {
            upload = upload.content_length(total as u64);
        }
        let written = envd
            .upload("/home/user/big.bin", chunks, &upload)
            .await
            .unwrap();
        assert_eq!(written.path, "/home/user/big.bin");
        let mut download = envd
            .download("/home/user/big.bin", &DownloadOptions::default())
            .await
            .unwrap();
        let mut received = 0usize;
        let mut largest = 0usize;
        while let Some(piece) = download.next().await {
            let piece = piece.unwrap();
            assert!(piece.iter().all(|&b| b == 0x5a));
            received += piece.len();
            largest = largest.max(piece.len());
        }
        assert_eq!(received, total);
        // Streamed, not collected into one buffer somewhere on the way.
        assert!(largest < total / 4, "largest chunk {largest}");
    }

    let missing = envd
        .download("/home/user/nothing", &DownloadOptions::default())
        .await
        .unwrap_err();
    assert!(missing.is_not_found(), "{missing:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gone_sandbox_is_sandbox_not_found_for_the_adapter_and_unavailable_for_the_owner() {
    let world = World::start();
    let api = world.api();
    let sandbox = world.sandbox(&api).await;
    let owner = owner_of(&sandbox);
    let envd = adapter(&owner);

    // Running streams when the sandbox is killed.
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
    // A raw gateway call with its body pending: a 64 MiB download read
    // one chunk at a time (backpressure keeps most of it in the sandbox).
    let made = envd
        .start(
            &Command::shell("head -c 67108864 /dev/zero > /home/user/big"),
            &StreamOptions::default(),
        )
        .await
        .unwrap()
        .wait()
        .await
        .unwrap();
    assert!(made.success(), "{made:?}");
    let mut raw = owner
        .daemon(DaemonRequest {
            method: "GET".into(),
            path_and_query: "/files?path=%2Fhome%2Fuser%2Fbig".into(),
            headers: Vec::new(),
            body: byte_stream_once(Vec::new()),
        })
        .await
        .unwrap();
    assert_eq!(raw.status, 200);
    raw.body.next().await.unwrap().unwrap();
    assert!(owner.alive().await.unwrap());

    sandbox.kill().await.unwrap();
    let deadline = Duration::from_secs(10);

    let err = tokio::time::timeout(deadline, async {
        loop {
            match ticker.next().await {
                Some(Ok(_)) => continue,
                Some(Err(err)) => return err,
                None => panic!("the stream ended cleanly after a kill"),
            }
        }
    })
    .await
    .expect("the ticking stream ends within 10 s");
    assert!(err.is_unavailable(), "{err:?}");
    let err = tokio::time::timeout(deadline, silent.next())
        .await
        .expect("the silent stream ends within 10 s")
        .expect("an error item")
        .unwrap_err();
    assert!(err.is_unavailable(), "{err:?}");

    let err = tokio::time::timeout(deadline, async {
        loop {
            match raw.body.next().await {
                Some(Ok(_)) => continue,
                Some(Err(err)) => return err,
                None => panic!("the download ended cleanly after a kill"),
            }
        }
    })
    .await
    .expect("the raw body ends within 10 s");
    assert_eq!(err.kind(), ErrorKind::Unavailable, "{err}");
    assert!(err.message().contains("is gone"), "{err}");

    // New calls: the owner says Unavailable, the adapter sees the sandbox gone.
    let err = owner
        .daemon(DaemonRequest {
            method: "GET".into(),
            path_and_query: "/health".into(),
            headers: Vec::new(),
            body: byte_stream_once(Vec::new()),
        })
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Unavailable);
    assert_eq!(err.subject(), Some(sandbox.id()));
    let err = envd
        .stat("/home/user", &CallOptions::default())
        .await
        .unwrap_err();
    assert!(err.is_sandbox_gone(), "{err:?}");
    assert!(err.to_string().contains(sandbox.id()), "{err}");
    let err = envd
        .start(&Command::new("/bin/true"), &StreamOptions::default())
        .await
        .unwrap_err();
    assert!(err.is_sandbox_gone(), "{err:?}");
    assert!(
        !envd.health().await.unwrap(),
        "health is false for a gone sandbox"
    );
    assert!(!owner.alive().await.unwrap());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unreachable_envd_of_a_running_sandbox_is_a_transport_failure_not_a_gone_sandbox() {
    let world = World::start();
    let api = world.api();
    let sandbox = world.sandbox(&api).await;
    // A transport to a port nothing listens on, for a sandbox that runs.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let config = world
        .options()
        .with_sandbox_url(format!("http://127.0.0.1:{port}"))
        .resolve_with(|_| None)
        .unwrap();
    let transport = SandboxTransport::new(
        api.http().clone(),
        &config,
        SandboxRoute {
            sandbox_id: sandbox.id().to_owned(),
            domain: None,
            access_token: sandbox.info().envd_access_token.clone(),
        },
    )
    .unwrap();
    let owner = Arc::new(GatewayOwner::from_parts(
        info_of(&sandbox),
        EnvdGateway::new(
            transport,
            sandbox.id(),
            Arc::new(ControlPlaneLiveness::new(api.clone(), sandbox.id())),
        ),
        ControlPlaneLiveness::new(api.clone(), sandbox.id()),
    ));
    let err = owner
        .daemon(DaemonRequest {
            method: "GET".into(),
            path_and_query: "/health".into(),
            headers: Vec::new(),
            body: byte_stream_once(Vec::new()),
        })
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Io, "{err}");
    assert!(err.message().contains("still runs"), "{err}");
    let err = adapter(&owner)
        .stat("/", &CallOptions::default())
        .await
        .unwrap_err();
    assert!(err.is_unavailable() && !err.is_sandbox_gone(), "{err:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_requests_are_refused_before_anything_is_sent() {
    let world = World::start();
    let api = world.api();
    let sandbox = world.sandbox(&api).await;
    let owner = owner_of(&sandbox);
    let request = |method: &str, path: &str, headers: Vec<(String, Vec<u8>)>| DaemonRequest {
        method: method.into(),
        path_and_query: path.into(),
        headers,
        body: byte_stream_once(Vec::new()),
    };
    let cases = [
        (request("GE T", "/health", vec![]), "method"),
        (request("GET", "health", vec![]), "must be a path"),
        (
            request("GET", "http://elsewhere/health", vec![]),
            "must be a path",
        ),
        (
            request(
                "GET",
                "/health",
                vec![("x-access-token".into(), b"t".to_vec())],
            ),
            "set by the owner",
        ),
        (
            request(
                "GET",
                "/health",
                vec![("e2b-sandbox-id".into(), b"other".to_vec())],
            ),
            "set by the owner",
        ),
        (
            request("GET", "/health", vec![("bad name".into(), b"v".to_vec())]),
            "not valid HTTP",
        ),
    ];
    for (request, expected) in cases {
        let target = format!("{} {}", request.method, request.path_and_query);
        let err = owner.daemon(request).await.unwrap_err();
        assert_eq!(err.kind(), ErrorKind::InvalidInput, "{target}: {err}");
        assert!(err.message().contains(expected), "{target}: {err}");
        assert!(err.message().starts_with("envd "), "{target}: {err}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_request_body_keeps_its_kind() {
    let world = World::start();
    let api = world.api();
    let sandbox = world.sandbox(&api).await;
    let owner = owner_of(&sandbox);
    let body = futures::stream::iter(vec![
        Ok(Bytes::from(vec![1u8; 1024])),
        Err(dsh_plugin_api::Error::new(
            ErrorKind::Cancelled,
            "the producer gave up",
        )),
    ])
    .boxed();
    let err = owner
        .daemon(DaemonRequest {
            method: "POST".into(),
            path_and_query: "/files?path=%2Fhome%2Fuser%2Fpartial".into(),
            headers: vec![("content-type".into(), b"application/octet-stream".to_vec())],
            body,
        })
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Cancelled, "{err}");
    assert!(err.message().contains("the producer gave up"), "{err}");
    assert!(err.message().contains("request body failed"), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn control_commands_run_as_root_with_a_fresh_home_behind_the_guard() {
    let world = World::start();
    let api = world.api();
    let sandbox = world.sandbox(&api).await;
    let owner = owner_of(&sandbox);
    let envd = adapter(&owner);
    let root = "/home/user/ws/.dsh-e2b";
    let shell = ControlShell::new(root);
    let limit = 4096;
    let timeout = Duration::from_secs(30);

    // Without the runtime root the guard refuses to run the script.
    let guarded = shell
        .run(
            &envd,
            &shell.script("echo ran", Vec::<String>::new()),
            timeout,
            limit,
        )
        .await
        .unwrap();
    assert_eq!(guarded.status.exit_code, GUARD_FAILED_EXIT);
    assert!(guarded.stdout.is_empty());
    assert!(guarded.stderr_text().contains("not a root-owned directory"));

    let made = shell
        .run(
            &envd,
            &shell.exec("/bin/mkdir", ["-p", "-m", "0700", "--", root]),
            timeout,
            limit,
        )
        .await
        .unwrap();
    assert!(made.status.success(), "{made:?}");

    let probe = shell
        .run(
            &envd,
            &shell.script(
                r#"id -u; printf '%s\n' "$HOME" "$1"; [ -e "$HOME" ] && echo exists || echo absent"#,
                ["an arg with spaces"],
            ),
            timeout,
            limit,
        )
        .await
        .unwrap();
    assert!(probe.status.success(), "{probe:?}");
    let text = String::from_utf8(probe.stdout).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines[0], "0");
    assert!(
        lines[1].starts_with("/home/user/ws/.dsh-e2b/home-"),
        "{text}"
    );
    assert_eq!(lines[2], "an arg with spaces");
    assert_eq!(lines[3], "absent");

    // The output limit is honoured and reported.
    let noisy = shell
        .run(
            &envd,
            &shell.script("head -c 100000 /dev/zero", Vec::<String>::new()),
            timeout,
            10,
        )
        .await
        .unwrap();
    assert_eq!(noisy.stdout.len(), 10);
    assert!(noisy.truncated);
}
