//! The SDK peers: `tests/sdk-peers/bench/fs.mjs` (npm `e2b` 2.51.0, Node) and
//! `tests/sdk-peers/bench/fs.py` (PyPI `e2b` 2.63.0, the peer's venv), run
//! against the same sandbox through e2b-local's [`SdkDriver`].

use anyhow::Result;
use e2b_local::harness::{LocalServer, SdkDriver, Steps, millisecond_samples};

use crate::{Figures, Plan};

/// The drivers of this benchmark.
pub fn js() -> SdkDriver {
    SdkDriver::js("fs")
}

pub fn python() -> SdkDriver {
    SdkDriver::python("fs")
}

/// Latency samples of `peer`.
pub fn measure(
    peer: &SdkDriver,
    server: &LocalServer,
    sandbox_id: &str,
    plan: &Plan,
) -> Result<Figures> {
    let iterations = plan.iterations.to_string();
    let latency = peer.run_json(server, "latency", &[sandbox_id, &plan.small, &iterations])?;
    Ok(Figures {
        stat: millisecond_samples(&latency, "stat_ms")?,
        read_small: millisecond_samples(&latency, "read_small_ms")?,
        write_small: millisecond_samples(&latency, "write_small_ms")?,
        edit_small: millisecond_samples(&latency, "edit_small_ms")?,
        ..Figures::default()
    })
}

/// `peer` warmed for the large file's transfers, one `read` or `write` a
/// step.
pub fn transfers(
    peer: &SdkDriver,
    server: &LocalServer,
    sandbox_id: &str,
    plan: &Plan,
) -> Result<Steps> {
    Ok(peer.steps(server, &[sandbox_id, &plan.large])?)
}
