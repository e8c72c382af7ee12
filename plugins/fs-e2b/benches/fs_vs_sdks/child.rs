//! Peak RSS of a process that streams one file: each client runs in its own
//! child process (ours: this bench binary again, with [`FLAG`]) and reports
//! its `VmHWM` from `/proc/self/status` — the kernel's high-water mark of
//! that program's own memory. (`wait4`'s `ru_maxrss` cannot be used: Linux
//! carries a process's maximum across `fork` and `exec`, so every child
//! would report at least this bench's own peak.)

use std::process::{Command, Stdio};

use anyhow::{Context, Result, bail};
use e2b_local::harness::LocalServer;

use crate::ours::{self, Endpoints};
use crate::peers;

/// The argument that makes this binary the RSS child of our side.
pub const FLAG: &str = "--stream-child";

/// Who streams.
#[derive(Debug, Clone, Copy)]
pub enum Client {
    Dsh,
    Js,
    Python,
}

/// Runs `client` streaming `path` of `sandbox_id` in a child process and
/// returns the child's peak RSS in bytes.
pub fn peak_rss(client: Client, server: &LocalServer, sandbox_id: &str, path: &str) -> Result<u64> {
    let mut command = match client {
        Client::Dsh => {
            let mut command = Command::new(std::env::current_exe()?);
            command
                .args([FLAG, sandbox_id, path])
                .envs(server.env())
                .stdin(Stdio::null())
                .stderr(Stdio::inherit());
            command
        }
        Client::Js => peers::js().command(server, "stream", &[sandbox_id, path]),
        Client::Python => peers::python().command(server, "stream", &[sandbox_id, path]),
    };
    let output = command
        .output()
        .with_context(|| format!("run the {client:?} streaming child"))?;
    if !output.status.success() {
        bail!("the {client:?} streaming child failed: {}", output.status);
    }
    let report: serde_json::Value = serde_json::from_slice(&output.stdout).with_context(|| {
        format!(
            "the {client:?} child printed {:?}",
            String::from_utf8_lossy(&output.stdout)
        )
    })?;
    anyhow::ensure!(
        report["bytes"].as_u64().is_some_and(|bytes| bytes > 0),
        "the {client:?} child read nothing: {report}"
    );
    let kib = report["vm_hwm_kib"]
        .as_u64()
        .with_context(|| format!("the {client:?} child reported no peak RSS: {report}"))?;
    Ok(kib * 1024)
}

/// The `VmHWM` of this process, in KiB.
fn vm_hwm_kib() -> Result<u64> {
    let status = std::fs::read_to_string("/proc/self/status")?;
    status
        .lines()
        .find_map(|line| line.strip_prefix("VmHWM:"))
        .and_then(|rest| rest.trim().strip_suffix("kB"))
        .and_then(|kib| kib.trim().parse().ok())
        .context("no VmHWM in /proc/self/status")
}

/// Our RSS child: `FLAG <sandbox id> <path>`, the server from the `E2B_*`
/// variables; prints `{"bytes": n, "vm_hwm_kib": k}`.
pub fn main(args: &[String]) -> Result<()> {
    let [sandbox_id, path] = args else {
        bail!("usage: {FLAG} <sandbox id> <path>");
    };
    let endpoints = Endpoints::from_env()?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    let bytes = runtime.block_on(ours::stream(&endpoints, sandbox_id, path))?;
    println!("{{\"bytes\": {bytes}, \"vm_hwm_kib\": {}}}", vm_hwm_kib()?);
    Ok(())
}
