//! The dlopen path: the built `libdsh_subprocess_local.so` loads through the
//! plugin API's host loader and serves `subprocess` across the ABI — pipes,
//! collect, stdin, terminate, terminals — with the same error kinds as
//! in-process.

use std::path::PathBuf;
use std::time::Duration;

use dsh_plugin_api::host::{CreateRequest, PluginLibrary, library_file_name};
use dsh_plugin_api::stream::collect_bytes;
use dsh_plugin_api::subprocess::{
    OutputMode, OutputStream, Signal, SpawnSpec, StdinMode, TerminalSpec,
};
use dsh_plugin_api::{Bytes, ErrorKind, Service, ServiceKind};
use futures::StreamExt;
use serde_json::json;

/// The cdylib cargo built for this test run, beside the test executable
/// (`target/<profile>/deps`): this package's own library or a
/// dev-dependency's, so never older than its sources.
fn library() -> PathBuf {
    let exe = std::env::current_exe().expect("test executable");
    let path = exe.with_file_name(library_file_name("dsh-subprocess-local"));
    assert!(
        path.is_file(),
        "{} was not built beside the test executable",
        path.display()
    );
    path
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_built_library_loads_and_serves_subprocess() {
    let library = PluginLibrary::load(&library()).expect("load");
    let descriptor = library.descriptor();
    assert_eq!(descriptor.name, "dsh-subprocess-local");
    assert_eq!(descriptor.version, env!("CARGO_PKG_VERSION"));
    assert_eq!(descriptor.provides, vec![ServiceKind::Subprocess]);
    assert!(descriptor.inject.is_empty());

    let dir = tempfile::tempdir().expect("tempdir");
    let root = std::fs::canonicalize(dir.path()).expect("canonical");
    let instance = library
        .create(CreateRequest {
            id: "subprocess".into(),
            config: json!({ "cwd": root, "killGraceMs": 200 }),
            services: Vec::new(),
        })
        .await
        .expect("create");
    let subprocess = match instance.services() {
        [Service::Subprocess(subprocess)] => subprocess.clone(),
        other => panic!("expected one subprocess service, got {other:?}"),
    };

    // Pipes and stdin across the boundary, byte-exact.
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
    let mut expected = format!("{}\n", root.display()).into_bytes();
    expected.extend_from_slice(b"\x00\xff\xe2\x82\xac");
    assert_eq!(out, expected);
    let status = process.wait().await.expect("wait");
    assert_eq!(status.code, Some(3));

    // Collect mode and offset reads.
    let mut spec = SpawnSpec::new(["sh", "-c", "printf 0123456789"]);
    spec.stdout = OutputMode::Collect { limit: 4 };
    let process = subprocess.spawn(spec).await.expect("spawn");
    process.wait().await.expect("wait");
    let snapshot = process
        .read_output(OutputStream::Stdout, 0, 100)
        .await
        .expect("read");
    assert_eq!(
        (snapshot.total, snapshot.offset, snapshot.truncated),
        (10, 6, true)
    );
    assert_eq!(snapshot.bytes, &b"6789"[..]);

    // Terminate across the boundary (once the trap is installed).
    let process = subprocess
        .spawn(SpawnSpec::new([
            "sh",
            "-c",
            "trap '' TERM; echo ready; exec sleep 30",
        ]))
        .await
        .expect("spawn");
    let mut stdout = process.take_stdout().expect("stdout");
    let ready = stdout.next().await.expect("a line").expect("chunk");
    assert_eq!(ready, &b"ready\n"[..]);
    process
        .terminate(Duration::from_millis(200))
        .await
        .expect("terminate");
    assert_eq!(
        process.wait().await.expect("wait").signal,
        Some(Signal::KILL)
    );

    // A terminal across the boundary.
    let mut spec = TerminalSpec::new(["cat"]);
    spec.env.insert("TERM".into(), "xterm".into());
    let terminal = subprocess
        .spawn_terminal(spec)
        .await
        .expect("spawn_terminal");
    let mut output = terminal.take_output().expect("output");
    terminal
        .write(Bytes::from_static(b"ping\n"))
        .await
        .expect("write");
    let mut seen = Vec::new();
    while !String::from_utf8_lossy(&seen).contains("ping\r\nping\r\n") {
        let chunk = tokio::time::timeout(Duration::from_secs(10), output.next())
            .await
            .expect("output in time")
            .expect("open")
            .expect("chunk");
        seen.extend_from_slice(&chunk);
    }
    assert!(terminal.foreground_pgid().await.expect("fg") == terminal.pid());
    terminal.terminate().await.expect("terminate");

    // Errors keep their kind, message and subject.
    let err = subprocess
        .spawn(SpawnSpec::new(["bin/ls"]))
        .await
        .err()
        .expect("relative");
    assert_eq!(err.kind(), ErrorKind::InvalidInput);
    assert!(
        err.message().starts_with("spawn: relative program path"),
        "{err}"
    );
    let err = subprocess
        .resolve_executable("no-such-program-51f0", &[])
        .await
        .expect_err("missing");
    assert_eq!(err.kind(), ErrorKind::NotFound);
    assert_eq!(err.subject(), Some("no-such-program-51f0"));

    // Disposal ends what is still running.
    let sleeper = subprocess
        .spawn(SpawnSpec::new(["sleep", "30"]))
        .await
        .expect("spawn");
    let pid = sleeper.pid();
    instance.dispose().await.expect("dispose");
    assert!(
        std::fs::read_to_string(format!("/proc/{pid}/stat")).map_or(true, |s| s.contains(") Z ")),
        "disposal ended the sleeper"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bad_config_fails_create_through_the_abi() {
    let library = PluginLibrary::load(&library()).expect("load");
    let created = library
        .create(CreateRequest {
            id: "subprocess".into(),
            config: json!({ "spillDir": "relative" }),
            services: Vec::new(),
        })
        .await;
    let Err(err) = created else {
        panic!("create with a bad config succeeded");
    };
    assert_eq!(err.kind(), ErrorKind::Config);
    assert!(err.message().contains("config.spillDir"), "{err}");
}
