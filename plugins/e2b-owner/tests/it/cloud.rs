//! The owner against E2B's real service. Ignored by default (nextest
//! reports it skipped); run it with credentials:
//!
//! ```sh
//! E2B_API_KEY=e2b_... cargo nextest run -p dsh-e2b-owner --test it --run-ignored only cloud::
//! ```
//!
//! It creates one `base` sandbox (60 s lifetime, tagged `dsh-owner`),
//! checks the prepared world through the owner, and kills it.

use std::time::Duration;

use dsh_e2b_gateway::envd_client;
use dsh_e2b_owner::E2bPlugin;
use dsh_plugin_api::Plugin;
use dsh_plugin_api::owner::Owner;
use e2b_client::{Api, CallOptions, Command, ConnectionOptions, FileType, StreamOptions};
use serde_json::json;

use crate::support::context;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs E2B_API_KEY and network"]
async fn the_owner_prepares_and_releases_a_real_e2b_sandbox() {
    let key = std::env::var("E2B_API_KEY")
        .expect("E2B_API_KEY must be set to run this test (it is ignored otherwise)");
    let plugin = E2bPlugin::create_with_env(context("e2b", json!({"timeoutMs": 60_000})), |name| {
        std::env::var(name).ok()
    })
    .await
    .expect("create an E2B sandbox");
    let owner = plugin.owner().clone();
    let info = owner.info();
    assert!(!info.template_id.is_empty());
    assert_eq!(info.runtime_root, "/var/lib/dsh-e2b");

    let envd = envd_client(owner.clone());
    let private = envd
        .stat(&info.runtime_root, &CallOptions::default())
        .await
        .unwrap();
    assert_eq!(private.file_type, FileType::Directory);
    assert_eq!(private.symlink_target, None);
    assert_eq!((private.owner.as_str(), private.mode), ("root", 0o700));

    // The key is not in the environment of a command.
    let mut command = envd
        .start(
            &Command::shell("env; cat /proc/[0-9]*/environ 2>/dev/null | tr '\\0' '\\n'"),
            &StreamOptions::default().user("root"),
        )
        .await
        .unwrap();
    let mut seen = Vec::new();
    while let Some(event) = futures::StreamExt::next(&mut command).await {
        if let e2b_client::ProcessEvent::Stdout(bytes) = event.unwrap() {
            seen.extend_from_slice(&bytes);
        }
    }
    let seen = String::from_utf8_lossy(&seen);
    assert!(seen.contains("PATH="), "{seen}");
    assert!(!seen.contains(&key), "the API key is inside the sandbox");

    assert!(owner.alive().await.unwrap());
    plugin.dispose().await.expect("kill");
    let api = Api::new(
        ConnectionOptions::default()
            .with_request_timeout(Some(Duration::from_secs(30)))
            .resolve()
            .unwrap(),
    );
    let err = api.sandbox_info(&info.sandbox_id).await.unwrap_err();
    assert!(err.is_sandbox_gone(), "{err:?}");
}
