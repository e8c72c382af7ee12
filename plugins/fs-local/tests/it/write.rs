//! write: atomicity, guards, modes, parents, staging cleanup, errors.

use std::os::unix::fs::{MetadataExt, PermissionsExt, symlink};
use std::sync::Arc;

use dsh_plugin_api::fs::{FsProvider, Version, WriteGuard};
use dsh_plugin_api::{Bytes, ErrorKind};

use crate::common::{
    World, as_unprivileged, assert_names, block_on, expect_err, staged_files, umask,
};

#[tokio::test]
async fn write_creates_replaces_and_returns_the_committed_version() {
    let world = World::new();
    let created = world
        .fs
        .write("a.txt", Bytes::from_static(b"first"), WriteGuard::Overwrite)
        .await
        .unwrap();
    assert_eq!(world.get("a.txt"), b"first");
    assert_eq!(created, world.fs.stat("a.txt").await.unwrap().version);
    let replaced = world
        .fs
        .write(
            "a.txt",
            Bytes::from_static(b"second"),
            WriteGuard::Overwrite,
        )
        .await
        .unwrap();
    assert_eq!(world.get("a.txt"), b"second");
    assert_ne!(created, replaced);
    assert_eq!(replaced, world.fs.read_text("a.txt").await.unwrap().version);
    assert!(staged_files(world.root()).is_empty());
}

#[tokio::test]
async fn write_publishes_a_new_inode_so_open_readers_keep_the_old_content() {
    let world = World::new();
    let path = world.put("swap", "old content");
    let reader = std::fs::File::open(&path).unwrap();
    let before = reader.metadata().unwrap().ino();
    world
        .fs
        .write("swap", Bytes::from_static(b"new"), WriteGuard::Overwrite)
        .await
        .unwrap();
    assert_ne!(std::fs::metadata(&path).unwrap().ino(), before);
    let mut old = String::new();
    std::io::Read::read_to_string(&mut &reader, &mut old).unwrap();
    assert_eq!(old, "old content", "a reader never sees a partial file");
}

#[tokio::test]
async fn write_creates_missing_parents() {
    let world = World::new();
    world
        .fs
        .write(
            "deep/er/still/f.txt",
            Bytes::from_static(b"x"),
            WriteGuard::CreateNew,
        )
        .await
        .unwrap();
    assert_eq!(world.get("deep/er/still/f.txt"), b"x");
}

#[tokio::test]
async fn binary_empty_and_large_contents_round_trip() {
    let world = World::new();
    world
        .fs
        .write("empty", Bytes::from(Vec::new()), WriteGuard::Overwrite)
        .await
        .unwrap();
    assert_eq!(world.get("empty"), b"");
    let binary: Vec<u8> = (0..=255).collect();
    world
        .fs
        .write("bin", Bytes::from(binary.clone()), WriteGuard::Overwrite)
        .await
        .unwrap();
    assert_eq!(world.get("bin"), binary);
    let large: Vec<u8> = (0..5_000_000_u32).map(|i| (i % 253) as u8).collect();
    world
        .fs
        .write("large", Bytes::from(large.clone()), WriteGuard::Overwrite)
        .await
        .unwrap();
    assert_eq!(world.get("large"), large);
    assert!(staged_files(world.root()).is_empty());
}

#[tokio::test]
async fn create_new_refuses_an_existing_file_and_changes_nothing() {
    let world = World::new();
    world.put("exists", "keep");
    let err = expect_err(
        world
            .fs
            .write(
                "exists",
                Bytes::from_static(b"clobber"),
                WriteGuard::CreateNew,
            )
            .await,
        ErrorKind::AlreadyExists,
    );
    assert_names(&err, "write", &world.abs("exists"));
    assert_eq!(world.get("exists"), b"keep");
    assert!(staged_files(world.root()).is_empty());
}

#[tokio::test]
async fn a_stale_version_write_is_a_conflict_and_changes_nothing() {
    let world = World::new();
    let path = world.put("doc", "v1");
    let seen = world.fs.read_text("doc").await.unwrap().version;
    std::fs::write(&path, "changed behind our back").unwrap();
    let err = expect_err(
        world
            .fs
            .write(
                "doc",
                Bytes::from_static(b"mine"),
                WriteGuard::IfVersion(seen.clone()),
            )
            .await,
        ErrorKind::Conflict,
    );
    assert_names(&err, "write", &world.abs("doc"));
    assert!(err.message().contains("stale version"), "{err}");
    assert_eq!(world.get("doc"), b"changed behind our back");

    let current = world.fs.stat("doc").await.unwrap().version;
    let next = world
        .fs
        .write(
            "doc",
            Bytes::from_static(b"mine"),
            WriteGuard::IfVersion(current.clone()),
        )
        .await
        .unwrap();
    assert_eq!(world.get("doc"), b"mine");
    // The version just replaced is now stale too.
    expect_err(
        world
            .fs
            .write(
                "doc",
                Bytes::from_static(b"again"),
                WriteGuard::IfVersion(current),
            )
            .await,
        ErrorKind::Conflict,
    );
    world
        .fs
        .write(
            "doc",
            Bytes::from_static(b"again"),
            WriteGuard::IfVersion(next),
        )
        .await
        .unwrap();
}

#[tokio::test]
async fn an_expected_version_of_a_missing_file_is_not_found() {
    let world = World::new();
    let err = expect_err(
        world
            .fs
            .write(
                "gone",
                Bytes::from_static(b"x"),
                WriteGuard::IfVersion(Version("v".into())),
            )
            .await,
        ErrorKind::NotFound,
    );
    assert_names(&err, "write", &world.abs("gone"));
    assert!(!world.path("gone").exists());
}

#[tokio::test]
async fn concurrent_guarded_writes_of_one_version_let_exactly_one_win() {
    let world = Arc::new(World::new());
    world.put("race", "base");
    let base = world.fs.stat("race").await.unwrap().version;
    let mut tasks = Vec::new();
    for i in 0..16 {
        let world = world.clone();
        let base = base.clone();
        tasks.push(tokio::spawn(async move {
            world
                .fs
                .write(
                    "race",
                    Bytes::from(format!("writer {i}")),
                    WriteGuard::IfVersion(base),
                )
                .await
        }));
    }
    let mut wins = 0;
    for task in tasks {
        match task.await.unwrap() {
            Ok(_) => wins += 1,
            Err(err) => assert_eq!(err.kind(), ErrorKind::Conflict, "{err}"),
        }
    }
    assert_eq!(wins, 1);
    let create_world = world.clone();
    let creators: Vec<_> = (0..8)
        .map(|i| {
            let world = create_world.clone();
            tokio::spawn(async move {
                world
                    .fs
                    .write("fresh", Bytes::from(vec![b'0' + i]), WriteGuard::CreateNew)
                    .await
            })
        })
        .collect();
    let mut created = 0;
    for task in creators {
        if task.await.unwrap().is_ok() {
            created += 1;
        }
    }
    assert_eq!(created, 1);
    assert!(staged_files(world.root()).is_empty());
}

#[tokio::test]
async fn an_existing_files_mode_is_preserved_and_new_files_honour_the_umask() {
    let world = World::new();
    let path = world.put("script.sh", "#!/bin/sh\n");
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o751)).unwrap();
    world
        .fs
        .write(
            "script.sh",
            Bytes::from_static(b"#!/bin/sh\necho\n"),
            WriteGuard::Overwrite,
        )
        .await
        .unwrap();
    assert_eq!(std::fs::metadata(&path).unwrap().mode() & 0o7777, 0o751);

    world
        .fs
        .write("new.txt", Bytes::from_static(b"x"), WriteGuard::CreateNew)
        .await
        .unwrap();
    let mode = std::fs::metadata(world.path("new.txt")).unwrap().mode() & 0o7777;
    assert_eq!(mode, 0o666 & !umask());
}

/// Needs root (CI runs the tests as root): giving a file to another owner
/// is a privileged operation.
#[tokio::test]
async fn owner_and_group_are_preserved_when_the_process_may_set_them() {
    assert_root();
    let world = World::new();
    let path = world.put("owned", "x");
    std::os::unix::fs::chown(&path, Some(65534), Some(65534)).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o4755)).unwrap();
    world
        .fs
        .write("owned", Bytes::from_static(b"y"), WriteGuard::Overwrite)
        .await
        .unwrap();
    let meta = std::fs::metadata(&path).unwrap();
    assert_eq!((meta.uid(), meta.gid()), (65534, 65534));
    assert_eq!(meta.mode() & 0o7777, 0o4755);
}

/// A writer that cannot give the new file the old owner must not hand a
/// set-user-ID file to itself: the set-id bits are dropped.
#[test]
fn set_id_bits_are_dropped_when_the_owner_cannot_be_kept() {
    assert_root();
    let world = World::new();
    let dir = world.path("shared");
    std::fs::create_dir(&dir).unwrap();
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o777)).unwrap();
    let path = world.put("shared/tool", "root's");
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o6755)).unwrap();
    as_unprivileged(|| {
        block_on(world.fs.write(
            "shared/tool",
            Bytes::from_static(b"nobody's"),
            WriteGuard::Overwrite,
        ))
    })
    .unwrap();
    let meta = std::fs::metadata(&path).unwrap();
    assert_eq!(meta.uid(), 65534, "the writer owns the new file");
    assert_eq!(meta.mode() & 0o7777, 0o755);
}

fn assert_root() {
    // SAFETY: geteuid has no preconditions.
    let euid = unsafe { libc::geteuid() };
    assert_eq!(euid, 0, "this test needs root (CI runs the tests as root)");
}

#[tokio::test]
async fn writing_through_a_symlink_replaces_the_target_and_keeps_the_link() {
    let world = World::new();
    world.put("real.txt", "old");
    symlink("real.txt", world.path("link.txt")).unwrap();
    world
        .fs
        .write(
            "link.txt",
            Bytes::from_static(b"new"),
            WriteGuard::Overwrite,
        )
        .await
        .unwrap();
    assert!(
        std::fs::symlink_metadata(world.path("link.txt"))
            .unwrap()
            .file_type()
            .is_symlink()
    );
    assert_eq!(world.get("real.txt"), b"new");
    // A dangling link is filled in at its target, like `echo > link`.
    symlink("sub/made.txt", world.path("dangling")).unwrap();
    world
        .fs
        .write("dangling", Bytes::from_static(b"m"), WriteGuard::CreateNew)
        .await
        .unwrap();
    assert_eq!(world.get("sub/made.txt"), b"m");
}

#[tokio::test]
async fn writing_a_directory_or_under_a_file_fails_and_stages_nothing() {
    let world = World::new();
    std::fs::create_dir(world.path("dir")).unwrap();
    let err = expect_err(
        world
            .fs
            .write("dir", Bytes::from_static(b"x"), WriteGuard::Overwrite)
            .await,
        ErrorKind::IsADirectory,
    );
    assert_names(&err, "write", &world.abs("dir"));
    world.put("file", "f");
    let err = expect_err(
        world
            .fs
            .write(
                "file/child",
                Bytes::from_static(b"x"),
                WriteGuard::Overwrite,
            )
            .await,
        ErrorKind::NotADirectory,
    );
    assert_names(&err, "write", &world.abs("file/child"));
    expect_err(
        world
            .fs
            .write("/", Bytes::from_static(b"x"), WriteGuard::Overwrite)
            .await,
        ErrorKind::IsADirectory,
    );
    expect_err(
        world
            .fs
            .write("", Bytes::from_static(b"x"), WriteGuard::Overwrite)
            .await,
        ErrorKind::InvalidInput,
    );
    expect_err(
        world
            .fs
            .write("a\0", Bytes::from_static(b"x"), WriteGuard::Overwrite)
            .await,
        ErrorKind::InvalidInput,
    );
    assert!(staged_files(world.root()).is_empty());
    assert_eq!(world.get("file"), b"f");
}

#[test]
fn a_write_the_world_refuses_is_permission_denied_and_leaves_nothing() {
    let world = World::new();
    let dir = world.path("locked");
    std::fs::create_dir(&dir).unwrap();
    world.put("locked/f", "keep");
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
    let result = as_unprivileged(|| {
        block_on(
            world
                .fs
                .write("locked/f", Bytes::from_static(b"x"), WriteGuard::Overwrite),
        )
    });
    let err = expect_err(result, ErrorKind::PermissionDenied);
    assert_names(&err, "write", &world.abs("locked/f"));
    assert!(err.message().contains("staged file"), "{err}");
    assert_eq!(world.get("locked/f"), b"keep");
    assert!(staged_files(&dir).is_empty());
}

#[tokio::test]
async fn newline_and_multibyte_names_can_be_written() {
    let world = World::new();
    for name in ["new\nline", "日本語.txt", "ü ñ"] {
        world
            .fs
            .write(
                name,
                Bytes::copy_from_slice(name.as_bytes()),
                WriteGuard::CreateNew,
            )
            .await
            .unwrap();
        assert_eq!(world.get(name), name.as_bytes());
    }
}
