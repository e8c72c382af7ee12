//! The benchmark's sections, one file each. Every section measures the
//! providers loaded as plugins through [`dsh_host::Host`] (what users get)
//! against a raw peer in the same run, and — where it explains the gap —
//! the same provider linked in-process, without the ABI.

pub mod collect;
pub mod fs;
pub mod host_start;
pub mod producer;
pub mod subprocess;

use anyhow::{Context, Result};
use tokio::runtime::Runtime;

/// What every section shares.
#[derive(Debug)]
pub struct Bench {
    /// The host side's runtime: a multi-thread runtime with 2 workers, as
    /// an embedder would have. Plugin work runs on each plugin's own
    /// runtime, entered on poll (so on this runtime's threads).
    pub runtime: Runtime,
    /// Fewer rounds and smaller payloads.
    pub quick: bool,
}

impl Bench {
    pub fn new(quick: bool) -> Result<Bench> {
        Ok(Bench {
            runtime: host_runtime()?,
            quick,
        })
    }

    /// `full` normally, `quick` in a quick run.
    pub fn pick<T>(&self, full: T, quick: T) -> T {
        if self.quick { quick } else { full }
    }
}

/// A runtime like an embedder's: multi-thread, 2 workers, all drivers.
pub fn host_runtime() -> Result<Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .context("build the host-side tokio runtime")
}
