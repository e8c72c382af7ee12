//! The owner's lifecycle against a real e2b-local: create (tagged, set up),
//! the owner service through the gateway, disposal by `onDispose`, and
//! reconnecting with `sandboxId` (which sweeps stale adapter state).

use dsh_e2b_gateway::envd_client;
use dsh_plugin_api::Plugin;
use dsh_plugin_api::owner::Owner;
use e2b_client::{CallOptions, FileType, SandboxState};
use serde_json::json;

use crate::support::{World, root, run_as};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn create_prepares_the_world_and_kill_on_dispose_deletes_it() {
    let world = World::start();
    let plugin = world
        .owner(json!({"metadata": {"team": "infra"}}))
        .await
        .expect("create the owner");
    let owner = plugin.owner().clone();
    let info = owner.info();
    assert_eq!(info.template_id, "base");
    assert_eq!(info.cwd, "/home/user/workspace");
    assert_eq!(info.runtime_root, "/var/lib/dsh-e2b");
    assert!(semver_like(&info.daemon_version), "{}", info.daemon_version);

    // Tagged as dsh's, with the user's metadata.
    let listed = world.sandboxes().await;
    assert_eq!(listed.len(), 1);
    let metadata = listed[0].metadata.clone().unwrap_or_default();
    assert_eq!(listed[0].sandbox_id, info.sandbox_id);
    assert_eq!(metadata["dsh-owner"], "dsh-e2b");
    assert_eq!(metadata["dsh-entry"], "e2b");
    assert_eq!(metadata["team"], "infra");

    // The cwd belongs to the sandbox user; the runtime root is root's, 0700,
    // a real directory — as envd reports it, through the owner.
    let envd = envd_client(owner.clone());
    let cwd = envd.stat(&info.cwd, &CallOptions::default()).await.unwrap();
    assert_eq!(cwd.file_type, FileType::Directory);
    assert_eq!(cwd.owner, "user");
    let private = envd
        .stat(&info.runtime_root, &CallOptions::default().user("root"))
        .await
        .unwrap();
    assert_eq!(private.file_type, FileType::Directory);
    assert_eq!(private.symlink_target, None);
    assert_eq!(private.owner, "root");
    assert_eq!(private.mode, 0o700);

    // The sandbox user can work in the cwd but not in the runtime root.
    let sandbox = plugin.sandbox().clone();
    let (code, _, _) = run_as(&sandbox, "user", "touch /home/user/workspace/mine").await;
    assert_eq!(code, 0);
    let (code, _, err) = run_as(&sandbox, "user", "touch /var/lib/dsh-e2b/forged").await;
    assert_ne!(code, 0, "the sandbox user wrote into the runtime root");
    assert!(err.contains("Permission denied"), "{err}");
    let (code, _, _) = run_as(&sandbox, "user", "ls /var/lib/dsh-e2b").await;
    assert_ne!(code, 0, "the sandbox user listed the runtime root");

    assert!(owner.alive().await.unwrap());
    plugin.dispose().await.expect("dispose");
    assert!(world.sandboxes().await.is_empty(), "the sandbox is gone");
    assert!(!owner.alive().await.unwrap());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gateway_calls_after_dispose_are_refused_as_closed() {
    let world = World::start();
    let plugin = world.owner(json!({"onDispose": "leave"})).await.unwrap();
    let owner = plugin.owner().clone();
    plugin.dispose().await.unwrap();
    let envd = envd_client(owner.clone());
    let err = envd.stat("/", &CallOptions::default()).await.unwrap_err();
    assert!(err.is_unavailable() && !err.is_sandbox_gone(), "{err:?}");
    assert!(err.to_string().contains("disposed"), "{err}");
    // Left running: the world still answers directly.
    assert_eq!(
        world.state_of(&owner.info().sandbox_id).await,
        Some(SandboxState::Running)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pause_and_leave_keep_the_sandbox_and_sandbox_id_reconnects() {
    let world = World::start();

    // pause: listed as paused.
    let paused = world.owner(json!({"onDispose": "pause"})).await.unwrap();
    let paused_id = paused.owner().info().sandbox_id;
    paused.dispose().await.unwrap();
    assert_eq!(world.state_of(&paused_id).await, Some(SandboxState::Paused));

    // leave: still running.
    let left = world.owner(json!({"onDispose": "leave"})).await.unwrap();
    let left_id = left.owner().info().sandbox_id;
    left.dispose().await.unwrap();
    assert_eq!(world.state_of(&left_id).await, Some(SandboxState::Running));

    // Reconnecting to the paused one resumes it; same identity, same world.
    let again = world
        .owner(json!({"sandboxId": paused_id, "onDispose": "leave"}))
        .await
        .expect("reconnect");
    assert_eq!(again.owner().info().sandbox_id, paused_id);
    assert_eq!(
        world.state_of(&paused_id).await,
        Some(SandboxState::Running)
    );
    again.dispose().await.unwrap();

    // Reconnecting and killing.
    let last = world
        .owner(json!({"sandboxId": left_id}))
        .await
        .expect("reconnect");
    last.dispose().await.unwrap();
    assert_eq!(world.state_of(&left_id).await, None);
    assert_eq!(
        world.state_of(&paused_id).await,
        Some(SandboxState::Running)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reconnecting_sweeps_stale_adapter_state_keeps_a_live_owners_durable_commands_the_template_helper_and_the_user_files()
 {
    let world = World::start();
    let first = world.owner(json!({"onDispose": "leave"})).await.unwrap();
    let id = first.owner().info().sandbox_id;
    let sandbox = first.sandbox().clone();
    // What adapters of owners killed days ago left behind (as root, like
    // their control commands), and the fresh state of an owner starting now
    // on the same sandbox.
    root(
        &sandbox,
        "mkdir -p /var/lib/dsh-e2b/proc-17/spill && \
         echo 9 > /var/lib/dsh-e2b/proc-17/exit && \
         touch '/var/lib/dsh-e2b/we ird\nname' && \
         mkdir -p /var/lib/dsh-e2b/durable/0123456789abcdef0123456789abcdef && \
         mkdir -p /var/lib/dsh-e2b/template/0123 && \
         touch -h -d '2 days ago' /var/lib/dsh-e2b/proc-17 '/var/lib/dsh-e2b/we ird\nname' \
           /var/lib/dsh-e2b/durable /var/lib/dsh-e2b/template && \
         mkdir /var/lib/dsh-e2b/subprocess-e2b-live",
    )
    .await;
    run_as(
        &sandbox,
        "user",
        "echo keep > /home/user/workspace/notes.txt",
    )
    .await;
    first.dispose().await.unwrap();

    let second = world
        .owner(json!({"sandboxId": id}))
        .await
        .expect("reconnect");
    let listing = root(&sandbox, "ls -A /var/lib/dsh-e2b").await;
    assert_eq!(
        listing, "durable\nsubprocess-e2b-live\ntemplate\n",
        "stale state was swept; the live owner's, durable commands' and a template's helper kept"
    );
    let notes = root(&sandbox, "cat /home/user/workspace/notes.txt").await;
    assert_eq!(notes, "keep\n");
    let mode = root(&sandbox, "stat -c '%U %a %F' /var/lib/dsh-e2b").await;
    assert_eq!(mode.trim(), "root 700 directory");
    second.dispose().await.unwrap();
    assert!(world.sandboxes().await.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_configured_cwd_anywhere_is_created_for_the_sandbox_user() {
    let world = World::start();
    let plugin = world
        .owner(json!({"cwd": "/srv//projects/app/"}))
        .await
        .unwrap();
    let info = plugin.owner().info();
    assert_eq!(info.cwd, "/srv/projects/app");
    assert_eq!(info.runtime_root, "/var/lib/dsh-e2b");
    let owners = root(
        plugin.sandbox(),
        "stat -c '%U %a' /srv/projects/app /var/lib/dsh-e2b; ls -A /srv/projects/app",
    )
    .await;
    assert_eq!(
        owners, "user 755\nroot 700\n",
        "nothing of dsh's in the cwd"
    );
    plugin.dispose().await.unwrap();
}

fn semver_like(version: &str) -> bool {
    let parts: Vec<&str> = version.split('.').collect();
    parts.len() == 3 && parts.iter().all(|part| part.parse::<u32>().is_ok())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_abandoned_create_does_not_leak_its_sandbox() {
    use dsh_e2b_owner::acquire::{Acquired, KillOnDrop, Origin};

    let world = World::start();
    let api = world.api();
    let create = || async {
        e2b_client::Sandbox::create(&api, &e2b_client::NewSandbox::new("base"))
            .await
            .unwrap()
    };

    // Dropped armed (create abandoned between acquiring and handing out):
    // the sandbox is deleted.
    let created = Acquired {
        sandbox: create().await,
        origin: Origin::Created,
    };
    drop(KillOnDrop::new(&created));
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while world.state_of(created.sandbox.id()).await.is_some() {
        assert!(std::time::Instant::now() < deadline, "the sandbox leaked");
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }

    // Disarmed (handed out), or not ours (connected): kept.
    let kept = Acquired {
        sandbox: create().await,
        origin: Origin::Created,
    };
    let mut guard = KillOnDrop::new(&kept);
    guard.disarm();
    drop(guard);
    let connected = Acquired {
        sandbox: world.connect(kept.sandbox.id()).await,
        origin: Origin::Connected { resumed: false },
    };
    drop(KillOnDrop::new(&connected));
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    assert_eq!(
        world.state_of(kept.sandbox.id()).await,
        Some(SandboxState::Running)
    );
}
