//! Cancellation before the commit point, made deterministic: the test polls
//! the operation once so it runs up to one of its awaits — the target's lock
//! (held by the test; the last await before the rename) or, on a
//! current-thread runtime, a large read or write on the blocking pool — and
//! then drops it.

use std::path::{Path, PathBuf};
use std::task::Poll;
use std::time::{Duration, Instant};

use dsh_plugin_api::fs::{Edit, FsProvider, WriteGuard};

use crate::blocking::INLINE_LIMIT;
use crate::locks;
use crate::provider::FsLocal;
use crate::staging::STAGING_PREFIX;
use dsh_plugin_api::Bytes;

struct Fixture {
    _dir: tempfile::TempDir,
    root: PathBuf,
    fs: FsLocal,
}

fn fixture() -> Fixture {
    let dir = tempfile::tempdir().expect("tempdir");
    let root = std::fs::canonicalize(dir.path()).expect("canonical");
    let fs = FsLocal::new(root.to_str().expect("utf-8")).expect("fs");
    Fixture {
        _dir: dir,
        root,
        fs,
    }
}

fn staged_files(dir: &Path) -> Vec<PathBuf> {
    std::fs::read_dir(dir)
        .expect("read_dir")
        .map(|entry| entry.expect("entry").path())
        .filter(|path| {
            path.file_name()
                .is_some_and(|name| name.to_string_lossy().starts_with(STAGING_PREFIX))
        })
        .collect()
}

/// Waits until no descriptor of this process refers to a path under `dir`
/// (the blocking pool finished with the abandoned staged file).
async fn wait_for_no_open_files_under(dir: &Path) {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let open = std::fs::read_dir("/proc/self/fd")
            .expect("fds")
            .filter_map(|entry| std::fs::read_link(entry.ok()?.path()).ok())
            .any(|target| target.starts_with(dir));
        if !open {
            return;
        }
        assert!(Instant::now() < deadline, "a staged file stayed open");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

#[tokio::test]
async fn a_write_dropped_before_its_commit_leaves_the_old_file_and_no_staging() {
    let fx = fixture();
    let target = fx.root.join("keep.txt");
    std::fs::write(&target, "original").unwrap();
    let lock = locks::lock(&target).await;

    let mut write = Box::pin(fx.fs.write(
        "keep.txt",
        Bytes::from_static(b"replacement"),
        WriteGuard::Overwrite,
    ));
    assert!(matches!(futures::poll!(write.as_mut()), Poll::Pending));
    // Staged and waiting for the lock: the new content exists beside the
    // target, complete, but unpublished.
    let staged = staged_files(&fx.root);
    assert_eq!(staged.len(), 1, "one staged file while waiting");
    assert_eq!(std::fs::read(&staged[0]).unwrap(), b"replacement");
    let private = std::os::unix::fs::PermissionsExt::mode(
        &std::fs::metadata(&staged[0]).unwrap().permissions(),
    );
    assert_eq!(private & 0o777, 0o600, "private until published");
    assert_eq!(std::fs::read(&target).unwrap(), b"original");

    drop(write);
    assert!(
        staged_files(&fx.root).is_empty(),
        "dropping removed the staged file"
    );
    assert_eq!(std::fs::read(&target).unwrap(), b"original");
    drop(lock);
    assert!(!locks::is_tracked(&target));

    // Nothing is left held: the next write goes through.
    fx.fs
        .write(
            "keep.txt",
            Bytes::from_static(b"next"),
            WriteGuard::Overwrite,
        )
        .await
        .unwrap();
    assert_eq!(std::fs::read(&target).unwrap(), b"next");
}

/// Current-thread runtime: the large content is written on the blocking
/// pool, and the future is dropped while that write is in flight.
#[tokio::test]
async fn a_large_write_dropped_mid_flight_leaves_the_old_file_and_no_staging() {
    large_write_dropped_before_commit(false).await;
}

/// Multi-thread runtime: the large content is written in place
/// (`block_in_place`), and the future is dropped at the lock.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_large_write_dropped_at_the_lock_leaves_the_old_file_and_no_staging() {
    large_write_dropped_before_commit(true).await;
}

async fn large_write_dropped_before_commit(hold_lock: bool) {
    let fx = fixture();
    let target = fx.root.join("big.bin");
    std::fs::write(&target, "original").unwrap();
    let lock = if hold_lock {
        Some(locks::lock(&target).await)
    } else {
        None
    };
    let content = vec![7_u8; 64 * 1024 * 1024];
    assert!(content.len() as u64 > INLINE_LIMIT);

    let mut write = Box::pin(
        fx.fs
            .write("big.bin", Bytes::from(content), WriteGuard::Overwrite),
    );
    assert!(matches!(futures::poll!(write.as_mut()), Poll::Pending));
    if hold_lock {
        let staged = staged_files(&fx.root);
        assert_eq!(staged.len(), 1);
        let size = std::fs::metadata(&staged[0]).unwrap().len();
        assert_eq!(size, 64 * 1024 * 1024, "fully staged, waiting to commit");
    }
    drop(write);
    assert!(staged_files(&fx.root).is_empty());
    wait_for_no_open_files_under(&fx.root).await;
    assert!(staged_files(&fx.root).is_empty(), "nothing reappeared");
    assert_eq!(std::fs::read(&target).unwrap(), b"original");
    drop(lock);
    assert!(!locks::is_tracked(&target));
}

#[tokio::test]
async fn a_new_file_write_dropped_before_its_commit_creates_nothing() {
    let fx = fixture();
    let target = fx.root.join("sub/new.txt");
    let lock = locks::lock(&target).await;
    let mut write = Box::pin(fx.fs.write(
        "sub/new.txt",
        Bytes::from_static(b"x"),
        WriteGuard::CreateNew,
    ));
    assert!(matches!(futures::poll!(write.as_mut()), Poll::Pending));
    drop(write);
    drop(lock);
    assert!(!target.exists());
    assert!(staged_files(&fx.root.join("sub")).is_empty());
}

#[tokio::test]
async fn an_edit_dropped_while_waiting_for_its_target_changes_nothing() {
    let fx = fixture();
    let target = fx.root.join("e.txt");
    std::fs::write(&target, "alpha").unwrap();
    let before = std::fs::metadata(&target).unwrap();
    let lock = locks::lock(&target).await;
    let edits = vec![Edit {
        old: "alpha".into(),
        new: "beta".into(),
        replace_all: false,
    }];
    let mut edit = Box::pin(fx.fs.edit("e.txt", edits.clone(), WriteGuard::Overwrite));
    assert!(matches!(futures::poll!(edit.as_mut()), Poll::Pending));
    drop(edit);
    drop(lock);
    assert_eq!(std::fs::read(&target).unwrap(), b"alpha");
    let after = std::fs::metadata(&target).unwrap();
    assert_eq!(
        crate::version::version_of(&before),
        crate::version::version_of(&after)
    );
    assert!(staged_files(&fx.root).is_empty());
    fx.fs
        .edit("e.txt", edits, WriteGuard::Overwrite)
        .await
        .unwrap();
    assert_eq!(std::fs::read(&target).unwrap(), b"beta");
}

/// Current-thread runtime: the large file is read on the blocking pool, and
/// the future is dropped while that read is in flight.
#[tokio::test]
async fn a_large_edit_dropped_mid_flight_changes_nothing() {
    let fx = fixture();
    let target = fx.root.join("large.txt");
    let original = "line of text\n".repeat(2_000_000);
    std::fs::write(&target, &original).unwrap();
    let edits = vec![Edit {
        old: "line".into(),
        new: "LINE".into(),
        replace_all: true,
    }];
    let mut edit = Box::pin(fx.fs.edit("large.txt", edits, WriteGuard::Overwrite));
    assert!(matches!(futures::poll!(edit.as_mut()), Poll::Pending));
    drop(edit);
    wait_for_no_open_files_under(&fx.root).await;
    assert!(staged_files(&fx.root).is_empty());
    assert_eq!(std::fs::read_to_string(&target).unwrap(), original);
    assert!(
        !locks::is_tracked(&target),
        "the dropped edit released its target"
    );
}
