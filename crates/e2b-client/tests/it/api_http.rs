//! The control-plane client against a scripted HTTP server: request shapes
//! (paths, headers, JSON bodies, list queries) and response handling
//! (statuses, pagination, malformed bodies, timeouts).

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::Body;
use axum::extract::Request;
use axum::http::{HeaderMap, Method, StatusCode};
use axum::response::Response;
use e2b_client::{
    Api, ConnectionOptions, DEBUG_SANDBOX_ID, Error, ListQuery, NewSandbox, Sandbox, SandboxState,
};
use futures::StreamExt;

const KEY: &str = "e2b_0123456789abcdef";

const SANDBOX_JSON: &str = r#"{"templateID":"base","sandboxID":"abc123","clientID":"c","envdVersion":"0.6.13","envdAccessToken":"tok"}"#;

fn detail_json(id: &str) -> String {
    format!(
        r#"{{"templateID":"base","sandboxID":"{id}","clientID":"c","startedAt":"2024-01-01T00:00:00Z",
            "endAt":"2024-01-01T00:05:00Z","cpuCount":2,"memoryMB":512,"diskSizeMB":1024,
            "state":"running","envdVersion":"0.6.13","metadata":{{"owner":"dsh"}}}}"#
    )
}

/// What the server saw.
#[derive(Debug, Clone)]
struct Seen {
    method: Method,
    path_and_query: String,
    headers: HeaderMap,
    body: String,
}

/// One scripted answer: status, extra headers, body, delay.
#[derive(Debug, Clone)]
struct Answer {
    status: u16,
    headers: Vec<(&'static str, String)>,
    body: String,
    delay: Duration,
}

fn answer(status: u16, body: impl Into<String>) -> Answer {
    Answer {
        status,
        headers: Vec::new(),
        body: body.into(),
        delay: Duration::ZERO,
    }
}

struct Server {
    url: String,
    seen: Arc<Mutex<Vec<Seen>>>,
}

impl Server {
    /// Serves `answers` in order, one per request.
    async fn start(answers: Vec<Answer>) -> Server {
        let queue = Arc::new(Mutex::new(VecDeque::from(answers)));
        let seen = Arc::new(Mutex::new(Vec::new()));
        let seen_in = seen.clone();
        let app = axum::Router::new().fallback(move |request: Request| {
            let queue = queue.clone();
            let seen = seen_in.clone();
            async move {
                let (parts, body) = request.into_parts();
                let body = axum::body::to_bytes(body, usize::MAX).await.unwrap();
                seen.lock().unwrap().push(Seen {
                    method: parts.method,
                    path_and_query: parts.uri.path_and_query().unwrap().to_string(),
                    headers: parts.headers,
                    body: String::from_utf8(body.to_vec()).unwrap(),
                });
                let answer = queue
                    .lock()
                    .unwrap()
                    .pop_front()
                    .expect("an answer is scripted");
                tokio::time::sleep(answer.delay).await;
                let mut response = Response::new(Body::from(answer.body));
                *response.status_mut() = StatusCode::from_u16(answer.status).unwrap();
                for (name, value) in answer.headers {
                    response.headers_mut().insert(name, value.parse().unwrap());
                }
                response
            }
        });
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        tokio::spawn(async move {
            axum::serve(listener, app).await.unwrap();
        });
        Server { url, seen }
    }

    fn api(&self) -> Api {
        Api::new(
            ConnectionOptions::default()
                .with_api_key(KEY)
                .with_api_url(&self.url)
                .with_sandbox_url("http://127.0.0.1:9")
                .resolve_with(|_| None)
                .unwrap(),
        )
    }

    fn seen(&self) -> Vec<Seen> {
        self.seen.lock().unwrap().clone()
    }
}

#[tokio::test]
async fn create_posts_the_sdk_body_with_credentials() {
    let server = Server::start(vec![answer(201, SANDBOX_JSON)]).await;
    let info = server
        .api()
        .create_sandbox(
            &NewSandbox::new("base")
                .metadata("owner", "dsh")
                .timeout(Duration::from_secs(60)),
        )
        .await
        .unwrap();
    assert_eq!(info.sandbox_id, "abc123");
    assert_eq!(info.envd_version, semver::Version::new(0, 6, 13));
    let seen = &server.seen()[0];
    assert_eq!(seen.method, Method::POST);
    assert_eq!(seen.path_and_query, "/sandboxes");
    assert_eq!(seen.headers["x-api-key"], KEY);
    assert_eq!(seen.headers["content-type"], "application/json");
    assert!(
        seen.headers["user-agent"]
            .to_str()
            .unwrap()
            .starts_with("e2b-client-rust/")
    );
    let body: serde_json::Value = serde_json::from_str(&seen.body).unwrap();
    assert_eq!(
        body,
        serde_json::json!({"templateID":"base","metadata":{"owner":"dsh"},"timeout":60,"secure":true,
                           "allow_internet_access":true,"autoPause":false})
    );
}

#[tokio::test]
async fn access_token_goes_out_as_bearer() {
    let server = Server::start(vec![answer(200, format!("[{}]", detail_json("a")))]).await;
    let api = Api::new(
        ConnectionOptions::default()
            .with_access_token("legacy-token")
            .with_api_url(&server.url)
            .resolve_with(|_| None)
            .unwrap(),
    );
    api.list_sandboxes_page(&ListQuery::default(), None)
        .await
        .unwrap();
    let seen = &server.seen()[0];
    assert_eq!(seen.headers["authorization"], "Bearer legacy-token");
    assert!(seen.headers.get("x-api-key").is_none());
}

#[tokio::test]
async fn a_missing_key_fails_before_any_request() {
    let server = Server::start(vec![]).await;
    let api = Api::new(
        ConnectionOptions::default()
            .with_api_url(&server.url)
            .resolve_with(|_| None)
            .unwrap(),
    );
    let err = api
        .create_sandbox(&NewSandbox::new("base"))
        .await
        .unwrap_err();
    assert!(matches!(err, Error::Authentication { .. }), "{err:?}");
    assert!(err.to_string().contains("E2B_API_KEY"), "{err}");
    assert!(server.seen().is_empty());
}

#[tokio::test]
async fn auth_rate_limit_and_template_errors() {
    let server = Server::start(vec![
        answer(401, r#"{"code":401,"message":"Invalid API key"}"#),
        answer(429, r#"{"code":429,"message":"too many sandboxes"}"#),
        answer(400, r#"{"code":400,"message":"template 'nope' not found"}"#),
    ])
    .await;
    let api = server.api();
    let err = api
        .create_sandbox(&NewSandbox::new("base"))
        .await
        .unwrap_err();
    assert!(matches!(err, Error::Authentication { .. }), "{err:?}");
    assert!(err.to_string().contains("Invalid API key"), "{err}");
    let err = api
        .create_sandbox(&NewSandbox::new("base"))
        .await
        .unwrap_err();
    assert!(matches!(err, Error::RateLimited { .. }), "{err:?}");
    let err = api
        .create_sandbox(&NewSandbox::new("nope"))
        .await
        .unwrap_err();
    assert!(matches!(err, Error::Http { status: 400, .. }), "{err:?}");
    assert!(
        err.to_string()
            .starts_with("create sandbox from template nope: HTTP 400: template 'nope' not found"),
        "{err}"
    );
}

#[tokio::test]
async fn malformed_responses_name_the_problem() {
    let server = Server::start(vec![
        answer(
            201,
            r#"{"templateID":"base","sandboxID":"abc","envdVersion":"0.6.13"}"#,
        ),
        answer(
            201,
            r#"{"templateID":"base","sandboxID":"abc","clientID":"c","envdVersion":"v1"}"#,
        ),
        answer(201, "<html>"),
    ])
    .await;
    let api = server.api();
    for expected in ["clientID", "not semver", "malformed response"] {
        let err = api
            .create_sandbox(&NewSandbox::new("base"))
            .await
            .unwrap_err();
        assert!(matches!(err, Error::Protocol { .. }), "{err:?}");
        assert!(err.to_string().contains(expected), "{err}");
    }
}

#[tokio::test]
async fn connect_reports_resume_and_sends_the_timeout() {
    let server = Server::start(vec![answer(200, SANDBOX_JSON), answer(201, SANDBOX_JSON)]).await;
    let api = server.api();
    let running = api
        .connect_sandbox("abc123", Duration::from_millis(1500))
        .await
        .unwrap();
    assert!(!running.resumed);
    let resumed = api
        .connect_sandbox("abc123", Duration::from_secs(30))
        .await
        .unwrap();
    assert!(resumed.resumed);
    let seen = server.seen();
    assert_eq!(seen[0].path_and_query, "/sandboxes/abc123/connect");
    assert_eq!(seen[0].body, r#"{"timeout":2}"#);
    assert_eq!(seen[1].body, r#"{"timeout":30}"#);
}

#[tokio::test]
async fn sandbox_not_found_needs_code_404_in_the_body() {
    let server = Server::start(vec![
        answer(
            404,
            r#"{"code":404,"message":"sandbox \"abc123\" not found"}"#,
        ),
        answer(404, "404 page not found"),
        answer(
            404,
            r#"{"code":404,"message":"paused sandbox abc123 not found"}"#,
        ),
        answer(404, r#"{"code":404,"message":"not found"}"#),
        answer(404, r#"{"code":404,"message":"not found"}"#),
        answer(404, r#"{"code":404,"message":"not found"}"#),
    ])
    .await;
    let api = server.api();
    let err = api.kill_sandbox("abc123").await.unwrap_err();
    assert!(err.is_sandbox_gone(), "{err:?}");
    assert!(
        err.to_string()
            .starts_with("kill sandbox abc123: sandbox abc123 not found"),
        "{err}"
    );
    let err = api.kill_sandbox("abc123").await.unwrap_err();
    assert!(matches!(err, Error::Http { status: 404, .. }), "{err:?}");
    assert!(
        api.connect_sandbox("abc123", Duration::from_secs(1))
            .await
            .unwrap_err()
            .is_sandbox_gone()
    );
    assert!(
        api.sandbox_info("abc123")
            .await
            .unwrap_err()
            .is_sandbox_gone()
    );
    assert!(
        api.set_sandbox_timeout("abc123", Duration::from_secs(1))
            .await
            .unwrap_err()
            .is_sandbox_gone()
    );
    assert!(
        api.sandbox_metrics("abc123")
            .await
            .unwrap_err()
            .is_sandbox_gone()
    );
}

#[tokio::test]
async fn lifecycle_calls_use_their_paths() {
    let metrics = r#"[{"timestamp":"2024-01-01T00:00:00Z","timestampUnix":1704067200,"cpuCount":2,"cpuUsedPct":1.5,
                       "memUsed":1,"memTotal":2,"memCache":0,"diskUsed":3,"diskTotal":4}]"#;
    let server = Server::start(vec![
        answer(204, ""),
        answer(204, ""),
        answer(409, r#"{"code":409,"message":"sandbox is already paused"}"#),
        answer(204, ""),
        answer(200, detail_json("abc123")),
        answer(200, metrics),
    ])
    .await;
    let api = server.api();
    api.kill_sandbox("abc123").await.unwrap();
    api.pause_sandbox("abc123").await.unwrap();
    let err = api.pause_sandbox("abc123").await.unwrap_err();
    assert!(matches!(err, Error::Conflict { .. }), "{err:?}");
    api.set_sandbox_timeout("abc123", Duration::from_secs(5))
        .await
        .unwrap();
    let detail = api.sandbox_info("abc123").await.unwrap();
    assert_eq!(detail.state, SandboxState::Running);
    assert_eq!(detail.metadata.unwrap()["owner"], "dsh");
    let samples = api.sandbox_metrics("abc123").await.unwrap();
    assert_eq!(samples[0].disk_total, 4);
    let seen: Vec<(Method, String, String)> = server
        .seen()
        .into_iter()
        .map(|s| (s.method, s.path_and_query, s.body))
        .collect();
    assert_eq!(
        seen,
        [
            (
                Method::DELETE,
                "/sandboxes/abc123".to_owned(),
                String::new()
            ),
            (
                Method::POST,
                "/sandboxes/abc123/pause".to_owned(),
                String::new()
            ),
            (
                Method::POST,
                "/sandboxes/abc123/pause".to_owned(),
                String::new()
            ),
            (
                Method::POST,
                "/sandboxes/abc123/timeout".to_owned(),
                r#"{"timeout":5}"#.to_owned()
            ),
            (Method::GET, "/sandboxes/abc123".to_owned(), String::new()),
            (
                Method::GET,
                "/sandboxes/abc123/metrics".to_owned(),
                String::new()
            ),
        ]
    );
    // Pause is sent without a body, hence without a content type.
    assert!(server.seen()[1].headers.get("content-type").is_none());
}

#[tokio::test]
async fn bad_ids_and_timeouts_are_rejected_before_sending() {
    let server = Server::start(vec![]).await;
    let api = server.api();
    for id in ["", "a/b", "x y", "../etc"] {
        let err = api.kill_sandbox(id).await.unwrap_err();
        assert!(
            matches!(err, Error::InvalidArgument { .. }),
            "{id:?}: {err:?}"
        );
    }
    let err = api
        .set_sandbox_timeout("abc", Duration::from_secs(1 << 40))
        .await
        .unwrap_err();
    assert!(matches!(err, Error::InvalidArgument { .. }), "{err:?}");
    let err = api.create_sandbox(&NewSandbox::new("")).await.unwrap_err();
    assert!(matches!(err, Error::InvalidArgument { .. }), "{err:?}");
    let err = api
        .list_sandboxes_page(&ListQuery::default().limit(0), None)
        .await
        .unwrap_err();
    assert!(matches!(err, Error::InvalidArgument { .. }), "{err:?}");
    assert!(server.seen().is_empty());
}

#[tokio::test]
async fn listing_follows_x_next_token_until_it_is_absent() {
    let page = |ids: &[&str], next: Option<&str>| {
        let body = format!(
            "[{}]",
            ids.iter()
                .map(|id| detail_json(id))
                .collect::<Vec<_>>()
                .join(",")
        );
        let mut a = answer(200, body);
        if let Some(next) = next {
            a.headers.push(("x-next-token", next.to_owned()));
        }
        a
    };
    let server = Server::start(vec![
        page(&["a", "b"], Some("t1")),
        page(&["c"], Some("t/2")),
        page(&["d"], Some("")),
    ])
    .await;
    let query = ListQuery::default()
        .metadata("owner", "d s h")
        .state(SandboxState::Running)
        .state(SandboxState::Paused)
        .limit(2);
    let ids: Vec<String> = server
        .api()
        .list_sandboxes(query)
        .into_stream()
        .map(|s| s.unwrap().sandbox_id)
        .collect()
        .await;
    assert_eq!(ids, ["a", "b", "c", "d"]);
    let queries: Vec<String> = server
        .seen()
        .into_iter()
        .map(|s| s.path_and_query)
        .collect();
    assert_eq!(
        queries,
        [
            "/v2/sandboxes?metadata=owner%3Dd%252520s%252520h&state=running,paused&limit=2",
            "/v2/sandboxes?metadata=owner%3Dd%252520s%252520h&state=running,paused&limit=2&nextToken=t1",
            "/v2/sandboxes?metadata=owner%3Dd%252520s%252520h&state=running,paused&limit=2&nextToken=t%2F2",
        ]
    );
}

#[tokio::test]
async fn the_page_iterator_stops_after_the_last_page() {
    let server = Server::start(vec![answer(200, "[]")]).await;
    let mut pager = server.api().list_sandboxes(ListQuery::default());
    assert!(pager.has_next());
    assert_eq!(pager.next_page().await.unwrap().unwrap().len(), 0);
    assert!(!pager.has_next());
    assert!(pager.next_page().await.unwrap().is_none());
    assert_eq!(server.seen()[0].path_and_query, "/v2/sandboxes");
}

#[tokio::test]
async fn a_slow_api_hits_the_request_timeout() {
    let mut slow = answer(200, SANDBOX_JSON);
    slow.delay = Duration::from_secs(10);
    let server = Server::start(vec![slow]).await;
    let api = Api::new(
        ConnectionOptions::default()
            .with_api_key(KEY)
            .with_api_url(&server.url)
            .with_request_timeout(Some(Duration::from_millis(200)))
            .resolve_with(|_| None)
            .unwrap(),
    );
    let started = std::time::Instant::now();
    let err = api.sandbox_info("abc").await.unwrap_err();
    assert!(err.is_timeout(), "{err:?}");
    assert!(started.elapsed() < Duration::from_secs(5));
}

#[tokio::test]
async fn an_unreachable_api_is_a_transport_failure() {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let api = Api::new(
        ConnectionOptions::default()
            .with_api_key(KEY)
            .with_api_url(format!("http://127.0.0.1:{port}"))
            .resolve_with(|_| None)
            .unwrap(),
    );
    let err = api.sandbox_info("abc").await.unwrap_err();
    assert!(matches!(err, Error::Transport { .. }), "{err:?}");
    assert!(err.is_unavailable() && !err.is_sandbox_gone());
    assert!(
        err.to_string()
            .starts_with("get info of sandbox abc: transport failure"),
        "{err}"
    );
}

#[tokio::test]
async fn debug_mode_creates_without_the_api_and_talks_to_localhost() {
    let api = Api::new(
        ConnectionOptions::default()
            .resolve_with(|name| (name == "E2B_DEBUG").then(|| "true".to_owned()))
            .unwrap(),
    );
    let sandbox = Sandbox::create(&api, &NewSandbox::new("base"))
        .await
        .unwrap();
    assert_eq!(sandbox.id(), DEBUG_SANDBOX_ID);
    assert_eq!(
        sandbox.info().envd_version,
        semver::Version::new(99, 99, 99)
    );
    assert_eq!(
        sandbox.transport().base_url().to_string(),
        "http://localhost:49983/"
    );
    assert!(!sandbox.transport().is_secured());
    // No-ops in debug mode, as in the JS SDK.
    sandbox.kill().await.unwrap();
    sandbox.set_timeout(Duration::from_secs(1)).await.unwrap();
    assert!(sandbox.metrics().await.unwrap().is_empty());
}

#[tokio::test]
async fn sandbox_handles_carry_the_access_token_to_envd() {
    let server = Server::start(vec![answer(201, SANDBOX_JSON)]).await;
    let api = server.api();
    let sandbox = Sandbox::create(&api, &NewSandbox::new("base"))
        .await
        .unwrap();
    assert_eq!(sandbox.id(), "abc123");
    assert!(sandbox.transport().is_secured());
    assert_eq!(
        sandbox.transport().base_url().to_string(),
        "http://127.0.0.1:9/"
    );
    assert!(!format!("{sandbox:?}").contains("\"tok\""));
}

#[tokio::test]
async fn too_old_envd_is_refused_and_the_sandbox_killed() {
    let server = Server::start(vec![
        answer(
            201,
            r#"{"templateID":"old","sandboxID":"abc123","clientID":"c","envdVersion":"0.0.9"}"#,
        ),
        answer(204, ""),
    ])
    .await;
    let err = Sandbox::create(&server.api(), &NewSandbox::new("old"))
        .await
        .unwrap_err();
    assert!(matches!(err, Error::Protocol { .. }), "{err:?}");
    assert!(err.to_string().contains("the sandbox was killed"), "{err}");
    let seen = server.seen();
    assert_eq!(seen[1].method, Method::DELETE);
    assert_eq!(seen[1].path_and_query, "/sandboxes/abc123");
}
