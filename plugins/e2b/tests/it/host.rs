//! The owner loaded through the host, from its built library: the `e2b`
//! service crosses the plugin ABI and adapters' typed envd client works
//! through it, and when the host (or the `dsh` program) ends, so does the
//! sandbox.
//!
//! Needs the built library and program (`cargo build -p dsh-e2b -p
//! dsh-host -p dsh-fs-local -p dsh-subprocess-local`), root and the built
//! server (`cargo build -p e2b-local`).

use std::process::{Command as Process, Output, Stdio};
use std::time::{Duration, Instant};

use bytes::Bytes;
use dsh_e2b_gateway::envd_client;
use dsh_host::{Host, ManifestFormat};
use e2b_client::{
    CallOptions, Command, DownloadOptions, ProcessEvent, StreamOptions, UploadOptions,
};
use futures::StreamExt;

use crate::support::{World, artifact, dsh_binary, owner_library};

/// A YAML manifest with the owner from its built library, configured for
/// `world` in the manifest itself (this process's environment is left
/// alone), plus `extra` entries.
fn manifest(world: &World, on_dispose: &str, extra: &str) -> String {
    format!(
        "plugins:\n  - id: e2b\n    name: dsh-e2b\n    path: {lib}\n    config:\n      apiKey: {key}\n      apiUrl: {api}\n      sandboxUrl: {sandbox}\n      onDispose: {on_dispose}\n{extra}",
        lib = owner_library().display(),
        key = world.server.api_key(),
        api = world.server.api_url(),
        sandbox = world.server.sandbox_url(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_owner_serves_adapters_across_the_plugin_abi() {
    let world = World::start();
    let host = Host::from_str(&manifest(&world, "kill", ""), ManifestFormat::Yaml)
        .await
        .expect("load the owner");
    let owner = host.e2b().expect("the e2b service");
    let info = owner.info();
    assert_eq!(info.cwd, "/home/user/workspace");
    assert_eq!(world.sandboxes().await.len(), 1);

    let envd = envd_client(owner.clone());
    let entry = envd
        .make_dir("/home/user/workspace/src", &CallOptions::default())
        .await
        .unwrap();
    assert_eq!(entry.owner, "user");

    // 8 MiB up and down through the ABI, streamed.
    let chunk = Bytes::from(vec![0xa5u8; 256 << 10]);
    let chunks =
        futures::stream::iter((0..32).map(move |_| Ok::<_, std::io::Error>(chunk.clone())));
    envd.upload(
        "/home/user/workspace/src/blob",
        chunks,
        &UploadOptions::default().content_length(8 << 20),
    )
    .await
    .unwrap();
    let mut download = envd
        .download("/home/user/workspace/src/blob", &DownloadOptions::default())
        .await
        .unwrap();
    let mut total = 0;
    while let Some(piece) = download.next().await {
        let piece = piece.unwrap();
        assert!(piece.iter().all(|&b| b == 0xa5));
        total += piece.len();
    }
    assert_eq!(total, 8 << 20);

    // A process stream, then the sandbox killed under it.
    let mut ticker = envd
        .start(
            &Command::shell("cd /home/user/workspace && while true; do pwd; sleep 0.05; done"),
            &StreamOptions::default(),
        )
        .await
        .unwrap();
    match ticker.next().await {
        Some(Ok(ProcessEvent::Stdout(bytes))) => {
            assert!(bytes.starts_with(b"/home/user/workspace\n"), "{bytes:?}");
        }
        other => panic!("expected output, got {other:?}"),
    }
    world.api().kill_sandbox(&info.sandbox_id).await.unwrap();
    let err = tokio::time::timeout(Duration::from_secs(10), async {
        loop {
            match ticker.next().await {
                Some(Ok(_)) => continue,
                Some(Err(err)) => return err,
                None => panic!("the stream ended cleanly after a kill"),
            }
        }
    })
    .await
    .expect("the stream ends within 10 s");
    assert!(err.is_unavailable(), "{err:?}");
    let err = envd.stat("/", &CallOptions::default()).await.unwrap_err();
    assert!(err.is_sandbox_gone(), "{err:?}");
    assert!(!owner.alive().await.unwrap());
    drop(envd);
    drop(owner);
    host.dispose()
        .await
        .expect("a gone sandbox disposes quietly");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn disposing_the_host_kills_the_sandbox_and_config_errors_create_nothing() {
    let world = World::start();
    let host = Host::from_str(&manifest(&world, "kill", ""), ManifestFormat::Yaml)
        .await
        .expect("load the owner");
    assert_eq!(world.sandboxes().await.len(), 1);
    host.dispose().await.unwrap();
    assert!(world.sandboxes().await.is_empty());

    let bad = manifest(&world, "kill", "").replace(
        "      onDispose: kill\n",
        "      onDispose: kill\n      cwd: relative/dir\n",
    );
    let err = Host::from_str(&bad, ManifestFormat::Yaml)
        .await
        .expect_err("a relative cwd");
    let message = err.to_string();
    assert!(
        message.contains("config.cwd: must be an absolute POSIX path"),
        "{message}"
    );
    assert!(world.sandboxes().await.is_empty());
}

/// `dsh` with the server's variables in its environment.
fn dsh(world: &World) -> Process {
    let mut command = Process::new(dsh_binary());
    command
        .envs(world.env_pairs())
        .env_remove("RUST_LOG")
        .stdin(Stdio::null());
    command
}

fn run(world: &World, args: &[&str]) -> Output {
    let output = dsh(world).args(args).output().expect("run dsh");
    assert!(
        output.status.success(),
        "dsh {args:?}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    output
}

/// A manifest file with the owner (configured by the environment, as the
/// shipped ones are) and the local fs and subprocess.
fn local_world_manifest(dir: &tempfile::TempDir, on_dispose: &str) -> String {
    artifact(
        "libdsh_fs_local.so",
        "build it with `cargo build -p dsh-fs-local`",
    );
    artifact(
        "libdsh_subprocess_local.so",
        "build it with `cargo build -p dsh-subprocess-local`",
    );
    let path = dir.path().join(format!("owner-{on_dispose}.yaml"));
    std::fs::write(
        &path,
        format!(
            "plugins:\n  - id: e2b\n    name: dsh-e2b\n    config: {{ onDispose: {on_dispose} }}\n  - id: fs\n    name: dsh-fs-local\n  - id: subprocess\n    name: dsh-subprocess-local\n"
        ),
    )
    .unwrap();
    owner_library();
    path.display().to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_sandbox_lives_exactly_as_long_as_dsh() {
    let world = World::start();
    let dir = tempfile::tempdir().unwrap();
    let kill = local_world_manifest(&dir, "kill");
    let leave = local_world_manifest(&dir, "leave");

    let listing = String::from_utf8(run(&world, &["--config", &kill, "plugins"]).stdout).unwrap();
    assert!(listing.contains("dsh-e2b"), "{listing}");
    assert!(
        world.sandboxes().await.is_empty(),
        "`plugins` creates nothing"
    );

    run(&world, &["--config", &kill, "exec", "--", "true"]);
    assert!(
        world.sandboxes().await.is_empty(),
        "the sandbox is gone after dsh"
    );
    run(&world, &["--config", &leave, "exec", "--", "true"]);
    assert_eq!(world.sandboxes().await.len(), 1, "leave keeps it");

    // SIGTERM while a command runs: orderly disposal kills the sandbox.
    let before = world.sandboxes().await.len();
    let mut child = dsh(&world)
        .args(["--config", &kill, "exec", "--", "sleep", "60"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    while world.sandboxes().await.len() == before {
        assert!(Instant::now() < deadline, "dsh never created its sandbox");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let killed = Process::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(killed.success());
    let status = tokio::task::spawn_blocking(move || child.wait().unwrap())
        .await
        .unwrap();
    assert!(!status.success());
    assert_eq!(
        world.sandboxes().await.len(),
        before,
        "SIGTERM disposed the sandbox"
    );
}

/// The E2B composition through `dsh`, the owner left running, reconnecting
/// to `sandbox` when given.
fn e2b_world_manifest(dir: &tempfile::TempDir, sandbox: Option<&str>) -> String {
    for package in ["dsh_fs_e2b", "dsh_subprocess_e2b"] {
        artifact(
            &format!("lib{package}.so"),
            "build it with `cargo build -p dsh-fs-e2b -p dsh-subprocess-e2b`",
        );
    }
    owner_library();
    let reconnect = sandbox
        .map(|id| format!(", sandboxId: {id}"))
        .unwrap_or_default();
    let path = dir
        .path()
        .join(format!("e2b-{}.yaml", sandbox.unwrap_or("new")));
    std::fs::write(
        &path,
        format!(
            "plugins:\n  - id: e2b\n    name: dsh-e2b\n    config: {{ onDispose: leave{reconnect} }}\n  - id: fs\n    name: dsh-fs-e2b\n  - id: subprocess\n    name: dsh-subprocess-e2b\n"
        ),
    )
    .unwrap();
    path.display().to_string()
}

/// A command of the sandbox user cannot move the owner's private state
/// away (issue 9): `mv` fails on its own — dsh exits with the command's
/// status — and the next command and a reconnect to the same sandbox work.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_command_cannot_move_the_owners_state_away() {
    let world = World::start();
    let dir = tempfile::tempdir().unwrap();
    let first = e2b_world_manifest(&dir, None);
    let moved = dsh(&world)
        .args(["--config", &first, "exec", "--"])
        .args(["mv", "/var/lib/dsh-e2b", "/home/user/workspace/x"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&moved.stderr);
    assert_eq!(moved.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("Permission denied"), "{stderr}");
    let sandboxes = world.sandboxes().await;
    assert_eq!(sandboxes.len(), 1, "onDispose: leave keeps it");
    // The next command, through a reconnect to the same sandbox: the
    // owner's state is where it was (mv may have left a partial copy of
    // what the user could read, across filesystems).
    let again = e2b_world_manifest(&dir, Some(&sandboxes[0].sandbox_id));
    let script = "test -d /var/lib/dsh-e2b && echo still here";
    let out = run(
        &world,
        &["--config", &again, "exec", "--", "sh", "-c", script],
    );
    assert_eq!(String::from_utf8_lossy(&out.stdout), "still here\n");
}
