//! The API key never reaches the sandbox — not the environment of its
//! commands, not any `/proc/*/environ` inside, not a file — and never
//! reaches the log, whether it came from the config or from
//! `E2B_API_KEY`.

use std::io::Write;
use std::sync::{Arc, Mutex, OnceLock};

use dsh_e2b_gateway::envd_client;
use dsh_plugin_api::Plugin;
use e2b_client::{CallOptions, Command, StreamOptions};
use serde_json::json;

use crate::support::{World, root, run_as};

/// Everything every thread of this test process logs, at TRACE.
fn captured_log() -> Arc<Mutex<Vec<u8>>> {
    static LOG: OnceLock<Arc<Mutex<Vec<u8>>>> = OnceLock::new();
    LOG.get_or_init(|| {
        let log = Arc::new(Mutex::new(Vec::new()));
        let sink = log.clone();
        tracing_subscriber::fmt()
            .with_max_level(tracing::Level::TRACE)
            .with_ansi(false)
            .with_writer(move || SharedWriter(sink.clone()))
            .init();
        log
    })
    .clone()
}

struct SharedWriter(Arc<Mutex<Vec<u8>>>);

impl Write for SharedWriter {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Asserts `key` occurs nowhere a sandbox process could read it.
async fn assert_not_in_sandbox(sandbox: &e2b_client::Sandbox, key: &str) {
    // The environment of a command as the sandbox user and as root.
    for user in ["user", "root"] {
        let (code, env, _) = run_as(sandbox, user, "env").await;
        assert_eq!(code, 0);
        assert!(env.contains("PATH="), "env printed nothing useful: {env}");
        assert!(
            !env.contains(key),
            "the key is in the environment of {user}'s commands"
        );
    }
    // Every process's environment (root can read them all), including
    // envd's and the sandbox init's.
    let environs = root(
        sandbox,
        "n=0; for f in /proc/[0-9]*/environ; do cat \"$f\" 2>/dev/null | tr '\\0' '\\n'; \
         n=$((n+1)); done; echo \"counted $n\"",
    )
    .await;
    let counted: usize = environs
        .lines()
        .last()
        .and_then(|line| line.strip_prefix("counted "))
        .and_then(|n| n.parse().ok())
        .expect("the count line");
    assert!(counted >= 3, "only {counted} processes inspected");
    assert!(
        !environs.contains(key),
        "the key is in a /proc/*/environ inside"
    );
    // The places dsh or the server write in a sandbox (cwd and runtime
    // root live under /home; the rest of the root filesystem is the host's
    // image, which neither writes).
    let (code, hits, _) = run_as(
        sandbox,
        "root",
        &format!("grep -rsl -- '{key}' /home /tmp /etc /run /dev/shm"),
    )
    .await;
    assert_eq!(code, 1, "grep found the key in: {hits}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_key_never_reaches_the_sandbox_or_the_log() {
    let log = captured_log();
    let world = World::start();
    let key = world.server.api_key().to_owned();

    // From the config …
    let from_config = world
        .owner(json!({"apiKey": key, "apiUrl": world.server.api_url()}))
        .await
        .expect("create with the key in the config");
    // … and from E2B_API_KEY.
    let from_env = world
        .owner(json!(null))
        .await
        .expect("create with the key from the env");

    for plugin in [&from_config, &from_env] {
        // Work through the owner, as adapters would.
        let envd = envd_client(plugin.owner().clone());
        envd.stat("/home/user/workspace", &CallOptions::default())
            .await
            .unwrap();
        let status = envd
            .start(
                &Command::shell("echo hi > /tmp/out"),
                &StreamOptions::default(),
            )
            .await
            .unwrap()
            .wait()
            .await
            .unwrap();
        assert!(status.success());
        assert_not_in_sandbox(plugin.sandbox(), &key).await;
    }
    from_config.dispose().await.unwrap();
    from_env.dispose().await.unwrap();

    let text = String::from_utf8_lossy(&log.lock().unwrap()).into_owned();
    assert!(
        text.contains("sandbox created"),
        "the log was captured: {text}"
    );
    assert!(text.contains("envd request"), "TRACE covered the requests");
    assert!(!text.contains(&key), "the key is in the log");
}
