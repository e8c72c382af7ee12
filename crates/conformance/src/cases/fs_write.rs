//! `write` (docs/design.md §5.1): atomic publication, guards, mode
//! preservation, parent creation, cancellation before the commit.

use std::time::Duration;

use dsh_plugin_api::fs::{FileKind, WriteGuard};
use dsh_plugin_api::{Bytes, ErrorKind};
use futures::FutureExt;

use crate::check::{
    CaseResult, Failure, ensure, ensure_bytes, ensure_eq, ensure_names, fail, show,
};
use crate::commands::drain;
use crate::context::Cx;
use crate::patterns::binary;
use crate::registry::{CaseInfo, case};

pub(crate) const CASES: &[CaseInfo] = &[
    case!(
        "fs.write.creates_parents",
        Fs,
        [Fs, FsWrite],
        "write creates missing parents, stores exact bytes (empty included) and returns the version stat then reports",
        creates_parents
    ),
    case!(
        "fs.write.replaces_without_debris",
        Fs,
        [Fs, FsWrite],
        "replacing a file stores the new bytes and leaves no staging directory behind",
        replaces_without_debris
    ),
    case!(
        "fs.write.atomic_for_readers",
        Fs,
        [Fs, FsWrite],
        "a reader racing repeated writes only ever sees a whole old or a whole new content",
        atomic_for_readers
    ),
    case!(
        "fs.write.cancel_keeps_old",
        Fs,
        [Fs, FsWrite],
        "a write dropped before its commit leaves the old content intact (never partial) and cleans its staging",
        cancel_keeps_old
    ),
    case!(
        "fs.write.preserves_mode",
        Fs,
        [Fs, FsWrite, Shell],
        "write and edit keep an existing file's permission bits",
        preserves_mode
    ),
    case!(
        "fs.write.guard_create_new",
        Fs,
        [Fs, FsWrite],
        "CreateNew creates a missing file; on an existing one it is AlreadyExists and changes nothing",
        guard_create_new
    ),
    case!(
        "fs.write.guard_if_version",
        Fs,
        [Fs, FsWrite],
        "IfVersion commits at the current version; a stale version is Conflict and changes nothing; a missing file is NotFound",
        guard_if_version
    ),
    case!(
        "fs.write.guard_race",
        Fs,
        [Fs, FsWrite],
        "of 8 concurrent writes guarded by the same version exactly one commits, the rest are Conflict",
        guard_race
    ),
    case!(
        "fs.write.through_symlink",
        Fs,
        [Fs, FsWrite, Shell],
        "writing through a symlink replaces the target's content and keeps the link",
        through_symlink
    ),
    case!(
        "fs.write.errors",
        Fs,
        [Fs, FsWrite],
        "writing onto a directory is IsADirectory, below a file NotADirectory, a path with NUL InvalidInput; nothing changes",
        write_errors
    ),
];

/// Writes through `fs` and checks the returned version.
pub(crate) async fn write(
    cx: &Cx,
    path: &str,
    content: &[u8],
    guard: WriteGuard,
) -> Result<dsh_plugin_api::fs::Version, Failure> {
    cx.ok(
        &format!("write {path}"),
        cx.fs().write(path, Bytes::copy_from_slice(content), guard),
    )
    .await
}

pub(crate) async fn expect_content(
    cx: &Cx,
    path: &str,
    expected: &[u8],
    context: &str,
) -> CaseResult {
    let got = cx.read_all(path).await?;
    ensure_bytes(&format!("content of {path} {context}"), &got, expected)
}

async fn creates_parents(cx: &Cx) -> CaseResult {
    let path = cx.path("a/b/c/file");
    let content = binary(70_000, 5);
    let version = write(cx, &path, &content, WriteGuard::Overwrite).await?;
    expect_content(cx, &path, &content, "after write").await?;
    let stat = cx.ok(&format!("stat {path}"), cx.fs().stat(&path)).await?;
    ensure_eq(
        &format!("write {path}: returned version vs stat"),
        &version,
        &stat.version,
    )?;
    for parent in ["a", "a/b", "a/b/c"] {
        let parent = cx.path(parent);
        let stat = cx
            .ok(&format!("stat {parent}"), cx.fs().stat(&parent))
            .await?;
        ensure_eq(
            &format!("stat {parent}: kind of a created parent"),
            &stat.kind,
            &FileKind::Directory,
        )?;
    }
    let empty = cx.path("a/empty");
    write(cx, &empty, b"", WriteGuard::Overwrite).await?;
    let stat = cx
        .ok(&format!("stat {empty}"), cx.fs().stat(&empty))
        .await?;
    ensure_eq(
        &format!("stat {empty}: size after writing nothing"),
        &stat.size,
        &0,
    )
}

async fn replaces_without_debris(cx: &Cx) -> CaseResult {
    let dir = cx.mkdirs("only").await?;
    let path = format!("{dir}/target");
    write(cx, &path, b"first", WriteGuard::Overwrite).await?;
    let content = binary(200_000, 9);
    write(cx, &path, &content, WriteGuard::Overwrite).await?;
    write(cx, &path, &content[..1000], WriteGuard::Overwrite).await?;
    expect_content(cx, &path, &content[..1000], "after three writes").await?;
    let entries = cx.ok(&format!("list {dir}"), cx.fs().list(&dir)).await?;
    let names: Vec<&str> = entries.iter().map(|e| e.name.as_str()).collect();
    ensure_eq(
        &format!("list {dir} after three writes (no staging debris)"),
        &names,
        &vec!["target"],
    )
}

async fn atomic_for_readers(cx: &Cx) -> CaseResult {
    const LEN: usize = 256 * 1024;
    const WRITES: usize = 24;
    let path = cx.path("raced");
    let a = vec![b'a'; LEN];
    let b = vec![b'b'; LEN];
    write(cx, &path, &a, WriteGuard::Overwrite).await?;
    let done = std::sync::atomic::AtomicBool::new(false);
    let writer = async {
        let result = async {
            for round in 0..WRITES {
                let content = if round % 2 == 0 { &b } else { &a };
                write(cx, &path, content, WriteGuard::Overwrite).await?;
                tokio::task::yield_now().await;
            }
            Ok::<_, Failure>(())
        }
        .await;
        done.store(true, std::sync::atomic::Ordering::SeqCst);
        result
    };
    let reader = async {
        let mut reads = 0usize;
        loop {
            let finished = done.load(std::sync::atomic::Ordering::SeqCst);
            let stream = cx.fs().read_bytes(&path).await;
            let got = match stream {
                Ok(stream) => drain(stream.chunks).await,
                Err(err) => Err(err),
            };
            match got {
                Ok(bytes) => {
                    reads += 1;
                    if bytes != a && bytes != b {
                        let mixed = bytes.iter().position(|&x| x != bytes[0]);
                        fail!(
                            "read_bytes {path} during writes: saw a torn file of {} bytes (expected {LEN} bytes all 'a' or all 'b'; first byte {}, first change at {mixed:?})",
                            bytes.len(),
                            show(&bytes[..bytes.len().min(1)])
                        );
                    }
                }
                Err(err) => fail!(
                    "read_bytes {path} during writes: the file was not readable ({}: {err}); a published file never disappears",
                    err.kind()
                ),
            }
            if finished {
                return Ok::<_, Failure>(reads);
            }
            tokio::task::yield_now().await;
        }
    };
    let (written, read) = cx
        .within(
            "racing writer and reader",
            futures::future::join(writer, reader),
        )
        .await?;
    written?;
    let reads = read?;
    ensure!(
        reads > 0,
        "read_bytes {path}: the reader never completed a read"
    );
    Ok(())
}

async fn cancel_keeps_old(cx: &Cx) -> CaseResult {
    let dir = cx.mkdirs("cancel").await?;
    let path = format!("{dir}/target");
    let old = vec![b'o'; 4096];
    let new = binary(8 << 20, 21);
    // Drop the write at several points: before its first poll, right after
    // it, and after short delays, so some drops land mid-transfer.
    for delay_ms in [None, Some(0), Some(1), Some(5), Some(20)] {
        write(cx, &path, &old, WriteGuard::Overwrite).await?;
        let fut = cx
            .fs()
            .write(&path, Bytes::from(new.clone()), WriteGuard::Overwrite);
        let finished = match delay_ms {
            None => {
                drop(fut);
                false
            }
            Some(ms) => {
                let mut fut = fut.fuse();
                tokio::select! {
                    // Poll the operation first so it always gets started.
                    biased;
                    _ = &mut fut => true,
                    () = tokio::time::sleep(Duration::from_millis(ms)) => false,
                }
            }
        };
        let got = cx.read_all(&path).await?;
        let label = match delay_ms {
            None => "dropped unpolled".to_owned(),
            Some(ms) => format!("dropped after {ms} ms"),
        };
        ensure!(
            got == old || got == new,
            "write {path} {label}: the file holds {} bytes that are neither the old {} nor the new {} bytes (a partial write was published)",
            got.len(),
            old.len(),
            new.len()
        );
        if finished {
            ensure_bytes(&format!("write {path} that completed"), &got, &new)?;
        }
    }
    expect_only_target(cx, &dir, "cancelled writes").await
}

/// Waits until `dir` holds only `target`: staging debris of failed or
/// dropped writes must go away (a provider may finish its rollback after
/// the drop, so it gets 4 s).
pub(crate) async fn expect_only_target(cx: &Cx, dir: &str, after: &str) -> CaseResult {
    let mut names = Vec::new();
    for _ in 0..40 {
        let entries = cx.ok(&format!("list {dir}"), cx.fs().list(dir)).await?;
        names = entries.into_iter().map(|e| e.name).collect::<Vec<_>>();
        if names == ["target"] {
            return Ok(());
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    fail!(
        "list {dir} 4 s after {after}: expected only \"target\", got {names:?} (staging debris left behind)"
    )
}

async fn preserves_mode(cx: &Cx) -> CaseResult {
    let path = cx.put("script", b"#!/bin/sh\necho old\n").await?;
    cx.chmod(&path, 0o751).await?;
    write(cx, &path, b"#!/bin/sh\necho new\n", WriteGuard::Overwrite).await?;
    let stat = cx.ok(&format!("stat {path}"), cx.fs().stat(&path)).await?;
    ensure!(
        stat.mode == 0o751,
        "write {path}: mode was 751 before the write, {:o} after",
        stat.mode
    );
    cx.chmod(&path, 0o604).await?;
    let edits = vec![dsh_plugin_api::fs::Edit {
        old: "new".into(),
        new: "edited".into(),
        replace_all: false,
    }];
    cx.ok(
        &format!("edit {path}"),
        cx.fs().edit(&path, edits, WriteGuard::Overwrite),
    )
    .await?;
    let stat = cx.ok(&format!("stat {path}"), cx.fs().stat(&path)).await?;
    ensure!(
        stat.mode == 0o604,
        "edit {path}: mode was 604 before the edit, {:o} after",
        stat.mode
    );
    Ok(())
}

async fn guard_create_new(cx: &Cx) -> CaseResult {
    let path = cx.path("fresh");
    let version = write(cx, &path, b"one", WriteGuard::CreateNew).await?;
    let err = cx
        .err(
            &format!("write {path} with CreateNew over an existing file"),
            ErrorKind::AlreadyExists,
            cx.fs()
                .write(&path, Bytes::from_static(b"two"), WriteGuard::CreateNew),
        )
        .await?;
    ensure_names(&format!("write {path} with CreateNew"), &err, "fresh")?;
    expect_content(cx, &path, b"one", "after a refused CreateNew").await?;
    let stat = cx.ok(&format!("stat {path}"), cx.fs().stat(&path)).await?;
    ensure_eq(
        &format!("stat {path}: version after a refused CreateNew"),
        &stat.version,
        &version,
    )
}

async fn guard_if_version(cx: &Cx) -> CaseResult {
    let path = cx.path("guarded");
    let v1 = write(cx, &path, b"one", WriteGuard::Overwrite).await?;
    let v2 = write(cx, &path, b"two", WriteGuard::IfVersion(v1.clone())).await?;
    ensure!(
        v2 != v1,
        "write {path}: a guarded write returned the version it was guarded by"
    );
    let err = cx
        .err(
            &format!("write {path} guarded by a stale version"),
            ErrorKind::Conflict,
            cx.fs().write(
                &path,
                Bytes::from_static(b"three"),
                WriteGuard::IfVersion(v1.clone()),
            ),
        )
        .await?;
    ensure_names(
        &format!("write {path} guarded by a stale version"),
        &err,
        "guarded",
    )?;
    expect_content(cx, &path, b"two", "after a stale-version write").await?;
    let stat = cx.ok(&format!("stat {path}"), cx.fs().stat(&path)).await?;
    ensure_eq(
        &format!("stat {path}: version after a refused write"),
        &stat.version,
        &v2,
    )?;
    let missing = cx.path("missing");
    cx.err(
        &format!("write {missing} guarded by a version, file missing"),
        ErrorKind::NotFound,
        cx.fs().write(
            &missing,
            Bytes::from_static(b"x"),
            WriteGuard::IfVersion(v2),
        ),
    )
    .await?;
    cx.err(
        &format!("stat {missing} after a refused guarded write"),
        ErrorKind::NotFound,
        cx.fs().stat(&missing),
    )
    .await?;
    Ok(())
}

async fn guard_race(cx: &Cx) -> CaseResult {
    const WRITERS: usize = 8;
    let path = cx.path("contended");
    let v0 = write(cx, &path, b"base", WriteGuard::Overwrite).await?;
    let contents: Vec<Vec<u8>> = (0..WRITERS)
        .map(|i| format!("writer {i}").into_bytes())
        .collect();
    let attempts = contents.iter().map(|content| {
        cx.fs().write(
            &path,
            Bytes::from(content.clone()),
            WriteGuard::IfVersion(v0.clone()),
        )
    });
    let results = cx
        .within(
            "8 concurrent guarded writes",
            futures::future::join_all(attempts),
        )
        .await?;
    let mut winners = Vec::new();
    for (i, result) in results.iter().enumerate() {
        match result {
            Ok(_) => winners.push(i),
            Err(err) if err.kind() == ErrorKind::Conflict => {}
            Err(err) => fail!(
                "write {path} #{i} guarded by the same version: expected success or conflict, got {}: {err}",
                err.kind()
            ),
        }
    }
    ensure!(
        winners.len() == 1,
        "write {path}: {} of {WRITERS} writes guarded by one version committed (expected exactly 1): writers {winners:?}",
        winners.len()
    );
    expect_content(cx, &path, &contents[winners[0]], "after the race").await
}

async fn through_symlink(cx: &Cx) -> CaseResult {
    let real = cx.put("real", b"old").await?;
    let link = cx.symlink("real", "link").await?;
    write(cx, &link, b"new through link", WriteGuard::Overwrite).await?;
    let lstat = cx
        .ok(&format!("lstat {link}"), cx.fs().lstat(&link))
        .await?;
    ensure_eq(
        &format!("lstat {link} after writing through it"),
        &lstat.kind,
        &FileKind::Symlink,
    )?;
    expect_content(
        cx,
        &real,
        b"new through link",
        "(the link's target) after writing through the link",
    )
    .await
}

async fn write_errors(cx: &Cx) -> CaseResult {
    let dir = cx.mkdirs("a-directory").await?;
    let err = cx
        .err(
            &format!("write {dir} (a directory)"),
            ErrorKind::IsADirectory,
            cx.fs()
                .write(&dir, Bytes::from_static(b"x"), WriteGuard::Overwrite),
        )
        .await?;
    ensure_names(&format!("write {dir}"), &err, "a-directory")?;
    let stat = cx.ok(&format!("stat {dir}"), cx.fs().stat(&dir)).await?;
    ensure_eq(
        &format!("stat {dir} after a refused write"),
        &stat.kind,
        &FileKind::Directory,
    )?;
    let file = cx.put("file", b"keep").await?;
    let below = format!("{file}/child");
    cx.err(
        &format!("write {below} (below a regular file)"),
        ErrorKind::NotADirectory,
        cx.fs()
            .write(&below, Bytes::from_static(b"x"), WriteGuard::Overwrite),
    )
    .await?;
    expect_content(cx, &file, b"keep", "after a refused write below it").await?;
    let nul = cx.path("nul\0name");
    cx.err(
        "write of a path with NUL",
        ErrorKind::InvalidInput,
        cx.fs()
            .write(&nul, Bytes::from_static(b"x"), WriteGuard::Overwrite),
    )
    .await?;
    let entries = cx
        .ok(&format!("list {}", cx.dir), cx.fs().list(&cx.dir))
        .await?;
    let names: Vec<&str> = entries.iter().map(|e| e.name.as_str()).collect();
    ensure_eq(
        &format!("list {} after refused writes", cx.dir),
        &names,
        &vec!["a-directory", "file"],
    )
}
