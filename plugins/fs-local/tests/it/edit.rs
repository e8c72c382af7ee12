//! edit: literal replacement, CRLF, guards, serialisation, bad edits.

use std::os::unix::fs::{PermissionsExt, symlink};
use std::sync::Arc;

use dsh_plugin_api::fs::{Edit, FsProvider, WriteGuard};
use dsh_plugin_api::{Bytes, ErrorKind};

use crate::common::{World, assert_names, expect_err, staged_files};

fn edit(old: &str, new: &str) -> Edit {
    Edit {
        old: old.into(),
        new: new.into(),
        replace_all: false,
    }
}

#[tokio::test]
async fn an_edit_replaces_once_and_returns_version_and_count() {
    let world = World::new();
    world.put("lib.rs", "fn a() {}\nfn b() {}\n");
    let outcome = world
        .fs
        .edit(
            "lib.rs",
            vec![edit("fn b() {}", "fn b() { a() }")],
            WriteGuard::Overwrite,
        )
        .await
        .unwrap();
    assert_eq!(world.get("lib.rs"), b"fn a() {}\nfn b() { a() }\n");
    assert_eq!(outcome.replacements, 1);
    assert_eq!(
        outcome.version,
        world.fs.stat("lib.rs").await.unwrap().version
    );
    assert!(staged_files(world.root()).is_empty());
}

#[tokio::test]
async fn replace_all_and_sequences_of_edits() {
    let world = World::new();
    world.put("t.txt", "x y x y x");
    let outcome = world
        .fs
        .edit(
            "t.txt",
            vec![
                Edit {
                    old: "x".into(),
                    new: "z".into(),
                    replace_all: true,
                },
                edit("z y z y z", "done"),
            ],
            WriteGuard::Overwrite,
        )
        .await
        .unwrap();
    assert_eq!(outcome.replacements, 4);
    assert_eq!(world.get("t.txt"), b"done");
}

#[tokio::test]
async fn crlf_files_round_trip_with_lf_edits() {
    let world = World::new();
    let original = "[section]\r\nkey = old\r\nother = 1\r\n";
    world.put("win.ini", original);
    world
        .fs
        .edit(
            "win.ini",
            vec![edit("key = old\nother", "key = new\nadded = 2\nother")],
            WriteGuard::Overwrite,
        )
        .await
        .unwrap();
    assert_eq!(
        world.get("win.ini"),
        b"[section]\r\nkey = new\r\nadded = 2\r\nother = 1\r\n"
    );
    // LF files stay LF even when the edit is written with CRLF.
    world.put("unix.txt", "a\nb\nc\n");
    world
        .fs
        .edit(
            "unix.txt",
            vec![edit("a\r\nb", "A\r\nB")],
            WriteGuard::Overwrite,
        )
        .await
        .unwrap();
    assert_eq!(world.get("unix.txt"), b"A\nB\nc\n");
    // A read after the edit returns the stored CRLF text unchanged.
    assert_eq!(
        world.fs.read_text("win.ini").await.unwrap().text,
        "[section]\r\nkey = new\r\nadded = 2\r\nother = 1\r\n"
    );
}

#[tokio::test]
async fn ambiguous_and_non_matching_edits_fail_naming_edit_and_count() {
    let world = World::new();
    world.put("dup.txt", "same\nsame\nsame\n");
    let before = world.fs.stat("dup.txt").await.unwrap().version;
    let err = expect_err(
        world
            .fs
            .edit("dup.txt", vec![edit("same", "diff")], WriteGuard::Overwrite)
            .await,
        ErrorKind::InvalidInput,
    );
    assert_names(&err, "edit", &world.abs("dup.txt"));
    assert!(err.message().contains("edit 1 of 1"), "{err}");
    assert!(err.message().contains("matches 3 times"), "{err}");

    let err = expect_err(
        world
            .fs
            .edit(
                "dup.txt",
                vec![edit("same\nsame\nsame", "ok"), edit("absent", "x")],
                WriteGuard::Overwrite,
            )
            .await,
        ErrorKind::InvalidInput,
    );
    assert!(err.message().contains("edit 2 of 2"), "{err}");
    assert!(err.message().contains("matches 0 times"), "{err}");
    // Nothing was stored, not even the first (valid) edit.
    assert_eq!(world.get("dup.txt"), b"same\nsame\nsame\n");
    assert_eq!(world.fs.stat("dup.txt").await.unwrap().version, before);
    assert!(staged_files(world.root()).is_empty());
}

#[tokio::test]
async fn empty_edit_lists_and_empty_old_text_are_invalid_input() {
    let world = World::new();
    world.put("f", "content");
    let err = expect_err(
        world.fs.edit("f", vec![], WriteGuard::Overwrite).await,
        ErrorKind::InvalidInput,
    );
    assert!(err.message().contains("no edits"), "{err}");
    let err = expect_err(
        world
            .fs
            .edit("f", vec![edit("", "x")], WriteGuard::Overwrite)
            .await,
        ErrorKind::InvalidInput,
    );
    assert!(err.message().contains("edit 1 of 1"), "{err}");
    assert_eq!(world.get("f"), b"content");
}

#[tokio::test]
async fn edits_of_missing_binary_invalid_or_directory_targets_fail() {
    let world = World::new();
    let err = expect_err(
        world
            .fs
            .edit("missing", vec![edit("a", "b")], WriteGuard::Overwrite)
            .await,
        ErrorKind::NotFound,
    );
    assert_names(&err, "edit", &world.abs("missing"));
    world.put("bin", b"a\x00b");
    expect_err(
        world
            .fs
            .edit("bin", vec![edit("a", "b")], WriteGuard::Overwrite)
            .await,
        ErrorKind::Binary,
    );
    world.put("bad", b"a\xffb");
    expect_err(
        world
            .fs
            .edit("bad", vec![edit("a", "b")], WriteGuard::Overwrite)
            .await,
        ErrorKind::InvalidUtf8,
    );
    std::fs::create_dir(world.path("dir")).unwrap();
    expect_err(
        world
            .fs
            .edit("dir", vec![edit("a", "b")], WriteGuard::Overwrite)
            .await,
        ErrorKind::IsADirectory,
    );
    assert_eq!(world.get("bin"), b"a\x00b");
    assert_eq!(world.get("bad"), b"a\xffb");
}

#[tokio::test]
async fn edit_guards_check_the_state_that_was_read() {
    let world = World::new();
    let path = world.put("g.txt", "alpha");
    let seen = world.fs.stat("g.txt").await.unwrap().version;
    std::fs::write(&path, "alpha beta").unwrap();
    let err = expect_err(
        world
            .fs
            .edit(
                "g.txt",
                vec![edit("alpha", "A")],
                WriteGuard::IfVersion(seen),
            )
            .await,
        ErrorKind::Conflict,
    );
    assert_names(&err, "edit", &world.abs("g.txt"));
    assert_eq!(world.get("g.txt"), b"alpha beta");
    let current = world.fs.stat("g.txt").await.unwrap().version;
    world
        .fs
        .edit(
            "g.txt",
            vec![edit("alpha", "A")],
            WriteGuard::IfVersion(current),
        )
        .await
        .unwrap();
    assert_eq!(world.get("g.txt"), b"A beta");
    expect_err(
        world
            .fs
            .edit("g.txt", vec![edit("A", "B")], WriteGuard::CreateNew)
            .await,
        ErrorKind::AlreadyExists,
    );
}

#[tokio::test]
async fn edits_keep_mode_and_write_through_symlinks() {
    let world = World::new();
    let path = world.put("run.sh", "echo old\n");
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o700)).unwrap();
    symlink("run.sh", world.path("alias.sh")).unwrap();
    world
        .fs
        .edit("alias.sh", vec![edit("old", "new")], WriteGuard::Overwrite)
        .await
        .unwrap();
    assert_eq!(world.get("run.sh"), b"echo new\n");
    assert_eq!(
        std::fs::metadata(&path).unwrap().permissions().mode() & 0o7777,
        0o700
    );
    assert!(
        std::fs::symlink_metadata(world.path("alias.sh"))
            .unwrap()
            .file_type()
            .is_symlink()
    );
}

/// Many concurrent edits of one file — through different spellings of its
/// path — all land: none reads a state another is about to replace.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_edits_are_serialised_without_lost_updates() {
    let world = Arc::new(World::new());
    world.put("dir/log.txt", "START\r\nEND\r\n");
    symlink("dir", world.path("alias")).unwrap();
    let spellings = ["dir/log.txt", "alias/log.txt", "dir/../dir/./log.txt"];
    let mut tasks = Vec::new();
    for i in 0..60 {
        let world = world.clone();
        let path = spellings[i % spellings.len()];
        tasks.push(tokio::spawn(async move {
            world
                .fs
                .edit(
                    path,
                    vec![edit("END", &format!("entry {i}\nEND"))],
                    WriteGuard::Overwrite,
                )
                .await
        }));
    }
    for task in tasks {
        task.await.unwrap().unwrap();
    }
    let text = String::from_utf8(world.get("dir/log.txt")).unwrap();
    for i in 0..60 {
        assert!(
            text.contains(&format!("entry {i}\r\n")),
            "entry {i} was lost"
        );
    }
    assert_eq!(text.matches("\r\n").count(), 62, "CRLF kept throughout");
    assert!(staged_files(&world.path("dir")).is_empty());
}

/// Writes and edits of one target interleave only at whole operations.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn writes_and_edits_of_one_target_serialise() {
    let world = Arc::new(World::new());
    world.put("mixed", "counter: 0");
    let mut tasks = Vec::new();
    for i in 0..30 {
        let world = world.clone();
        tasks.push(tokio::spawn(async move {
            if i % 3 == 0 {
                world
                    .fs
                    .write(
                        "mixed",
                        Bytes::from_static(b"counter: 0"),
                        WriteGuard::Overwrite,
                    )
                    .await
                    .map(|_| ())
            } else {
                // Either form may be present; edit whichever is there.
                let text = world.fs.read_text("mixed").await?.text;
                let next = if text.ends_with(": 0") {
                    "counter: 1"
                } else {
                    "counter: 0"
                };
                match world
                    .fs
                    .edit("mixed", vec![edit(&text, next)], WriteGuard::Overwrite)
                    .await
                {
                    Ok(_) => Ok(()),
                    // Another mutation replaced the text between our read
                    // and our edit: the edit must fail cleanly, not clobber.
                    Err(err) if err.kind() == ErrorKind::InvalidInput => Ok(()),
                    Err(err) => Err(err),
                }
            }
        }));
    }
    for task in tasks {
        task.await.unwrap().unwrap();
    }
    let text = String::from_utf8(world.get("mixed")).unwrap();
    assert!(text == "counter: 0" || text == "counter: 1", "{text}");
}
