//! The envd-compatible daemon that runs inside each e2b-local sandbox.
//!
//! It speaks the wire protocol of E2B's `envd` (see `docs/e2b-protocol.md` §3–9): the Connect
//! services `process.Process` and `filesystem.Filesystem` (JSON and binary protobuf, unary and
//! streaming, HTTP/1.1 and h2c on one listener) and the plain HTTP routes `/files` (GET and POST),
//! `/health`, `/envs`, `/metrics` and `/init`. The official E2B SDKs talk to it unchanged.
//!
//! e2b-local runs [`serve`] inside each sandbox's namespaces (as root, after `pivot_root`), so
//! every path, user name and pid the daemon sees is the sandbox's own. What it needs from that
//! environment:
//!
//! - **root**: it switches uid/gid/supplementary groups for commands and chowns what it creates;
//! - **`/etc/passwd` and `/etc/group`**: users and groups are read from these files on every
//!   request (no NSS), so a user added inside the sandbox is usable at once;
//! - **`/proc`** of the sandbox's PID namespace (pids reported to clients are the namespace's,
//!   `/proc/self/oom_score_adj` is written for each command, `/metrics` reads `/proc/stat` and
//!   `/proc/meminfo`);
//! - **`/dev/ptmx` and a devpts instance** for PTY processes, and **`/dev/null`** for commands
//!   started without stdin;
//! - **`/bin/sh`**: every command runs as `/bin/sh -c 'exec "$@"' -- <cmd> <args…>`, exactly as
//!   envd does, so a missing command is reported by the shell (exit 127) rather than as an RPC
//!   error, and the reported pid is the user command's own;
//! - an inotify-capable filesystem for `WatchDir` and `user.*` extended attributes for file
//!   metadata (best effort: without xattr support metadata is silently not stored, as in envd);
//! - **umask 022** (envd's, under systemd): uploads are created 0666 and directories 0755 minus
//!   the process umask, and commands inherit it;
//! - a sensible **`PATH`** in its own environment: commands get the daemon's `PATH` (envd copies
//!   its own), or the standard `/usr/local/sbin:…:/bin` when the daemon has none.
//!
//! Like envd, commands started without a PTY stay in the daemon's process group and session
//! (only PTY commands get a session of their own), so `kill 0` in such a command signals the
//! daemon's whole group: run the daemon as the leader of its own session (`setsid`) so that no
//! sandbox command can signal anything outside the sandbox.
//!
//! The daemon does not reap orphans: in a sandbox the namespace's init (PID 1) does. It must not
//! share a process with a `waitpid(-1)` reaper either, since that would steal the exit statuses
//! of the commands it runs.
//!
//! [`serve`] runs on the caller's tokio runtime, which needs the I/O and time drivers
//! (`enable_all()`); child processes are reaped through tokio's process driver.

mod acting_user;
mod auth;
mod dispatch;
mod entry;
mod env_vars;
mod error;
mod filesystem;
mod http;
mod ids;
mod metrics;
mod paths;
mod process;
mod rpc_context;
mod sandbox_log;
mod server;
mod state;
mod stream_timing;
mod users;
mod xattr;

pub use acting_user::FileAccess;
pub use error::EnvdError;
pub use server::{
    DEFAULT_EXIT_RETENTION, DEFAULT_MAX_MESSAGE_SIZE, Envd, EnvdListener, StartedEnvd,
    connection_builder, serve,
};

/// The envd version this daemon implements; the control plane reports the same value as
/// `envdVersion`, which turns on every version-gated SDK feature.
pub const ENVD_VERSION: &str = "0.6.13";

/// Everything the daemon needs to know about its sandbox at start.
///
/// `POST /init` can later replace the user environment variables, the access token, the default
/// user and the default working directory at runtime (docs/e2b-protocol.md §7.4).
#[derive(Debug, Clone)]
pub struct EnvdConfig {
    /// The sandbox id, exported to commands as `E2B_SANDBOX_ID`.
    pub sandbox_id: String,
    /// The template id, exported to commands as `E2B_TEMPLATE_ID`.
    pub template_id: String,
    /// Create-time `envVars`; envd adds E2B_SANDBOX=true, E2B_SANDBOX_ID, E2B_TEMPLATE_ID.
    pub env_vars: std::collections::BTreeMap<String, String>,
    /// Some(token) for `secure` sandboxes: X-Access-Token / signed /files URLs enforced.
    pub access_token: Option<String>,
    /// "user" in e2b-local (home from the passwd entry, normally /home/user).
    pub default_user: String,
    /// Default working directory; None = the user's home.
    pub default_workdir: Option<std::path::PathBuf>,
}
