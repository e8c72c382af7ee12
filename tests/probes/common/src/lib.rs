//! Test-only: the shared logic of the dsh probe plugins.
//!
//! Three probe plugins form a miniature E2B-shaped composition with fully
//! deterministic, documented fake behaviour:
//!
//! | crate | provides | injects |
//! |---|---|---|
//! | `dsh-probe-e2b` | `e2b` ([`fake_owner`]) | — |
//! | `dsh-probe-fs` | `fs` ([`memory_fs`], cwd = the injected owner's cwd) | `e2b` |
//! | `dsh-probe-subprocess` | `subprocess` ([`fake_subprocess`]) | `e2b`, `fs` |
//!
//! Every probe takes the same strict config ([`config::ProbeConfig`]:
//! `record`, `failCreate`, `failDispose`, `disposeDelayMs`,
//! `createDelayMs`) and records its
//! lifecycle ([`lifecycle`], [`record`]) so a host can prove creation order,
//! typed injection, reverse disposal, rollback and signal-driven disposal.
//! Their services cover every seam method, with magic inputs
//! ([`magic`]) for each error kind, panics, hangs (cancellation) and
//! internal counters, and the subprocess probe's `fs`/`e2b` programs
//! ([`script`]) drive the injected services from inside a plugin.
//!
//! Each probe also emits `tracing` events: `info` "probe created" and
//! `debug` "probe create details" at create, `info` "probe disposed", and
//! one event per `stat("/.probe/log/<level>")`.

/// The version every probe's descriptor declares: the workspace's, which probes and this crate
/// share (`version.workspace = true`), and which the published crates (`dsh-plugin-api`…) need
/// not have.
pub const PROBE_VERSION: &str = env!("CARGO_PKG_VERSION");

pub mod config;
pub mod exit;
pub mod fake_owner;
pub mod fake_process;
pub mod fake_subprocess;
pub mod fake_terminal;
pub mod lifecycle;
pub mod magic;
pub mod memory_fs;
pub mod record;
pub mod script;

pub use config::{Failure, ProbeConfig};
pub use lifecycle::Lifecycle;
pub use magic::Counters;
