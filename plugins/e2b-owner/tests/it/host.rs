//! The owner loaded through the host, from its built library (this
//! package's, beside the test executable): the `e2b` service crosses the
//! plugin ABI and adapters' typed envd client works through it, and when
//! the host ends, so does the sandbox (through the `dsh` program: dsh-cli's
//! `e2b_owner` tests).
//!
//! Needs root and the built server (`cargo build -p e2b-local`).

use std::time::Duration;

use bytes::Bytes;
use dsh_e2b_gateway::envd_client;
use dsh_host::{Host, ManifestFormat};
use dsh_plugin_api::OwnerKind;
use e2b_client::{
    CallOptions, Command, DownloadOptions, ProcessEvent, StreamOptions, UploadOptions,
};
use futures::StreamExt;

use crate::support::{World, owner_library};

/// A YAML manifest with the owner from its built library, configured for
/// `world` in the manifest itself (this process's environment is left
/// alone), plus `extra` entries.
fn manifest(world: &World, on_dispose: &str, extra: &str) -> String {
    format!(
        "plugins:\n  - id: e2b\n    name: dsh-e2b-owner\n    path: {lib}\n    config:\n      apiKey: {key}\n      apiUrl: {api}\n      sandboxUrl: {sandbox}\n      onDispose: {on_dispose}\n{extra}",
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
    let owner = host.owner(OwnerKind::E2B).expect("the e2b service");
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
