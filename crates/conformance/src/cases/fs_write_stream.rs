//! `write_stream` (docs/design.md §5.1): `write`'s contract for content
//! that arrives as a stream — exact bytes from uneven chunks, a failing
//! source publishes nothing, guards refuse before anything is pulled, and a
//! drop mid-stream keeps the old content.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use dsh_plugin_api::fs::{Version, WriteGuard};
use dsh_plugin_api::stream::ByteStream;
use dsh_plugin_api::{Bytes, Error, ErrorKind};
use futures::{FutureExt, StreamExt};

use super::fs_write::{expect_content, expect_only_target, write};
use crate::check::{CaseResult, Failure, ensure, ensure_eq, fail};
use crate::context::Cx;
use crate::patterns::binary;
use crate::registry::{CaseInfo, case};

pub(crate) const CASES: &[CaseInfo] = &[
    case!(
        "fs.write_stream.stores_chunks",
        Fs,
        [Fs, FsWrite],
        "write_stream stores exactly the bytes of uneven chunks (and an empty stream as an empty file), returns the version stat reports, and leaves no staging",
        stores_chunks
    ),
    case!(
        "fs.write_stream.source_error_keeps_old",
        Fs,
        [Fs, FsWrite],
        "a stream that fails after some chunks fails the write with the stream's error; the old content stays and the staging goes",
        source_error_keeps_old
    ),
    case!(
        "fs.write_stream.guard_before_pull",
        Fs,
        [Fs, FsWrite],
        "a CreateNew or stale IfVersion guard refuses the write before any chunk is pulled; a current IfVersion commits",
        guard_before_pull
    ),
    case!(
        "fs.write_stream.cancel_keeps_old",
        Fs,
        [Fs, FsWrite],
        "a write_stream dropped while waiting for its next chunk leaves the old content and no staging",
        cancel_keeps_old
    ),
];

/// The message of the source error the cases inject.
const SOURCE_FAILED: &str = "the content source failed on purpose";

/// A stream of `chunks` that counts how many were pulled, then ends as
/// `tail` says.
fn counted(chunks: Vec<Bytes>, tail: Tail, pulled: &Arc<AtomicUsize>) -> ByteStream {
    let pulled = Arc::clone(pulled);
    let items = futures::stream::iter(chunks).map(move |chunk| {
        pulled.fetch_add(1, Ordering::SeqCst);
        Ok(chunk)
    });
    match tail {
        Tail::End => Box::pin(items),
        Tail::Fail => Box::pin(items.chain(futures::stream::once(async {
            Err(Error::new(ErrorKind::Io, SOURCE_FAILED))
        }))),
        Tail::Hang => Box::pin(items.chain(futures::stream::pending())),
    }
}

/// How a [`counted`] stream ends after its chunks.
#[derive(Clone, Copy)]
enum Tail {
    End,
    Fail,
    Hang,
}

/// `content` cut into chunks of uneven sizes (1 byte up to 1 MiB).
fn uneven(content: &[u8]) -> Vec<Bytes> {
    const SIZES: [usize; 6] = [1, 4095, 65_536, 7, 1 << 20, 300_001];
    let content = Bytes::copy_from_slice(content);
    let mut chunks = Vec::new();
    let mut start = 0;
    for size in SIZES.iter().cycle() {
        if start == content.len() {
            break;
        }
        let end = (start + size).min(content.len());
        chunks.push(content.slice(start..end));
        start = end;
    }
    chunks
}

async fn write_stream(
    cx: &Cx,
    path: &str,
    chunks: ByteStream,
    guard: WriteGuard,
) -> Result<Version, Failure> {
    cx.ok(
        &format!("write_stream {path}"),
        cx.fs().write_stream(path, chunks, guard),
    )
    .await
}

async fn stores_chunks(cx: &Cx) -> CaseResult {
    let dir = cx.mkdirs("streamed").await?;
    let path = format!("{dir}/target");
    write(cx, &path, b"old content", WriteGuard::Overwrite).await?;
    let content = binary(6 << 20, 31);
    let pulled = Arc::new(AtomicUsize::new(0));
    let chunks = uneven(&content);
    let count = chunks.len();
    let stream = counted(chunks, Tail::End, &pulled);
    let version = write_stream(cx, &path, stream, WriteGuard::Overwrite).await?;
    ensure_eq(
        &format!("write_stream {path}: chunks pulled"),
        &pulled.load(Ordering::SeqCst),
        &count,
    )?;
    expect_content(cx, &path, &content, "after write_stream").await?;
    let stat = cx.ok(&format!("stat {path}"), cx.fs().stat(&path)).await?;
    ensure_eq(
        &format!("write_stream {path}: returned version vs stat"),
        &version,
        &stat.version,
    )?;
    let empty = Box::pin(futures::stream::empty());
    write_stream(cx, &path, empty, WriteGuard::Overwrite).await?;
    expect_content(cx, &path, b"", "after an empty write_stream").await?;
    // Missing parents are created, as `write` creates them.
    let nested = format!("{dir}/a/b/file");
    let stream = counted(uneven(&content[..70_000]), Tail::End, &pulled);
    write_stream(cx, &nested, stream, WriteGuard::CreateNew).await?;
    expect_content(cx, &nested, &content[..70_000], "after write_stream").await?;
    cx.ok(
        &format!("remove {dir}/a"),
        cx.fs().remove(&format!("{dir}/a")),
    )
    .await?;
    expect_only_target(cx, &dir, "streamed writes").await
}

async fn source_error_keeps_old(cx: &Cx) -> CaseResult {
    let dir = cx.mkdirs("failing").await?;
    let path = format!("{dir}/target");
    let old = binary(10_000, 3);
    write(cx, &path, &old, WriteGuard::Overwrite).await?;
    let pulled = Arc::new(AtomicUsize::new(0));
    let stream = counted(uneven(&binary(2 << 20, 4)), Tail::Fail, &pulled);
    let err = cx
        .err(
            &format!("write_stream {path} from a failing source"),
            ErrorKind::Io,
            cx.fs().write_stream(&path, stream, WriteGuard::Overwrite),
        )
        .await?;
    ensure!(
        err.to_string().contains(SOURCE_FAILED),
        "write_stream {path} from a failing source: the error does not carry the source's message {SOURCE_FAILED:?}: {err}"
    );
    expect_content(cx, &path, &old, "after a failed write_stream").await?;
    expect_only_target(cx, &dir, "a failed write_stream").await
}

async fn guard_before_pull(cx: &Cx) -> CaseResult {
    let path = cx.path("guarded-stream");
    let version = write(cx, &path, b"one", WriteGuard::Overwrite).await?;
    let pulled = Arc::new(AtomicUsize::new(0));
    let refusals = [
        (WriteGuard::CreateNew, ErrorKind::AlreadyExists, "CreateNew"),
        (
            WriteGuard::IfVersion(Version("stale".into())),
            ErrorKind::Conflict,
            "a stale IfVersion",
        ),
    ];
    for (guard, kind, label) in refusals {
        // A stream that never ends: a provider that pulled before checking
        // the guard would wait forever (and fail the call limit).
        let stream = counted(vec![Bytes::from_static(b"two")], Tail::Hang, &pulled);
        cx.err(
            &format!("write_stream {path} with {label}"),
            kind,
            cx.fs().write_stream(&path, stream, guard),
        )
        .await?;
        ensure_eq(
            &format!("write_stream {path} with {label}: chunks pulled before the refusal"),
            &pulled.load(Ordering::SeqCst),
            &0,
        )?;
    }
    expect_content(cx, &path, b"one", "after refused write_streams").await?;
    let stream = counted(vec![Bytes::from_static(b"two")], Tail::End, &pulled);
    write_stream(cx, &path, stream, WriteGuard::IfVersion(version)).await?;
    expect_content(cx, &path, b"two", "after a current IfVersion").await
}

async fn cancel_keeps_old(cx: &Cx) -> CaseResult {
    let dir = cx.mkdirs("cancel-stream").await?;
    let path = format!("{dir}/target");
    let old = vec![b'o'; 4096];
    write(cx, &path, &old, WriteGuard::Overwrite).await?;
    let pulled = Arc::new(AtomicUsize::new(0));
    let stream = counted(uneven(&binary(1 << 20, 8)), Tail::Hang, &pulled);
    let mut fut = cx
        .fs()
        .write_stream(&path, stream, WriteGuard::Overwrite)
        .fuse();
    // Drive the write until it has pulled a chunk, then a moment more (to
    // stage it), while it waits for a chunk that never comes.
    let outcome = cx
        .within("write_stream waiting for its next chunk", async {
            while pulled.load(Ordering::SeqCst) == 0 {
                futures::select_biased! {
                    result = fut => return Some(result),
                    () = tokio::time::sleep(Duration::from_millis(20)).fuse() => {}
                }
            }
            tokio::time::timeout(Duration::from_millis(300), &mut fut)
                .await
                .ok()
        })
        .await?;
    if let Some(result) = outcome {
        fail!("write_stream {path}: finished ({result:?}) although its stream never ended");
    }
    drop(fut);
    expect_content(cx, &path, &old, "after a dropped write_stream").await?;
    expect_only_target(cx, &dir, "a dropped write_stream").await
}
