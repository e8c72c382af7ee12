//! Shared by the owner's integration tests: a real e2b-local server per
//! test, the owner created in-process against it (its `E2B_*` variables
//! handed in, never set on this process), and probes of the sandbox world
//! that bypass the owner (the control plane and a direct envd client).
//!
//! Needs root and the built server (`cargo build -p e2b-local`).

use std::collections::HashMap;
use std::path::PathBuf;
use std::time::Duration;

use dsh_e2b_owner::E2bPlugin;
use dsh_plugin_api::{CreateContext, Injected, Result};
use e2b_client::{
    Api, Command, ConnectionOptions, ListQuery, ProcessEvent, Sandbox, SandboxDetail, SandboxState,
    StreamOptions,
};
pub use e2b_local::harness::LocalServer;
use futures::StreamExt;

/// One e2b-local server; dropping it kills its sandboxes and the server.
pub struct World {
    pub server: LocalServer,
}

impl World {
    pub fn start() -> World {
        World {
            server: LocalServer::start(),
        }
    }

    /// The variables `e2b-local serve` prints, as the owner's environment.
    pub fn env(&self) -> impl Fn(&str) -> Option<String> + Send + Sync + 'static + use<> {
        let vars: HashMap<String, String> = self.server.env().into_iter().collect();
        move |name| vars.get(name).cloned()
    }

    /// A control-plane client of this server (the test's own, not the
    /// owner's).
    pub fn api(&self) -> Api {
        Api::new(
            ConnectionOptions::default()
                .with_api_key(self.server.api_key())
                .with_api_url(self.server.api_url())
                .with_sandbox_url(self.server.sandbox_url())
                .resolve_with(|_| None)
                .expect("the harness settings are valid"),
        )
    }

    /// Creates the owner plugin in-process with `config`.
    pub async fn owner(&self, config: serde_json::Value) -> Result<E2bPlugin> {
        E2bPlugin::create_with_env(context("e2b", config), self.env()).await
    }

    /// Every sandbox of this server, running or paused.
    pub async fn sandboxes(&self) -> Vec<SandboxDetail> {
        let mut pager = self.api().list_sandboxes(
            ListQuery::default()
                .state(SandboxState::Running)
                .state(SandboxState::Paused),
        );
        let mut all = Vec::new();
        while let Some(page) = pager.next_page().await.expect("list sandboxes") {
            all.extend(page);
        }
        all
    }

    /// The state of `sandbox_id` as the control plane lists it, `None`
    /// when it is gone.
    pub async fn state_of(&self, sandbox_id: &str) -> Option<SandboxState> {
        self.sandboxes()
            .await
            .into_iter()
            .find(|sandbox| sandbox.sandbox_id == sandbox_id)
            .map(|sandbox| sandbox.state)
    }

    /// A handle of `sandbox_id` for probes (connects, so it resumes a
    /// paused one).
    pub async fn connect(&self, sandbox_id: &str) -> Sandbox {
        Sandbox::connect(&self.api(), sandbox_id, Duration::from_secs(300))
            .await
            .expect("connect to the sandbox")
            .0
    }
}

/// A create context for entry `id`.
pub fn context(id: &str, config: serde_json::Value) -> CreateContext {
    CreateContext {
        id: id.to_owned(),
        config,
        services: Injected::default(),
    }
}

/// What a shell script printed and its exit code, run directly through
/// envd (bypassing the owner) as `user`.
pub async fn run_as(sandbox: &Sandbox, user: &str, script: &str) -> (i32, String, String) {
    let mut stream = sandbox
        .envd()
        .start(
            &Command::new("/bin/bash").args(["-c", script]).stdin(false),
            &StreamOptions::default()
                .user(user)
                .timeout(Duration::from_secs(60)),
        )
        .await
        .expect("start a probe command");
    let (mut out, mut err, mut code) = (Vec::new(), Vec::new(), None);
    while let Some(event) = stream.next().await {
        match event.expect("probe stream") {
            ProcessEvent::Stdout(bytes) => out.extend_from_slice(&bytes),
            ProcessEvent::Stderr(bytes) => err.extend_from_slice(&bytes),
            ProcessEvent::End(end) => code = Some(end.exit_code),
            ProcessEvent::Pty(_) => {}
        }
    }
    (
        code.expect("an end event"),
        String::from_utf8_lossy(&out).into_owned(),
        String::from_utf8_lossy(&err).into_owned(),
    )
}

/// Runs `script` as root and asserts it succeeded; its stdout.
pub async fn root(sandbox: &Sandbox, script: &str) -> String {
    let (code, out, err) = run_as(sandbox, "root", script).await;
    assert_eq!(code, 0, "{script}: {err}");
    out
}

/// The owner plugin's library: this package's own, which cargo builds
/// beside the test executable for these tests (never older than its
/// sources).
pub fn owner_library() -> PathBuf {
    let exe = std::env::current_exe().expect("the test executable");
    let path = exe.with_file_name("libdsh_e2b_owner.so");
    assert!(
        path.is_file(),
        "{} was not built beside the test executable",
        path.display()
    );
    path
}
