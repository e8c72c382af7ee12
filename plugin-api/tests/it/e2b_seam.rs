//! Every owner method (the `e2b` kind), host → plugin, through the real loader, with
//! streams in both directions: the request body is produced by the host and
//! pulled by the plugin, the response body the other way round.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use dsh_plugin_api::owner::DaemonRequest;
use dsh_plugin_api::stream::{ByteStream, byte_stream_once, collect_bytes};
use dsh_plugin_api::{Bytes, ErrorKind};
use futures::StreamExt;

use crate::support::World;

fn request(path: &str, body: ByteStream) -> DaemonRequest {
    DaemonRequest {
        method: "POST".into(),
        path_and_query: path.into(),
        headers: vec![
            ("content-type".into(), b"application/connect+json".to_vec()),
            ("x-raw".into(), vec![0, 159, 255]),
        ],
        body,
    }
}

/// A body of `count` chunks that counts how many were pulled and notices
/// being dropped.
struct Counted {
    pulled: Arc<AtomicUsize>,
    dropped: Arc<AtomicBool>,
}

impl Counted {
    fn body(&self, count: usize) -> ByteStream {
        struct Guard(Arc<AtomicBool>);
        impl Drop for Guard {
            fn drop(&mut self) {
                self.0.store(true, Ordering::SeqCst);
            }
        }
        let pulled = self.pulled.clone();
        let guard = Guard(self.dropped.clone());
        Box::pin(futures::stream::iter(0..count).map(move |index| {
            let _alive = &guard;
            pulled.fetch_add(1, Ordering::SeqCst);
            Ok(Bytes::from(format!("chunk {index};")))
        }))
    }
}

fn counted() -> Counted {
    Counted {
        pulled: Arc::new(AtomicUsize::new(0)),
        dropped: Arc::new(AtomicBool::new(false)),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn info_and_alive_round_trip() {
    let world = World::new(serde_json::Value::Null).await;
    let owner = world.owner();
    let info = owner.info();
    assert_eq!(info.sandbox_id, "probe-e2b");
    assert_eq!(info.template_id, "probe");
    assert_eq!(info.daemon_version, "0.0.0-probe");
    assert_eq!(info.cwd, "/probe/e2b");
    assert_eq!(info.runtime_root, "/probe/e2b/.dsh-e2b");
    assert!(owner.alive().await.expect("alive"));
    world.dispose().await;
    let err = owner.alive().await.expect_err("disposed");
    assert_eq!(err.kind(), ErrorKind::Closed);
    // The identity was read once at import and stays readable.
    assert_eq!(owner.info().sandbox_id, "probe-e2b");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn daemon_echoes_head_and_streams_the_body_both_ways() {
    let world = World::new(serde_json::Value::Null).await;
    let owner = world.owner();
    let response = owner
        .daemon(request(
            "/process.Process/Start?x=1",
            byte_stream_once(b"{\"hello\":1}".to_vec()),
        ))
        .await
        .expect("daemon");
    assert_eq!(response.status, 200);
    let headers: Vec<(String, Vec<u8>)> = response.headers.clone();
    assert_eq!(
        headers,
        vec![
            ("x-echo-method".to_owned(), b"POST".to_vec()),
            (
                "x-echo-path".to_owned(),
                b"/process.Process/Start?x=1".to_vec()
            ),
            (
                "content-type".to_owned(),
                b"application/connect+json".to_vec()
            ),
            ("x-raw".to_owned(), vec![0, 159, 255]),
        ]
    );
    assert_eq!(
        collect_bytes(response.body).await.expect("body"),
        b"{\"hello\":1}"
    );
    world.dispose().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bodies_are_pulled_end_to_end_and_dropping_the_response_drops_the_request() {
    let world = World::new(serde_json::Value::Null).await;
    let owner = world.owner();
    let body = counted();
    let response = owner
        .daemon(request("/stream", body.body(100)))
        .await
        .expect("daemon");
    tokio::time::sleep(Duration::from_millis(30)).await;
    assert_eq!(
        body.pulled.load(Ordering::SeqCst),
        0,
        "nothing pulled before the response body is"
    );
    let mut chunks = response.body;
    for index in 0..5 {
        let chunk = chunks.next().await.expect("chunk").expect("ok");
        assert_eq!(chunk, format!("chunk {index};").into_bytes());
        assert_eq!(
            body.pulled.load(Ordering::SeqCst),
            index + 1,
            "one pulled per chunk read"
        );
    }
    tokio::time::sleep(Duration::from_millis(30)).await;
    assert_eq!(body.pulled.load(Ordering::SeqCst), 5);
    assert!(!body.dropped.load(Ordering::SeqCst));
    drop(chunks);
    assert!(
        body.dropped.load(Ordering::SeqCst),
        "dropping the response body dropped the request body through the plugin, synchronously"
    );
    world.dispose().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn daemon_errors_panics_and_cancellation_cross() {
    let world = World::new(serde_json::Value::Null).await;
    let owner = world.owner();
    let err = owner
        .daemon(request("/.probe/error/11", byte_stream_once(Vec::new())))
        .await
        .expect_err("unavailable");
    assert_eq!(err.kind(), ErrorKind::Unavailable);
    assert_eq!(err.subject(), Some("/.probe/error/11"));
    let err = owner
        .daemon(request("/.probe/panic", byte_stream_once(Vec::new())))
        .await
        .expect_err("panic");
    assert_eq!(err.kind(), ErrorKind::Panicked);

    // A dropped call is cancelled in the plugin, and the request body it
    // held is released.
    let body = counted();
    let hung = tokio::time::timeout(
        Duration::from_millis(50),
        owner.daemon(request("/.probe/hang", body.body(3))),
    )
    .await;
    assert!(hung.is_err());
    assert!(
        body.dropped.load(Ordering::SeqCst),
        "the request body was dropped"
    );
    let state = owner
        .daemon(request("/.probe/state", byte_stream_once(Vec::new())))
        .await
        .expect("state");
    let counters: serde_json::Value =
        serde_json::from_slice(&collect_bytes(state.body).await.expect("body")).expect("JSON");
    assert_eq!(counters["hangsStarted"], 1);
    assert_eq!(counters["hangsCancelled"], 1);
    world.dispose().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_requests_stream_independently() {
    let world = World::new(serde_json::Value::Null).await;
    let owner = world.owner();
    let mut tasks = Vec::new();
    for task in 0..16 {
        let owner = owner.clone();
        tasks.push(tokio::spawn(async move {
            let chunks: Vec<Vec<u8>> = (0..20)
                .map(|index| format!("{task}:{index},").into_bytes())
                .collect();
            let expected = chunks.concat();
            let body: ByteStream = Box::pin(futures::stream::iter(
                chunks.into_iter().map(|chunk| Ok(Bytes::from(chunk))),
            ));
            let response = owner
                .daemon(request(&format!("/t/{task}"), body))
                .await
                .expect("daemon");
            assert_eq!(collect_bytes(response.body).await.expect("body"), expected);
        }));
    }
    for task in tasks {
        task.await.expect("task");
    }
    world.dispose().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pull_pending_at_dispose_resolves_closed() {
    let world = World::new(serde_json::Value::Null).await;
    let owner = world.owner();
    // The request body never yields, so pulling the echoed response body
    // stays pending inside the owner plugin.
    let response = owner
        .daemon(request("/stalled", Box::pin(futures::stream::pending())))
        .await
        .expect("daemon");
    let mut body = response.body;
    let pull = tokio::spawn(async move {
        let first = body.next().await;
        (first, body.next().await)
    });
    tokio::time::sleep(Duration::from_millis(30)).await;
    assert!(!pull.is_finished(), "the pull is pending");
    world.dispose().await;
    let (first, second) = tokio::time::timeout(Duration::from_secs(10), pull)
        .await
        .expect("woken by the dispose")
        .expect("task");
    let err = first.expect("an answer").expect_err("closed");
    assert_eq!(err.kind(), ErrorKind::Closed);
    assert_eq!(err.message(), "daemon: plugin instance `e2b` was disposed");
    assert!(second.is_none(), "a closed stream is over");
}
