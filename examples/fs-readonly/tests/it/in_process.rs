//! The decorator's logic in-process, through the rlib: reads pass through
//! to the wrapped provider, every mutation is refused before it reaches it,
//! and the plugin's config and injection are checked.

use std::sync::Arc;

use dsh_example_fs_readonly::{FsReadonly, ReadOnlyFs, read_only};
use dsh_fs_local::FsLocal;
use dsh_plugin_api::fs::{Edit, FileKind, FsProvider, WriteGuard};
use dsh_plugin_api::stream::TextStream;
use dsh_plugin_api::stream::collect_bytes;
use dsh_plugin_api::{Bytes, CreateContext, ErrorKind, Injected, Plugin, Service};
use futures::StreamExt;

async fn collect_text(stream: TextStream) -> String {
    stream
        .map(|chunk| chunk.expect("chunk"))
        .collect::<Vec<_>>()
        .await
        .concat()
}

struct Fixture {
    dir: tempfile::TempDir,
    fs: ReadOnlyFs,
}

fn fixture() -> Fixture {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::create_dir(dir.path().join("sub")).expect("mkdir");
    std::fs::write(dir.path().join("sub/a.txt"), "héllo\n").expect("write");
    let cwd = dir.path().to_str().expect("UTF-8 temp dir").to_owned();
    let local: Arc<dyn FsProvider> = Arc::new(FsLocal::new(cwd).expect("fs-local"));
    Fixture {
        fs: read_only(local, "ro"),
        dir,
    }
}

#[tokio::test]
async fn reads_pass_through() {
    let Fixture { dir, fs } = fixture();
    let root = dir.path().to_str().unwrap();
    let resolved = fs.resolve("sub/a.txt", None).await.expect("resolve");
    assert_eq!(resolved.path, format!("{root}/sub/a.txt"));
    assert!(fs.contains(root, "sub/a.txt").await.expect("contains"));
    let stat = fs.stat("sub/a.txt").await.expect("stat");
    assert_eq!((stat.kind, stat.size), (FileKind::File, 7));
    assert_eq!(
        fs.lstat("sub/a.txt").await.expect("lstat").kind,
        FileKind::File
    );
    let names: Vec<String> = fs
        .list("sub")
        .await
        .expect("list")
        .into_iter()
        .map(|entry| entry.name)
        .collect();
    assert_eq!(names, ["a.txt"]);
    let file = fs.read_text("sub/a.txt").await.expect("read_text");
    assert_eq!(file.text, "héllo\n");
    assert_eq!(file.version, stat.version);
    let streamed = fs.stream_text("sub/a.txt").await.expect("stream_text");
    assert_eq!(collect_text(streamed.chunks).await, "héllo\n");
    let bytes = fs.read_bytes("sub/a.txt").await.expect("read_bytes");
    assert_eq!(
        collect_bytes(bytes.chunks).await.expect("bytes"),
        "héllo\n".as_bytes()
    );
    // Errors of the wrapped provider pass through unchanged.
    assert_eq!(
        fs.stat("missing").await.expect_err("missing").kind(),
        ErrorKind::NotFound
    );
}

#[tokio::test]
async fn every_mutation_is_refused_and_changes_nothing() {
    let Fixture { dir, fs } = fixture();
    let before = std::fs::read_to_string(dir.path().join("sub/a.txt")).unwrap();
    let refusals = [
        (
            "write",
            "sub/a.txt",
            fs.write("sub/a.txt", Bytes::from_static(b"x"), WriteGuard::Overwrite)
                .await
                .err(),
        ),
        (
            "edit",
            "sub/a.txt",
            fs.edit(
                "sub/a.txt",
                vec![Edit {
                    old: "h".into(),
                    new: "H".into(),
                    replace_all: false,
                }],
                WriteGuard::Overwrite,
            )
            .await
            .err(),
        ),
        ("mkdir", "new/dir", fs.mkdir("new/dir").await.err()),
        ("remove", "sub", fs.remove("sub").await.err()),
        ("rename", "sub", fs.rename("sub", "moved").await.err()),
    ];
    for (operation, path, err) in refusals {
        let err = err.unwrap_or_else(|| panic!("{operation} was not refused"));
        assert_eq!(err.kind(), ErrorKind::PermissionDenied, "{operation}");
        assert_eq!(
            err.message(),
            format!("{operation}: `ro` is a read-only fs")
        );
        assert_eq!(err.subject(), Some(path));
    }
    assert_eq!(
        std::fs::read_to_string(dir.path().join("sub/a.txt")).unwrap(),
        before
    );
    assert!(!dir.path().join("new").exists());
    assert!(!dir.path().join("moved").exists());
}

fn context(config: serde_json::Value, services: Vec<Service>) -> CreateContext {
    CreateContext {
        id: "ro".into(),
        config,
        services: Injected::new(services),
    }
}

#[tokio::test]
async fn the_plugin_wraps_the_injected_fs_and_takes_no_config() {
    let Fixture { dir, .. } = fixture();
    let local: Arc<dyn FsProvider> = Arc::new(FsLocal::new(dir.path().to_str().unwrap()).unwrap());
    let plugin = FsReadonly::create(context(
        serde_json::Value::Null,
        vec![Service::Fs(local.clone())],
    ))
    .await
    .expect("create");
    let services = plugin.services();
    let [Service::Fs(fs)] = services.as_slice() else {
        panic!("one fs service");
    };
    assert_eq!(
        fs.read_text("sub/a.txt").await.expect("read").text,
        "héllo\n"
    );
    assert_eq!(
        fs.mkdir("x").await.expect_err("refused").kind(),
        ErrorKind::PermissionDenied
    );
    plugin.dispose().await.expect("dispose");

    let err = FsReadonly::create(context(
        serde_json::json!({"writable": true}),
        vec![Service::Fs(local)],
    ))
    .await
    .err()
    .expect("a config field is refused");
    assert_eq!(err.kind(), ErrorKind::Config);
    assert!(
        err.message()
            .starts_with("config.writable: unknown field `writable`"),
        "{err}"
    );
    let err = FsReadonly::create(context(serde_json::Value::Null, vec![]))
        .await
        .err()
        .expect("fs must be injected");
    assert_eq!(err.kind(), ErrorKind::Config);
}
