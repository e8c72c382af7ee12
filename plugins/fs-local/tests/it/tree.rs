//! mkdir, remove and rename.

use std::os::unix::fs::symlink;

use dsh_plugin_api::ErrorKind;
use dsh_plugin_api::fs::FsProvider;

use crate::common::{World, assert_names, expect_err};

#[tokio::test]
async fn mkdir_is_mkdir_p() {
    let world = World::new();
    world.fs.mkdir("a/b/c").await.unwrap();
    assert!(world.path("a/b/c").is_dir());
    world.fs.mkdir("a/b/c").await.unwrap();
    world.fs.mkdir("a").await.unwrap();
}

#[tokio::test]
async fn mkdir_over_a_file_fails_clearly() {
    let world = World::new();
    world.put("file", "x");
    let err = expect_err(world.fs.mkdir("file").await, ErrorKind::AlreadyExists);
    assert_names(&err, "mkdir", &world.abs("file"));
    let err = expect_err(
        world.fs.mkdir("file/sub/deeper").await,
        ErrorKind::NotADirectory,
    );
    assert_names(&err, "mkdir", &world.abs("file/sub/deeper"));
    expect_err(world.fs.mkdir("").await, ErrorKind::InvalidInput);
    assert_eq!(world.get("file"), b"x");
}

#[tokio::test]
async fn remove_is_recursive_and_reports_existence() {
    let world = World::new();
    world.put("tree/a/b/c.txt", "c");
    world.put("tree/d.txt", "d");
    assert!(world.fs.remove("tree").await.unwrap());
    assert!(!world.path("tree").exists());
    assert!(
        !world.fs.remove("tree").await.unwrap(),
        "missing is not an error"
    );
    world.put("single", "s");
    assert!(world.fs.remove("single").await.unwrap());
    assert!(!world.path("single").exists());
}

#[tokio::test]
async fn remove_takes_a_symlink_itself_never_its_target() {
    let world = World::new();
    world.put("keep/inside.txt", "safe");
    symlink("keep", world.path("dirlink")).unwrap();
    symlink("keep/inside.txt", world.path("filelink")).unwrap();
    world.put("tree/x", "x");
    symlink(world.path("keep"), world.path("tree/escape")).unwrap();
    assert!(world.fs.remove("dirlink").await.unwrap());
    assert!(world.fs.remove("filelink").await.unwrap());
    assert!(
        world.fs.remove("tree").await.unwrap(),
        "a tree holding a link to elsewhere"
    );
    assert!(std::fs::symlink_metadata(world.path("dirlink")).is_err());
    assert_eq!(world.get("keep/inside.txt"), b"safe");
    symlink("nowhere", world.path("dangling")).unwrap();
    assert!(world.fs.remove("dangling").await.unwrap());
}

#[tokio::test]
async fn remove_refuses_root_and_dotdot() {
    let world = World::new();
    world.put("x/y", "");
    let err = expect_err(world.fs.remove("/").await, ErrorKind::InvalidInput);
    assert!(err.message().starts_with("remove: "), "{err}");
    expect_err(world.fs.remove("x/..").await, ErrorKind::InvalidInput);
    expect_err(world.fs.remove("").await, ErrorKind::InvalidInput);
    assert!(world.path("x/y").exists());
}

#[tokio::test]
async fn rename_moves_files_and_directories_creating_parents() {
    let world = World::new();
    world.put("from.txt", "f");
    world
        .fs
        .rename("from.txt", "new/parent/to.txt")
        .await
        .unwrap();
    assert_eq!(world.get("new/parent/to.txt"), b"f");
    assert!(!world.path("from.txt").exists());
    world.put("dir/inner", "i");
    world.fs.rename("dir", "moved/dir").await.unwrap();
    assert_eq!(world.get("moved/dir/inner"), b"i");
}

#[tokio::test]
async fn rename_replaces_a_file_and_moves_symlinks_themselves() {
    let world = World::new();
    world.put("a", "a");
    world.put("b", "b");
    world.fs.rename("a", "b").await.unwrap();
    assert_eq!(world.get("b"), b"a");
    world.put("target", "t");
    symlink("target", world.path("link")).unwrap();
    world.fs.rename("link", "sub/link").await.unwrap();
    let meta = std::fs::symlink_metadata(world.path("sub/link")).unwrap();
    assert!(meta.file_type().is_symlink());
    assert_eq!(world.get("target"), b"t");
    world.fs.rename("b", "b").await.unwrap();
    assert_eq!(world.get("b"), b"a", "renaming onto itself is a no-op");
}

#[tokio::test]
async fn bad_renames_fail_and_change_nothing() {
    let world = World::new();
    let err = expect_err(
        world.fs.rename("missing", "new/x").await,
        ErrorKind::NotFound,
    );
    assert_names(&err, "rename", &world.abs("missing"));
    assert!(
        !world.path("new").exists(),
        "no parent was created for a failed rename"
    );

    world.put("dir/f", "");
    let err = expect_err(
        world.fs.rename("dir", "dir/sub/dir").await,
        ErrorKind::InvalidInput,
    );
    assert!(err.message().contains("into itself"), "{err}");
    assert!(!world.path("dir/sub").exists());

    world.put("file", "");
    expect_err(
        world.fs.rename("file", "dir").await,
        ErrorKind::IsADirectory,
    );
    world.put("full/x", "");
    expect_err(
        world.fs.rename("dir", "full").await,
        ErrorKind::AlreadyExists,
    );
    expect_err(
        world.fs.rename("dir", "file").await,
        ErrorKind::NotADirectory,
    );
    expect_err(
        world.fs.rename("file", "file/under").await,
        ErrorKind::NotADirectory,
    );
    expect_err(world.fs.rename("", "x").await, ErrorKind::InvalidInput);
    expect_err(world.fs.rename("file", "/").await, ErrorKind::InvalidInput);
    assert!(world.path("dir/f").exists() && world.path("file").exists());
}
