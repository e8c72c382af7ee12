//! `/health`, `/envs`, `/metrics`, `/init`, the access token, signed `/files` URLs, CORS, the Unix
//! listener and shutdown (docs/e2b-protocol.md §7.2, §7.4).

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use base64::Engine as _;
use bytes::Bytes;
use connectrpc::ErrorCode;
use http::Method;
use sha2::{Digest, Sha256};

use crate::common::process::{command, run, shell};
use crate::common::{self, TestDaemon, body, config, send, unary_json};

const TOKEN: &str = "0tQG31xiMp0IOQfaz9dcwi72L1CPo8e0";

fn sign(path: &str, op: &str, user: &str, expiration: Option<i64>) -> String {
    let mut text = format!("{path}:{op}:{user}:{TOKEN}");
    if let Some(expiration) = expiration {
        text.push_str(&format!(":{expiration}"));
    }
    format!(
        "v1_{}",
        base64::engine::general_purpose::STANDARD_NO_PAD.encode(Sha256::digest(text.as_bytes()))
    )
}

fn encode(text: &str) -> String {
    percent_encoding::utf8_percent_encode(text, percent_encoding::NON_ALPHANUMERIC).to_string()
}

fn now() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn health_envs_metrics_and_unknown_routes() {
    let mut config = config();
    config.env_vars.insert("FOO".to_owned(), "bar".to_owned());
    let daemon = TestDaemon::start(config).await;
    let health = send(Method::GET, &daemon.url("/health"), &[], body(Bytes::new())).await;
    assert_eq!(health.status, 204);
    assert_eq!(health.header("cache-control"), Some("no-store"));
    assert!(health.body.is_empty());

    let envs = send(Method::GET, &daemon.url("/envs"), &[], body(Bytes::new())).await;
    assert_eq!(envs.status, 200);
    assert_eq!(
        envs.json(),
        serde_json::json!({"E2B_SANDBOX": "true", "E2B_SANDBOX_ID": "sbxtest", "E2B_TEMPLATE_ID": "base", "FOO": "bar"})
    );

    let metrics = send(
        Method::GET,
        &daemon.url("/metrics"),
        &[],
        body(Bytes::new()),
    )
    .await;
    assert_eq!(metrics.status, 200);
    let json = metrics.json();
    for field in [
        "ts",
        "cpu_count",
        "cpu_used_pct",
        "mem_total",
        "mem_used",
        "mem_cache",
        "mem_total_mib",
        "mem_used_mib",
        "disk_used",
        "disk_total",
    ] {
        assert!(json.get(field).is_some(), "{field} in {json}");
    }
    assert!(json["mem_total"].as_u64().unwrap() > 0);
    assert!(json["disk_total"].as_u64().unwrap() > 0);

    let unknown = send(Method::GET, &daemon.url("/nope"), &[], body(Bytes::new())).await;
    assert_eq!(unknown.status, 404);
    assert_eq!(unknown.json()["code"], 404);
    let wrong_method = send(
        Method::DELETE,
        &daemon.url("/files"),
        &[],
        body(Bytes::new()),
    )
    .await;
    assert_eq!(wrong_method.status, 405);
    assert_eq!(wrong_method.header("allow"), Some("GET, POST"));
    let unknown_rpc = unary_json(&daemon.url("/process.Process/Nope"), "{}", &[]).await;
    assert_eq!(unknown_rpc.status, 404);
    daemon.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_access_token_guards_everything_but_the_exempt_routes() {
    let mut config = config();
    config.access_token = Some(TOKEN.to_owned());
    let daemon = TestDaemon::start(config).await;

    let health = send(Method::GET, &daemon.url("/health"), &[], body(Bytes::new())).await;
    assert_eq!(health.status, 204);
    for (method, path) in [
        (Method::GET, "/envs"),
        (Method::GET, "/metrics"),
        (Method::POST, "/process.Process/List"),
    ] {
        let reply = send(
            method.clone(),
            &daemon.url(path),
            &[("content-type", "application/json")],
            body("{}"),
        )
        .await;
        assert_eq!(reply.status, 401, "{method} {path}");
        assert_eq!(
            reply.json(),
            serde_json::json!({"code": 401, "message": "unauthorized access, please provide a valid access token or method signing if supported"})
        );
        let wrong = send(
            method.clone(),
            &daemon.url(path),
            &[
                ("content-type", "application/json"),
                ("x-access-token", "wrong"),
            ],
            body("{}"),
        )
        .await;
        assert_eq!(wrong.status, 401);
    }
    let client = daemon.process_with_headers(true, &[("x-access-token", TOKEN)]);
    let outcome = run(&client, shell("echo ok")).await;
    assert_eq!(outcome.stdout_text(), "ok\n");
    let denied = run(&daemon.process(true), shell("echo ok")).await;
    let err = denied.error.expect("no token");
    assert_eq!(err.code, ErrorCode::Unauthenticated);
    daemon.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn signed_files_urls() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("signed.txt");
    std::fs::write(&file, b"secret").unwrap();
    let mut config = config();
    config.access_token = Some(TOKEN.to_owned());
    let daemon = TestDaemon::start(config).await;
    let path = file.to_str().unwrap();
    let get = |query: String, headers: Vec<(&'static str, String)>| {
        let url = daemon.url(&format!("/files?{query}"));
        async move {
            let headers: Vec<(&str, &str)> =
                headers.iter().map(|(n, v)| (*n, v.as_str())).collect();
            send(Method::GET, &url, &headers, body(Bytes::new())).await
        }
    };

    let unsigned = get(format!("path={}", encode(path)), vec![]).await;
    assert_eq!(unsigned.status, 401);
    assert_eq!(
        unsigned.json()["message"],
        "missing signature query parameter"
    );

    let signature = sign(path, "read", "", None);
    let signed = get(
        format!("path={}&signature={}", encode(path), encode(&signature)),
        vec![],
    )
    .await;
    assert_eq!(signed.status, 200, "{}", signed.text());
    assert_eq!(signed.text(), "secret");

    let user_signature = sign(path, "read", "root", Some(now() + 60));
    let signed = get(
        format!(
            "path={}&username=root&signature={}&signature_expiration={}",
            encode(path),
            encode(&user_signature),
            now() + 60
        ),
        vec![],
    )
    .await;
    assert_eq!(signed.status, 200, "{}", signed.text());

    let expired_at = now() - 10;
    let expired = get(
        format!(
            "path={}&signature={}&signature_expiration={expired_at}",
            encode(path),
            encode(&sign(path, "read", "", Some(expired_at)))
        ),
        vec![],
    )
    .await;
    assert_eq!(expired.status, 401);
    assert_eq!(
        expired.json(),
        serde_json::json!({"code": 401, "message": "signature is already expired"})
    );

    let wrong_op = get(
        format!(
            "path={}&signature={}",
            encode(path),
            encode(&sign(path, "write", "", None))
        ),
        vec![],
    )
    .await;
    assert_eq!(wrong_op.json()["message"], "invalid signature");

    let wrong_header = get(
        format!("path={}&signature={}", encode(path), encode(&signature)),
        vec![("x-access-token", "wrong".to_owned())],
    )
    .await;
    assert_eq!(
        wrong_header.status, 401,
        "a mismatching header fails even with a good signature"
    );

    let header_only = get(
        format!("path={}", encode(path)),
        vec![("x-access-token", TOKEN.to_owned())],
    )
    .await;
    assert_eq!(header_only.status, 200);

    let bad_expiration = get(
        format!(
            "path={}&signature=x&signature_expiration=soon",
            encode(path)
        ),
        vec![],
    )
    .await;
    assert_eq!(bad_expiration.status, 400);

    let upload_path = dir.path().join("up.txt");
    let upload = upload_path.to_str().unwrap();
    let reply = send(
        Method::POST,
        &daemon.url(&format!(
            "/files?path={}&signature={}",
            encode(upload),
            encode(&sign(upload, "write", "", None))
        )),
        &[("content-type", "application/octet-stream")],
        body("uploaded"),
    )
    .await;
    assert_eq!(reply.status, 200, "{}", reply.text());
    assert_eq!(std::fs::read(&upload_path).unwrap(), b"uploaded");
    daemon.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn init_updates_the_configuration_at_runtime() {
    let dir = tempfile::tempdir().unwrap();
    let daemon = TestDaemon::start(config()).await;
    let init = |json: String, headers: Vec<(&'static str, String)>| {
        let url = daemon.url("/init");
        async move {
            let mut all = vec![("content-type", "application/json".to_owned())];
            all.extend(headers);
            let all: Vec<(&str, &str)> = all.iter().map(|(n, v)| (*n, v.as_str())).collect();
            send(Method::POST, &url, &all, body(json)).await
        }
    };
    let reply = init(
        serde_json::json!({
            "envVars": {"FROM_INIT": "1", "E2B_SANDBOX": "spoofed"},
            "defaultUser": "nobody",
            "defaultWorkdir": dir.path(),
            "timestamp": "2030-01-01T00:00:00Z",
            "hyperloopIP": "10.0.0.1",
            "volumeMounts": []
        })
        .to_string(),
        vec![],
    )
    .await;
    assert_eq!(reply.status, 204, "{}", reply.text());
    assert_eq!(
        reply.header("x-envd-version"),
        Some(e2b_local_envd::ENVD_VERSION)
    );
    let client = daemon.process(true);
    let outcome = run(
        &client,
        command(
            "/bin/sh",
            &["-c", "id -un; pwd; echo $FROM_INIT $E2B_SANDBOX"],
        ),
    )
    .await;
    assert_eq!(
        outcome.stdout_text(),
        format!("nobody\n{}\n1 true\n", dir.path().display())
    );

    // An older init is acknowledged but ignored.
    let stale = init(
        serde_json::json!({"envVars": {"STALE": "1"}, "timestamp": "2029-01-01T00:00:00Z"})
            .to_string(),
        vec![],
    )
    .await;
    assert_eq!(stale.status, 204);
    let envs = send(Method::GET, &daemon.url("/envs"), &[], body(Bytes::new()))
        .await
        .json();
    assert!(envs.get("STALE").is_none() && envs["FROM_INIT"] == "1");

    // Setting a token: from now on it is required, and only the same token may re-init.
    let reply = init(
        serde_json::json!({"accessToken": TOKEN}).to_string(),
        vec![],
    )
    .await;
    assert_eq!(reply.status, 204);
    let denied = send(Method::GET, &daemon.url("/envs"), &[], body(Bytes::new())).await;
    assert_eq!(denied.status, 401);
    let reply = init(
        serde_json::json!({"accessToken": "other"}).to_string(),
        vec![],
    )
    .await;
    assert_eq!(reply.status, 401);
    assert_eq!(reply.json()["message"], "access token validation failed");
    let reply = init("{}".to_owned(), vec![]).await;
    assert_eq!(reply.status, 401);
    let reply = init(
        serde_json::json!({"accessToken": TOKEN, "envVars": {}}).to_string(),
        vec![],
    )
    .await;
    assert_eq!(reply.status, 204);

    for bad in [
        "{not json",
        r#"{"timestamp":"yesterday"}"#,
        r#"{"envVars":{"A=B":"1"}}"#,
        r#"{"envVars":"x"}"#,
    ] {
        let reply = init(bad.to_owned(), vec![]).await;
        assert_eq!(reply.status, 400, "{bad}: {}", reply.text());
        assert_eq!(reply.json()["code"], 400);
    }
    daemon.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cors_is_open_to_any_origin() {
    let daemon = TestDaemon::start(config()).await;
    let preflight = send(
        Method::OPTIONS,
        &daemon.url("/process.Process/List"),
        &[
            ("origin", "https://example.com"),
            ("access-control-request-method", "POST"),
            (
                "access-control-request-headers",
                "content-type, connect-protocol-version",
            ),
        ],
        body(Bytes::new()),
    )
    .await;
    assert_eq!(preflight.status, 204);
    assert_eq!(preflight.header("access-control-allow-origin"), Some("*"));
    assert_eq!(
        preflight.header("access-control-allow-headers"),
        Some("content-type, connect-protocol-version")
    );
    let list = unary_json(
        &daemon.url("/process.Process/List"),
        "{}",
        &[("origin", "https://example.com")],
    )
    .await;
    assert_eq!(list.status, 200);
    assert_eq!(list.header("access-control-allow-origin"), Some("*"));
    daemon.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serves_on_a_unix_socket() {
    use hyper_util::rt::TokioIo;
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("envd.sock");
    let listener = tokio::net::UnixListener::bind(&socket).unwrap();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let task = tokio::spawn(e2b_local_envd::serve(
        config(),
        e2b_local_envd::EnvdListener::Unix(listener),
        async move {
            let _ = stopped.await;
        },
    ));
    let stream = tokio::net::UnixStream::connect(&socket).await.unwrap();
    let (mut sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .unwrap();
    tokio::spawn(connection);
    let response = sender
        .send_request(
            http::Request::get("/health")
                .header("host", "localhost")
                .body(http_body_util::Empty::<Bytes>::new())
                .unwrap(),
        )
        .await
        .unwrap();
    assert_eq!(response.status(), 204);
    stop.send(()).unwrap();
    task.await.unwrap().unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_kills_every_process() {
    let daemon = TestDaemon::start(config()).await;
    let client = daemon.process(true);
    let (pid, _stream) = common::process::started(&client, shell("sleep 60")).await;
    assert!(std::path::Path::new(&format!("/proc/{pid}")).exists());
    daemon.stop().await;
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    loop {
        let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
        if status.is_empty() || status.contains("State:\tZ") {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "process survived shutdown"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn invalid_configs_are_refused() {
    let listener = || async { tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap() };
    let mut relative = config();
    relative.default_workdir = Some("relative/dir".into());
    let mut empty_token = config();
    empty_token.access_token = Some(String::new());
    let mut bad_env = config();
    bad_env.env_vars.insert("A=B".to_owned(), "1".to_owned());
    for (config, needle) in [
        (relative, "default_workdir relative/dir must be absolute"),
        (empty_token, "access_token is empty"),
        (bad_env, "env_vars: environment variable name \"A=B\""),
    ] {
        let err = e2b_local_envd::serve(
            config,
            e2b_local_envd::EnvdListener::Tcp(listener().await),
            std::future::pending(),
        )
        .await
        .expect_err("refused");
        assert!(err.to_string().contains(needle), "{err}");
    }
}
