//! Every `fs` method, host → plugin, through the real loader: values, streams
//! with backpressure, every error kind with its subject, panics,
//! cancellation, concurrency, and calls after dispose.

use std::time::Duration;

use dsh_plugin_api::fs::{Edit, FileKind, WriteGuard};
use dsh_plugin_api::stream::collect_bytes;
use dsh_plugin_api::{Bytes, ErrorKind, Text};
use futures::StreamExt;

use crate::support::World;

async fn state(world: &World) -> serde_json::Value {
    let text = world
        .fs()
        .read_text("/.probe/state")
        .await
        .expect("state")
        .text;
    serde_json::from_str(&text).expect("state JSON")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_method_round_trips() {
    let world = World::new(serde_json::Value::Null).await;
    let fs = world.fs();
    // The probe's cwd is the injected owner's cwd.
    let text = "héllo\nwörld\n";
    let v1 = fs
        .write(
            "notes/a.txt",
            Bytes::copy_from_slice(text.as_bytes()),
            WriteGuard::CreateNew,
        )
        .await
        .expect("write");

    let resolved = fs.resolve("notes/a.txt", None).await.expect("resolve");
    assert_eq!(resolved.path, "/probe/e2b/notes/a.txt");
    assert_eq!(resolved.uri, "file:///probe/e2b/notes/a.txt");
    let resolved = fs
        .resolve("a b.txt", Some("/probe/e2b/notes"))
        .await
        .expect("resolve with cwd");
    assert_eq!(resolved.path, "/probe/e2b/notes/a b.txt");
    assert_eq!(resolved.uri, "file:///probe/e2b/notes/a%20b.txt");

    assert!(
        fs.contains("/probe/e2b", "notes/a.txt")
            .await
            .expect("contains")
    );
    assert!(
        !fs.contains("/probe/e2b/notes", "/probe")
            .await
            .expect("contains")
    );

    let stat = fs.stat("notes/a.txt").await.expect("stat");
    assert_eq!(stat.kind, FileKind::File);
    assert_eq!(stat.size, text.len() as u64);
    assert_eq!(stat.mode, 0o644);
    assert_eq!(stat.symlink_target, None);
    assert_eq!(stat.version, v1);
    assert!(stat.modified > std::time::UNIX_EPOCH);
    assert_eq!(
        fs.lstat("/probe/e2b/notes/a.txt").await.expect("lstat"),
        stat
    );
    assert_eq!(
        fs.stat("notes").await.expect("stat dir").kind,
        FileKind::Directory
    );

    let entries = fs.list("notes").await.expect("list");
    assert_eq!(entries.len(), 1);
    assert_eq!(entries[0].name, "a.txt");
    assert_eq!(entries[0].path, "/probe/e2b/notes/a.txt");
    assert_eq!(entries[0].metadata, stat);
    assert_eq!(entries[0].resolved, None);

    let file = fs.read_text("notes/a.txt").await.expect("read_text");
    assert_eq!(file.text, text);
    assert_eq!(file.version, v1);

    let streamed = fs.stream_text("notes/a.txt").await.expect("stream_text");
    assert_eq!(streamed.version, v1);
    assert_eq!(streamed.size, text.len() as u64);
    let chunks: Vec<Text> = streamed
        .chunks
        .map(|chunk| chunk.expect("chunk"))
        .collect()
        .await;
    assert_eq!(chunks.concat(), text);

    let bytes = fs.read_bytes("notes/a.txt").await.expect("read_bytes");
    assert_eq!(bytes.version, v1);
    assert_eq!(
        collect_bytes(bytes.chunks).await.expect("bytes"),
        text.as_bytes()
    );

    let v2 = fs
        .write(
            "notes/a.txt",
            Bytes::from_static(b"one\ntwo\ntwo\n"),
            WriteGuard::IfVersion(v1.clone()),
        )
        .await
        .expect("guarded write");
    assert_ne!(v2, v1);
    let stale = fs
        .write(
            "notes/a.txt",
            Bytes::from_static(b"x"),
            WriteGuard::IfVersion(v1),
        )
        .await
        .expect_err("stale version");
    assert_eq!(stale.kind(), ErrorKind::Conflict);
    assert_eq!(stale.subject(), Some("notes/a.txt"));

    let outcome = fs
        .edit(
            "notes/a.txt",
            vec![Edit {
                old: "two".into(),
                new: "2".into(),
                replace_all: true,
            }],
            WriteGuard::IfVersion(v2),
        )
        .await
        .expect("edit");
    assert_eq!(outcome.replacements, 2);
    assert_eq!(
        fs.read_text("notes/a.txt").await.expect("read").text,
        "one\n2\n2\n"
    );
    assert_eq!(
        fs.stat("notes/a.txt").await.expect("stat").version,
        outcome.version
    );

    fs.mkdir("deep/er").await.expect("mkdir");
    fs.mkdir("deep/er").await.expect("mkdir again");
    fs.rename("notes", "deep/er/notes").await.expect("rename");
    assert_eq!(
        fs.read_text("deep/er/notes/a.txt")
            .await
            .expect("moved")
            .text,
        "one\n2\n2\n"
    );
    assert!(fs.remove("deep").await.expect("remove"));
    assert!(!fs.remove("deep").await.expect("remove again"));
    let gone = fs.stat("deep/er/notes/a.txt").await.expect_err("removed");
    assert_eq!(gone.kind(), ErrorKind::NotFound);
    assert_eq!(gone.subject(), Some("deep/er/notes/a.txt"));
    world.dispose().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_error_kind_crosses_with_its_subject() {
    let world = World::new(serde_json::Value::Null).await;
    let fs = world.fs();
    for code in (1..=19).chain([4242]) {
        let path = format!("/.probe/error/{code}");
        let err = fs.stat(&path).await.expect_err("injected error");
        assert_eq!(err.kind(), ErrorKind::from_code(code), "code {code}");
        assert_eq!(err.kind().code(), code);
        assert_eq!(err.subject(), Some(path.as_str()));
        assert!(err.message().starts_with("stat: injected"), "{err}");
    }
    // Errors of the other methods cross the same way.
    let err = fs.read_text("/probe/e2b").await.expect_err("a directory");
    assert_eq!(err.kind(), ErrorKind::IsADirectory);
    fs.write("bin", Bytes::from(vec![0, 1, 2]), WriteGuard::Overwrite)
        .await
        .expect("write");
    assert_eq!(
        fs.read_text("bin").await.expect_err("binary").kind(),
        ErrorKind::Binary
    );
    fs.write("bad", Bytes::from(vec![b'a', 0xff]), WriteGuard::Overwrite)
        .await
        .expect("write");
    assert_eq!(
        fs.read_text("bad").await.expect_err("utf-8").kind(),
        ErrorKind::InvalidUtf8
    );
    let err = fs
        .edit(
            "bad",
            vec![Edit {
                old: "a".into(),
                new: "b".into(),
                replace_all: false,
            }],
            WriteGuard::Overwrite,
        )
        .await
        .expect_err("edit of invalid UTF-8");
    assert_eq!(err.kind(), ErrorKind::InvalidUtf8);
    world.dispose().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn panics_become_panicked_errors_and_the_plugin_keeps_working() {
    let world = World::new(serde_json::Value::Null).await;
    let fs = world.fs();
    let err = fs.stat("/.probe/panic").await.expect_err("panic");
    assert_eq!(err.kind(), ErrorKind::Panicked);
    assert_eq!(
        err.message(),
        "stat: plugin \"fs\" panicked: stat: probe panic on /.probe/panic"
    );
    assert_eq!(
        err.subject(),
        Some("fs"),
        "the panicking instance is the subject"
    );
    assert_eq!(
        fs.stat("/").await.expect("still works").kind,
        FileKind::Directory
    );

    // A panic inside a stream ends it with a Panicked error.
    let read = fs
        .read_bytes("/.probe/panic-stream")
        .await
        .expect("stream opens");
    let mut chunks = read.chunks;
    assert_eq!(
        chunks.next().await.expect("first").expect("chunk").len(),
        1024
    );
    let err = chunks.next().await.expect("second").expect_err("panic");
    assert_eq!(err.kind(), ErrorKind::Panicked);
    assert!(
        err.message()
            .starts_with("read_bytes: plugin \"fs\" panicked: read_bytes: probe stream panic"),
        "{err}"
    );
    assert!(chunks.next().await.is_none(), "a failed stream is over");
    assert_eq!(
        fs.stat("/").await.expect("still works").kind,
        FileKind::Directory
    );
    world.dispose().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dropping_a_future_cancels_the_call_in_the_plugin() {
    let world = World::new(serde_json::Value::Null).await;
    let fs = world.fs();
    let hung = tokio::time::timeout(Duration::from_millis(50), fs.stat("/.probe/hang")).await;
    assert!(hung.is_err(), "the call hangs");
    // The timeout dropped the FFI future; the plugin dropped its future at
    // once (no polling, no waiting).
    let counters = state(&world).await;
    assert_eq!(counters["hangsStarted"], 1);
    assert_eq!(counters["hangsCancelled"], 1);

    // The same with a spawned call that is aborted.
    let fs2 = fs.clone();
    let task = tokio::spawn(async move { fs2.list("/.probe/hang").await });
    while state(&world).await["hangsStarted"] != 2 {
        tokio::task::yield_now().await;
    }
    task.abort();
    assert!(task.await.expect_err("aborted").is_cancelled());
    assert_eq!(state(&world).await["hangsCancelled"], 2);
    world.dispose().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn streams_are_pulled_and_dropping_one_stops_its_producer() {
    let world = World::new(serde_json::Value::Null).await;
    let fs = world.fs();
    let read = fs.read_bytes("/.probe/stream/64").await.expect("stream");
    assert_eq!(read.size, 64 * 1024);
    assert_eq!(
        state(&world).await["chunksProduced"],
        0,
        "nothing produced before a pull"
    );
    let mut chunks = read.chunks;
    for index in 0..3u8 {
        let chunk = chunks.next().await.expect("chunk").expect("ok");
        assert_eq!(chunk, vec![index; 1024]);
    }
    // Nothing is produced ahead of the consumer, however long it waits.
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert_eq!(state(&world).await["chunksProduced"], 3);
    drop(chunks);
    tokio::time::sleep(Duration::from_millis(20)).await;
    assert_eq!(state(&world).await["chunksProduced"], 3);
    // A full read produces everything, in order.
    let all = collect_bytes(
        fs.read_bytes("/.probe/stream/64")
            .await
            .expect("stream")
            .chunks,
    )
    .await
    .expect("all");
    assert_eq!(all.len(), 64 * 1024);
    assert!(
        all.chunks(1024)
            .enumerate()
            .all(|(index, chunk)| chunk.iter().all(|byte| *byte == index as u8))
    );
    assert_eq!(state(&world).await["chunksProduced"], 3 + 64);
    world.dispose().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_calls_from_many_tasks() {
    let world = World::new(serde_json::Value::Null).await;
    let fs = world.fs();
    let mut tasks = Vec::new();
    for task in 0..32 {
        let fs = fs.clone();
        tasks.push(tokio::spawn(async move {
            for round in 0..20 {
                let path = format!("c/{task}/{round}.txt");
                let content = format!("task {task} round {round}");
                let version = fs
                    .write(&path, Bytes::from(content.clone()), WriteGuard::CreateNew)
                    .await
                    .expect("write");
                let file = fs.read_text(&path).await.expect("read");
                assert_eq!(file.text, content);
                assert_eq!(file.version, version);
            }
        }));
    }
    // Hanging calls in between must not hold anything up.
    let hang = tokio::spawn({
        let fs = fs.clone();
        async move { fs.stat("/.probe/hang").await }
    });
    for task in tasks {
        task.await.expect("task");
    }
    hang.abort();
    let _ = hang.await;
    let entries = fs.list("c").await.expect("list");
    assert_eq!(entries.len(), 32);
    world.dispose().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn calls_after_dispose_are_closed() {
    let world = World::new(serde_json::Value::Null).await;
    let fs = world.fs();
    let pending = fs.read_bytes("/.probe/stream/4").await.expect("stream");
    world.dispose().await;
    let err = fs.stat("/").await.expect_err("disposed");
    assert_eq!(err.kind(), ErrorKind::Closed);
    assert_eq!(err.message(), "stat: plugin instance `fs` was disposed");
    assert_eq!(err.subject(), Some("fs"));
    // A stream opened before dispose is closed too.
    let mut chunks = pending.chunks;
    let err = chunks
        .next()
        .await
        .expect("an answer")
        .expect_err("disposed");
    assert_eq!(err.kind(), ErrorKind::Closed);
    assert!(chunks.next().await.is_none());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_pending_at_dispose_resolves_closed() {
    let world = World::new(serde_json::Value::Null).await;
    let fs = world.fs();
    // This call would never complete on its own: nothing will ever wake it.
    let pending = tokio::spawn({
        let fs = fs.clone();
        async move { fs.stat("/.probe/hang").await }
    });
    while state(&world).await["hangsStarted"] != 1 {
        tokio::task::yield_now().await;
    }
    world.dispose().await;
    let err = tokio::time::timeout(Duration::from_secs(10), pending)
        .await
        .expect("woken by the dispose")
        .expect("task")
        .expect_err("closed");
    assert_eq!(err.kind(), ErrorKind::Closed);
    assert_eq!(err.message(), "stat: plugin instance `fs` was disposed");
}
