//! The dlopen path: the built `libdsh_subprocess_e2b.so` loads through the
//! plugin API's host loader, gets an `e2b` owner injected across the ABI,
//! and serves `subprocess` in that owner's sandbox — commands, stdin,
//! collect, terminals, errors, and disposal — with the same results as
//! in-process.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use dsh_plugin_api::OwnerKind;
use dsh_plugin_api::host::{CreateRequest, PluginLibrary, library_file_name};
use dsh_plugin_api::stream::collect_bytes;
use dsh_plugin_api::subprocess::{OutputMode, OutputStream, SpawnSpec, StdinMode, TerminalSpec};
use dsh_plugin_api::{Bytes, ErrorKind, Service, ServiceKind};
use serde_json::json;

/// The cdylib cargo built for this test run, beside the test executable
/// (`target/<profile>/deps`): this package's own library or a
/// dev-dependency's, so never older than its sources.
fn library() -> PathBuf {
    let exe = std::env::current_exe().expect("test executable");
    let path = exe.with_file_name(library_file_name("dsh-subprocess-e2b"));
    assert!(
        path.is_file(),
        "{} was not built beside the test executable",
        path.display()
    );
    path
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_built_library_serves_subprocess_in_the_injected_owners_sandbox() {
    let world = crate::support::World::start().await;
    let library = PluginLibrary::load(&library()).expect("load");
    let descriptor = library.descriptor();
    assert_eq!(descriptor.name, "dsh-subprocess-e2b");
    assert_eq!(descriptor.provides, vec![ServiceKind::Subprocess]);
    assert_eq!(descriptor.inject, vec![ServiceKind::Owner(OwnerKind::E2B)]);

    let err = library
        .create(CreateRequest {
            id: "subprocess".into(),
            config: json!({ "killGrace": 5 }),
            services: vec![Service::Owner(OwnerKind::E2B, world.owner.clone())],
        })
        .await
        .expect_err("unknown config field");
    assert_eq!(err.kind(), ErrorKind::Config);

    let instance = library
        .create(CreateRequest {
            id: "subprocess".into(),
            config: json!({ "killGraceMs": 200 }),
            services: vec![Service::Owner(
                OwnerKind::E2B,
                world.owner.clone() as Arc<_>,
            )],
        })
        .await
        .expect("create");
    let subprocess = match instance.services() {
        [Service::Subprocess(subprocess)] => subprocess.clone(),
        other => panic!("expected one subprocess service, got {other:?}"),
    };

    let mut spec = SpawnSpec::new(["sh", "-c", "pwd; cat; exit 3"]);
    spec.stdin = StdinMode::Pipe;
    let process = subprocess.spawn(spec).await.expect("spawn");
    assert!(process.pid() > 1);
    let mut stdin = process.take_stdin().expect("stdin");
    stdin
        .write(Bytes::from_static(b"\x00\xff\xe2\x82"))
        .await
        .expect("write");
    stdin
        .write(Bytes::from_static(b"\xac"))
        .await
        .expect("write");
    stdin.close().await.expect("close");
    let out = collect_bytes(process.take_stdout().expect("stdout"))
        .await
        .expect("stdout");
    let mut expected = format!("{}\n", crate::support::CWD).into_bytes();
    expected.extend_from_slice(b"\x00\xff\xe2\x82\xac");
    assert_eq!(out, expected);
    assert_eq!(process.wait().await.expect("wait").code, Some(3));

    let mut spec = SpawnSpec::new(["sh", "-c", "printf 0123456789"]);
    spec.stdout = OutputMode::Collect { limit: 4 };
    let process = subprocess.spawn(spec).await.expect("spawn");
    process.wait().await.expect("wait");
    let snapshot = process
        .read_output(OutputStream::Stdout, 0, 100)
        .await
        .expect("read_output");
    assert_eq!((snapshot.total, &snapshot.bytes[..]), (10, &b"6789"[..]));

    let err = subprocess
        .spawn(SpawnSpec::new(["dsh-no-such-program"]))
        .await
        .err()
        .expect("missing");
    assert_eq!(err.kind(), ErrorKind::NotFound);

    let mut spec = TerminalSpec::new(["sh", "-c", "printf ready; exit 4"]);
    spec.env.insert("TERM".into(), "xterm".into());
    let terminal = subprocess.spawn_terminal(spec).await.expect("terminal");
    let screen = collect_bytes(terminal.take_output().expect("output"))
        .await
        .expect("output");
    assert_eq!(screen, b"ready");
    assert_eq!(terminal.wait().await.expect("wait").code, Some(4));

    let lingering = subprocess
        .spawn(SpawnSpec::new(["sleep", "60"]))
        .await
        .expect("spawn");
    let pid = lingering.pid();
    tokio::time::timeout(Duration::from_secs(30), instance.dispose())
        .await
        .expect("dispose in time")
        .expect("dispose");
    assert!(
        world.group_members(pid).await.is_empty(),
        "disposal across the ABI terminated group {pid}"
    );
    // Across the ABI, a disposed instance's handles refuse further calls.
    let err = lingering.terminate(Duration::ZERO).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Closed, "{err}");
}
