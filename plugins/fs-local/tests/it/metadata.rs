//! stat, lstat, list and versions.

use std::os::unix::fs::{PermissionsExt, symlink};
use std::time::{Duration, SystemTime};

use dsh_plugin_api::fs::{FileKind, FsProvider, WriteGuard};
use dsh_plugin_api::{Bytes, ErrorKind};

use crate::common::{World, assert_names, expect_err};

#[tokio::test]
async fn stat_reports_kind_size_mode_and_mtime() {
    let world = World::new();
    let path = world.put("f.txt", "hello");
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o640)).unwrap();
    let meta = world.fs.stat("f.txt").await.unwrap();
    assert_eq!(meta.kind, FileKind::File);
    assert_eq!(meta.size, 5);
    assert_eq!(meta.mode, 0o640);
    assert_eq!(meta.symlink_target, None);
    assert_eq!(
        meta.modified,
        std::fs::metadata(&path).unwrap().modified().unwrap()
    );
    let age = SystemTime::now()
        .duration_since(meta.modified)
        .unwrap_or_default();
    assert!(age < Duration::from_secs(60));
    let dir = world.fs.stat(&world.abs("")).await.unwrap();
    assert_eq!(dir.kind, FileKind::Directory);
}

#[tokio::test]
async fn stat_follows_symlinks_and_lstat_does_not() {
    let world = World::new();
    world.put("target.txt", "12345678");
    symlink("target.txt", world.path("link")).unwrap();
    let followed = world.fs.stat("link").await.unwrap();
    assert_eq!(followed.kind, FileKind::File);
    assert_eq!(followed.size, 8);
    assert_eq!(followed.symlink_target, None);
    let own = world.fs.lstat("link").await.unwrap();
    assert_eq!(own.kind, FileKind::Symlink);
    assert_eq!(own.size, "target.txt".len() as u64);
    assert_eq!(own.symlink_target.as_deref(), Some("target.txt"));
    assert_ne!(own.version, followed.version);
    assert_eq!(
        followed.version,
        world.fs.stat("target.txt").await.unwrap().version
    );
}

#[tokio::test]
async fn special_files_are_other() {
    let world = World::new();
    let fifo = world.path("fifo");
    let status = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap();
    assert!(status.success());
    assert_eq!(world.fs.stat("fifo").await.unwrap().kind, FileKind::Other);
}

#[tokio::test]
async fn missing_paths_and_bad_input_fail_clearly() {
    let world = World::new();
    let err = expect_err(world.fs.stat("nope").await, ErrorKind::NotFound);
    assert_names(&err, "stat", &world.abs("nope"));
    let err = expect_err(world.fs.lstat("nope").await, ErrorKind::NotFound);
    assert_names(&err, "lstat", &world.abs("nope"));
    world.put("file", "");
    expect_err(world.fs.stat("file/child").await, ErrorKind::NotADirectory);
    expect_err(world.fs.stat("").await, ErrorKind::InvalidInput);
    expect_err(world.fs.lstat("x\0y").await, ErrorKind::InvalidInput);
    // A dangling link: lstat sees it, stat does not.
    symlink("gone", world.path("dangling")).unwrap();
    assert_eq!(
        world.fs.lstat("dangling").await.unwrap().kind,
        FileKind::Symlink
    );
    expect_err(world.fs.stat("dangling").await, ErrorKind::NotFound);
}

#[tokio::test]
async fn versions_change_on_content_and_metadata_changes_only() {
    let world = World::new();
    let path = world.put("v.txt", "one");
    let first = world.fs.stat("v.txt").await.unwrap().version;
    assert_eq!(
        first,
        world.fs.stat("v.txt").await.unwrap().version,
        "stable when unchanged"
    );
    assert_eq!(first, world.fs.read_text("v.txt").await.unwrap().version);

    // Same size, in place: content change moves mtime/ctime.
    std::fs::write(&path, "two").unwrap();
    let second = world.fs.stat("v.txt").await.unwrap().version;
    assert_ne!(first, second);

    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
    let third = world.fs.stat("v.txt").await.unwrap().version;
    assert_ne!(second, third);

    let written = world
        .fs
        .write("v.txt", Bytes::from_static(b"two"), WriteGuard::Overwrite)
        .await
        .unwrap();
    assert_ne!(
        third, written,
        "a rewrite with identical content is a new version"
    );
    assert_eq!(written, world.fs.stat("v.txt").await.unwrap().version);
}

#[tokio::test]
async fn rapid_in_place_rewrites_always_change_the_version() {
    let world = World::new();
    let path = world.put("rapid", "aaaa");
    let mut seen = std::collections::HashSet::new();
    seen.insert(world.fs.stat("rapid").await.unwrap().version);
    for round in 0..200 {
        let text = if round % 2 == 0 { "bbbb" } else { "aaaa" };
        std::fs::write(&path, text).unwrap();
        let version = world.fs.stat("rapid").await.unwrap().version;
        assert!(seen.insert(version), "round {round}: a version repeated");
    }
}

#[tokio::test]
async fn list_is_one_level_sorted_by_bytes_with_resolved_symlinks() {
    let world = World::new();
    world.put("dir/b.txt", "bb");
    world.put("dir/B.txt", "B");
    world.put("dir/a/nested.txt", "deep");
    world.put("dir/ü.txt", "u");
    world.put("dir/new\nline", "n");
    symlink("b.txt", world.path("dir/link")).unwrap();
    symlink("missing", world.path("dir/dangling")).unwrap();
    let entries = world.fs.list("dir").await.unwrap();
    let names: Vec<&str> = entries.iter().map(|entry| entry.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "B.txt",
            "a",
            "b.txt",
            "dangling",
            "link",
            "new\nline",
            "ü.txt"
        ]
    );
    for entry in &entries {
        assert_eq!(entry.path, world.abs(&format!("dir/{}", entry.name)));
    }
    let by_name = |name: &str| entries.iter().find(|entry| entry.name == name).unwrap();
    assert_eq!(by_name("a").metadata.kind, FileKind::Directory);
    assert_eq!(by_name("a").resolved, None);
    assert_eq!(by_name("b.txt").metadata.size, 2);
    let link = by_name("link");
    assert_eq!(link.metadata.kind, FileKind::Symlink);
    assert_eq!(link.metadata.symlink_target.as_deref(), Some("b.txt"));
    let resolved = link.resolved.as_ref().expect("resolved target");
    assert_eq!(resolved.kind, FileKind::File);
    assert_eq!(resolved.version, by_name("b.txt").metadata.version);
    let dangling = by_name("dangling");
    assert_eq!(dangling.metadata.kind, FileKind::Symlink);
    assert_eq!(dangling.resolved, None);
}

#[tokio::test]
async fn list_of_an_empty_dir_is_empty_and_errors_are_clear() {
    let world = World::new();
    std::fs::create_dir(world.path("empty")).unwrap();
    assert!(world.fs.list("empty").await.unwrap().is_empty());
    let err = expect_err(world.fs.list("missing").await, ErrorKind::NotFound);
    assert_names(&err, "list", &world.abs("missing"));
    world.put("file", "");
    let err = expect_err(world.fs.list("file").await, ErrorKind::NotADirectory);
    assert_names(&err, "list", &world.abs("file"));
    expect_err(world.fs.list("").await, ErrorKind::InvalidInput);
}

#[tokio::test]
async fn list_through_a_symlinked_directory_keeps_the_link_path() {
    let world = World::new();
    world.put("real/x", "");
    symlink("real", world.path("alias")).unwrap();
    let entries = world.fs.list("alias").await.unwrap();
    assert_eq!(entries.len(), 1);
    assert_eq!(entries[0].path, world.abs("alias/x"));
}

#[tokio::test]
async fn non_utf8_names_are_listed_lossily_not_dropped() {
    use std::os::unix::ffi::OsStrExt;
    let world = World::new();
    std::fs::create_dir(world.path("raw")).unwrap();
    let name = std::ffi::OsStr::from_bytes(b"bad\xffname");
    std::fs::write(world.path("raw").join(name), "x").unwrap();
    let entries = world.fs.list("raw").await.unwrap();
    assert_eq!(entries.len(), 1);
    assert_eq!(entries[0].name, "bad\u{FFFD}name");
    assert_eq!(entries[0].metadata.kind, FileKind::File);
}
