//! Setup verification against a real e2b-local: traps planted at the
//! runtime root or the cwd are refused with a clear error, a sandbox the
//! owner created is deleted when its setup fails, and one it connected to
//! is left as it was.

use dsh_plugin_api::ErrorKind;
use dsh_plugin_api::Plugin;
use dsh_plugin_api::e2b::E2bOwner;
use e2b_client::SandboxState;
use serde_json::json;

use crate::support::{World, root, run_as};

/// A running sandbox (left by an owner) with `plant` run in it as `user`,
/// and its id.
async fn planted(world: &World, user: &str, plant: &str) -> String {
    let plugin = world.owner(json!({"onDispose": "leave"})).await.unwrap();
    let id = plugin.owner().info().sandbox_id;
    let sandbox = plugin.sandbox().clone();
    plugin.dispose().await.unwrap();
    let (code, _, err) = run_as(&sandbox, user, plant).await;
    assert_eq!(code, 0, "{plant}: {err}");
    id
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_symlink_planted_at_the_runtime_root_is_refused_on_reconnect() {
    let world = World::start();
    // The sandbox user swaps the private directory for a link to their own.
    let id = planted(
        &world,
        "user",
        // (the user owns the cwd, so may rename root's directory in it)
        "cd /home/user/workspace && mv .dsh-e2b .dsh-e2b.old && \
         mkdir -p /home/user/mine && ln -s /home/user/mine .dsh-e2b",
    )
    .await;
    let err = world
        .owner(json!({"sandboxId": id}))
        .await
        .expect_err("a symlinked runtime root is refused");
    assert_eq!(err.kind(), ErrorKind::PermissionDenied, "{err}");
    let message = err.to_string();
    assert!(
        message.contains("/home/user/workspace/.dsh-e2b: it is a symlink to /home/user/mine"),
        "{message}"
    );
    assert!(message.contains("left as it was"), "{message}");
    // Nothing was done through the link, and the sandbox is still there.
    assert_eq!(world.state_of(&id).await, Some(SandboxState::Running));
    let sandbox = world.connect(&id).await;
    let target = root(&sandbox, "stat -c '%U %a' /home/user/mine").await;
    assert_eq!(target.trim(), "user 755");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dangling_symlink_file_or_user_directory_at_the_runtime_root_is_refused() {
    let world = World::start();
    let cases = [
        // (what envd reports as a dangling link's target varies)
        ("ln -s /nowhere .dsh-e2b", "it is a symlink"),
        ("echo x > .dsh-e2b", "it is not a directory"),
        ("mkdir -m 0700 .dsh-e2b", "it is owned by user, not root"),
    ];
    for (index, (plant, expected)) in cases.into_iter().enumerate() {
        // A fresh cwd per case, so the runtime root never existed before
        // the user planted something there.
        let cwd = format!("/home/user/w{index}");
        let plugin = world
            .owner(json!({"onDispose": "leave", "cwd": "/home/user"}))
            .await
            .unwrap();
        let id = plugin.owner().info().sandbox_id;
        let sandbox = plugin.sandbox().clone();
        plugin.dispose().await.unwrap();
        let script = format!("mkdir -p {cwd} && cd {cwd} && {plant}");
        let (code, _, err) = run_as(&sandbox, "user", &script).await;
        assert_eq!(code, 0, "{script}: {err}");

        let err = world
            .owner(json!({"sandboxId": id, "cwd": cwd}))
            .await
            .expect_err("refused");
        assert_eq!(err.kind(), ErrorKind::PermissionDenied, "{plant}: {err}");
        assert!(err.to_string().contains(expected), "{plant}: {err}");
        assert!(
            err.to_string().contains(&format!("{cwd}/.dsh-e2b")),
            "{err}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_symlinked_cwd_is_refused() {
    let world = World::start();
    let id = planted(&world, "user", "ln -s /etc /home/user/trap").await;
    let err = world
        .owner(json!({"sandboxId": id, "cwd": "/home/user/trap"}))
        .await
        .expect_err("a symlinked cwd is refused");
    assert_eq!(err.kind(), ErrorKind::Config, "{err}");
    assert!(
        err.to_string()
            .contains("config.cwd: /home/user/trap is a symlink to /etc"),
        "{err}"
    );
    let sandbox = world.connect(&id).await;
    let (code, _, _) = run_as(&sandbox, "root", "test -e /etc/.dsh-e2b").await;
    assert_ne!(code, 0, "nothing was created through the link");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_setup_failure_after_create_deletes_the_sandbox() {
    let world = World::start();
    // /etc/hostname is a file: the cwd cannot be created under it, after
    // the sandbox exists.
    let err = world
        .owner(json!({"cwd": "/etc/hostname/work"}))
        .await
        .expect_err("setup fails");
    assert_eq!(err.kind(), ErrorKind::Config, "{err}");
    let message = err.to_string();
    assert!(
        message.contains("config.cwd: /etc/hostname/work"),
        "{message}"
    );
    assert!(message.contains("was deleted"), "{message}");
    assert!(
        world.sandboxes().await.is_empty(),
        "no sandbox is left behind"
    );

    // A cwd that exists as a file, likewise.
    let err = world
        .owner(json!({"cwd": "/etc/hostname"}))
        .await
        .expect_err("setup fails");
    assert!(
        err.to_string().contains("config.cwd: /etc/hostname"),
        "{err}"
    );
    assert!(
        world.sandboxes().await.is_empty(),
        "no sandbox is left behind"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_relative_cwd_is_refused_before_anything_is_created() {
    let world = World::start();
    for cwd in ["workspace", "./workspace", "~/workspace", ""] {
        let err = world
            .owner(json!({"cwd": cwd}))
            .await
            .expect_err("a relative cwd is refused");
        assert_eq!(err.kind(), ErrorKind::Config, "{cwd}: {err}");
        assert!(
            err.message()
                .starts_with("config.cwd: must be an absolute POSIX path"),
            "{cwd}: {err}"
        );
    }
    assert!(world.sandboxes().await.is_empty());
}
