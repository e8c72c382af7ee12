//! What the integration tests share: a real e2b-local server with one
//! sandbox, prepared as the `dsh-e2b-owner` owner prepares it (the world's cwd,
//! a root-owned 0700 runtime root), an in-process owner serving envd
//! through the gateway, and the provider over `OwnerTransport` — the same
//! client path the plugin takes in a host.
//!
//! Needs root and the built server (`cargo build -p e2b-local`).

pub mod wire;

use std::sync::Arc;
use std::time::Duration;

use dsh_e2b_gateway::{
    ControlOutput, ControlShell, GatewayOwner, OwnerEnvd, OwnerTransport, envd_client,
};
use dsh_plugin_api::owner::{Owner, SandboxInfo};
use dsh_plugin_api::stream::collect_bytes;
use dsh_plugin_api::subprocess::{OutputMode, OutputStream, Process, SpawnSpec};
use dsh_subprocess_e2b::{Config, E2bSubprocess, OwnerLiveness};
use e2b_client::{Api, ConnectionOptions, NewSandbox, Sandbox};
use e2b_local::harness::LocalServer;

/// The world's cwd inside the sandbox.
pub const CWD: &str = "/home/user/workspace";
/// The owner's runtime root.
pub const RUNTIME_ROOT: &str = "/home/user/workspace/.dsh-e2b";
/// The template [`World::from_template`]'s owner reports.
pub const TEMPLATE: &str = "dsh-helper-template";

/// A server, a prepared sandbox, and its owner.
pub struct World {
    /// Held, not read: the sandbox lives as long as its server.
    _server: LocalServer,
    pub sandbox: Sandbox,
    pub owner: Arc<GatewayOwner>,
}

impl World {
    /// A server and a sandbox whose global environment holds credential-
    /// shaped and `DSH_*` names (which must never reach a command).
    pub async fn start() -> World {
        World::reporting(None).await
    }

    /// Like [`World::start`], the owner reporting the sandbox as made from a
    /// template other than `base` (as one from `dsh template`'s recipe is),
    /// so that a first command runs the helper's copy in the runtime root
    /// when it is there.
    pub async fn from_template() -> World {
        World::reporting(Some(TEMPLATE)).await
    }

    async fn reporting(template: Option<&str>) -> World {
        let server = LocalServer::start();
        let options = ConnectionOptions::default()
            .with_api_key(server.api_key())
            .with_api_url(server.api_url())
            .with_sandbox_url(server.sandbox_url());
        let api = Api::new(options.resolve_with(|_| None).expect("options"));
        let sandbox = Sandbox::create(
            &api,
            &NewSandbox::new("base")
                .timeout(Duration::from_secs(900))
                .env("OPENAI_API_KEY", "sk-ambient-secret")
                .env("GITHUB_TOKEN", "ghp-ambient")
                .env("DSH_AMBIENT", "1")
                .env("db_secret_password", "hunter2")
                .env("PLAIN_AMBIENT", "visible"),
        )
        .await
        .expect("create a sandbox");
        let info = SandboxInfo {
            sandbox_id: sandbox.id().to_owned(),
            template_id: template.map_or_else(|| sandbox.info().template_id.clone(), str::to_owned),
            daemon_version: sandbox.info().envd_version.to_string(),
            cwd: CWD.into(),
            runtime_root: RUNTIME_ROOT.into(),
        };
        let owner = Arc::new(GatewayOwner::new(&sandbox, info));
        let world = World {
            _server: server,
            sandbox,
            owner,
        };
        // What the owner does before handing the sandbox out.
        let prepared = world
            .root(
                r#"mkdir -p -- "$1" && chown user:user -- "$1" && mkdir -m 0700 -- "$2" && chown root:root -- "$2""#,
                &[CWD, RUNTIME_ROOT],
            )
            .await;
        assert!(
            prepared.status.success(),
            "prepare: {}",
            prepared.stderr_text()
        );
        world
    }

    /// The typed envd client through the owner.
    pub fn envd(&self) -> OwnerEnvd {
        envd_client(self.owner.clone())
    }

    /// A provider through the owner, with a short kill grace.
    pub fn provider(&self) -> E2bSubprocess<OwnerTransport> {
        self.provider_with(&Config {
            kill_grace_ms: Some(300),
            ..Config::default()
        })
    }

    pub fn provider_with(&self, config: &Config) -> E2bSubprocess<OwnerTransport> {
        E2bSubprocess::new(
            self.envd(),
            &self.owner.info(),
            Arc::new(OwnerLiveness::new(self.owner.clone())),
            config,
        )
        .expect("provider")
    }

    /// Runs `script` with bash as root in the sandbox (test probes).
    pub async fn root(&self, script: &str, args: &[&str]) -> ControlOutput {
        let shell = ControlShell::new(RUNTIME_ROOT);
        let mut argv = vec!["--noprofile", "--norc", "-c", script, "probe"];
        argv.extend_from_slice(args);
        shell
            .run(
                &self.envd(),
                &shell.exec("/bin/bash", argv),
                Duration::from_secs(60),
                1 << 20,
            )
            .await
            .expect("root probe")
    }

    /// Live (non-zombie) pids of process group `pgid`, seen in the sandbox.
    pub async fn group_members(&self, pgid: u32) -> Vec<u32> {
        self.ps_field_matching("pgid", pgid).await
    }

    /// Live pids of session `sid`.
    pub async fn session_members(&self, sid: u32) -> Vec<u32> {
        self.ps_field_matching("sid", sid).await
    }

    async fn ps_field_matching(&self, field: &str, value: u32) -> Vec<u32> {
        let out = self
            .root(
                r#"ps -e -o pid= -o "$1"= -o stat= | awk -v want="$2" '$2 == want && $3 !~ /^Z/ { print $1 }'"#,
                &[field, &value.to_string()],
            )
            .await;
        String::from_utf8_lossy(&out.stdout)
            .split_whitespace()
            .map(|pid| pid.parse().expect("pid"))
            .collect()
    }

    /// Kills the sandbox through the control plane.
    pub async fn kill_sandbox(&self) {
        self.sandbox.kill().await.expect("kill the sandbox");
    }
}

/// Polls `future` once (`delay` 0) or for `delay` ms, then drops it; what
/// it resolved with, if it did.
pub async fn give_up_after<F: std::future::Future + Unpin>(
    mut future: F,
    delay: u64,
) -> Option<F::Output> {
    if delay == 0 {
        match futures::poll!(&mut future) {
            std::task::Poll::Ready(output) => Some(output),
            std::task::Poll::Pending => None,
        }
    } else {
        tokio::time::timeout(Duration::from_millis(delay), &mut future)
            .await
            .ok()
    }
}

/// Lines of the sandbox's process table (stat and args) of live processes
/// whose arguments contain one of `markers`, after giving a rollback up to
/// 3 s to finish.
pub async fn survivors(world: &World, markers: &[String]) -> String {
    let mut found = String::new();
    for _ in 0..30 {
        let table = world.root("ps -e -o stat= -o args=", &[]).await;
        found = String::from_utf8_lossy(&table.stdout)
            .lines()
            .filter(|line| {
                !line.starts_with('Z') && markers.iter().any(|m| line.contains(m.as_str()))
            })
            .collect::<Vec<_>>()
            .join("\n");
        if found.is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    found
}

/// `sh -c script` with both outputs piped.
pub fn sh(script: &str) -> SpawnSpec {
    SpawnSpec::new(["sh", "-c", script])
}

/// `sh -c script` with both outputs collected (1 MiB tails).
pub fn sh_collect(script: &str) -> SpawnSpec {
    let mut spec = sh(script);
    spec.stdout = OutputMode::Collect { limit: 1 << 20 };
    spec.stderr = OutputMode::Collect { limit: 1 << 20 };
    spec
}

/// Everything kept of one collected stream.
pub async fn kept(process: &dyn Process, stream: OutputStream) -> Vec<u8> {
    Vec::from(
        process
            .read_output(stream, 0, usize::MAX)
            .await
            .expect("read_output")
            .bytes,
    )
}

/// Reads a piped stdout to its end.
pub async fn stdout_of(process: &dyn Process) -> Vec<u8> {
    collect_bytes(process.take_stdout().expect("piped stdout"))
        .await
        .expect("stdout")
}

/// `future` within `limit`, or a panic naming `what`.
pub async fn within<F: std::future::Future>(limit: Duration, what: &str, future: F) -> F::Output {
    tokio::time::timeout(limit, future)
        .await
        .unwrap_or_else(|_| panic!("{what}: no answer within {limit:?}"))
}
