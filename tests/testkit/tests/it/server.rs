//! The E2B world's server: started as `ServerOptions` say, and built from
//! the checkout when there is none next to the test.

use std::path::{Path, PathBuf};

use dsh_plugin_api::subprocess::{OutputMode, OutputStream, SpawnSpec};
use dsh_testkit::{ServerOptions, World};

/// A loopback port nothing listens on now.
fn free_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind a free port");
    listener.local_addr().expect("its address").port()
}

/// The stdout of `script` run by `sh` in the world.
async fn sh(world: &World, script: &str) -> String {
    let mut spec = SpawnSpec::new(["sh", "-c", script]);
    spec.stdout = OutputMode::Collect { limit: 4096 };
    let process = world
        .subprocess()
        .spawn(spec)
        .await
        .unwrap_or_else(|err| panic!("spawn {script:?}: {err}"));
    let status = process.wait().await.expect("wait");
    let output = process
        .read_output(OutputStream::Stdout, 0, 4096)
        .await
        .expect("output");
    assert!(status.success(), "{script:?}: {status:?}");
    String::from_utf8_lossy(&output.bytes).into_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_e2b_world_starts_its_server_as_the_options_say() {
    let (api_port, envd_port) = (free_port(), free_port());
    let parent = tempfile_dir();
    let world = World::e2b_local_with(
        ServerOptions::new()
            .api_port(api_port)
            .envd_port(envd_port)
            .state_dir_in(&parent)
            .sandbox_network("none")
            .args(["--envd-file-access", "as-root"]),
    )
    .await;
    let server = world.server().expect("an E2B world has a server");
    assert_eq!(server.api_url(), format!("http://127.0.0.1:{api_port}"));
    assert!(
        server.sandbox_url().ends_with(&format!(":{envd_port}")),
        "{}",
        server.sandbox_url()
    );
    assert!(
        server.state_dir().starts_with(&parent),
        "{}",
        server.state_dir().display()
    );
    // `none`: the sandbox has loopback only.
    let interfaces = sh(&world, "sed 1,2d /proc/net/dev | cut -d: -f1").await;
    assert_eq!(
        interfaces.split_whitespace().collect::<Vec<_>>(),
        ["lo"],
        "{interfaces}"
    );
    world.dispose().await;
    std::fs::remove_dir_all(&parent).expect("remove the state parent");
}

/// A fresh directory for the server's state (not the system's temporary
/// dir itself, to show the option is used).
fn tempfile_dir() -> PathBuf {
    let dir = std::env::temp_dir().join(format!("dsh-testkit-state-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("create the state parent");
    dir
}

#[test]
fn a_server_that_cannot_be_built_says_what_was_run() {
    // A real cargo run that fails at once (an unknown profile), in a target
    // directory of its own: the error names the command — a build of the
    // checkout's manifest, never `cargo build -p e2b-local` — and the way
    // around it. (The build itself is checked by hand: in CI it would
    // rebuild the server with other features, minutes of a 2-core run.)
    let target = std::env::temp_dir().join(format!("dsh-testkit-target-{}", std::process::id()));
    let err = e2b_local::harness::build_binary(&target, "no-such-profile")
        .expect_err("an unknown profile cannot build")
        .to_string();
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../e2b-local/Cargo.toml");
    let manifest = manifest.canonicalize().expect("the checkout's e2b-local");
    assert!(
        err.contains("build --bin e2b-local --manifest-path"),
        "{err}"
    );
    assert!(err.contains(&manifest.display().to_string()), "{err}");
    assert!(err.contains("set E2B_LOCAL_BIN"), "{err}");
    assert!(!err.contains(" -p "), "{err}");
    let _ = std::fs::remove_dir_all(&target);
}
