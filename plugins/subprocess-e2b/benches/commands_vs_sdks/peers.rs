//! The SDK peers: `tests/sdk-peers/bench/commands.mjs` (npm `e2b` 2.51.0, Node)
//! and `tests/sdk-peers/bench/commands.py` (PyPI `e2b` 2.63.0, the peer's venv),
//! run against the same sandbox through e2b-local's [`SdkDriver`].

use anyhow::Result;
use e2b_local::harness::{LocalServer, SdkDriver, millisecond_samples};

use crate::{Figures, Plan};

/// The drivers of this benchmark.
pub fn js() -> SdkDriver {
    SdkDriver::js("commands")
}

pub fn python() -> SdkDriver {
    SdkDriver::python("commands")
}

/// Round trips, throughput and concurrency samples of `peer`.
pub fn measure(
    peer: &SdkDriver,
    server: &LocalServer,
    sandbox_id: &str,
    plan: &Plan,
) -> Result<Figures> {
    let samples = |mode: &str, args: &[&str]| -> Result<_> {
        let report = peer.run_json(server, mode, args)?;
        Ok(millisecond_samples(&report, "samples_ms")?)
    };
    Ok(Figures {
        round_trip: samples("roundtrip", &[sandbox_id, &plan.iterations.to_string()])?,
        throughput: samples(
            "throughput",
            &[
                sandbox_id,
                &plan.throughput_bytes.to_string(),
                &plan.runs.to_string(),
            ],
        )?,
        concurrent: samples(
            "concurrent",
            &[
                sandbox_id,
                &plan.concurrent.to_string(),
                &plan.rounds.to_string(),
            ],
        )?,
        ..Figures::default()
    })
}
