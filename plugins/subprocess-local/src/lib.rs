//! `dsh-subprocess-local`: the `subprocess` seam (docs/design.md §5.2) on the
//! host.
//!
//! - Commands start through `posix_spawn` as leaders of a new session and
//!   process group (`launch`), behind an environment boundary ([`env`](mod@env)),
//!   with executables resolved by `resolve`.
//! - Output is piped to the caller losslessly (`pipe_stream`), or pumped
//!   (`pump`) into a bounded tail, the host's own stdout/stderr, or
//!   nowhere, with an optional spill copy (`spill`); host memory is
//!   bounded in every mode but an unread pipe.
//! - Each command's group is owned until a terminate ladder proves it empty
//!   (`group`, on `dsh-process-group`: the process table, the quiescence
//!   rule and the ladders the E2B helper uses too); disposal terminates
//!   whatever is left.
//! - Terminals run on real PTYs in their own sessions (`terminal`).
//!
//! Choices the seam leaves open, made here:
//!
//! - Null output goes through a pipe and is counted (the seam reports
//!   `total` in every mode), so like collect and inherit it is drained after
//!   the child exits, within the spec's drain grace. When the grace runs
//!   out, what is already in the pipe is still read; later writers are cut
//!   off.
//! - Outside collect mode nothing is retained: `read_output` answers an
//!   empty view at `offset == total`, with `truncated` set once any byte
//!   was produced. Offsets past `total` clamp to `total`.
//! - In pipe mode, spill and totals advance as the caller reads.
//! - A relative `cwd` joins the world's cwd; an empty one is invalid.
//! - A bare program name is looked up on the command's own `PATH` (the
//!   spec's `PATH` entry if it sets one); relative `PATH` entries are
//!   skipped.
//! - Terminals get exactly the scrubbed environment plus the spec's
//!   entries: no `TERM` is invented (pass one in `env`).
//! - Terminal teardown starts with SIGHUP (what a hangup delivers;
//!   interactive shells ignore SIGTERM), then SIGKILL after the configured
//!   kill grace.
//! - The host must ignore SIGPIPE (every Rust program does): writing to
//!   the stdin of a child that closed it must fail with `Closed`, not kill
//!   the host.
//!
//! Everything runs on the tokio runtime that calls it — the plugin's own
//! runtime when a host loads the library.
//!
//! [`SubprocessLocalPlugin`] is the plugin (`dsh-subprocess-local`,
//! provides `subprocess`, injects nothing, config
//! `{ cwd?, spillDir?, killGraceMs? }`), exported for the host as
//! `libdsh_subprocess_local.so`.

mod command;
pub mod config;
mod durable;
pub mod env;
mod fdio;
mod group;
mod launch;
mod leader;
mod output;
mod pause;
mod pipe_stream;
mod plugin;
mod prepare;
mod process;
mod provider;
mod pty;
mod pump;
mod registry;
mod resolve;
mod session;
mod spill;
mod stdin;
mod terminal;
mod world;

pub use config::Config;
pub use env::Environment;
pub use plugin::SubprocessLocalPlugin;
pub use provider::LocalSubprocess;

dsh_plugin_api::export_plugin!(SubprocessLocalPlugin);
