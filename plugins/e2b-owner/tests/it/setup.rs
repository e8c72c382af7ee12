//! Setup verification against a real e2b-local: the sandbox user cannot
//! move or replace the runtime root; traps at the runtime root, its
//! ancestors or the cwd are refused with a clear error, a sandbox the
//! owner created is deleted when its setup fails, and one it connected to
//! is left as it was.

use dsh_plugin_api::ErrorKind;
use dsh_plugin_api::Plugin;
use dsh_plugin_api::owner::Owner;
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
async fn the_sandbox_user_cannot_move_or_replace_the_runtime_root() {
    let world = World::start();
    let plugin = world.owner(json!({"onDispose": "leave"})).await.unwrap();
    let info = plugin.owner().info();
    assert_eq!(info.runtime_root, "/var/lib/dsh-e2b");
    let sandbox = plugin.sandbox().clone();
    root(&sandbox, "touch /var/lib/dsh-e2b/state").await;
    for attack in [
        "mv /var/lib/dsh-e2b /var/lib/x",
        "mv /var/lib /home/user/lib",
        "mv /var /home/user/var",
        "rm -rf /var/lib/dsh-e2b",
        "ln -s /home/user /var/lib/dsh-e2b.new",
    ] {
        let (code, _, err) = run_as(&sandbox, "user", attack).await;
        assert_ne!(code, 0, "the sandbox user could run {attack:?}");
        assert!(err.contains("Permission denied"), "{attack}: {err}");
    }
    // The owner's state is where it was, and a reconnect finds it fit.
    let kept = root(
        &sandbox,
        "stat -c '%U %a %F' /var/lib/dsh-e2b/state /var/lib/dsh-e2b",
    )
    .await;
    assert_eq!(kept, "root 644 regular empty file\nroot 700 directory\n");
    plugin.dispose().await.unwrap();
    let again = world
        .owner(json!({"sandboxId": info.sandbox_id}))
        .await
        .expect("a reconnect works");
    again.dispose().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_runtime_root_or_ancestor_the_user_could_replace_is_refused_on_reconnect() {
    let world = World::start();
    let ancestors = [
        (
            "chmod 1777 /var/lib",
            "/var/lib is not a directory only root may write (owner uid 0, mode 1777)",
        ),
        (
            "chown user /var",
            "/var is not a directory only root may write (owner uid 1000",
        ),
    ];
    // What a template or an earlier root process could leave there.
    let cases = [
        // (what envd reports as a dangling link's target varies)
        (
            "ln -s /nowhere /var/lib/dsh-e2b",
            "/var/lib/dsh-e2b: it is a symlink",
        ),
        (
            "mkdir -p /home/user/mine && ln -s /home/user/mine /var/lib/dsh-e2b",
            "/var/lib/dsh-e2b: it is a symlink to /home/user/mine",
        ),
        (
            "echo x > /var/lib/dsh-e2b",
            "/var/lib/dsh-e2b: it is not a directory",
        ),
        (
            "mkdir -m 0700 /var/lib/dsh-e2b && chown user /var/lib/dsh-e2b",
            "/var/lib/dsh-e2b: it is owned by user, not root",
        ),
    ]
    .into_iter()
    .chain(ancestors)
    .map(|(plant, expected)| (format!("rm -rf /var/lib/dsh-e2b && {plant}"), expected));
    // A runtime root the owner's look (envd's metadata, no script) would
    // find ready but for an ancestor or its mode: the look must not take
    // it, and the script then refuses.
    let kept = ancestors
        .into_iter()
        .chain([(
            "chmod 0755 /var/lib/dsh-e2b",
            "/var/lib/dsh-e2b: its mode is 0755, not 0700",
        )])
        .map(|(plant, expected)| {
            (
                format!("test -z \"$(ls -A /var/lib/dsh-e2b)\" && {plant}"),
                expected,
            )
        });
    for (script, expected) in cases.chain(kept) {
        let plugin = world.owner(json!({"onDispose": "leave"})).await.unwrap();
        let id = plugin.owner().info().sandbox_id;
        let sandbox = plugin.sandbox().clone();
        plugin.dispose().await.unwrap();
        let (code, _, err) = run_as(&sandbox, "root", &script).await;
        assert_eq!(code, 0, "{script}: {err}");

        let err = world
            .owner(json!({"sandboxId": id}))
            .await
            .expect_err("refused");
        assert_eq!(err.kind(), ErrorKind::PermissionDenied, "{script}: {err}");
        let message = err.to_string();
        assert!(message.contains(expected), "{script}: {message}");
        assert!(message.contains("left as it was"), "{message}");
        // Nothing was done through the link, and the sandbox is still there.
        assert_eq!(world.state_of(&id).await, Some(SandboxState::Running));
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
    let (code, out, _) = run_as(&sandbox, "user", "readlink /home/user/trap").await;
    assert_eq!(
        (code, out.as_str()),
        (0, "/etc\n"),
        "the link is left as it was"
    );
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
