//! Our side: the shipped composition (`dsh-e2b-owner` + `dsh-subprocess-e2b`
//! through `dsh-host`) against the bench's e2b-local, and the wrapper
//! comparison measured in-process.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use dsh_e2b_gateway::{ControlPlaneLiveness, ControlShell};
use dsh_host::{Host, ManifestFormat};
use dsh_plugin_api::OwnerKind;
use dsh_plugin_api::owner::SandboxInfo;
use dsh_plugin_api::stream::ByteStream;
use dsh_plugin_api::subprocess::{OutputMode, OutputStream, SpawnSpec, SubprocessProvider};
use dsh_subprocess_e2b::{Config, E2bSubprocess};
use e2b_client::{Api, ConnectionOptions, Sandbox};
use e2b_local::harness::LocalServer;
use futures::StreamExt;

use crate::{Figures, Plan, TAIL};

/// `target/`, from this bench binary (`target/<profile>/deps/<bench>`).
pub fn target_dir() -> Result<PathBuf> {
    let exe = std::env::current_exe()?;
    exe.ancestors()
        .nth(3)
        .map(PathBuf::from)
        .context("the bench binary is not in target/<profile>/deps")
}

/// A built plugin library: `$DSH_BENCH_PLUGIN_DIR`, else `target/release`,
/// else `target/debug`.
fn library(name: &str) -> Result<PathBuf> {
    let file = format!("lib{}.so", name.replace('-', "_"));
    let dirs = match std::env::var_os("DSH_BENCH_PLUGIN_DIR") {
        Some(dir) => vec![PathBuf::from(dir)],
        None => {
            let target = target_dir()?;
            vec![target.join("release"), target.join("debug")]
        }
    };
    dirs.iter()
        .map(|dir| dir.join(&file))
        .find(|path| path.is_file())
        .with_context(|| {
            format!(
                "{file} is not built; run `cargo build --release -p dsh-e2b-owner -p dsh-subprocess-e2b`"
            )
        })
}

/// The composition's manifest: a new sandbox (killed at disposal), or
/// `sandbox_id` reconnected and left running.
fn manifest(server: &[(String, String)], sandbox_id: Option<&str>) -> Result<String> {
    let var = |name: &str| {
        server
            .iter()
            .find(|(key, _)| key == name)
            .map(|(_, value)| value.clone())
            .with_context(|| format!("{name} is not set"))
    };
    let (acquire, on_dispose) = match sandbox_id {
        Some(id) => (format!("sandboxId: {id}"), "leave"),
        None => ("template: base".to_owned(), "kill"),
    };
    Ok(format!(
        "plugins:
  - id: e2b
    name: dsh-e2b-owner
    path: {owner}
    config:
      apiKey: {key}
      apiUrl: {api}
      sandboxUrl: {sandbox}
      cwd: /home/user/workspace
      timeoutMs: 3600000
      onDispose: {on_dispose}
      {acquire}
  - id: subprocess
    name: dsh-subprocess-e2b
    path: {provider}
",
        owner = library("dsh-e2b-owner")?.display(),
        provider = library("dsh-subprocess-e2b")?.display(),
        key = var("E2B_API_KEY")?,
        api = var("E2B_API_URL")?,
        sandbox = var("E2B_SANDBOX_URL")?,
    ))
}

/// A running composition and its sandbox.
pub struct World {
    host: Host,
    subprocess: Arc<dyn SubprocessProvider>,
    info: SandboxInfo,
    pub sandbox_id: String,
}

/// The wrapper comparison's samples.
#[derive(Debug, Clone, Default)]
pub struct Wrappers {
    pub shell: Vec<Duration>,
    pub helper: Vec<Duration>,
}

fn collected(argv: &[&str]) -> SpawnSpec {
    let mut spec = SpawnSpec::new(argv.iter().copied());
    spec.stdout = OutputMode::Collect { limit: TAIL };
    spec.stderr = OutputMode::Collect { limit: TAIL };
    spec
}

async fn drain(stream: ByteStream) -> Result<u64> {
    let mut stream = stream;
    let mut total = 0;
    while let Some(chunk) = stream.next().await {
        total += chunk?.len() as u64;
    }
    Ok(total)
}

impl World {
    /// Starts the composition on a new sandbox.
    pub async fn start(server: &LocalServer) -> Result<World> {
        let host = Host::from_str(&manifest(&server.env(), None)?, ManifestFormat::Yaml)
            .await
            .context("start dsh-e2b-owner + dsh-subprocess-e2b")?;
        let subprocess = host.subprocess()?;
        let info = host.owner(OwnerKind::E2B)?.info();
        Ok(World {
            host,
            subprocess,
            sandbox_id: info.sandbox_id.clone(),
            info,
        })
    }

    /// Round trips, throughput and concurrency, as planned.
    pub async fn measure(&self, plan: &Plan) -> Result<Figures> {
        let sp = &self.subprocess;
        let mut figures = Figures::default();
        // Install the helper and warm the connection pool first.
        for _ in 0..10 {
            sp.spawn(collected(&["true"])).await?.wait().await?;
        }
        for _ in 0..plan.iterations {
            let start = Instant::now();
            let status = sp.spawn(collected(&["true"])).await?.wait().await?;
            figures.round_trip.push(start.elapsed());
            anyhow::ensure!(status.success(), "true: {status:?}");
        }
        let size = plan.throughput_bytes.to_string();
        for _ in 0..plan.runs {
            let start = Instant::now();
            let mut spec = SpawnSpec::new(["head", "-c", size.as_str(), "/dev/zero"]);
            spec.stderr = OutputMode::Null;
            let process = sp.spawn(spec).await?;
            let got = drain(process.take_stdout().context("stdout")?).await?;
            process.wait().await?;
            figures.throughput.push(start.elapsed());
            anyhow::ensure!(got == plan.throughput_bytes, "received {got} bytes");
        }
        for _ in 0..plan.rounds {
            let start = Instant::now();
            let runs = (0..plan.concurrent).map(|i| async move {
                let text = i.to_string();
                let process = sp.spawn(collected(&["echo", &text])).await?;
                process.wait().await?;
                let out = process.read_output(OutputStream::Stdout, 0, 64).await?;
                anyhow::ensure!(out.bytes == format!("{i}\n").as_bytes(), "command {i}");
                Ok::<_, anyhow::Error>(())
            });
            for result in futures::future::join_all(runs).await {
                result?;
            }
            figures.concurrent.push(start.elapsed());
        }
        Ok(figures)
    }

    /// `true` through a minimal shell wrapper started by envd as root,
    /// against the provider's helper, both in-process over the sandbox's
    /// own transport.
    pub async fn wrappers(&self, server: &LocalServer, plan: &Plan) -> Result<Wrappers> {
        let options = ConnectionOptions::default()
            .with_api_key(server.api_key())
            .with_api_url(server.api_url())
            .with_sandbox_url(server.sandbox_url());
        let api = Api::new(options.resolve_with(|_| None)?);
        let (sandbox, _) =
            Sandbox::connect(&api, &self.sandbox_id, Duration::from_secs(3600)).await?;
        let provider = E2bSubprocess::new(
            sandbox.envd().clone(),
            &self.info,
            Arc::new(ControlPlaneLiveness::new(api.clone(), &self.sandbox_id)),
            &Config::default(),
        )?;
        let shell = ControlShell::for_sandbox(&self.info);
        let wrapper = shell.exec(
            "/bin/bash",
            ["--noprofile", "--norc", "-c", "setsid -w true; echo $?"],
        );
        let mut samples = Wrappers::default();
        let null = || {
            let mut spec = SpawnSpec::new(["true"]);
            spec.stdout = OutputMode::Null;
            spec.stderr = OutputMode::Null;
            spec
        };
        for _ in 0..10 {
            provider.spawn(null()).await?.wait().await?;
        }
        for _ in 0..plan.iterations {
            let start = Instant::now();
            let output = shell
                .run(sandbox.envd(), &wrapper, Duration::from_secs(60), 64)
                .await?;
            samples.shell.push(start.elapsed());
            if output.stdout != b"0\n" {
                bail!("the shell wrapper printed {:?}", output.stdout);
            }
            let start = Instant::now();
            provider.spawn(null()).await?.wait().await?;
            samples.helper.push(start.elapsed());
        }
        provider.dispose().await?;
        Ok(samples)
    }

    /// Disposes the composition (the sandbox is killed).
    pub async fn dispose(self) -> Result<()> {
        self.host.dispose().await?;
        Ok(())
    }
}

/// Passes `bytes` of output through collect mode (a 1 MiB tail) of a
/// composition reconnected to `sandbox_id`; returns the total seen (the
/// RSS child's work). The server comes from the `E2B_*` variables.
pub async fn collect(sandbox_id: &str, bytes: u64) -> Result<u64> {
    let env: Vec<(String, String)> = std::env::vars().collect();
    let host = Host::from_str(&manifest(&env, Some(sandbox_id))?, ManifestFormat::Yaml).await?;
    let size = bytes.to_string();
    let mut spec = SpawnSpec::new(["head", "-c", size.as_str(), "/dev/zero"]);
    spec.stdout = OutputMode::Collect { limit: TAIL };
    spec.stderr = OutputMode::Null;
    let process = host.subprocess()?.spawn(spec).await?;
    process.wait().await?;
    let total = process.read_output(OutputStream::Stdout, 0, 0).await?.total;
    drop(process);
    host.dispose().await?;
    Ok(total)
}
