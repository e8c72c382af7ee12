//! The control plane against a real server: auth, bad input (each case its own assertion),
//! lifecycle transitions and their status codes, list filters and pagination, metrics.

use std::time::Duration;

use http::{Method, StatusCode};
use serde_json::{Value, json};

use crate::common::{self, Api, Http, LocalServer, error_of};

#[tokio::test(flavor = "multi_thread")]
async fn missing_or_wrong_api_key_is_401() {
    let server = LocalServer::start();
    let http = Http::default();
    let url = format!("{}/v2/sandboxes", server.api_url());
    let missing = http.send(Method::GET, &url, &[], "").await;
    assert!(error_of(&missing, StatusCode::UNAUTHORIZED).contains("missing API key"));
    let wrong = http
        .send(Method::GET, &url, &[("x-api-key", "e2b_0000")], "")
        .await;
    assert!(error_of(&wrong, StatusCode::UNAUTHORIZED).contains("invalid API key"));
    let right = http
        .send(Method::GET, &url, &[("x-api-key", server.api_key())], "")
        .await;
    assert_eq!(right.status, StatusCode::OK);
    let health = http
        .send(
            Method::GET,
            &format!("{}/health", server.api_url()),
            &[],
            "",
        )
        .await;
    assert_eq!(health.status, StatusCode::OK, "health needs no key");
}

#[tokio::test(flavor = "multi_thread")]
async fn bad_create_bodies_are_rejected_and_the_server_keeps_serving() {
    let server = LocalServer::start();
    let api = Api::new(&server);
    let cases: &[(&str, StatusCode, &str)] = &[
        ("{", StatusCode::BAD_REQUEST, "invalid JSON body"),
        ("", StatusCode::BAD_REQUEST, "request body is empty"),
        ("[]", StatusCode::BAD_REQUEST, "invalid JSON body"),
        (
            r#"{"timeout":5}"#,
            StatusCode::BAD_REQUEST,
            "missing field `templateID`",
        ),
        (
            r#"{"templateID":"base","surprise":1}"#,
            StatusCode::BAD_REQUEST,
            "unknown field `surprise`",
        ),
        (
            r#"{"templateID":"base","timeout":"5"}"#,
            StatusCode::BAD_REQUEST,
            "invalid type",
        ),
        (
            r#"{"templateID":"base","timeout":-5}"#,
            StatusCode::BAD_REQUEST,
            "invalid value",
        ),
        (
            r#"{"templateID":"base","metadata":{"k":1}}"#,
            StatusCode::BAD_REQUEST,
            "invalid type",
        ),
        (
            r#"{"templateID":"base","envVars":{"A=B":"x"}}"#,
            StatusCode::BAD_REQUEST,
            "invalid envVars name",
        ),
        (
            r#"{"templateID":"no spaces"}"#,
            StatusCode::BAD_REQUEST,
            "invalid templateID",
        ),
        (
            r#"{"templateID":"../../etc"}"#,
            StatusCode::BAD_REQUEST,
            "invalid templateID \"../../etc\"",
        ),
        (
            r#"{"templateID":"base","timeout":99999999}"#,
            StatusCode::BAD_REQUEST,
            "exceeds the maximum",
        ),
    ];
    for (body, status, needle) in cases {
        let reply = api.call(Method::POST, "/sandboxes", body).await;
        let message = error_of(&reply, *status);
        assert!(message.starts_with("create sandbox: "), "{body}: {message}");
        assert!(message.contains(needle), "{body}: {message}");
    }
    let huge = format!(
        r#"{{"templateID":"base","metadata":{{"k":"{}"}}}}"#,
        "x".repeat(2 << 20)
    );
    let reply = api.call(Method::POST, "/v2/sandboxes", &huge).await;
    assert!(error_of(&reply, StatusCode::PAYLOAD_TOO_LARGE).contains("exceeds"));
    // Still serving: a good create works after every bad one.
    let id = api.sandbox().await;
    assert_eq!(api.kill(&id).await, StatusCode::NO_CONTENT);
}

#[tokio::test(flavor = "multi_thread")]
async fn unknown_templates_are_404_and_create_nothing() {
    let server = LocalServer::start();
    let api = Api::new(&server);
    for (path, template) in [
        ("/sandboxes", "python-latest"),
        ("/v2/sandboxes", "team/never-built:v1"),
        ("/v2/sandboxes", "base:v2"),
    ] {
        let body = json!({ "templateID": template }).to_string();
        let reply = api.call(Method::POST, path, &body).await;
        assert_eq!(
            error_of(&reply, StatusCode::NOT_FOUND),
            format!("create sandbox: template '{template}' not found"),
            "{path} {template}"
        );
    }
    let listed = api.call(Method::GET, "/v2/sandboxes", "").await;
    assert_eq!(listed.json(), json!([]), "no sandbox was created");

    // `base`, and a snapshot by its id, still create.
    let id = api.sandbox().await;
    let snapshot = api
        .call(Method::POST, &format!("/sandboxes/{id}/snapshots"), "{}")
        .await;
    assert!(snapshot.status.is_success(), "{snapshot:?}");
    let snapshot_id = snapshot.json()["snapshotID"]
        .as_str()
        .expect("snapshotID")
        .to_owned();
    let from_snapshot = api.create(json!({ "templateID": snapshot_id })).await;
    assert_eq!(from_snapshot["templateID"], json!(snapshot_id));
    let copy = from_snapshot["sandboxID"].as_str().expect("sandboxID");
    for sandbox in [id.as_str(), copy] {
        assert_eq!(api.kill(sandbox).await, StatusCode::NO_CONTENT);
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn unknown_sandboxes_are_404_with_code_on_every_route() {
    let server = LocalServer::start();
    let api = Api::new(&server);
    let routes: &[(Method, &str, &str)] = &[
        (Method::GET, "/sandboxes/nope", ""),
        (Method::DELETE, "/sandboxes/nope", ""),
        (Method::POST, "/sandboxes/nope/connect", r#"{"timeout":10}"#),
        (
            Method::POST,
            "/v2/sandboxes/nope/connect",
            r#"{"timeout":10}"#,
        ),
        (Method::POST, "/sandboxes/nope/pause", ""),
        (Method::POST, "/sandboxes/nope/resume", ""),
        (Method::POST, "/sandboxes/nope/timeout", r#"{"timeout":10}"#),
        (Method::POST, "/sandboxes/nope/refreshes", ""),
        (Method::GET, "/sandboxes/nope/metrics", ""),
        (Method::GET, "/sandboxes/nope/logs", ""),
        (Method::GET, "/v2/sandboxes/nope/logs", ""),
    ];
    for (method, path, body) in routes {
        let reply = api.call(method.clone(), path, body).await;
        let message = error_of(&reply, StatusCode::NOT_FOUND);
        assert!(
            message.contains("nope") && message.contains("not found"),
            "{method} {path}: {message}"
        );
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn bad_bodies_on_lifecycle_routes_are_400() {
    let server = LocalServer::start();
    let api = Api::new(&server);
    let id = api.sandbox().await;
    let cases: &[(&str, &str, &str)] = &[
        ("connect", "", "request body is empty"),
        ("connect", r#"{"timeout":"x"}"#, "invalid type"),
        ("connect", r#"{"timeout":1,"x":1}"#, "unknown field `x`"),
        ("connect", r#"{}"#, "missing field `timeout`"),
        ("timeout", r#"{}"#, "missing field `timeout`"),
        ("timeout", r#"{"timeout":1.5}"#, "invalid type"),
        ("pause", r#"{"bogus":true}"#, "unknown field `bogus`"),
    ];
    for (route, body, needle) in cases {
        let reply = api
            .call(Method::POST, &format!("/sandboxes/{id}/{route}"), body)
            .await;
        let message = error_of(&reply, StatusCode::BAD_REQUEST);
        assert!(message.contains(needle), "{route} {body}: {message}");
    }
    let metrics = api
        .call(
            Method::GET,
            &format!("/sandboxes/{id}/metrics?start=yesterday"),
            "",
        )
        .await;
    assert!(error_of(&metrics, StatusCode::BAD_REQUEST).contains("unix seconds"));
    assert_eq!(
        api.info(&id).await.status,
        StatusCode::OK,
        "the sandbox survived the bad requests"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn unknown_routes_and_methods_are_json_errors() {
    let server = LocalServer::start();
    let api = Api::new(&server);
    let reply = api.call(Method::GET, "/templates/xyz/nothing", "").await;
    assert!(error_of(&reply, StatusCode::NOT_FOUND).contains("no such API route"));
    let reply = api.call(Method::PUT, "/sandboxes", "").await;
    assert!(error_of(&reply, StatusCode::METHOD_NOT_ALLOWED).contains("method not allowed"));
}

#[tokio::test(flavor = "multi_thread")]
async fn pause_connect_and_timeout_transitions() {
    let server = LocalServer::start();
    let api = Api::new(&server);
    let created = api
        .create(json!({"templateID": "base", "timeout": 60, "secure": true}))
        .await;
    let id = created["sandboxID"].as_str().unwrap();
    assert_eq!(created["envdVersion"], json!(e2b_local_envd::ENVD_VERSION));
    assert_eq!(
        created["envdAccessToken"].as_str().map(str::len),
        Some(32),
        "secure sandboxes get a token"
    );

    let pause = api
        .call(Method::POST, &format!("/sandboxes/{id}/pause"), "")
        .await;
    assert_eq!(pause.status, StatusCode::NO_CONTENT);
    let again = api
        .call(Method::POST, &format!("/sandboxes/{id}/pause"), "")
        .await;
    assert!(error_of(&again, StatusCode::CONFLICT).contains("already paused"));
    assert_eq!(api.info(id).await.json()["state"], json!("paused"));

    let resumed = api
        .call(
            Method::POST,
            &format!("/v2/sandboxes/{id}/connect"),
            r#"{"timeout":30}"#,
        )
        .await;
    assert_eq!(
        resumed.status,
        StatusCode::CREATED,
        "resuming a paused sandbox is 201"
    );
    assert_eq!(
        resumed.json()["envdAccessToken"],
        created["envdAccessToken"]
    );
    let running = api
        .call(
            Method::POST,
            &format!("/sandboxes/{id}/connect"),
            r#"{"timeout":30}"#,
        )
        .await;
    assert_eq!(
        running.status,
        StatusCode::OK,
        "connecting to a running sandbox is 200"
    );

    let end_at = |reply: &common::Reply| reply.json()["endAt"].as_str().unwrap().to_owned();
    let before = end_at(&api.info(id).await);
    api.call(
        Method::POST,
        &format!("/sandboxes/{id}/connect"),
        r#"{"timeout":1}"#,
    )
    .await;
    assert_eq!(
        end_at(&api.info(id).await),
        before,
        "connect never shortens endAt"
    );
    let timeout = api
        .call(
            Method::POST,
            &format!("/sandboxes/{id}/timeout"),
            r#"{"timeout":1}"#,
        )
        .await;
    assert_eq!(timeout.status, StatusCode::NO_CONTENT);
    assert!(
        end_at(&api.info(id).await) < before,
        "timeout may shorten endAt"
    );
    common::eventually(
        Duration::from_secs(10),
        "expiry after the shortened timeout",
        || common::sandbox_cgroup(id).is_none(),
    )
    .await;
    assert_eq!(api.info(id).await.status, StatusCode::NOT_FOUND);
}

#[tokio::test(flavor = "multi_thread")]
async fn auto_pause_on_timeout_pauses_instead_of_killing() {
    let server = LocalServer::start();
    let api = Api::new(&server);
    let created = api
        .create(json!({"templateID": "base", "timeout": 1, "autoPause": true}))
        .await;
    let id = created["sandboxID"].as_str().unwrap();
    tokio::time::sleep(Duration::from_millis(1800)).await;
    let info = api.info(id).await.json();
    assert_eq!(info["state"], json!("paused"), "{info}");
    assert_eq!(info["lifecycle"]["onTimeout"], json!("pause"));
    let resumed = api
        .call(
            Method::POST,
            &format!("/sandboxes/{id}/connect"),
            r#"{"timeout":30}"#,
        )
        .await;
    assert_eq!(resumed.status, StatusCode::CREATED);
}

#[tokio::test(flavor = "multi_thread")]
async fn list_filters_by_state_and_metadata_and_paginates() {
    let server = LocalServer::start();
    let api = Api::new(&server);
    let mut ids = Vec::new();
    for name in ["a b", "a b", "other"] {
        let created = api
            .create(json!({"templateID": "base", "timeout": 60, "metadata": {"name": name}}))
            .await;
        ids.push(created["sandboxID"].as_str().unwrap().to_owned());
    }
    api.call(Method::POST, &format!("/sandboxes/{}/pause", ids[1]), "")
        .await;
    let list = |query: String| {
        let api = &api;
        async move {
            api.call(Method::GET, &format!("/v2/sandboxes{query}"), "")
                .await
        }
    };
    let ids_of = |reply: &common::Reply| -> Vec<String> {
        reply
            .json()
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s["sandboxID"].as_str().unwrap().to_owned())
            .collect()
    };
    // Newest first unless `order=asc` (the API's default, which the newest SDKs rely on).
    let newest_first: Vec<String> = ids.iter().rev().cloned().collect();
    // The SDKs' triple encoding of {name: "a b"}.
    let by_name = list("?metadata=name%3Da%252520b".into()).await;
    assert_eq!(ids_of(&by_name), vec![ids[1].clone(), ids[0].clone()]);
    let running = list("?metadata=name%3Da%252520b&state=running".into()).await;
    assert_eq!(ids_of(&running), vec![ids[0].clone()]);
    let v1 = api.call(Method::GET, "/sandboxes", "").await;
    assert_eq!(ids_of(&v1).len(), 2, "v1 lists running sandboxes only");

    // Pagination is stable in both orders.
    for (order, expected) in [("", &newest_first), ("&order=asc", &ids)] {
        let first = list(format!("?limit=2{order}")).await;
        assert_eq!(ids_of(&first), expected[..2].to_vec(), "{order}");
        let token = first
            .headers
            .get("x-next-token")
            .expect("x-next-token on a partial page")
            .to_str()
            .unwrap()
            .to_owned();
        let second = list(format!("?limit=2&nextToken={token}{order}")).await;
        assert_eq!(ids_of(&second), expected[2..].to_vec(), "{order}");
        assert!(
            second.headers.get("x-next-token").is_none(),
            "no token on the last page"
        );
    }
    let desc = list("?order=desc".into()).await;
    assert_eq!(ids_of(&desc), newest_first);

    // startedAfter / startedBefore (inclusive), as the SDKs send them: RFC 3339.
    let started = |id: &str| {
        let all = desc.json();
        let listed = all
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["sandboxID"] == id)
            .cloned()
            .expect("listed");
        listed["startedAt"].as_str().unwrap().to_owned()
    };
    let encode = |at: &str| at.replace(':', "%3A").replace('+', "%2B");
    let middle = started(&ids[1]);
    let after = list(format!("?startedAfter={}", encode(&middle))).await;
    assert_eq!(ids_of(&after), vec![ids[2].clone(), ids[1].clone()]);
    let before = list(format!("?startedBefore={}", encode(&middle))).await;
    assert_eq!(ids_of(&before), vec![ids[1].clone(), ids[0].clone()]);

    for (query, needle) in [
        ("?state=frozen", "invalid state"),
        ("?limit=0", "invalid limit"),
        ("?nextToken=%21%21", "invalid nextToken"),
        ("?metadata=novalue", "invalid metadata filter"),
        ("?color=red", "unknown query parameter"),
    ] {
        let reply = list(query.into()).await;
        assert!(
            error_of(&reply, StatusCode::BAD_REQUEST).contains(needle),
            "{query}"
        );
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn detail_and_metrics_report_real_figures() {
    let server = LocalServer::start();
    let api = Api::new(&server);
    let id = api.sandbox().await;
    let info: Value = api.info(&id).await.json();
    for field in [
        "templateID",
        "sandboxID",
        "clientID",
        "startedAt",
        "endAt",
        "envdVersion",
        "state",
    ] {
        assert!(info[field].is_string(), "{field} in {info}");
    }
    assert!(info["cpuCount"].as_u64().unwrap() >= 1 && info["memoryMB"].as_u64().unwrap() >= 128);
    common::exec(
        &server,
        &id,
        None,
        "head -c 5000000 /dev/urandom > /tmp/blob",
    )
    .await;
    // The current sample, inside a range around now; none in a range long past.
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    let metrics = api
        .call(
            Method::GET,
            &format!(
                "/sandboxes/{id}/metrics?start={}&end={}",
                now - 60,
                now + 60
            ),
            "",
        )
        .await;
    assert_eq!(metrics.status, StatusCode::OK);
    let past = api
        .call(
            Method::GET,
            &format!("/sandboxes/{id}/metrics?start=1&end=2"),
            "",
        )
        .await;
    assert_eq!(past.status, StatusCode::OK);
    assert_eq!(past.json(), json!([]));
    let sample = &metrics.json()[0];
    assert!(sample["memUsed"].as_u64().unwrap() > 0, "{sample}");
    assert!(
        sample["diskUsed"].as_u64().unwrap() >= 5_000_000,
        "{sample}"
    );
    assert!(sample["memTotal"].as_u64().unwrap() > sample["memUsed"].as_u64().unwrap());
    assert!(sample["timestampUnix"].as_i64().unwrap() > 1_600_000_000);
}

#[tokio::test(flavor = "multi_thread")]
async fn the_deprecated_resume_endpoint_resumes_and_sets_auto_pause() {
    let server = LocalServer::start();
    let api = Api::new(&server);
    let id = api.sandbox().await;
    let running = api
        .call(Method::POST, &format!("/sandboxes/{id}/resume"), "")
        .await;
    assert!(error_of(&running, StatusCode::CONFLICT).contains("already running"));
    api.call(Method::POST, &format!("/sandboxes/{id}/pause"), "")
        .await;
    let body = r#"{"timeout":30,"autoPause":true}"#;
    let resumed = api
        .call(Method::POST, &format!("/sandboxes/{id}/resume"), body)
        .await;
    assert_eq!(resumed.status, StatusCode::CREATED);
    let info = api.info(&id).await.json();
    assert_eq!(info["state"], json!("running"));
    assert_eq!(info["lifecycle"]["onTimeout"], json!("pause"));
    let bad = api
        .call(
            Method::POST,
            &format!("/sandboxes/{id}/resume"),
            r#"{"autoPause":1}"#,
        )
        .await;
    assert!(error_of(&bad, StatusCode::BAD_REQUEST).contains("invalid type"));
}

/// v2 connect may leave `timeout` out (PyPI `e2b` 2.63's `Sandbox.connect(id)` does): the sandbox
/// then lives 300 s from now, as the v2 schema's default says.
#[tokio::test(flavor = "multi_thread")]
async fn v2_connect_without_timeout_defaults_to_300_seconds() {
    let server = LocalServer::start();
    let api = Api::new(&server);
    let created = api
        .create(json!({"templateID": "base", "timeout": 10}))
        .await;
    let id = created["sandboxID"].as_str().unwrap();
    let connected = api
        .call(Method::POST, &format!("/v2/sandboxes/{id}/connect"), "{}")
        .await;
    assert_eq!(connected.status, StatusCode::OK, "{:?}", connected.body);
    let lifetime = lifetime_of(&api, id).await;
    assert!(
        (299..=302).contains(&lifetime),
        "endAt is {lifetime}s after start"
    );
}

/// How many seconds after its start sandbox `id` ends (`endAt - startedAt`).
async fn lifetime_of(api: &Api<'_>, id: &str) -> i64 {
    let info = api.info(id).await.json();
    let parse = |field: &str| {
        let text = info[field].as_str().unwrap().to_owned();
        text.parse::<jiff::Timestamp>()
            .unwrap_or_else(|e| panic!("{field} {text}: {e}"))
    };
    parse("endAt").duration_since(parse("startedAt")).as_secs()
}

/// A create that leaves `timeout` out gets its version's schema default: 15 s from v1's
/// `POST /sandboxes`, 300 s from v2's (the newest SDKs send no `timeout` unless the caller sets
/// one: npm `e2b` 2.51's and PyPI `e2b` 2.63's `Sandbox.create()` lives 5 minutes on E2B).
#[tokio::test(flavor = "multi_thread")]
async fn a_create_without_timeout_gets_its_versions_default() {
    let server = LocalServer::start();
    let api = Api::new(&server);
    for (path, expected) in [("/sandboxes", 15..=17), ("/v2/sandboxes", 299..=302)] {
        let created = api
            .call(Method::POST, path, r#"{"templateID": "base"}"#)
            .await;
        assert_eq!(
            created.status,
            StatusCode::CREATED,
            "{path}: {:?}",
            created.body
        );
        let id = created.json()["sandboxID"].as_str().unwrap().to_owned();
        let lifetime = lifetime_of(&api, &id).await;
        assert!(
            expected.contains(&lifetime),
            "{path}: endAt is {lifetime}s after start"
        );
    }
}

/// The sandbox log (v1 and v2): envd's start, each process's start and end (with its exit code),
/// a start that failed (level error); filtered by cursor, direction, level and search, bounded
/// by limit; bad queries are 400; kept across a files-only pause's reboot.
#[tokio::test(flavor = "multi_thread")]
async fn logs_report_what_envd_did_filtered_and_paged() {
    let server = LocalServer::start();
    let api = Api::new(&server);
    let id = api.sandbox().await;
    assert_eq!(
        common::exec(&server, &id, None, "exit 3").await.exit_code,
        3
    );
    assert_eq!(common::exec(&server, &id, None, "true").await.exit_code, 0);
    let logs = |query: String| {
        let api = &api;
        let id = id.clone();
        async move {
            let reply = api
                .call(Method::GET, &format!("/v2/sandboxes/{id}/logs{query}"), "")
                .await;
            assert_eq!(
                reply.status,
                StatusCode::OK,
                "{query}: {}",
                String::from_utf8_lossy(&reply.body)
            );
            reply.json()["logs"].as_array().expect("logs").clone()
        }
    };
    let all = logs(String::new()).await;
    let messages: Vec<&str> = all.iter().map(|e| e["message"].as_str().unwrap()).collect();
    assert_eq!(
        messages,
        [
            "envd started",
            "Process started",
            "Process ended",
            "Process started",
            "Process ended"
        ],
        "{all:?}"
    );
    assert_eq!(all[1]["fields"]["cmd"], "/bin/bash -c exit 3");
    assert_eq!(all[2]["fields"]["exitCode"], "3");
    assert_eq!(all[2]["fields"]["pid"], all[1]["fields"]["pid"]);
    assert!(
        all.iter()
            .all(|e| e["level"] == "info" && e["timestamp"].as_str().unwrap().ends_with('Z'))
    );

    // A start that fails is an error entry.
    let failed = api
        .call(
            Method::GET,
            &format!("/v2/sandboxes/{id}/logs?level=error"),
            "",
        )
        .await;
    assert_eq!(failed.json()["logs"], json!([]));
    let client = envd_proto::process::ProcessClient::new(
        connectrpc::client::HttpClient::plaintext(),
        common::envd_client_config(&server, &id, None),
    );
    let missing = envd_proto::process::StartRequest {
        // The sandbox user cannot enter root's home.
        process: buffa::MessageField::some(envd_proto::process::ProcessConfig {
            cmd: "/bin/true".to_owned(),
            cwd: Some("/root".to_owned()),
            ..Default::default()
        }),
        ..Default::default()
    };
    // The refusal comes as the stream's error.
    let refused = match client.start(missing).await {
        Err(_) => true,
        Ok(mut stream) => stream.message().await.is_err(),
    };
    assert!(
        refused,
        "a start in a directory the user cannot enter was refused"
    );
    let errors = logs("?level=error".to_owned()).await;
    assert_eq!(errors.len(), 1, "{errors:?}");
    assert_eq!(errors[0]["message"], "Process failed to start");
    assert_eq!(errors[0]["fields"]["cmd"], "/bin/true");
    assert!(
        errors[0]["fields"]["error"]
            .as_str()
            .unwrap()
            .contains("ermission"),
        "{errors:?}"
    );

    // Newest first backward, limited; search in the message; forward from a cursor.
    let newest = logs("?direction=backward&limit=2".to_owned()).await;
    assert_eq!(
        newest[0]["message"], "Process failed to start",
        "{newest:?}"
    );
    assert_eq!(newest.len(), 2);
    assert_eq!(logs("?search=ended".to_owned()).await.len(), 2);
    let far = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis()
        + 60_000;
    assert_eq!(logs(format!("?cursor={far}")).await.len(), 0);
    assert_eq!(
        logs(format!("?cursor={far}&direction=backward"))
            .await
            .len(),
        6
    );

    // v1: both shapes, the line a JSON object with level and logger (what the E2B CLI reads).
    let v1 = api
        .call(
            Method::GET,
            &format!("/sandboxes/{id}/logs?start=0&limit=3"),
            "",
        )
        .await;
    assert_eq!(v1.status, StatusCode::OK);
    let v1 = v1.json();
    assert_eq!(v1["logs"].as_array().unwrap().len(), 3);
    assert_eq!(v1["logEntries"].as_array().unwrap().len(), 3);
    let line: Value = serde_json::from_str(v1["logs"][1]["line"].as_str().unwrap()).unwrap();
    assert_eq!(
        (line["level"].as_str(), line["logger"].as_str()),
        (Some("info"), Some("process"))
    );

    for bad in [
        "?limit=1001",
        "?direction=sideways",
        "?level=loud",
        "?cursor=-1",
        "?since=0",
    ] {
        let reply = api
            .call(Method::GET, &format!("/v2/sandboxes/{id}/logs{bad}"), "")
            .await;
        error_of(&reply, StatusCode::BAD_REQUEST);
    }
    let long = "x".repeat(257);
    let reply = api
        .call(
            Method::GET,
            &format!("/v2/sandboxes/{id}/logs?search={long}"),
            "",
        )
        .await;
    error_of(&reply, StatusCode::BAD_REQUEST);

    // A files-only pause reboots envd over the same log.
    assert_eq!(api.reboot(&id).await, StatusCode::CREATED);
    let after: Vec<String> = logs(String::new())
        .await
        .iter()
        .map(|e| e["message"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(after.len(), 7, "{after:?}");
    assert_eq!(after[6], "envd started");
}

/// `GET /sandboxes/metrics` samples several sandboxes at once; the team metrics follow how many
/// run (a pause and a kill stop one) and how fast they start; bad queries are 400.
#[tokio::test(flavor = "multi_thread")]
async fn sandboxes_and_team_metrics_are_measured() {
    let server = LocalServer::start();
    let api = Api::new(&server);
    let (a, b) = (api.sandbox().await, api.sandbox().await);
    let get = |path: String| {
        let api = &api;
        async move { api.call(Method::GET, &path, "").await }
    };
    let several = get(format!("/sandboxes/metrics?sandbox_ids={a},{b},nope")).await;
    assert_eq!(several.status, StatusCode::OK);
    let several = several.json();
    let sampled = several["sandboxes"].as_object().expect("sandboxes");
    assert_eq!(sampled.len(), 2, "{several}");
    assert!(sampled[&a]["memTotal"].as_u64().unwrap() > 0, "{several}");
    let many = vec!["x"; 101].join(",");
    for bad in [
        String::new(),
        format!("?sandbox_ids={many}"),
        "?ids=a".to_owned(),
    ] {
        error_of(
            &get(format!("/sandboxes/metrics{bad}")).await,
            StatusCode::BAD_REQUEST,
        );
    }

    let now = || {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs()
    };
    let since = now() - 30;
    let running_now = || async {
        let series = get(format!(
            "/teams/local/metrics?start={since}&end={}",
            now() + 1
        ))
        .await;
        assert_eq!(series.status, StatusCode::OK);
        let series = series.json();
        let last = series
            .as_array()
            .expect("points")
            .last()
            .expect("a point")
            .clone();
        assert!(last["timestampUnix"].as_i64().is_some() && last["timestamp"].is_string());
        last["concurrentSandboxes"].as_i64().expect("count")
    };
    assert_eq!(running_now().await, 2);
    let paused = api
        .call(Method::POST, &format!("/sandboxes/{a}/pause"), "")
        .await;
    assert_eq!(paused.status, StatusCode::NO_CONTENT);
    assert_eq!(running_now().await, 1);
    assert_eq!(api.kill(&b).await, StatusCode::NO_CONTENT);
    assert_eq!(running_now().await, 0);

    let max = |metric: &str| {
        let path = format!(
            "/teams/local/metrics/max?start={since}&end={}&metric={metric}",
            now() + 1
        );
        async move {
            let reply = get(path).await;
            assert_eq!(reply.status, StatusCode::OK);
            reply.json()["value"].as_f64().expect("value")
        }
    };
    assert_eq!(max("concurrent_sandboxes").await, 2.0);
    assert!(max("sandbox_start_rate").await > 0.0);
    for bad in [
        format!("/teams/local/metrics?start={}&end={since}", now() + 100),
        "/teams/local/metrics?start=yesterday".to_owned(),
        "/teams/local/metrics/max".to_owned(),
        "/teams/local/metrics/max?metric=loudness".to_owned(),
        "/teams/local/metrics?step=1".to_owned(),
    ] {
        error_of(&get(bad).await, StatusCode::BAD_REQUEST);
    }
}

/// `Idempotency-Key` on create: the same request under a key gets the first answer (one
/// sandbox), another request under it is 409 `idempotency_request_mismatch`, a malformed key is
/// 400, and requests without a key each create.
#[tokio::test(flavor = "multi_thread")]
async fn an_idempotency_key_creates_at_most_once() {
    let server = LocalServer::start();
    let api = Api::new(&server);
    let url = format!("{}/v2/sandboxes", server.api_url());
    let server = &server;
    let create = |key: Option<&'static str>, body: &'static str| {
        let (api, url) = (&api, url.clone());
        async move {
            let mut headers = vec![("x-api-key", server.api_key())];
            if let Some(key) = key {
                headers.push(("idempotency-key", key));
            }
            api.http.send(Method::POST, &url, &headers, body).await
        }
    };
    let body = r#"{"templateID":"base","timeout":120}"#;
    let first = create(Some("key-1"), body).await;
    assert_eq!(first.status, StatusCode::CREATED);
    let again = create(Some("key-1"), body).await;
    assert_eq!(again.status, StatusCode::CREATED);
    assert_eq!(again.json()["sandboxID"], first.json()["sandboxID"]);
    let other = create(Some("key-1"), r#"{"templateID":"base","timeout":60}"#).await;
    error_of(&other, StatusCode::CONFLICT);
    assert_eq!(other.json()["error_code"], "idempotency_request_mismatch");
    error_of(&create(Some("Key_1"), body).await, StatusCode::BAD_REQUEST);
    let (a, b) = (create(None, body).await, create(None, body).await);
    assert_ne!(a.json()["sandboxID"], b.json()["sandboxID"]);
    let listed = api.call(Method::GET, "/v2/sandboxes", "").await.json();
    assert_eq!(
        listed.as_array().map(Vec::len),
        Some(3),
        "one sandbox for the key, two without"
    );
}

/// A server whose address pool is used up answers a create with 503 saying so (capacity, not a
/// fault), and has room again once a sandbox is killed.
#[tokio::test(flavor = "multi_thread")]
async fn a_used_up_address_pool_is_503_until_a_sandbox_goes() {
    // A /29 holds two /30 blocks (fewer if a host route overlaps one).
    let server = LocalServer::start_with_args(&["--sandbox-network", "10.250.0.0/29"]);
    let api = Api::new(&server);
    let mut created = Vec::new();
    let refused = loop {
        let reply = api
            .call(Method::POST, "/sandboxes", r#"{"templateID":"base"}"#)
            .await;
        if reply.status != StatusCode::CREATED {
            break reply;
        }
        created.push(reply.json()["sandboxID"].as_str().unwrap().to_owned());
        assert!(created.len() <= 2, "a /29 gave more than two sandboxes");
    };
    let message = error_of(&refused, StatusCode::SERVICE_UNAVAILABLE);
    assert!(message.contains("no free /30"), "{message}");
    assert!(
        !created.is_empty(),
        "a host route overlaps all of 10.250.0.0/29: nothing was created"
    );
    assert_eq!(api.kill(&created[0]).await, StatusCode::NO_CONTENT);
    // The pair is deleted behind the kill; its block is free once it is gone.
    let mut again = None;
    for _ in 0..100 {
        let reply = api
            .call(Method::POST, "/sandboxes", r#"{"templateID":"base"}"#)
            .await;
        if reply.status == StatusCode::CREATED {
            again = Some(reply);
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(
        again.is_some(),
        "a create succeeds once a sandbox is killed"
    );
}
