//! Our side: the shipped composition (`dsh-e2b-owner` + `dsh-fs-e2b` through
//! `dsh-host`) against the bench's e2b-local.

use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use dsh_host::{Host, ManifestFormat};
use dsh_plugin_api::OwnerKind;
use dsh_plugin_api::fs::{Edit, FsProvider, WalkSpec, WriteGuard};
use dsh_plugin_api::stream::collect_bytes;
use e2b_local::harness::LocalServer;
use futures::TryStreamExt;

use crate::{Figures, LARGE, Plan, SMALL};
use dsh_plugin_api::Bytes;

/// Where the bench's e2b-local serves, and its key.
#[derive(Debug, Clone)]
pub struct Endpoints {
    pub key: String,
    pub api: String,
    pub sandbox: String,
}

impl Endpoints {
    pub fn of(server: &LocalServer) -> Endpoints {
        Endpoints {
            key: server.api_key().to_owned(),
            api: server.api_url().to_owned(),
            sandbox: server.sandbox_url().to_owned(),
        }
    }

    /// From `E2B_API_KEY`, `E2B_API_URL`, `E2B_SANDBOX_URL` (how the RSS
    /// child is told).
    pub fn from_env() -> Result<Endpoints> {
        let var = |name: &str| std::env::var(name).with_context(|| format!("{name} is not set"));
        Ok(Endpoints {
            key: var("E2B_API_KEY")?,
            api: var("E2B_API_URL")?,
            sandbox: var("E2B_SANDBOX_URL")?,
        })
    }
}

/// The composition's manifest: a new sandbox (killed at disposal), or
/// `sandbox_id` reconnected and left running.
pub fn manifest(endpoints: &Endpoints, sandbox_id: Option<&str>) -> String {
    let (acquire, on_dispose) = match sandbox_id {
        Some(id) => (format!("sandboxId: {id}"), "leave"),
        None => ("template: base".to_owned(), "kill"),
    };
    format!(
        "plugins:
  - id: e2b
    name: dsh-e2b-owner
    config:
      apiKey: {key}
      apiUrl: {api}
      sandboxUrl: {sandbox}
      cwd: /home/user/workspace
      timeoutMs: 3600000
      onDispose: {on_dispose}
      {acquire}
  - id: fs
    name: dsh-fs-e2b
",
        key = endpoints.key,
        api = endpoints.api,
        sandbox = endpoints.sandbox,
    )
}

/// A running composition and its sandbox.
pub struct World {
    host: Host,
    fs: Arc<dyn FsProvider>,
    pub sandbox_id: String,
    pub cwd: String,
}

impl World {
    /// Starts the composition on a new sandbox.
    pub async fn start(server: &LocalServer) -> Result<World> {
        let host = Host::from_str(
            &manifest(&Endpoints::of(server), None),
            ManifestFormat::Yaml,
        )
        .await
        .context("start dsh-e2b-owner + dsh-fs-e2b (are both plugins built?)")?;
        let fs = host.fs()?;
        let info = host.owner(OwnerKind::E2B)?.info();
        Ok(World {
            host,
            fs,
            sandbox_id: info.sandbox_id,
            cwd: info.cwd,
        })
    }

    /// Writes the bench's files.
    pub async fn fixtures(&self, plan: &Plan) -> Result<()> {
        for (path, len) in [
            (&plan.small, SMALL),
            (&plan.large, LARGE),
            (&plan.huge, plan.huge_len),
        ] {
            let content: Vec<u8> = (0..len).map(|i| (i % 251) as u8).collect();
            self.fs
                .write(path, Bytes::from(content), WriteGuard::Overwrite)
                .await
                .with_context(|| format!("write fixture {path}"))?;
        }
        Ok(())
    }

    /// Stat, small reads, writes and edits, as many times as planned.
    pub async fn measure(&self, plan: &Plan) -> Result<Figures> {
        let fs = &self.fs;
        let mut figures = Figures::default();
        // Warm the connection pool and the plugin runtimes first.
        for _ in 0..10 {
            fs.stat(&plan.small).await?;
        }
        for _ in 0..plan.iterations {
            figures
                .stat
                .push(timed(|| async { fs.stat(&plan.small).await.map(drop) }).await?);
        }
        for _ in 0..plan.iterations {
            figures.read_small.push(
                timed(|| async {
                    let read = collect_bytes(fs.read_bytes(&plan.small).await?.chunks).await?;
                    anyhow::ensure!(read.len() == SMALL, "read {} bytes", read.len());
                    Ok(())
                })
                .await?,
            );
        }
        let target = format!("{}.dsh-write", plan.small);
        figures.write_small = writes(fs.as_ref(), &target, plan.iterations).await?;
        figures.edit_small = edits(fs.as_ref(), &target, plan.iterations).await?;
        // Last, for it starts the world helper's process (a walk does):
        // texts are then read, rewritten and edited through it.
        let text = format!("{}.txt", plan.small);
        let fixture = format!("{}\n", "x".repeat(SMALL - 1));
        fs.write(&text, Bytes::from(fixture), WriteGuard::Overwrite)
            .await?;
        let spec = WalkSpec {
            max_depth: 1,
            max_entries: 100,
            globs: Vec::new(),
            gitignore: false,
            beneath: false,
        };
        let walked: Vec<_> = fs.walk(&self.cwd, spec).await?.try_collect().await?;
        anyhow::ensure!(
            !walked.is_empty(),
            "the walk of {} answered nothing",
            self.cwd
        );
        for _ in 0..plan.iterations {
            figures.read_text_native.push(
                timed(|| async {
                    let read = fs.read_text(&text).await?;
                    anyhow::ensure!(read.text.len() == SMALL, "read {} bytes", read.text.len());
                    Ok(())
                })
                .await?,
            );
        }
        figures.write_native = writes(fs.as_ref(), &target, plan.iterations).await?;
        figures.edit_native = edits(fs.as_ref(), &target, plan.iterations).await?;
        fs.remove(&text).await?;
        fs.remove(&target).await?;
        Ok(figures)
    }

    /// The large file's content, read once, and written once to its copy
    /// (so that every timed write replaces a file, as the peers' do).
    pub async fn warm_large(&self, plan: &Plan) -> Result<Vec<u8>> {
        let content = collect_bytes(self.fs.read_bytes(&plan.large).await?.chunks).await?;
        anyhow::ensure!(content.len() == LARGE, "read {} bytes", content.len());
        self.write_large(plan, &content).await?;
        Ok(content)
    }

    /// One read of the large file, timed.
    pub async fn read_large(&self, plan: &Plan) -> Result<Duration> {
        timed(|| async {
            let read = collect_bytes(self.fs.read_bytes(&plan.large).await?.chunks).await?;
            anyhow::ensure!(read.len() == LARGE, "read {} bytes", read.len());
            Ok(())
        })
        .await
    }

    /// One write of `content` over the large file's copy, timed (the copy
    /// of `content` made before).
    pub async fn write_large(&self, plan: &Plan, content: &[u8]) -> Result<Duration> {
        let content = Bytes::from(content.to_vec());
        let target = large_copy(plan);
        timed(|| async {
            self.fs
                .write(&target, content, WriteGuard::Overwrite)
                .await
                .map(drop)
        })
        .await
    }

    /// Removes the large file's copy.
    pub async fn remove_large_copy(&self, plan: &Plan) -> Result<()> {
        self.fs.remove(&large_copy(plan)).await?;
        Ok(())
    }

    /// Disposes the composition (the sandbox is killed).
    pub async fn dispose(self) -> Result<()> {
        self.host.dispose().await?;
        Ok(())
    }
}

/// Streams `path` through a composition reconnected to `sandbox_id` and
/// returns how many bytes it read (the RSS child's work).
pub async fn stream(endpoints: &Endpoints, sandbox_id: &str, path: &str) -> Result<u64> {
    let host = Host::from_str(&manifest(endpoints, Some(sandbox_id)), ManifestFormat::Yaml).await?;
    let mut chunks = host.fs()?.read_bytes(path).await?.chunks;
    let mut total = 0_u64;
    while let Some(chunk) = futures::StreamExt::next(&mut chunks).await {
        total += chunk?.len() as u64;
    }
    drop(chunks);
    host.dispose().await?;
    Ok(total)
}

/// Where ours writes the large file's content.
fn large_copy(plan: &Plan) -> String {
    format!("{}.dsh-write", plan.large)
}

async fn timed<F, Fut, E>(work: F) -> Result<Duration>
where
    F: FnOnce() -> Fut,
    Fut: std::future::Future<Output = Result<(), E>>,
    anyhow::Error: From<E>,
{
    let start = Instant::now();
    work().await?;
    Ok(start.elapsed())
}

/// `iterations` edits of the small file `target`, timed: it is written
/// first with one digit, then letters, and each edit replaces the digit (a
/// unique match).
async fn edits(fs: &dyn FsProvider, target: &str, iterations: usize) -> Result<Vec<Duration>> {
    let fixture = format!("9{}\n", "x".repeat(SMALL - 2));
    fs.write(target, Bytes::from(fixture), WriteGuard::Overwrite)
        .await?;
    let mut times = Vec::with_capacity(iterations);
    for i in 0..iterations {
        let (old, new) = ((i + 9) % 10, i % 10);
        times.push(
            timed(|| async {
                let edit = Edit {
                    old: old.to_string(),
                    new: new.to_string(),
                    replace_all: false,
                };
                let outcome = fs.edit(target, vec![edit], WriteGuard::Overwrite).await?;
                anyhow::ensure!(outcome.replacements == 1, "{outcome:?}");
                Ok(())
            })
            .await?,
        );
    }
    Ok(times)
}

/// `iterations` writes of 1 KiB over `target` (the first may create it),
/// timed.
async fn writes(fs: &dyn FsProvider, target: &str, iterations: usize) -> Result<Vec<Duration>> {
    let mut times = Vec::with_capacity(iterations);
    for i in 0..iterations {
        let content = vec![b'0' + (i % 10) as u8; SMALL];
        times.push(
            timed(|| async {
                fs.write(target, Bytes::from(content), WriteGuard::Overwrite)
                    .await
                    .map(drop)
            })
            .await?,
        );
    }
    Ok(times)
}
