//! File operations act with the requested user's permissions (a departure from E2B's envd, which
//! acts as root): `/files?…&username=` and the Filesystem RPCs of a Basic-auth user neither read
//! root-only files nor write where that user cannot, and a refusal changes nothing — unless the
//! daemon is told to act as root ([`FileAccess::AsRoot`]), as E2B's envd does.

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::Path;

use bytes::Bytes;
use connectrpc::ErrorCode;
use e2b_local_envd::{Envd, FileAccess};
use envd_proto::filesystem::{
    ListDirRequest, MakeDirRequest, MoveRequest, RemoveRequest, StatRequest,
};
use http::Method;

use crate::common::{self, TestDaemon, body, config, send};

fn encode(text: &str) -> String {
    percent_encoding::utf8_percent_encode(text, percent_encoding::NON_ALPHANUMERIC).to_string()
}

fn chmod(path: &Path, mode: u32) {
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
}

/// A root-owned world `nobody` may enter but not write: `secret` (0600), `public` (0644),
/// `open` (0666), `private/` (0700) holding `inner`, and `mine/` (0777).
fn world() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    chmod(dir.path(), 0o755);
    for (name, mode) in [("secret", 0o600), ("public", 0o644), ("open", 0o666)] {
        let path = dir.path().join(name);
        std::fs::write(&path, name).unwrap();
        chmod(&path, mode);
    }
    let private = dir.path().join("private");
    std::fs::create_dir(&private).unwrap();
    std::fs::write(private.join("inner"), b"inner").unwrap();
    chmod(&private, 0o700);
    let mine = dir.path().join("mine");
    std::fs::create_dir(&mine).unwrap();
    chmod(&mine, 0o777);
    dir
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn files_endpoint_reads_and_writes_as_the_named_user() {
    let dir = world();
    let path = |name: &str| dir.path().join(name).to_str().unwrap().to_owned();
    let daemon = TestDaemon::start(config()).await;
    let get = |file: String, user: &'static str| {
        let url = daemon.url(&format!("/files?path={}&username={user}", encode(&file)));
        async move { send(Method::GET, &url, &[], body(Bytes::new())).await }
    };
    let post = |file: String, user: &'static str, content: &'static [u8]| {
        let url = daemon.url(&format!("/files?path={}&username={user}", encode(&file)));
        async move {
            send(
                Method::POST,
                &url,
                &[("content-type", "application/octet-stream")],
                body(Bytes::from_static(content)),
            )
            .await
        }
    };

    // Reads: root reads everything, nobody only what it may.
    let reply = get(path("secret"), "nobody").await;
    assert_eq!(reply.status, 403, "{}", reply.text());
    assert!(
        reply.text().contains(&path("secret")) && reply.text().contains("nobody"),
        "{}",
        reply.text()
    );
    let reply = get(path("private/inner"), "nobody").await;
    assert_eq!(reply.status, 403, "{}", reply.text());
    let reply = get(path("public"), "nobody").await;
    assert_eq!(
        (reply.status.as_u16(), reply.text()),
        (200, "public".into())
    );
    let reply = get(path("secret"), "root").await;
    assert_eq!(
        (reply.status.as_u16(), reply.text()),
        (200, "secret".into())
    );

    // Writes: refused where nobody may not write, and nothing changes.
    for (target, what) in [
        (path("public"), "a root-owned 0644 file"),
        (path("new"), "a new file in a root-owned 0755 directory"),
        (path("private/x"), "a file in a root-only directory"),
        (
            path("made/x"),
            "a new directory in a root-owned 0755 directory",
        ),
    ] {
        let reply = post(target.clone(), "nobody", b"changed").await;
        assert_eq!(reply.status, 403, "{what}: {}", reply.text());
    }
    assert_eq!(std::fs::read(dir.path().join("public")).unwrap(), b"public");
    for absent in ["new", "made"] {
        assert!(!dir.path().join(absent).exists(), "{absent}");
    }
    assert!(!dir.path().join("private/x").exists());

    // A file nobody may write but not own keeps its owner; one nobody creates is nobody's.
    let reply = post(path("open"), "nobody", b"changed").await;
    assert_eq!(reply.status, 200, "{}", reply.text());
    let meta = std::fs::metadata(dir.path().join("open")).unwrap();
    assert_eq!((meta.uid(), meta.len()), (0, 7));
    let reply = post(path("mine/deeper/new"), "nobody", b"mine").await;
    assert_eq!(reply.status, 200, "{}", reply.text());
    assert_eq!(
        std::fs::metadata(dir.path().join("mine/deeper/new"))
            .unwrap()
            .uid(),
        65534
    );
    daemon.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn filesystem_rpcs_act_as_the_basic_auth_user() {
    let dir = world();
    let path = |name: &str| dir.path().join(name).to_str().unwrap().to_owned();
    let daemon = TestDaemon::start(config()).await;
    let fs = daemon.fs_with_headers(false, &[("authorization", &common::basic("nobody"))]);

    let err = fs
        .stat(StatRequest {
            path: path("private/inner"),
            ..Default::default()
        })
        .await
        .expect_err("stat inside a root-only directory");
    assert_eq!(err.code, ErrorCode::PermissionDenied, "{err:?}");
    let err = fs
        .list_dir(ListDirRequest {
            path: path("private"),
            depth: 1,
            ..Default::default()
        })
        .await
        .expect_err("list a root-only directory");
    assert_eq!(err.code, ErrorCode::PermissionDenied, "{err:?}");
    let err = fs
        .make_dir(MakeDirRequest {
            path: path("made"),
            ..Default::default()
        })
        .await
        .expect_err("mkdir in a root-owned directory");
    assert_eq!(err.code, ErrorCode::PermissionDenied, "{err:?}");
    let err = fs
        .remove(RemoveRequest {
            path: path("public"),
            ..Default::default()
        })
        .await
        .expect_err("remove from a root-owned directory");
    assert_eq!(err.code, ErrorCode::PermissionDenied, "{err:?}");
    let err = fs
        .r#move(MoveRequest {
            source: path("public"),
            destination: path("mine/stolen"),
            ..Default::default()
        })
        .await
        .expect_err("move out of a root-owned directory");
    assert_eq!(err.code, ErrorCode::PermissionDenied, "{err:?}");
    assert!(dir.path().join("public").exists());
    assert!(!dir.path().join("made").exists());
    assert!(!dir.path().join("mine/stolen").exists());

    // What nobody may do still works, and what it makes is its own.
    fs.make_dir(MakeDirRequest {
        path: path("mine/sub"),
        ..Default::default()
    })
    .await
    .expect("mkdir in a writable directory");
    assert_eq!(
        std::fs::metadata(dir.path().join("mine/sub"))
            .unwrap()
            .uid(),
        65534
    );
    fs.stat(StatRequest {
        path: path("secret"),
        ..Default::default()
    })
    .await
    .expect("stat needs no read permission on the file");

    // Root still reaches everything.
    let root = daemon.fs(false);
    root.stat(StatRequest {
        path: path("private/inner"),
        ..Default::default()
    })
    .await
    .expect("root stats inside a root-only directory");
    daemon.stop().await;
}

/// With [`FileAccess::AsRoot`] (E2B's envd) a user's file operations run as root: nobody reads
/// and lists root-only files and writes in root-owned directories, and what it creates — or
/// overwrites — is given to it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn as_root_file_access_serves_any_user_as_root() {
    let dir = world();
    let path = |name: &str| dir.path().join(name).to_str().unwrap().to_owned();
    let daemon = TestDaemon::start_with(Envd::new(config()).file_access(FileAccess::AsRoot)).await;

    let url = |name: &str| {
        daemon.url(&format!(
            "/files?path={}&username=nobody",
            encode(&path(name))
        ))
    };
    let reply = send(Method::GET, &url("private/inner"), &[], body(Bytes::new())).await;
    assert_eq!((reply.status.as_u16(), reply.text()), (200, "inner".into()));
    for name in ["public", "made/new"] {
        let reply = send(
            Method::POST,
            &url(name),
            &[("content-type", "application/octet-stream")],
            body(Bytes::from_static(b"changed")),
        )
        .await;
        assert_eq!(reply.status, 200, "{name}: {}", reply.text());
        let meta = std::fs::metadata(dir.path().join(name)).unwrap();
        assert_eq!((meta.uid(), meta.len()), (65534, 7), "{name}");
    }
    assert_eq!(
        std::fs::metadata(dir.path().join("made")).unwrap().uid(),
        65534
    );

    let fs = daemon.fs_with_headers(false, &[("authorization", &common::basic("nobody"))]);
    let listed = fs
        .list_dir(ListDirRequest {
            path: path("private"),
            depth: 1,
            ..Default::default()
        })
        .await
        .expect("list a root-only directory")
        .into_owned()
        .entries;
    assert_eq!(listed.len(), 1);
    fs.make_dir(MakeDirRequest {
        path: path("dir"),
        ..Default::default()
    })
    .await
    .expect("mkdir in a root-owned directory");
    assert_eq!(
        std::fs::metadata(dir.path().join("dir")).unwrap().uid(),
        65534
    );
    daemon.stop().await;
}

/// A watch reports the names of a directory's entries, so the acting user must be allowed to
/// list the directory (the daemon adds the watch itself, as root): `nobody` watching the
/// root-only `private/` is `permission_denied`, on the stream and for a polling watcher alike,
/// while its own `mine/` can be watched.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watches_need_the_acting_users_read_permission() {
    let dir = world();
    let daemon = TestDaemon::start(config()).await;
    let nobody = common::basic("nobody");
    for (name, code) in [("private", Some("permission_denied")), ("mine", None)] {
        let path = dir.path().join(name);
        let request = format!(r#"{{"path":"{}"}}"#, path.display());
        let headers = [
            ("authorization", nobody.as_str()),
            ("connect-timeout-ms", "500"),
        ];
        let stream = common::RawStream::open(
            &daemon.url("/filesystem.Filesystem/WatchDir"),
            &request,
            &headers,
        )
        .await;
        let envelopes = stream.collect().await;
        let first = envelopes.first().expect("an answer").json();
        match code {
            Some(code) => assert_eq!(first["error"]["code"], code, "watch {name}: {first}"),
            None => assert!(first.get("start").is_some(), "watch {name}: {first}"),
        }
        let created = send(
            Method::POST,
            &daemon.url("/filesystem.Filesystem/CreateWatcher"),
            &[
                ("content-type", "application/json"),
                ("authorization", nobody.as_str()),
            ],
            body(request.clone()),
        )
        .await;
        let answer = created.text();
        match code {
            Some(code) => assert!(answer.contains(code), "watcher on {name}: {answer}"),
            None => assert!(answer.contains("watcherId"), "watcher on {name}: {answer}"),
        }
    }
    daemon.stop().await;
}
