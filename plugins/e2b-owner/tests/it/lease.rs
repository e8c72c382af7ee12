//! The lease (docs/design.md §5.3): the owner keeps its sandbox alive past
//! `timeoutMs` for as long as it lives, the sandbox expires within
//! `timeoutMs` of an owner that dies undisposed, `keepAlive: false` keeps
//! the fixed lifetime, and a connected sandbox's longer lifetime is never
//! shortened.

use std::time::{Duration, Instant, SystemTime};

use dsh_plugin_api::Plugin;
use dsh_plugin_api::owner::Owner;
use e2b_client::{NewSandbox, Sandbox, SandboxState};
use serde_json::json;

use crate::support::World;

/// Polls until `sandbox_id` is no longer listed; how long that took, or
/// `None` if it still was after `limit`.
async fn gone_within(world: &World, sandbox_id: &str, limit: Duration) -> Option<Duration> {
    let start = Instant::now();
    while start.elapsed() < limit {
        if world.state_of(sandbox_id).await.is_none() {
            return Some(start.elapsed());
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    None
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_owner_outlives_timeout_ms_and_its_sandbox_expires_after_it_dies() {
    let world = World::start();
    let kept = world.owner(json!({"timeoutMs": 3000})).await.unwrap();
    let fixed = world
        .owner(json!({"timeoutMs": 3000, "keepAlive": false}))
        .await
        .unwrap();
    let kept_id = kept.owner().info().sandbox_id;
    let fixed_id = fixed.owner().info().sandbox_id;

    // Twice the lease, in use: the kept sandbox runs on, the fixed one ends
    // at its lifetime.
    let start = Instant::now();
    while start.elapsed() < Duration::from_secs(7) {
        let (code, _, _) = crate::support::run_as(kept.sandbox(), "user", "true").await;
        assert_eq!(code, 0, "the kept sandbox stopped serving");
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    assert_eq!(
        world.state_of(&kept_id).await,
        Some(SandboxState::Running),
        "the owner lives, so must its sandbox"
    );
    assert_eq!(
        world.state_of(&fixed_id).await,
        None,
        "keepAlive: false keeps the fixed lifetime"
    );

    // An owner that dies without disposal (a killed dsh) stops renewing:
    // its sandbox is gone within the lease.
    drop(kept);
    let took = gone_within(&world, &kept_id, Duration::from_secs(8))
        .await
        .expect("the sandbox outlived its dead owner by more than the lease");
    assert!(took <= Duration::from_secs(4), "gone after {took:?}");
    drop(fixed);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_lease_never_shortens_a_connected_sandboxs_longer_lifetime() {
    let world = World::start();
    let sandbox = Sandbox::create(
        &world.api(),
        &NewSandbox::new("base").timeout(Duration::from_secs(120)),
    )
    .await
    .unwrap();
    let owner = world
        .owner(json!({"sandboxId": sandbox.id(), "timeoutMs": 1500, "onDispose": "leave"}))
        .await
        .unwrap();
    // Several renewal periods (a third of 1.5 s each).
    tokio::time::sleep(Duration::from_secs(3)).await;
    let end_at = SystemTime::from(sandbox.detail().await.unwrap().end_at);
    let left = end_at.duration_since(SystemTime::now()).unwrap_or_default();
    assert!(left > Duration::from_secs(100), "only {left:?} left");
    owner.dispose().await.unwrap();
    sandbox.kill().await.unwrap();
}
