//! `filesystem.Filesystem` unary RPCs: Stat, MakeDir, Move, ListDir and Remove with envd's entry
//! shape, path rules and error codes (docs/e2b-protocol.md §6).

use std::os::unix::fs::{MetadataExt, PermissionsExt};

use buffa::EnumValue;
use connectrpc::ErrorCode;
use envd_proto::filesystem::{
    FileType, ListDirRequest, MakeDirRequest, MoveRequest, RemoveRequest, StatRequest,
};

use crate::common::{self, TestDaemon, config, shared_tempdir, unary_json};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stat_reports_envds_entry() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("hello.txt");
    std::fs::write(&file, b"hello").unwrap();
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o640)).unwrap();
    let link = dir.path().join("link");
    std::os::unix::fs::symlink(&file, &link).unwrap();
    let daemon = TestDaemon::start(config()).await;
    for json in [true, false] {
        let fs = daemon.fs(json);
        let entry = fs
            .stat(StatRequest {
                path: file.to_str().unwrap().to_owned(),
                ..Default::default()
            })
            .await
            .expect("stat")
            .into_owned()
            .entry
            .into_option()
            .unwrap();
        assert_eq!(entry.name, "hello.txt");
        assert_eq!(entry.r#type, EnumValue::Known(FileType::FILE_TYPE_FILE));
        assert_eq!(entry.path, file.to_str().unwrap());
        assert_eq!(entry.size, 5);
        assert_eq!(entry.mode, 0o640);
        assert_eq!(entry.permissions, "-rw-r-----");
        assert_eq!(entry.owner, "root");
        assert_eq!(entry.group, "root");
        let mtime = std::fs::metadata(&file).unwrap().mtime();
        assert_eq!(entry.modified_time.seconds, mtime);
        assert!(entry.symlink_target.is_none());

        let entry = fs
            .stat(StatRequest {
                path: link.to_str().unwrap().to_owned(),
                ..Default::default()
            })
            .await
            .expect("stat link")
            .into_owned()
            .entry
            .into_option()
            .unwrap();
        assert_eq!(entry.r#type, EnumValue::Known(FileType::FILE_TYPE_FILE));
        assert_eq!(entry.permissions, "Lrwxrwxrwx");
        assert_eq!(
            entry.symlink_target.as_deref(),
            std::fs::canonicalize(&file).unwrap().to_str()
        );
    }

    // JSON field names and encodings as the SDKs read them.
    let raw = unary_json(
        &daemon.url("/filesystem.Filesystem/Stat"),
        &format!(r#"{{"path":"{}"}}"#, file.display()),
        &[],
    )
    .await;
    let entry = &raw.json()["entry"];
    assert_eq!(entry["type"], "FILE_TYPE_FILE");
    assert_eq!(entry["size"], "5");
    assert_eq!(entry["mode"], 0o640);
    assert!(entry["modifiedTime"].as_str().unwrap().ends_with('Z'));

    let err = daemon
        .fs(true)
        .stat(StatRequest {
            path: dir.path().join("missing").to_str().unwrap().to_owned(),
            ..Default::default()
        })
        .await
        .expect_err("missing");
    assert_eq!(err.code, ErrorCode::NotFound);
    assert!(
        err.message
            .as_deref()
            .unwrap()
            .starts_with("file not found: ")
    );
    daemon.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn relative_and_home_paths_resolve_against_the_users_home() {
    let daemon = TestDaemon::start(config()).await;
    let fs = daemon.fs(true);
    for path in ["", "~", "."] {
        let entry = fs
            .stat(StatRequest {
                path: path.to_owned(),
                ..Default::default()
            })
            .await
            .expect("stat home")
            .into_owned()
            .entry
            .into_option()
            .unwrap();
        assert_eq!(entry.path, "/root", "path {path:?}");
        assert_eq!(
            entry.r#type,
            EnumValue::Known(FileType::FILE_TYPE_DIRECTORY)
        );
    }
    let err = fs
        .stat(StatRequest {
            path: "a\0b".to_owned(),
            ..Default::default()
        })
        .await
        .expect_err("NUL");
    assert_eq!(err.code, ErrorCode::InvalidArgument);
    daemon.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn make_dir_creates_parents_owned_by_the_user() {
    let dir = shared_tempdir();
    let daemon = TestDaemon::start(config()).await;
    let fs = daemon.fs_with_headers(false, &[("authorization", &common::basic("nobody"))]);
    let target = dir.path().join("a/b/c");
    let entry = fs
        .make_dir(MakeDirRequest {
            path: target.to_str().unwrap().to_owned(),
            ..Default::default()
        })
        .await
        .expect("mkdir -p")
        .into_owned()
        .entry
        .into_option()
        .unwrap();
    assert_eq!(
        entry.r#type,
        EnumValue::Known(FileType::FILE_TYPE_DIRECTORY)
    );
    assert_eq!(entry.mode, 0o755);
    assert_eq!(entry.owner, "nobody");
    for sub in ["a", "a/b", "a/b/c"] {
        let meta = std::fs::metadata(dir.path().join(sub)).unwrap();
        assert_eq!(meta.uid(), 65534, "{sub}");
        assert_eq!(meta.mode() & 0o777, 0o755, "{sub}");
    }
    let err = fs
        .make_dir(MakeDirRequest {
            path: target.to_str().unwrap().to_owned(),
            ..Default::default()
        })
        .await
        .expect_err("exists");
    assert_eq!(err.code, ErrorCode::AlreadyExists);
    std::fs::write(dir.path().join("file"), b"x").unwrap();
    let err = fs
        .make_dir(MakeDirRequest {
            path: dir.path().join("file").to_str().unwrap().to_owned(),
            ..Default::default()
        })
        .await
        .expect_err("file");
    assert_eq!(err.code, ErrorCode::InvalidArgument);
    daemon.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn move_creates_destination_parents_and_returns_the_destination() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("src.txt"), b"data").unwrap();
    let daemon = TestDaemon::start(config()).await;
    let fs = daemon.fs(true);
    let destination = dir.path().join("x/y/dst.txt");
    let entry = fs
        .r#move(MoveRequest {
            source: dir.path().join("src.txt").to_str().unwrap().to_owned(),
            destination: destination.to_str().unwrap().to_owned(),
            ..Default::default()
        })
        .await
        .expect("move")
        .into_owned()
        .entry
        .into_option()
        .unwrap();
    assert_eq!(entry.path, destination.to_str().unwrap());
    assert_eq!(entry.name, "dst.txt");
    assert_eq!(std::fs::read(&destination).unwrap(), b"data");
    let err = fs
        .r#move(MoveRequest {
            source: dir.path().join("src.txt").to_str().unwrap().to_owned(),
            destination: destination.to_str().unwrap().to_owned(),
            ..Default::default()
        })
        .await
        .expect_err("source gone");
    assert_eq!(err.code, ErrorCode::NotFound);
    let err = fs
        .r#move(MoveRequest {
            source: String::new(),
            destination: destination.to_str().unwrap().to_owned(),
            ..Default::default()
        })
        .await
        .expect_err("empty source");
    assert_eq!(err.code, ErrorCode::InvalidArgument);
    assert_eq!(err.message.as_deref(), Some("move: source is required"));
    daemon.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn list_dir_walks_in_lexical_pre_order_to_the_depth() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("tree");
    for sub in ["subdir1/deep", "subdir2"] {
        std::fs::create_dir_all(root.join(sub)).unwrap();
    }
    for file in [
        "file1.txt",
        "subdir1/a",
        "subdir1/b",
        "subdir1/deep/z",
        "subdir2/c",
    ] {
        std::fs::write(root.join(file), b"x").unwrap();
    }
    std::os::unix::fs::symlink(root.join("subdir2"), root.join("linkdir")).unwrap();
    let alias = dir.path().join("alias");
    std::os::unix::fs::symlink(&root, &alias).unwrap();
    let daemon = TestDaemon::start(config()).await;
    let fs = daemon.fs(true);
    let list = |path: std::path::PathBuf, depth: u32| {
        let fs = &fs;
        async move {
            fs.list_dir(ListDirRequest {
                path: path.to_str().unwrap().to_owned(),
                depth,
                ..Default::default()
            })
            .await
            .map(|response| {
                response
                    .into_owned()
                    .entries
                    .into_iter()
                    .map(|entry| entry.path)
                    .collect::<Vec<_>>()
            })
        }
    };
    let base = root.to_str().unwrap();
    assert_eq!(
        list(root.clone(), 0).await.unwrap(),
        ["file1.txt", "linkdir", "subdir1", "subdir2"].map(|n| format!("{base}/{n}"))
    );
    assert_eq!(
        list(root.clone(), 2).await.unwrap(),
        [
            "file1.txt",
            "linkdir",
            "subdir1",
            "subdir1/a",
            "subdir1/b",
            "subdir1/deep",
            "subdir2",
            "subdir2/c"
        ]
        .map(|n| format!("{base}/{n}"))
    );
    // Symlinks in the requested path are resolved, but entry paths keep the requested prefix.
    let alias_base = alias.to_str().unwrap();
    assert_eq!(
        list(alias.clone(), 1).await.unwrap(),
        ["file1.txt", "linkdir", "subdir1", "subdir2"].map(|n| format!("{alias_base}/{n}"))
    );
    let err = list(root.join("file1.txt"), 1)
        .await
        .expect_err("not a dir");
    assert_eq!(err.code, ErrorCode::InvalidArgument);
    let err = list(root.join("nope"), 1).await.expect_err("missing");
    assert_eq!(err.code, ErrorCode::NotFound);
    let looped = dir.path().join("loop");
    std::os::unix::fs::symlink(&looped, &looped).unwrap();
    let err = list(looped, 1).await.expect_err("loop");
    assert_eq!(err.code, ErrorCode::FailedPrecondition);

    // The linked directory is reported as a directory but not descended into.
    let entries = fs
        .list_dir(ListDirRequest {
            path: base.to_owned(),
            depth: 3,
            ..Default::default()
        })
        .await
        .unwrap()
        .into_owned()
        .entries;
    let link = entries
        .iter()
        .find(|entry| entry.name == "linkdir")
        .unwrap();
    assert_eq!(link.r#type, EnumValue::Known(FileType::FILE_TYPE_DIRECTORY));
    assert!(entries.iter().all(|entry| !entry.path.contains("linkdir/")));
    daemon.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn remove_is_recursive_and_missing_paths_succeed() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("d/e")).unwrap();
    std::fs::write(dir.path().join("d/e/f"), b"x").unwrap();
    std::fs::write(dir.path().join("g"), b"x").unwrap();
    let daemon = TestDaemon::start(config()).await;
    let fs = daemon.fs(false);
    for path in ["d", "g", "never-existed"] {
        fs.remove(RemoveRequest {
            path: dir.path().join(path).to_str().unwrap().to_owned(),
            ..Default::default()
        })
        .await
        .unwrap_or_else(|err| panic!("remove {path}: {err:?}"));
    }
    assert!(!dir.path().join("d").exists());
    assert!(!dir.path().join("g").exists());
    let err = fs
        .remove(RemoveRequest::default())
        .await
        .expect_err("empty path");
    assert_eq!(err.code, ErrorCode::InvalidArgument);
    assert_eq!(err.message.as_deref(), Some("remove: path is required"));
    daemon.stop().await;
}
