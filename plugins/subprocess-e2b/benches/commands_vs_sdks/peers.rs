//! The SDK peers: `sdk-peers/bench/commands.mjs` (npm `e2b` 2.29.1, Node)
//! and `sdk-peers/bench/commands.py` (PyPI `e2b` 2.63.0, the peer's venv),
//! run against the same sandbox.

use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::Duration;

use anyhow::{Context, Result, bail};
use e2b_local::harness::LocalServer;
use serde_json::Value;

use crate::{Figures, Plan};

fn sdk_peers() -> PathBuf {
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
            script: sdk_peers().join("bench/commands.mjs"),
        }
    }

    pub fn python() -> Peer {
        Peer {
            name: "python e2b==2.63.0",
            program: sdk_peers().join("python/.venv/bin/python"),
            script: sdk_peers().join("bench/commands.py"),
        }
    }

    /// The driver for `mode` with `args`, with the server's variables.
    pub fn command(&self, server: &LocalServer, mode: &str, args: &[&str]) -> Command {
        let mut command = Command::new(&self.program);
        command
            .arg(&self.script)
            .arg(mode)
            .args(args)
            .envs(server.env())
            .stdin(Stdio::null())
            .stderr(Stdio::inherit());
        command
    }

    fn run(&self, server: &LocalServer, mode: &str, args: &[&str]) -> Result<Value> {
        let output = self.command(server, mode, args).output().with_context(|| {
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

    /// Round trips, throughput and concurrency samples.
    pub fn measure(&self, server: &LocalServer, sandbox_id: &str, plan: &Plan) -> Result<Figures> {
        let round_trip = self.run(
            server,
            "roundtrip",
            &[sandbox_id, &plan.iterations.to_string()],
        )?;
        let throughput = self.run(
            server,
            "throughput",
            &[
                sandbox_id,
                &plan.throughput_bytes.to_string(),
                &plan.runs.to_string(),
            ],
        )?;
        let concurrent = self.run(
            server,
            "concurrent",
            &[
                sandbox_id,
                &plan.concurrent.to_string(),
                &plan.rounds.to_string(),
            ],
        )?;
        Ok(Figures {
            round_trip: samples(&round_trip)?,
            throughput: samples(&throughput)?,
            concurrent: samples(&concurrent)?,
            ..Figures::default()
        })
    }
}

fn samples(value: &Value) -> Result<Vec<Duration>> {
    value["samples_ms"]
        .as_array()
        .context("no samples_ms")?
        .iter()
        .map(|sample| {
            sample
                .as_f64()
                .map(|ms| Duration::from_secs_f64(ms / 1000.0))
                .with_context(|| format!("{sample} is not milliseconds"))
        })
        .collect()
}
