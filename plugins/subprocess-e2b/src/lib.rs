//! `dsh-subprocess-e2b`: the `subprocess` seam (docs/design.md §5.2) in the E2B
//! sandbox of the injected `e2b` owner.
//!
//! Every command is started and supervised by `dsh-supervisor`, a static
//! helper of ours that runs inside the sandbox as root from the owner's
//! root-owned runtime root (docs/design.md §6, option b; the `dsh-supervisor`
//! crate, built static by `dsh-supervisor-client`'s `build.rs` and embedded through
//! that crate):
//!
//! - it forks the command as the leader of a new session and process group,
//!   as the sandbox user, with exactly the requested argv and the scrubbed
//!   environment ([`dsh_supervisor::ambient`]), and reports its pid before `spawn`
//!   resolves — an event, not a poll;
//! - it relays stdout and stderr as raw bytes in frames on its own stdout
//!   (a root process's envd pipe: no sandbox process can write a fact into
//!   it), writes the spill copies, and reports exactly how the command
//!   ended — its exit code, or the signal that killed it;
//! - its one-shot subcommands run the terminate ladder and the session
//!   teardown inside the sandbox, one round trip each.
//!
//! On the host, a task per command decodes the frames ([`frames`]), feeds
//! pipes with backpressure, tails and counters, and applies the timeout and
//! the drain grace (`supervise`). Terminals run the helper on an envd PTY,
//! which then becomes the program (`terminal`).
//!
//! Choices the seam leaves open, made here as `dsh-subprocess-local` makes
//! them (the conformance kit runs the same cases on both): null output is
//! counted (by the helper, without crossing the network); outside collect
//! mode nothing is retained; in pipe mode totals advance as bytes reach
//! the pipe; a relative `cwd` joins the world's cwd; a bare program name is
//! looked up on the command's own `PATH`; terminals get no invented `TERM`;
//! terminal teardown starts with SIGHUP.
//!
//! Where it differs from the host provider, because it is remote: output
//! crosses envd in one ordered stream, so output not read from a pipe holds
//! back what follows it (the other stream and the exit); after a lost
//! connection to envd the helper is re-attached and the status still
//! arrives, but output from then on is lost (the streams end with an
//! error); a gone sandbox settles every handle (terminate succeeds, `wait`
//! fails with `Unavailable` unless the exit was already seen).
//!
//! [`SubprocessE2bPlugin`] is the plugin (`dsh-subprocess-e2b`, provides
//! `subprocess`, injects `e2b`, config `{ killGraceMs?, user?, spillDir? }`),
//! exported for the host as `libdsh_subprocess_e2b.so`.

#![forbid(unsafe_code)]

mod boundary;
pub mod config;
mod control;
mod delivery;
mod durable;
mod errors;
pub mod frames;
mod group;
mod inherit;
mod liveness;
mod output;
mod pipe;
mod plugin;
mod process;
mod provider;
mod registry;
mod resolve;
mod setup;
mod start;
mod status;
mod stdin;
mod supervise;
mod terminal;
mod transport;
mod world;

// The helper's wire, from the helper's own crate: one definition for both
// sides.
use dsh_supervisor::wire;

pub use config::Config;
pub use liveness::OwnerLiveness;
pub use plugin::SubprocessE2bPlugin;
pub use provider::E2bSubprocess;
pub use transport::EnvdTransport;

dsh_plugin_api::export_plugin!(SubprocessE2bPlugin);
