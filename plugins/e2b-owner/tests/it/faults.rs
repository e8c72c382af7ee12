//! Bad input and faults of issue 4, owner side: credentials, an
//! unreachable API, a template or sandbox that does not exist, and the
//! sandbox killed from the API while gateway calls run.

use std::io::{Read, Write};
use std::net::TcpListener;
use std::time::{Duration, Instant};

use dsh_e2b_gateway::envd_client;
use dsh_e2b_owner::E2bPlugin;
use dsh_plugin_api::owner::{DaemonRequest, Owner};
use dsh_plugin_api::stream::byte_stream_once;
use dsh_plugin_api::{ErrorKind, Plugin};
use e2b_client::{CallOptions, Command, ProcessEvent, StreamOptions};
use futures::StreamExt;
use serde_json::json;

use crate::support::{World, context};

/// The owner created with exactly `vars` as its environment.
async fn owner_with(
    config: serde_json::Value,
    vars: &[(&str, &str)],
) -> dsh_plugin_api::Result<E2bPlugin> {
    let vars: Vec<(String, String)> = vars
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect();
    E2bPlugin::create_with_env(context("e2b", config), move |name| {
        vars.iter().find(|(k, _)| k == name).map(|(_, v)| v.clone())
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_or_malformed_key_is_a_config_error_and_creates_nothing() {
    let world = World::start();
    let urls = [
        ("E2B_API_URL", world.server.api_url()),
        ("E2B_SANDBOX_URL", world.server.sandbox_url()),
    ];
    let err = owner_with(json!(null), &urls).await.expect_err("no key");
    assert_eq!(err.kind(), ErrorKind::Config);
    assert!(
        err.message().starts_with("config.apiKey: no API key"),
        "{err}"
    );

    let malformed = "not-an-e2b-key-SECRET";
    let err = owner_with(json!({"apiKey": malformed}), &urls)
        .await
        .expect_err("malformed key");
    assert_eq!(err.kind(), ErrorKind::Config);
    assert!(
        err.message()
            .starts_with("config.apiKey: malformed API key"),
        "{err}"
    );
    assert!(
        !err.to_string().contains(malformed),
        "the key is never quoted"
    );

    let mut with_env_key = urls.to_vec();
    with_env_key.push(("E2B_API_KEY", malformed));
    let err = owner_with(json!(null), &with_env_key)
        .await
        .expect_err("malformed key");
    assert!(
        err.message()
            .starts_with("E2B_API_KEY (used because config.apiKey is not set)"),
        "{err}"
    );
    assert!(world.sandboxes().await.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_key_the_api_rejects_is_permission_denied() {
    let world = World::start();
    let wrong = "e2b_00000000000000000000000000000000";
    let err = owner_with(
        json!({"apiKey": wrong}),
        &[
            ("E2B_API_URL", world.server.api_url()),
            ("E2B_SANDBOX_URL", world.server.sandbox_url()),
        ],
    )
    .await
    .expect_err("rejected key");
    assert_eq!(err.kind(), ErrorKind::PermissionDenied, "{err}");
    assert!(err.message().contains("authentication failed"), "{err}");
    assert!(
        err.message().contains("check config.apiKey or E2B_API_KEY"),
        "{err}"
    );
    assert!(!err.to_string().contains(wrong));
    assert!(world.sandboxes().await.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unreachable_api_is_unavailable_promptly() {
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let started = Instant::now();
    let err = owner_with(
        json!({"apiUrl": format!("http://127.0.0.1:{port}")}),
        &[("E2B_API_KEY", "e2b_0123456789abcdef")],
    )
    .await
    .expect_err("nothing listens there");
    assert_eq!(err.kind(), ErrorKind::Unavailable, "{err}");
    assert!(
        err.message()
            .starts_with("create sandbox from template base: transport failure"),
        "{err}"
    );
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "{:?}",
        started.elapsed()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sandbox_or_template_that_does_not_exist_is_named() {
    let world = World::start();
    let err = world
        .owner(json!({"sandboxId": "doesnotexist0000"}))
        .await
        .expect_err("no such sandbox");
    assert_eq!(err.kind(), ErrorKind::NotFound, "{err}");
    assert!(
        err.message()
            .starts_with("config.sandboxId: sandbox \"doesnotexist0000\" does not exist"),
        "{err}"
    );
    let err = world
        .owner(json!({"sandboxId": "Not/An/Id"}))
        .await
        .expect_err("a malformed id");
    assert_eq!(err.kind(), ErrorKind::Config, "{err}");
    assert!(err.message().starts_with("config.sandboxId: "), "{err}");

    // e2b-local serves every well-formed template; it refuses malformed ones.
    let err = world
        .owner(json!({"template": "no such template!"}))
        .await
        .expect_err("a malformed template");
    assert_eq!(err.kind(), ErrorKind::Config, "{err}");
    assert!(
        err.message()
            .starts_with("config.template: the API refused to create a sandbox from template \"no such template!\""),
        "{err}"
    );
    assert!(world.sandboxes().await.is_empty());
}

/// E2B answers an unknown template with 404 and a JSON error; e2b-local has
/// no template registry, so a one-shot HTTP responder plays the API.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unknown_template_is_not_found() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let api = std::thread::spawn(move || {
        let (mut stream, _) = listener.accept().unwrap();
        let mut request = Vec::new();
        let mut buf = [0u8; 4096];
        // Read the head and the JSON body (ends with '}').
        while !request.ends_with(b"}") {
            let n = stream.read(&mut buf).unwrap();
            assert!(n > 0, "the client closed early");
            request.extend_from_slice(&buf[..n]);
        }
        let body = r#"{"code":404,"message":"template 'nonexistent' not found"}"#;
        write!(
            stream,
            "HTTP/1.1 404 Not Found\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
            body.len()
        )
        .unwrap();
        String::from_utf8(request).unwrap()
    });
    let err = owner_with(
        json!({"template": "nonexistent", "apiUrl": format!("http://127.0.0.1:{port}")}),
        &[("E2B_API_KEY", "e2b_0123456789abcdef")],
    )
    .await
    .expect_err("unknown template");
    assert_eq!(err.kind(), ErrorKind::NotFound, "{err}");
    assert!(
        err.message()
            .starts_with("config.template: template \"nonexistent\" does not exist"),
        "{err}"
    );
    assert!(
        err.message().contains("template 'nonexistent' not found"),
        "{err}"
    );
    let request = api.join().unwrap();
    assert!(request.starts_with("POST /sandboxes "), "{request}");
    assert!(request.contains(r#""dsh-owner":"dsh-e2b""#), "{request}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killing_the_sandbox_ends_gateway_calls_promptly_and_disposal_stays_quiet() {
    let world = World::start();
    let plugin = world.owner(json!(null)).await.unwrap();
    let owner = plugin.owner().clone();
    let envd = envd_client(owner.clone());
    let mut ticker = envd
        .start(
            &Command::shell("while true; do echo tick; sleep 0.05; done"),
            &StreamOptions::default(),
        )
        .await
        .unwrap();
    match ticker.next().await {
        Some(Ok(ProcessEvent::Stdout(_))) => {}
        other => panic!("expected output, got {other:?}"),
    }
    let mut silent = envd
        .start(
            &Command::new("/bin/sleep").arg("600"),
            &StreamOptions::default(),
        )
        .await
        .unwrap();

    world
        .api()
        .kill_sandbox(&owner.info().sandbox_id)
        .await
        .unwrap();
    let deadline = Duration::from_secs(10);
    let started = Instant::now();
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
    .expect("the running stream ends within 10 s");
    assert!(err.is_unavailable(), "{err:?}");
    let err = tokio::time::timeout(deadline, silent.next())
        .await
        .expect("the silent stream ends within 10 s")
        .expect("an error item")
        .unwrap_err();
    assert!(err.is_unavailable(), "{err:?}");
    assert!(started.elapsed() < deadline);

    // New calls: Unavailable at the owner, a gone sandbox for adapters.
    let err = owner
        .daemon(DaemonRequest {
            method: "POST".into(),
            path_and_query: "/filesystem.Filesystem/Stat".into(),
            headers: vec![("content-type".into(), b"application/json".to_vec())],
            body: byte_stream_once(br#"{"path":"/"}"#.to_vec()),
        })
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Unavailable, "{err}");
    let err = envd.stat("/", &CallOptions::default()).await.unwrap_err();
    assert!(err.is_sandbox_gone(), "{err:?}");
    assert!(!owner.alive().await.unwrap());

    // Disposal (kill) finds it gone and counts that as done.
    plugin.dispose().await.expect("a gone sandbox is quiescent");
}
