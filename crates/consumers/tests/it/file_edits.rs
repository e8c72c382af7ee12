//! `edit_file` with `edits`: several replacements in one or more files as
//! one patch, all or nothing, over the real local `fs` provider — and over
//! it decorated with a hook before each write, to change or fail the world
//! at a chosen moment of a commit.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use async_trait::async_trait;
use dsh_consumers::Outcome;
use dsh_consumers::files::*;
use dsh_plugin_api::decorate::{DecoratedFs, FsCall, FsHooks};
use dsh_plugin_api::fs::{FsProvider, WriteGuard};
use dsh_plugin_api::{Bytes, Error, ErrorKind, Result};
use futures::future::BoxFuture;

use crate::files::{World, assert_error, edit};

/// One replacement of `edits`.
fn hunk(path: Option<&str>, old: &str, new: &str) -> FileEdit {
    FileEdit {
        path: path.map(str::to_owned),
        old_string: old.to_owned(),
        new_string: new.to_owned(),
        expected_replacements: None,
        if_version: None,
    }
}

/// A request of `edits` only.
fn edits(edits: Vec<FileEdit>) -> EditFileRequest {
    EditFileRequest {
        path: None,
        old_string: None,
        new_string: None,
        edits: Some(edits),
        ..edit("", "", "")
    }
}

#[tokio::test]
async fn several_edits_across_files_apply_as_one_patch_with_one_diff() {
    let world = World::new();
    world.put("a.txt", "one\ntwo\nthree\n");
    world.put("src/b.txt", "alpha\nbeta\n");
    let request = EditFileRequest {
        path: Some("a.txt".to_owned()),
        ..edits(vec![
            // Each edit matches the file as it is: "2" below is not the "two" this one writes.
            hunk(None, "two", "2"),
            hunk(Some("src/b.txt"), "beta", "BETA"),
            hunk(Some("./a.txt"), "one\n2", "never: a.txt has no 2 yet"),
        ])
    };
    let err = world.files.edit_file(request.clone()).await.unwrap_err();
    assert_error(&err, ErrorKind::InvalidInput, "edit_file", "edit 3: ");
    assert_eq!(err.subject(), Some("a.txt"), "{err}");
    assert_eq!(world.get("src/b.txt"), b"alpha\nbeta\n", "nothing written");

    let mut request = request;
    request.edits.as_mut().expect("edits")[2] = hunk(Some("./a.txt"), "three", "3");
    let dry = world
        .files
        .edit_file(EditFileRequest {
            dry_run: Some(true),
            ..request.clone()
        })
        .await
        .expect("dry run");
    assert_eq!(
        world.get("a.txt"),
        b"one\ntwo\nthree\n",
        "a dry run writes nothing"
    );
    let result = world.files.edit_file(request).await.expect("edit");
    assert_eq!(world.get("a.txt"), b"one\n2\n3\n");
    assert_eq!(world.get("src/b.txt"), b"alpha\nBETA\n");
    assert_eq!(result.replacements, 3);
    assert_eq!(result.diff, dry.diff, "the dry run showed what was written");
    assert_eq!(
        result.diff,
        "--- a.txt\n+++ a.txt\n@@ -1,3 +1,3 @@\n one\n-two\n-three\n+2\n+3\n\
         --- src/b.txt\n+++ src/b.txt\n@@ -1,2 +1,2 @@\n alpha\n-beta\n+BETA\n"
    );
    // a.txt and ./a.txt are one file, named as first given.
    let files: Vec<(&str, u64)> = result
        .files
        .iter()
        .map(|file| (file.path.as_str(), file.replacements))
        .collect();
    assert_eq!(files, [("a.txt", 2), ("src/b.txt", 1)]);
    for (file, planned) in result.files.iter().zip(&dry.files) {
        assert_eq!(file.version, Some(world.version(&file.path).await));
        assert_eq!(file.base_version, planned.base_version);
        assert_eq!(planned.version, None);
    }
    assert!(
        result
            .text()
            .starts_with("edited a.txt: 2 replacement(s) (version "),
        "{}",
        result.text()
    );
    assert!(result.text().contains(", src/b.txt: 1 replacement(s)"));
}

#[tokio::test]
async fn a_refused_edit_names_its_file_and_edit_and_nothing_is_written() {
    let world = World::new();
    world.put("a.txt", "x = 1\ny = 2\n");
    world.put("b.txt", "z = 3\nz = 3\n");
    let before = world.version("a.txt").await;
    let files = &world.files;
    let unchanged = || async {
        assert_eq!(world.get("a.txt"), b"x = 1\ny = 2\n");
        assert_eq!(world.get("b.txt"), b"z = 3\nz = 3\n");
        assert_eq!(world.version("a.txt").await, before, "not even rewritten");
    };

    let err = files
        .edit_file(edits(vec![
            hunk(Some("a.txt"), "x = 1", "x = 10"),
            hunk(Some("b.txt"), "z = 3", "z = 30"),
        ]))
        .await
        .unwrap_err();
    assert_error(
        &err,
        ErrorKind::InvalidInput,
        "edit_file",
        "edit 2: old_string matches 2 times",
    );
    assert_eq!(err.subject(), Some("b.txt"));
    unchanged().await;

    let err = files
        .edit_file(edits(vec![
            hunk(Some("a.txt"), "x = 1\ny", "x = 1\nw"),
            hunk(Some("a.txt"), "1\ny = 2", "one"),
        ]))
        .await
        .unwrap_err();
    assert_error(
        &err,
        ErrorKind::InvalidInput,
        "edit_file",
        "edit 1 and edit 2: ",
    );
    assert!(err.message().contains("overlap"), "{err}");
    assert_eq!(err.subject(), Some("a.txt"));
    unchanged().await;

    let stale = files
        .edit_file(edits(vec![
            hunk(Some("a.txt"), "x = 1", "x = 10"),
            FileEdit {
                if_version: Some("stale".to_owned()),
                ..hunk(Some("b.txt"), "z = 3\nz", "z = 30\nz")
            },
        ]))
        .await
        .unwrap_err();
    assert_error(&stale, ErrorKind::Conflict, "edit_file", "read it again");
    assert_eq!(stale.subject(), Some("b.txt"));
    unchanged().await;

    let counted = files
        .edit_file(edits(vec![FileEdit {
            expected_replacements: Some(3),
            ..hunk(Some("b.txt"), "z = 3", "z")
        }]))
        .await
        .unwrap_err();
    assert_error(
        &counted,
        ErrorKind::InvalidInput,
        "edit_file",
        "edit 1: old_string matches 2 times, not the 3",
    );

    let missing = files
        .edit_file(edits(vec![
            hunk(Some("a.txt"), "x", "X"),
            hunk(Some("gone.txt"), "a", "b"),
        ]))
        .await
        .unwrap_err();
    assert_eq!(missing.kind(), ErrorKind::NotFound, "{missing}");
    assert!(missing.to_string().contains("gone.txt"), "{missing}");
    unchanged().await;

    // Requests that could never apply.
    for (request, needle) in [
        (edits(vec![]), "edits has 0 entries"),
        (edits(vec![hunk(None, "x", "y")]), "edit 1: no path"),
        (
            edits(vec![hunk(Some("a.txt"), "x", "x")]),
            "edit 1: old_string and new_string are the same",
        ),
        (
            EditFileRequest {
                old_string: Some("x".to_owned()),
                ..edits(vec![hunk(Some("a.txt"), "x", "y")])
            },
            "go in each edit",
        ),
        (
            EditFileRequest {
                if_version: Some(before.clone()),
                ..edits(vec![hunk(Some("a.txt"), "x", "y")])
            },
            "give each edit its if_version",
        ),
        (
            EditFileRequest {
                path: Some("a.txt".to_owned()),
                if_version: Some(before.clone()),
                ..edits(vec![
                    hunk(None, "x", "X"),
                    FileEdit {
                        if_version: Some("other".to_owned()),
                        ..hunk(Some("./a.txt"), "y", "Y")
                    },
                ])
            },
            "edit 2: if_version other differs",
        ),
        (
            EditFileRequest {
                old_string: None,
                ..edit("a.txt", "", "x")
            },
            "give path, old_string and new_string",
        ),
    ] {
        let err = files.edit_file(request).await.unwrap_err();
        assert_error(&err, ErrorKind::InvalidInput, "edit_file", needle);
        assert_ne!(err.subject(), Some(""), "a subject, or none: {err}");
    }
    unchanged().await;
}

/// What the hook does before write number `n` (0-based) of `path`: it may
/// change the world (another writer) or refuse the write (the world
/// refusing it).
pub type Hook = Box<dyn Fn(usize, &str) -> BoxFuture<'static, Result<()>> + Send + Sync>;

/// A decorator of the local provider running a [`Hook`] before each `write`.
struct BeforeWrite {
    writes: AtomicUsize,
    hook: Hook,
}

#[async_trait]
impl FsHooks for BeforeWrite {
    async fn on_write(&self, call: FsCall<'_>) -> Result<()> {
        if call.operation != "write" {
            return Ok(());
        }
        let n = self.writes.fetch_add(1, Ordering::SeqCst);
        (self.hook)(n, call.path).await
    }
}

/// `fs` with `hook` before each of its writes.
pub fn before_write(fs: Arc<dyn FsProvider>, hook: Hook) -> Arc<dyn FsProvider> {
    let hooks = BeforeWrite {
        writes: AtomicUsize::new(0),
        hook,
    };
    Arc::new(DecoratedFs::new(fs, hooks))
}

/// The file tools of `world` with `hook` before each write.
fn hooked(world: &World, hook: Hook) -> Files {
    Files::new(before_write(world.fs.clone(), hook))
}

/// Three files of two lines each, and a request editing each one.
fn three_files(world: &World) -> EditFileRequest {
    for name in ["a", "b", "c"] {
        world.put(&format!("{name}.txt"), format!("{name}1\n{name}2\n"));
    }
    edits(vec![
        hunk(Some("a.txt"), "a1", "A1"),
        hunk(Some("b.txt"), "b2", "B2"),
        hunk(Some("c.txt"), "c1", "C1"),
    ])
}

#[tokio::test]
async fn a_failed_write_restores_the_files_written_before_it() {
    let world = World::new();
    let request = three_files(&world);
    // The third write (c.txt) is refused.
    let files = hooked(
        &world,
        Box::new(|n, path| {
            let refused = (n == 2).then(|| {
                Error::new(ErrorKind::PermissionDenied, "write: refused by the test")
                    .with_subject(path)
            });
            Box::pin(async move { refused.map_or(Ok(()), Err) })
        }),
    );
    let err = files.edit_file(request).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::PermissionDenied, "{err}");
    assert_eq!(err.subject(), Some("c.txt"), "{err}");
    let message = err.to_string();
    assert!(message.contains("refused by the test"), "{message}");
    assert!(message.contains("no file is changed"), "{message}");
    assert!(message.contains("a.txt restored (version "), "{message}");
    assert!(message.contains("b.txt restored (version "), "{message}");
    for name in ["a", "b", "c"] {
        assert_eq!(
            world.get(&format!("{name}.txt")),
            format!("{name}1\n{name}2\n").into_bytes()
        );
    }
}

#[tokio::test]
async fn a_file_changed_after_this_call_wrote_it_is_not_restored_and_the_error_says_so() {
    let world = World::new();
    let request = three_files(&world);
    let a = world.fs.clone();
    // After a.txt is written, someone else writes it; then b.txt's write fails.
    let files = hooked(
        &world,
        Box::new(move |n, path| {
            let a = Arc::clone(&a);
            let path = path.to_owned();
            Box::pin(async move {
                if n == 1 {
                    a.write("a.txt", Bytes::from("theirs\n"), WriteGuard::Overwrite)
                        .await?;
                    return Err(Error::new(ErrorKind::Io, "write: disk full").with_subject(path));
                }
                Ok(())
            })
        }),
    );
    let err = files.edit_file(request).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Io, "{err}");
    assert_eq!(err.subject(), Some("b.txt"), "{err}");
    let message = err.to_string();
    assert!(message.contains("some files are changed"), "{message}");
    assert!(message.contains("a.txt NOT restored ("), "{message}");
    assert!(message.contains("it keeps this call's edit"), "{message}");
    assert_eq!(
        world.get("a.txt"),
        b"theirs\n",
        "the other writer's text is kept"
    );
    assert_eq!(world.get("b.txt"), b"b1\nb2\n");
    assert_eq!(world.get("c.txt"), b"c1\nc2\n");
}

#[tokio::test]
async fn a_file_changed_while_committing_is_planned_again_unless_its_version_was_given() {
    // c.txt changes between planning and its write: everything written is restored, and the
    // whole patch is planned again on what the files hold then.
    let world = World::new();
    let request = three_files(&world);
    let fs = world.fs.clone();
    let files = hooked(
        &world,
        Box::new(move |n, _| {
            let fs = Arc::clone(&fs);
            Box::pin(async move {
                if n == 2 {
                    fs.write("c.txt", Bytes::from("c1\nc2\nc3\n"), WriteGuard::Overwrite)
                        .await?;
                }
                Ok(())
            })
        }),
    );
    let result = files.edit_file(request).await.expect("planned again");
    assert_eq!(world.get("a.txt"), b"A1\na2\n");
    assert_eq!(world.get("b.txt"), b"b1\nB2\n");
    assert_eq!(
        world.get("c.txt"),
        b"C1\nc2\nc3\n",
        "the other change is kept"
    );
    assert_eq!(result.files[2].version, Some(world.version("c.txt").await));

    // With c.txt's version given, the change is a Conflict and a.txt and b.txt are put back.
    let world = World::new();
    let mut request = three_files(&world);
    request.edits.as_mut().expect("edits")[2].if_version = Some(world.version("c.txt").await);
    let fs = world.fs.clone();
    let files = hooked(
        &world,
        Box::new(move |n, _| {
            let fs = Arc::clone(&fs);
            Box::pin(async move {
                if n == 2 {
                    fs.write("c.txt", Bytes::from("c1\nc2\nc3\n"), WriteGuard::Overwrite)
                        .await?;
                }
                Ok(())
            })
        }),
    );
    let err = files.edit_file(request).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Conflict, "{err}");
    assert!(err.to_string().contains("no file is changed"), "{err}");
    assert_eq!(world.get("a.txt"), b"a1\na2\n");
    assert_eq!(world.get("b.txt"), b"b1\nb2\n");
    assert_eq!(world.get("c.txt"), b"c1\nc2\nc3\n");
}

#[tokio::test]
async fn a_call_dropped_while_writing_still_writes_every_file() {
    let world = World::new();
    let request = three_files(&world);
    let (started_tx, started_rx) = tokio::sync::oneshot::channel::<()>();
    let started = std::sync::Mutex::new(Some(started_tx));
    let gate = Arc::new(tokio::sync::Notify::new());
    let opened = Arc::clone(&gate);
    // The second write waits at the gate; the caller drops the call meanwhile.
    let files = hooked(
        &world,
        Box::new(move |n, _| {
            let gate = Arc::clone(&opened);
            if n == 1
                && let Some(started) = started.lock().expect("lock").take()
            {
                let _ = started.send(());
            }
            Box::pin(async move {
                if n == 1 {
                    gate.notified().await;
                }
                Ok(())
            })
        }),
    );
    let call = files.edit_file(request);
    tokio::select! {
        _ = call => panic!("the call ended while its second write was held"),
        _ = started_rx => {}
    }
    // The call's future is gone; its writes go on once the gate opens.
    gate.notify_one();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while world.get("c.txt") != b"C1\nc2\n" && std::time::Instant::now() < deadline {
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    assert_eq!(world.get("a.txt"), b"A1\na2\n");
    assert_eq!(world.get("b.txt"), b"b1\nB2\n");
    assert_eq!(world.get("c.txt"), b"C1\nc2\n");
}
