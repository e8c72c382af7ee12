//! Against the real E2B service. Ignored (reported as skipped) without
//! credentials; run with
//! `E2B_API_KEY=e2b_… cargo nextest run -p e2b-client --test it --run-ignored only e2b_cloud::`
//! (or `cargo test … -- --ignored`). Honours `E2B_DOMAIN`, `E2B_API_URL`
//! and the other variables like the SDKs. The sandbox is killed at the end
//! even when an assertion fails.

use std::time::Duration;

use bytes::Bytes;
use e2b_client::{
    Api, CallOptions, Command, DownloadOptions, Envd, EnvdOptions, ListQuery, NewSandbox,
    ProcessEvent, Sandbox, StreamOptions, UploadOptions, WireFormat,
};
use futures::{FutureExt, StreamExt};

async fn exercise(sandbox: &Sandbox, api: &Api) {
    for wire in [WireFormat::Proto, WireFormat::Json] {
        let mut options = EnvdOptions::new(sandbox.id());
        options.wire_format = wire;
        let envd = Envd::new(sandbox.transport().clone(), options);

        let mut stream = envd
            .start(
                &Command::shell("echo hello; id -un"),
                &StreamOptions::default(),
            )
            .await
            .unwrap();
        let mut stdout = Vec::new();
        while let Some(event) = stream.next().await {
            match event.unwrap() {
                ProcessEvent::Stdout(bytes) => stdout.extend_from_slice(&bytes),
                ProcessEvent::End(status) => assert!(status.success(), "{status:?}"),
                _ => {}
            }
        }
        assert_eq!(
            String::from_utf8_lossy(&stdout),
            "hello\nuser\n",
            "{wire:?}"
        );

        let path = format!("/home/user/e2b-client-{wire:?}.bin");
        let content = Bytes::from((0..=255u8).cycle().take(1 << 20).collect::<Vec<u8>>());
        let body = content.clone();
        envd.upload(
            &path,
            futures::stream::once(async move { Ok::<_, std::io::Error>(body) }),
            &UploadOptions::default(),
        )
        .await
        .unwrap();
        let entry = envd.stat(&path, &CallOptions::default()).await.unwrap();
        assert_eq!(entry.size, 1 << 20);
        let back = envd
            .download(&path, &DownloadOptions::default())
            .await
            .unwrap()
            .into_bytes(2 << 20)
            .await
            .unwrap();
        assert_eq!(back, content);
        assert!(
            envd.stat("/home/user/definitely-missing", &CallOptions::default())
                .await
                .unwrap_err()
                .is_not_found()
        );
    }

    let listed: Vec<String> = api
        .list_sandboxes(ListQuery::default().metadata("dsh-test", "e2b-client"))
        .into_stream()
        .map(|s| s.unwrap().sandbox_id)
        .collect()
        .await;
    assert!(listed.iter().any(|id| id == sandbox.id()), "{listed:?}");
    assert!(sandbox.is_running().await.unwrap());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs E2B_API_KEY and network"]
async fn real_e2b_sandbox_round_trip() {
    let api = Api::from_env().expect("E2B_* variables are valid");
    assert!(
        api.config().has_api_key(),
        "set E2B_API_KEY to run this test"
    );
    let request = NewSandbox::new("base")
        .timeout(Duration::from_secs(180))
        .metadata("dsh-test", "e2b-client");
    let sandbox = Sandbox::create(&api, &request)
        .await
        .expect("create a sandbox");

    let outcome = std::panic::AssertUnwindSafe(exercise(&sandbox, &api))
        .catch_unwind()
        .await;
    let killed = sandbox.kill().await;
    if let Err(panic) = outcome {
        std::panic::resume_unwind(panic);
    }
    killed.expect("kill the sandbox");
    assert!(sandbox.detail().await.unwrap_err().is_sandbox_gone());
    let err = sandbox
        .envd()
        .stat("/", &CallOptions::default())
        .await
        .unwrap_err();
    assert!(err.is_unavailable(), "{err:?}");
}
