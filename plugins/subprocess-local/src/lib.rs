//! `dsh-subprocess-local`: the `subprocess` seam (DESIGN §5.2) on the host.
//!
//! - Commands start through `posix_spawn` as leaders of a new session and
//!   process group (`launch`), behind an environment boundary ([`env`](mod@env)),
//!   with executables resolved by `resolve`.
//! - Output is piped to the caller losslessly (`pipe_stream`), or pumped
//!   (`pump`) into a bounded tail, the host's own stdout/stderr, or
//!   nowhere, with an optional spill copy (`spill`); host memory is
//!   bounded in every mode but an unread pipe.
//! - Each command's group is owned until a terminate ladder proves it empty
//!   (`group`, `proc_table`); disposal terminates whatever is left.
//! - Terminals run on real PTYs in their own sessions (`terminal`).
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
pub mod env;
mod fdio;
mod gate;
mod group;
mod launch;
mod leader;
mod output;
mod pipe_stream;
mod plugin;
mod prepare;
mod proc_table;
mod process;
mod provider;
mod pty;
mod pump;
mod registry;
mod resolve;
mod session;
mod spill;
mod stdin;
mod tail;
mod terminal;

pub use config::Config;
pub use env::Environment;
pub use plugin::SubprocessLocalPlugin;
pub use provider::LocalSubprocess;

dsh_plugin_api::export_plugin!(SubprocessLocalPlugin);
