//! The SDK peers: `sdk-peers/bench/fs.mjs` (npm `e2b` 2.29.1, Node) and
//! `sdk-peers/bench/fs.py` (PyPI `e2b` 2.63.0, the peer's venv), run
//! against the same sandbox.

use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::Duration;

use anyhow::{Context, Result, bail};
use e2b_local::harness::LocalServer;
use serde_json::Value;

use crate::{Figures, Plan};

/// `sdk-peers/`, from this crate's manifest directory.
pub fn sdk_peers() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../sdk-peers")
}

/// One SDK's driver.
#[derive(Debug, Clone)]
pub struct Peer {
    pub name: &'static str,
    program: PathBuf,
    script: PathBuf,
}

impl Peer {
    pub fn js() -> Peer {
        Peer {
            name: "js e2b@2.29.1",
            program: PathBuf::from("node"),
            script: sdk_peers().join("bench/fs.mjs"),
        }
    }

    pub fn python() -> Peer {
        Peer {
            name: "python e2b==2.63.0",
            program: sdk_peers().join("python/.venv/bin/python"),
            script: sdk_peers().join("bench/fs.py"),
        }
    }

    /// The driver for `mode` on `sandbox_id`, with the server's variables.
    pub fn command(&self, server_env: &[(String, String)], mode: &str, args: &[&str]) -> Command {
        let mut command = Command::new(&self.program);
        command
            .arg(&self.script)
            .arg(mode)
            .args(args)
            .envs(server_env.iter().cloned())
            .stdin(Stdio::null())
            .stderr(Stdio::inherit());
        command
    }

    fn run(&self, server: &LocalServer, mode: &str, args: &[&str]) -> Result<Value> {
        let output = self
            .command(&server.env(), mode, args)
            .output()
            .with_context(|| {
                format!(
                    "run {} {} (is the peer installed? scripts/install-sdk-peers.sh)",
                    self.program.display(),
                    self.script.display()
                )
            })?;
        if !output.status.success() {
            bail!("{} {mode} failed: {}", self.name, output.status);
        }
        serde_json::from_slice(&output.stdout)
            .with_context(|| format!("{} {mode} printed no JSON", self.name))
    }

    /// Latency and throughput samples.
    pub fn measure(&self, server: &LocalServer, sandbox_id: &str, plan: &Plan) -> Result<Figures> {
        let iterations = plan.iterations.to_string();
        let latency = self.run(server, "latency", &[sandbox_id, &plan.small, &iterations])?;
        let runs = plan.runs.to_string();
        let throughput = self.run(server, "throughput", &[sandbox_id, &plan.large, &runs])?;
        Ok(Figures {
            stat: samples(&latency, "stat_ms")?,
            read_small: samples(&latency, "read_small_ms")?,
            write_small: samples(&latency, "write_small_ms")?,
            read_large: samples(&throughput, "read_ms")?,
            write_large: samples(&throughput, "write_ms")?,
            ..Figures::default()
        })
    }
}

fn samples(value: &Value, key: &str) -> Result<Vec<Duration>> {
    value[key]
        .as_array()
        .with_context(|| format!("no {key} samples"))?
        .iter()
        .map(|sample| {
            sample
                .as_f64()
                .map(|ms| Duration::from_secs_f64(ms / 1000.0))
                .with_context(|| format!("{key}: {sample} is not milliseconds"))
        })
        .collect()
}
