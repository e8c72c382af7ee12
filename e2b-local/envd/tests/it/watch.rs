//! Directory watches: the `WatchDir` stream and the polling watchers (docs/e2b-protocol.md §6.3).

use std::time::{Duration, Instant};

use connectrpc::ErrorCode;
use envd_proto::filesystem::{
    CreateWatcherRequest, EventType, GetWatcherEventsRequest, RemoveWatcherRequest,
};

use crate::common::{RawStream, TestDaemon, config};

/// Reads filesystem events (as `(name, type)`) until `done` says so or 10 s pass.
async fn events_until(
    stream: &mut RawStream,
    done: impl Fn(&[(String, String)]) -> bool,
) -> (Vec<(String, String)>, Vec<serde_json::Value>) {
    let mut seen = Vec::new();
    let mut raw = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(10);
    while !done(&seen) {
        assert!(Instant::now() < deadline, "events so far: {seen:?}");
        let envelope = stream
            .next_within(Duration::from_secs(10))
            .await
            .expect("stream open");
        assert!(!envelope.is_end(), "stream ended: {}", envelope.json());
        let json = envelope.json();
        if let Some(event) = json.get("filesystem") {
            seen.push((
                event["name"].as_str().unwrap().to_owned(),
                event["type"].as_str().unwrap().to_owned(),
            ));
            raw.push(event.clone());
        }
    }
    (seen, raw)
}

fn has(seen: &[(String, String)], name: &str, kind: &str) -> bool {
    seen.iter().any(|(n, k)| n == name && k == kind)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watch_dir_streams_split_events_with_entries() {
    let dir = tempfile::tempdir().unwrap();
    let daemon = TestDaemon::start(config()).await;
    let mut stream = RawStream::open(
        &daemon.url("/filesystem.Filesystem/WatchDir"),
        &format!(
            r#"{{"path":"{}","includeEntry":true}}"#,
            dir.path().display()
        ),
        &[],
    )
    .await;
    assert_eq!(stream.status, 200);
    let start = stream.next_within(Duration::from_secs(5)).await.unwrap();
    assert_eq!(start.json(), serde_json::json!({"start": {}}));

    std::fs::write(dir.path().join("a.txt"), b"hello").unwrap();
    let (seen, raw) =
        events_until(&mut stream, |seen| has(seen, "a.txt", "EVENT_TYPE_WRITE")).await;
    assert_eq!(
        seen[0],
        ("a.txt".to_owned(), "EVENT_TYPE_CREATE".to_owned())
    );
    let write = raw
        .iter()
        .find(|event| event["type"] == "EVENT_TYPE_WRITE")
        .unwrap();
    assert_eq!(write["entry"]["name"], "a.txt");
    assert_eq!(write["entry"]["type"], "FILE_TYPE_FILE");

    std::fs::set_permissions(
        dir.path().join("a.txt"),
        std::os::unix::fs::PermissionsExt::from_mode(0o600),
    )
    .unwrap();
    events_until(&mut stream, |seen| has(seen, "a.txt", "EVENT_TYPE_CHMOD")).await;

    std::fs::rename(dir.path().join("a.txt"), dir.path().join("b.txt")).unwrap();
    let (seen, raw) = events_until(&mut stream, |seen| {
        has(seen, "a.txt", "EVENT_TYPE_RENAME") && has(seen, "b.txt", "EVENT_TYPE_CREATE")
    })
    .await;
    let rename = raw
        .iter()
        .find(|event| event["type"] == "EVENT_TYPE_RENAME")
        .unwrap();
    assert!(rename.get("entry").is_none(), "renames carry no entry");
    assert!(seen.len() >= 2);

    std::fs::remove_file(dir.path().join("b.txt")).unwrap();
    let (_, raw) = events_until(&mut stream, |seen| has(seen, "b.txt", "EVENT_TYPE_REMOVE")).await;
    assert!(raw.last().unwrap().get("entry").is_none());
    daemon.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn recursive_watches_follow_new_directories() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("existing")).unwrap();
    let daemon = TestDaemon::start(config()).await;
    let mut stream = RawStream::open(
        &daemon.url("/filesystem.Filesystem/WatchDir"),
        &format!(r#"{{"path":"{}","recursive":true}}"#, dir.path().display()),
        &[],
    )
    .await;
    stream.next_within(Duration::from_secs(5)).await.unwrap();
    std::fs::write(dir.path().join("existing/f1"), b"1").unwrap();
    events_until(&mut stream, |seen| {
        has(seen, "existing/f1", "EVENT_TYPE_CREATE")
    })
    .await;
    std::fs::create_dir(dir.path().join("new")).unwrap();
    events_until(&mut stream, |seen| has(seen, "new", "EVENT_TYPE_CREATE")).await;
    std::fs::write(dir.path().join("new/f2"), b"2").unwrap();
    events_until(&mut stream, |seen| has(seen, "new/f2", "EVENT_TYPE_WRITE")).await;
    // A directory moved within the tree keeps being watched under its new name.
    std::fs::rename(dir.path().join("new"), dir.path().join("moved")).unwrap();
    events_until(&mut stream, |seen| has(seen, "moved", "EVENT_TYPE_CREATE")).await;
    std::fs::write(dir.path().join("moved/f3"), b"3").unwrap();
    events_until(&mut stream, |seen| {
        has(seen, "moved/f3", "EVENT_TYPE_CREATE")
    })
    .await;
    daemon.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn non_recursive_watches_ignore_subdirectories() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("sub")).unwrap();
    let daemon = TestDaemon::start(config()).await;
    let mut stream = RawStream::open(
        &daemon.url("/filesystem.Filesystem/WatchDir"),
        &format!(r#"{{"path":"{}"}}"#, dir.path().display()),
        &[],
    )
    .await;
    stream.next_within(Duration::from_secs(5)).await.unwrap();
    std::fs::write(dir.path().join("sub/hidden"), b"x").unwrap();
    std::fs::write(dir.path().join("visible"), b"x").unwrap();
    let (seen, _) = events_until(&mut stream, |seen| {
        has(seen, "visible", "EVENT_TYPE_CREATE")
    })
    .await;
    assert!(
        seen.iter().all(|(name, _)| !name.contains("hidden")),
        "{seen:?}"
    );
    daemon.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watch_keepalives_deadline_and_errors() {
    let dir = tempfile::tempdir().unwrap();
    let daemon = TestDaemon::start(config()).await;
    let mut stream = RawStream::open(
        &daemon.url("/filesystem.Filesystem/WatchDir"),
        &format!(r#"{{"path":"{}"}}"#, dir.path().display()),
        &[
            ("keepalive-ping-interval", "1"),
            ("connect-timeout-ms", "2500"),
        ],
    )
    .await;
    let mut kinds = Vec::new();
    while let Some(envelope) = stream.next_within(Duration::from_secs(10)).await {
        if envelope.is_end() {
            kinds.push(
                envelope.json()["error"]["code"]
                    .as_str()
                    .unwrap()
                    .to_owned(),
            );
        } else {
            kinds.push(
                envelope
                    .json()
                    .as_object()
                    .unwrap()
                    .keys()
                    .next()
                    .unwrap()
                    .clone(),
            );
        }
    }
    assert_eq!(
        kinds,
        ["start", "keepalive", "keepalive", "deadline_exceeded"]
    );

    for (path, code) in [
        (dir.path().join("missing"), "not_found"),
        (
            std::path::PathBuf::from("/etc/hostname"),
            "invalid_argument",
        ),
    ] {
        let stream = RawStream::open(
            &daemon.url("/filesystem.Filesystem/WatchDir"),
            &format!(r#"{{"path":"{}"}}"#, path.display()),
            &[],
        )
        .await;
        assert_eq!(stream.status, 200, "stream errors are HTTP 200");
        let envelopes = stream.collect().await;
        assert_eq!(envelopes.len(), 1);
        assert!(envelopes[0].is_end());
        assert_eq!(envelopes[0].json()["error"]["code"], code);
    }
    daemon.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn polling_watchers_drain_and_are_removed() {
    let dir = tempfile::tempdir().unwrap();
    let daemon = TestDaemon::start(config()).await;
    let fs = daemon.fs(true);
    let id = fs
        .create_watcher(CreateWatcherRequest {
            path: dir.path().to_str().unwrap().to_owned(),
            include_entry: true,
            ..Default::default()
        })
        .await
        .expect("create watcher")
        .into_owned()
        .watcher_id;
    assert_eq!(id.len(), 21);
    assert!(id.starts_with('w'));
    assert!(
        id[1..]
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit())
    );

    std::fs::write(dir.path().join("polled"), b"x").unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut events = Vec::new();
    while !events
        .iter()
        .any(|(_, kind)| *kind == EventType::EVENT_TYPE_WRITE)
    {
        assert!(Instant::now() < deadline, "{events:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
        let drained = fs
            .get_watcher_events(GetWatcherEventsRequest {
                watcher_id: id.clone(),
                ..Default::default()
            })
            .await
            .expect("drain")
            .into_owned()
            .events;
        for event in drained {
            assert_eq!(event.name, "polled");
            if event.r#type.as_known() == Some(EventType::EVENT_TYPE_WRITE) {
                assert!(event.entry.is_set());
            }
            events.push((event.name, event.r#type.as_known().unwrap()));
        }
    }
    assert_eq!(events[0].1, EventType::EVENT_TYPE_CREATE);
    // Drained: nothing left.
    let again = fs
        .get_watcher_events(GetWatcherEventsRequest {
            watcher_id: id.clone(),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_owned()
        .events;
    assert!(again.is_empty(), "{again:?}");
    fs.remove_watcher(RemoveWatcherRequest {
        watcher_id: id.clone(),
        ..Default::default()
    })
    .await
    .expect("remove");
    for result in [
        fs.get_watcher_events(GetWatcherEventsRequest {
            watcher_id: id.clone(),
            ..Default::default()
        })
        .await
        .map(drop),
        fs.remove_watcher(RemoveWatcherRequest {
            watcher_id: id.clone(),
            ..Default::default()
        })
        .await
        .map(drop),
    ] {
        let err = result.expect_err("unknown watcher");
        assert_eq!(err.code, ErrorCode::NotFound);
        assert_eq!(
            err.message.unwrap(),
            format!("watcher with id {id} not found")
        );
    }
    let err = fs
        .create_watcher(CreateWatcherRequest {
            path: dir.path().join("nope").to_str().unwrap().to_owned(),
            ..Default::default()
        })
        .await
        .expect_err("missing dir");
    assert_eq!(err.code, ErrorCode::NotFound);
    daemon.stop().await;
}
