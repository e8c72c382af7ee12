//! The dlopen path: the built `libdsh_fs_local.so` loads through the
//! plugin API's host loader, describes itself and serves `fs` across the
//! ABI with the same behaviour and error kinds as in-process.

use std::path::PathBuf;

use dsh_plugin_api::fs::{Edit, WriteGuard};
use dsh_plugin_api::host::{CreateRequest, PluginLibrary, library_file_name};
use dsh_plugin_api::{Bytes, Text};
use dsh_plugin_api::{ErrorKind, Service, ServiceKind};
use futures::StreamExt;
use serde_json::json;

/// The cdylib cargo built for this test run, beside the test executable
/// (`target/<profile>/deps`): this package's own library or a
/// dev-dependency's, so never older than its sources.
fn library() -> PathBuf {
    let exe = std::env::current_exe().expect("test executable");
    let path = exe.with_file_name(library_file_name("dsh-fs-local"));
    assert!(
        path.is_file(),
        "{} was not built beside the test executable",
        path.display()
    );
    path
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_built_library_loads_and_serves_fs() {
    let library = PluginLibrary::load(&library()).expect("load");
    let descriptor = library.descriptor();
    assert_eq!(descriptor.name, "dsh-fs-local");
    assert_eq!(descriptor.version, env!("CARGO_PKG_VERSION"));
    assert_eq!(descriptor.provides, vec![ServiceKind::Fs]);
    assert!(descriptor.inject.is_empty());

    let dir = tempfile::tempdir().unwrap();
    let root = std::fs::canonicalize(dir.path()).unwrap();
    let instance = library
        .create(CreateRequest {
            id: "fs".into(),
            config: json!({ "cwd": root }),
            services: Vec::new(),
        })
        .await
        .expect("create");
    let fs = match instance.services() {
        [Service::Fs(fs)] => fs.clone(),
        other => panic!("expected one fs service, got {other:?}"),
    };

    let version = fs
        .write(
            "sub/a.txt",
            Bytes::from_static(b"one\r\ntwo\r\n"),
            WriteGuard::CreateNew,
        )
        .await
        .unwrap();
    let read = fs.read_text("sub/a.txt").await.unwrap();
    assert_eq!(read.text, "one\r\ntwo\r\n");
    assert_eq!(read.version, version);
    let outcome = fs
        .edit(
            "sub/a.txt",
            vec![Edit {
                old: "two".into(),
                new: "2\nthree".into(),
                replace_all: false,
            }],
            WriteGuard::IfVersion(version.clone()),
        )
        .await
        .unwrap();
    assert_eq!(outcome.replacements, 1);
    assert_eq!(
        std::fs::read(root.join("sub/a.txt")).unwrap(),
        b"one\r\n2\r\nthree\r\n"
    );

    let stream = fs.stream_text("sub/a.txt").await.unwrap();
    let text: Vec<Text> = stream.chunks.map(|chunk| chunk.unwrap()).collect().await;
    assert_eq!(text.concat(), "one\r\n2\r\nthree\r\n");
    let resolved = fs.resolve("sub/../sub/a.txt", None).await.unwrap();
    assert_eq!(resolved.path, root.join("sub/a.txt").to_str().unwrap());

    // Error kinds, messages and subjects survive the boundary.
    let err = fs
        .write(
            "sub/a.txt",
            Bytes::from_static(b"x"),
            WriteGuard::IfVersion(version),
        )
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Conflict);
    assert!(err.to_string().contains("write: stale version"), "{err}");
    std::fs::write(root.join("latin1"), b"caf\xe9").unwrap();
    let err = fs.read_text("latin1").await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidUtf8);
    assert_eq!(err.subject(), root.join("latin1").to_str());
    assert_eq!(
        fs.read_text("missing").await.unwrap_err().kind(),
        ErrorKind::NotFound
    );

    assert!(fs.remove("sub").await.unwrap());
    instance.dispose().await.expect("dispose");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bad_config_fails_create_through_the_abi() {
    let library = PluginLibrary::load(&library()).expect("load");
    let created = library
        .create(CreateRequest {
            id: "fs".into(),
            config: json!({ "cwd": "relative", "extra": true }),
            services: Vec::new(),
        })
        .await;
    let Err(err) = created else {
        panic!("create with a bad config succeeded");
    };
    assert_eq!(err.kind(), ErrorKind::Config);
    assert!(err.message().contains("config"), "{err}");
}
