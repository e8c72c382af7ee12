//! Faults: the sandbox killed from the control plane while operations run
//! — through the owner (dsh's path) and directly — makes them fail
//! promptly with `Unavailable`: a streamed read mid-download, a write
//! mid-upload, metadata calls and internal commands alike; nothing hangs.
//! And cancellation before the commit keeps the old content and leaves no
//! staging directory.
//!
//! Needs root and the built server (`cargo build -p e2b-local`).

use std::sync::Arc;
use std::time::{Duration, Instant};

use dsh_fs_e2b::STAGING_PREFIX;
use dsh_plugin_api::fs::{FsProvider, WriteGuard};
use dsh_plugin_api::stream::collect_bytes;
use dsh_plugin_api::{Bytes, ErrorKind};
use futures::StreamExt;

use crate::support::{CWD, Env};

/// How long "promptly" may take on a loaded CI machine.
const PROMPTLY: Duration = Duration::from_secs(10);

/// Awaits `future`, which must end within [`PROMPTLY`].
async fn promptly<T>(what: &str, future: impl std::future::Future<Output = T>) -> T {
    tokio::time::timeout(PROMPTLY, future)
        .await
        .unwrap_or_else(|_| panic!("{what} did not end within {PROMPTLY:?}"))
}

/// A file of `mib` MiB made in the sandbox (fast: no transfer).
async fn big_file(env: &Env, name: &str, mib: usize) -> String {
    let path = format!("{CWD}/{name}");
    env.sh(
        r#"head -c "$1" /dev/zero > "$2""#,
        &[&(mib << 20).to_string(), &path],
    )
    .await;
    path
}

async fn killed_mid_read(env: &Env, fs: Arc<dyn FsProvider>) {
    let path = big_file(env, "huge-read", 1024).await;
    let mut chunks = fs.read_bytes(&path).await.expect("open").chunks;
    let first = chunks.next().await.expect("a first chunk").expect("data");
    assert!(!first.is_empty());
    env.sandbox.kill().await.expect("kill the sandbox");
    let started = Instant::now();
    let outcome = promptly("a read of a killed sandbox", async {
        let mut read = first.len() as u64;
        while let Some(chunk) = chunks.next().await {
            match chunk {
                Ok(chunk) => read += chunk.len() as u64,
                Err(err) => return Err(err),
            }
        }
        Ok(read)
    })
    .await;
    let err = outcome.expect_err("1 GiB cannot all have arrived before the kill");
    assert_eq!(err.kind(), ErrorKind::Unavailable, "{err}");
    eprintln!("read ended {:?} after the kill: {err}", started.elapsed());
    // Everything after is Unavailable at once, internal commands included.
    for (what, result) in [
        ("stat", promptly("stat", fs.stat(&path)).await.map(drop)),
        ("list", promptly("list", fs.list(CWD)).await.map(drop)),
        (
            "resolve",
            promptly("resolve", fs.resolve("x", None)).await.map(drop),
        ),
        (
            "write",
            promptly(
                "write",
                fs.write(&path, Bytes::from_static(b"x"), WriteGuard::Overwrite),
            )
            .await
            .map(drop),
        ),
        (
            "remove",
            promptly("remove", fs.remove(&path)).await.map(drop),
        ),
    ] {
        let err = result.expect_err(what);
        assert_eq!(err.kind(), ErrorKind::Unavailable, "{what}: {err}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_read_of_a_killed_sandbox_fails_promptly_through_the_owner() {
    let env = Env::start().await;
    killed_mid_read(&env, env.through_owner()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_read_of_a_killed_sandbox_fails_promptly_directly() {
    let env = Env::start().await;
    killed_mid_read(&env, Arc::new(env.direct())).await;
}

async fn killed_mid_write(env: &Env, fs: Arc<dyn FsProvider>) {
    let path = format!("{CWD}/huge-write");
    let content = vec![b'w'; 1 << 30];
    let write = fs.write(&path, Bytes::from(content), WriteGuard::Overwrite);
    let kill = async {
        // Let the upload get going, then pull the plug.
        tokio::time::sleep(Duration::from_millis(150)).await;
        env.sandbox.kill().await.expect("kill the sandbox");
        Instant::now()
    };
    let (written, killed_at) = promptly("a write to a killed sandbox", async {
        tokio::join!(write, kill)
    })
    .await;
    let err = written.expect_err("a 1 GiB write cannot finish before the kill");
    assert_eq!(err.kind(), ErrorKind::Unavailable, "{err}");
    eprintln!(
        "write ended {:?} after the kill: {err}",
        killed_at.elapsed()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_to_a_killed_sandbox_fails_promptly_through_the_owner() {
    let env = Env::start().await;
    killed_mid_write(&env, env.through_owner()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_to_a_killed_sandbox_fails_promptly_directly() {
    let env = Env::start().await;
    killed_mid_write(&env, Arc::new(env.direct())).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_dropped_before_its_commit_keeps_the_old_file_and_no_staging() {
    let env = Env::start().await;
    let fs = env.through_owner();
    let path = format!("{CWD}/kept");
    fs.write(
        &path,
        Bytes::from_static(b"old content"),
        WriteGuard::Overwrite,
    )
    .await
    .unwrap();
    let before = fs.stat(&path).await.unwrap();
    // Dropped while preparing, while uploading, and everywhere between.
    for delay_ms in [0, 2, 5, 10, 20, 50, 100] {
        let write = fs.write(
            &path,
            Bytes::from(vec![b'n'; 256 << 20]),
            WriteGuard::Overwrite,
        );
        let finished = tokio::select! {
            biased;
            _ = write => true,
            () = tokio::time::sleep(Duration::from_millis(delay_ms)) => false,
        };
        assert!(!finished, "a 256 MiB write finished within {delay_ms} ms");
        let content = collect_bytes(fs.read_bytes(&path).await.unwrap().chunks)
            .await
            .unwrap();
        assert_eq!(content, b"old content", "dropped after {delay_ms} ms");
    }
    assert!(
        fs.quiesce(Duration::from_secs(20)).await,
        "the clean-up of dropped writes finished"
    );
    let left = env
        .sh(
            r#"find "$1" -maxdepth 1 -name "$2*""#,
            &[CWD, STAGING_PREFIX],
        )
        .await;
    assert_eq!(left, "", "no staging directory is left behind");
    assert_eq!(
        fs.stat(&path).await.unwrap(),
        before,
        "the file is untouched"
    );
}
