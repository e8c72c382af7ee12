//! Template builds' refusals and their worlds' end, which the SDK suites (`templates.test.mjs`,
//! `test_templates.py`) do not reach: malformed requests and steps refused with a clear error
//! (the build left waiting, usable), uploads without the URL's token refused, and a build
//! world — processes, cgroup, veth pair — gone when its template is deleted mid-build or the
//! server shuts down.

use std::time::Duration;

use http::{Method, StatusCode};
use serde_json::Value;

use crate::common::{
    self, Api, Http, LocalServer, error_of, processes_in, sandbox_cgroup, sandbox_pid_namespaces,
};

/// Requests a build of `name`: (template id, build id).
async fn request(api: &Api<'_>, name: &str) -> (String, String) {
    let reply = api
        .call(
            Method::POST,
            "/v3/templates",
            &format!(r#"{{"name":"{name}"}}"#),
        )
        .await;
    assert_eq!(reply.status, StatusCode::ACCEPTED, "{:?}", reply.json());
    let body = reply.json();
    (
        body["templateID"].as_str().unwrap().to_owned(),
        body["buildID"].as_str().unwrap().to_owned(),
    )
}

/// The upload link of `hash` for `template`.
async fn link(api: &Api<'_>, template: &str, hash: &str) -> common::Reply {
    api.call(
        Method::GET,
        &format!("/templates/{template}/files/{hash}"),
        "",
    )
    .await
}

async fn status(api: &Api<'_>, template: &str, build: &str) -> Value {
    let reply = api
        .call(
            Method::GET,
            &format!("/templates/{template}/builds/{build}/status"),
            "",
        )
        .await;
    assert_eq!(reply.status, StatusCode::OK);
    reply.json()
}

/// Polls the build's status until `done` holds of it (at most 60 s); returns it.
async fn until(api: &Api<'_>, template: &str, build: &str, done: impl Fn(&Value) -> bool) -> Value {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    loop {
        let status = status(api, template, build).await;
        if done(&status) {
            return status;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "build status: {status}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn template_requests_refuse_bad_input_and_the_build_stays_usable() {
    let server = LocalServer::start();
    let api = Api::new(&server);
    for (body, says) in [
        (r#"{"name":"Has Space"}"#, "invalid template name"),
        (r#"{"name":"a:b:c"}"#, "invalid"),
        (r#"{"name":"ok","tags":["bad tag"]}"#, "invalid tag"),
        (r#"{}"#, "a name is required"),
        (r#"{"name":"ok","bogus":1}"#, "bogus"),
    ] {
        let reply = api.call(Method::POST, "/v3/templates", body).await;
        assert!(
            error_of(&reply, StatusCode::BAD_REQUEST).contains(says),
            "{body}"
        );
    }
    let (template, build) = request(&api, "team/refusals:v1").await;
    // The name arrives percent-encoded as one segment.
    let alias = api
        .call(Method::GET, "/templates/aliases/team%2Frefusals", "")
        .await;
    assert_eq!(alias.json()["templateID"], template.as_str());

    let hash = "0f".repeat(32);
    let bad_hash = link(&api, &template, "xyz").await;
    assert!(error_of(&bad_hash, StatusCode::BAD_REQUEST).contains("64 hex digits"));
    let unknown = link(&api, "nope", &hash).await;
    error_of(&unknown, StatusCode::NOT_FOUND);
    let first = link(&api, &template, &hash).await;
    assert_eq!(first.status, StatusCode::CREATED);
    let first = first.json();
    assert_eq!(first["present"], false);
    let url = first["url"].as_str().unwrap().to_owned();
    let (without_token, _) = url.split_once('?').unwrap();
    for target in [
        without_token.to_owned(),
        format!("{without_token}?token=wrong"),
    ] {
        let reply = Http::default()
            .send(Method::PUT, &target, &[], "archive")
            .await;
        error_of(&reply, StatusCode::UNAUTHORIZED);
    }
    let stored = Http::default()
        .send(Method::PUT, &url, &[], "not really a tar")
        .await;
    assert_eq!(stored.status, StatusCode::OK);
    let again = link(&api, &template, &hash).await;
    assert_eq!(again.json()["present"], true);

    let start = format!("/v2/templates/{template}/builds/{build}");
    for (body, says) in [
        (
            r#"{"steps":[{"type":"FROM","args":["x"]}]}"#,
            "unknown step type",
        ),
        (r#"{"steps":[{"type":"RUN","args":[]}]}"#, "step 1"),
        (
            r#"{"steps":[{"type":"COPY","args":["a","/b","",""]}]}"#,
            "filesHash",
        ),
        (
            r#"{"steps":[{"type":"USER","args":["root; rm -rf /"]}]}"#,
            "invalid user name",
        ),
        (
            r#"{"fromImage":"e2bdev/base","fromTemplate":"base","steps":[]}"#,
            "exclusive",
        ),
        ("not json", "invalid JSON"),
    ] {
        let reply = api.call(Method::POST, &start, body).await;
        assert!(
            error_of(&reply, StatusCode::BAD_REQUEST).contains(says),
            "{body}"
        );
    }
    let unknown_build = api
        .call(
            Method::POST,
            &format!("/v2/templates/{template}/builds/00000000-0000-4000-8000-000000000000"),
            r#"{"steps":[]}"#,
        )
        .await;
    error_of(&unknown_build, StatusCode::NOT_FOUND);
    assert_eq!(status(&api, &template, &build).await["status"], "waiting");
    let bad_query = api
        .call(
            Method::GET,
            &format!("/templates/{template}/builds/{build}/status?level=loud"),
            "",
        )
        .await;
    assert!(error_of(&bad_query, StatusCode::BAD_REQUEST).contains("invalid level"));

    // The refusals changed nothing: the build starts once, and is ready.
    let body = r#"{"fromTemplate":"base","steps":[{"type":"RUN","args":["true"]}]}"#;
    assert_eq!(
        api.call(Method::POST, &start, body).await.status,
        StatusCode::ACCEPTED
    );
    let again = api.call(Method::POST, &start, body).await;
    assert!(error_of(&again, StatusCode::CONFLICT).contains("started already"));
    until(&api, &template, &build, |s| s["status"] == "ready").await;
    let tags = api
        .call(Method::GET, "/templates/team%2Frefusals/tags", "")
        .await;
    assert_eq!(tags.json()[0]["tag"], "v1");
    let missing = api
        .call(
            Method::DELETE,
            "/templates/tags",
            r#"{"name":"team/refusals","tags":["nope"]}"#,
        )
        .await;
    error_of(&missing, StatusCode::NOT_FOUND);
}

/// Starts a build that runs `sleep 300` and returns (template id, build world id) once the
/// sleep runs.
async fn sleeping_build(api: &Api<'_>, name: &str) -> (String, String) {
    let (template, build) = request(api, name).await;
    let body =
        r#"{"fromTemplate":"base","steps":[{"type":"RUN","args":["echo sleeping; sleep 300"]}]}"#;
    let reply = api
        .call(
            Method::POST,
            &format!("/v2/templates/{template}/builds/{build}"),
            body,
        )
        .await;
    assert_eq!(reply.status, StatusCode::ACCEPTED);
    let status = until(api, &template, &build, |s| {
        s["logEntries"]
            .as_array()
            .is_some_and(|e| e.iter().any(|e| e["message"] == "sleeping"))
    })
    .await;
    let world = status["logEntries"]
        .as_array()
        .unwrap()
        .iter()
        .find_map(|e| {
            e["message"]
                .as_str()?
                .strip_prefix("Starting the build world ")
                .map(str::to_owned)
        })
        .expect("the log names the build world");
    (template, world)
}

fn veth_exists(world: &str) -> bool {
    std::path::Path::new("/sys/class/net")
        .join(format!("e2bl{}", &world[..11]))
        .exists()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_build_world_ends_with_its_template_and_with_the_server() {
    let server = LocalServer::start();
    let api = Api::new(&server);

    let (template, world) = sleeping_build(&api, "doomed").await;
    let namespaces = sandbox_pid_namespaces(&world);
    assert!(
        !processes_in(&namespaces).is_empty(),
        "the build world runs"
    );
    assert!(veth_exists(&world), "the build world has its network");
    let listed = api.call(Method::GET, "/v2/sandboxes", "").await;
    assert_eq!(
        listed.json(),
        serde_json::json!([]),
        "build worlds are not sandboxes"
    );
    let deleted = api
        .call(Method::DELETE, &format!("/templates/{template}"), "")
        .await;
    assert_eq!(deleted.status, StatusCode::NO_CONTENT);
    let dir = server.state_dir().join("sandboxes").join(&world);
    common::eventually(Duration::from_secs(15), "the build world to go", || {
        sandbox_cgroup(&world).is_none() && !dir.exists() && !veth_exists(&world)
    })
    .await;
    assert_eq!(processes_in(&namespaces), Vec::<String>::new());
    assert!(
        !server
            .state_dir()
            .join("templates")
            .join(&template)
            .exists()
    );

    let (_, world) = sleeping_build(&api, "interrupted").await;
    let namespaces = sandbox_pid_namespaces(&world);
    assert!(server.stop().success(), "a clean shutdown mid-build");
    assert!(sandbox_cgroup(&world).is_none());
    assert!(!veth_exists(&world));
    assert_eq!(processes_in(&namespaces), Vec::<String>::new());
}

/// A `RUN` step that fails fails the build as E2B's builder words it (E2B's own SDK suites look
/// for this string): an unknown step user by envd's Connect code, a failing command by its status.
#[tokio::test(flavor = "multi_thread")]
async fn a_failed_run_step_fails_the_build_in_e2bs_words() {
    let server = LocalServer::start();
    let api = Api::new(&server);
    for (name, step, says) in [
        (
            "team/nobody",
            r#"["whoami","root123"]"#,
            "failed to run command 'whoami': command failed: unauthenticated: invalid username: 'root123'",
        ),
        (
            "team/exits",
            r#"["exit 3"]"#,
            "failed to run command 'exit 3': command failed: exit status 3",
        ),
    ] {
        let (template, build) = request(&api, name).await;
        let body = format!(r#"{{"fromTemplate":"base","steps":[{{"type":"RUN","args":{step}}}]}}"#);
        let reply = api
            .call(
                Method::POST,
                &format!("/v2/templates/{template}/builds/{build}"),
                &body,
            )
            .await;
        assert_eq!(reply.status, StatusCode::ACCEPTED, "{:?}", reply.json());
        let status = until(&api, &template, &build, |s| s["status"] == "error").await;
        let message = status["reason"]["message"].as_str().unwrap_or_default();
        assert!(message.contains(says), "{status}");
    }
}
