//! Commands in the world: `run` (foreground or background), `read_output`
//! by cursor, `write_stdin`, `close_stdin`, `kill`, `list_commands`.
//!
//! Each command runs through the `subprocess` seam as the leader of its own
//! process group, with stdout and stderr merged in the world (see
//! [`Commands::run`] for how). The provider keeps the last 128 KiB of
//! the output in memory and a lossless copy of up to 1 GiB in a spill file
//! on the world's disk; `read_output` serves any offset from one or the
//! other, so output of any size can be read to its end in bounded memory.
//! A command is known by an id (`cmd-<n>`) from its start until
//! [`MAX_COMMANDS`] newer commands push it out (the oldest finished
//! first; forgetting a command ends what is left of its group and removes
//! its spill files) or [`Commands::shutdown`].
//!
//! A background command without stdin is durable when the provider has
//! durable commands: id `cmd-<durable id>`, output retained by the world
//! instead of a spill file, detached from (not ended) at shutdown, found
//! again by later tools over the same world (see the `durable` module).

mod durable;
mod errors;
mod kill;
mod list;
mod output;
mod read;
mod registry;
mod run;
mod status;
mod stdin;
mod terminate;
mod text;
mod tracked;

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use dsh_plugin_api::Error;
use dsh_plugin_api::fs::FsProvider;
use dsh_plugin_api::subprocess::SubprocessProvider;

pub use kill::{DEFAULT_KILL_GRACE_MS, KillRequest, KillResult, MAX_KILL_GRACE_MS};
pub use list::{CommandInfo, ListCommandsRequest, ListCommandsResult, MAX_LISTED_LINE_CHARS};
pub use read::{
    DEFAULT_READ_BYTES, DEFAULT_UNTIL_WAIT_MS, MAX_PATTERN_BYTES, MAX_READ_BYTES, MAX_WAIT_MS,
    ReadOutputRequest, ReadOutputResult, SCAN_OVERLAP, Until,
};
pub use run::{
    DEFAULT_RUN_WAIT_MS, HEAD_BYTES, MAX_BACKGROUND_TIMEOUT_MS, MAX_COMMAND_BYTES, MAX_ENV_ENTRIES,
    MAX_FOREGROUND_TIMEOUT_MS, MAX_RUN_WAIT_MS, MAX_STDIN_BYTES, RunRequest, RunResult, TAIL_BYTES,
};
pub use status::{CommandStatus, ExitInfo};
pub use stdin::{
    CloseStdinRequest, CloseStdinResult, MAX_WRITE_BYTES, WRITE_TIMEOUT, WriteStdinRequest,
    WriteStdinResult,
};

// Shared with the terminal tools.
pub(crate) use errors::{from_seam, invalid};
pub(crate) use registry::{Kind, Registry, Retire, Tracked};
pub(crate) use terminate::{TerminateOnDrop, until_proven_gone};
pub(crate) use text::{cut_character_start, decode_piece, quote_argv};

use tracked::TrackedCommand;

/// How many commands are remembered. When a new one would exceed it, the
/// oldest finished command is forgotten (what is left of its group ended,
/// its spill files removed); when all are running, `run` refuses with
/// `Busy`.
pub const MAX_COMMANDS: usize = 64;

/// How many bytes of spill files finished commands keep in the world,
/// together: beyond it, the oldest finished command is forgotten (its spill
/// files removed) when the next one starts; the newest finished one stays.
pub const MAX_KEPT_SPILL_BYTES: u64 = 1 << 30;

/// The command tools of one world.
pub struct Commands {
    subprocess: Arc<dyn SubprocessProvider>,
    /// Reads and removes spill files (they live on the world's disk).
    fs: Arc<dyn FsProvider>,
    registry: Registry<TrackedCommand>,
    /// Held while a durable command of the world is adopted, so that two
    /// calls naming it attach once.
    adopting: tokio::sync::Mutex<()>,
    /// How long a foreground `run` waits by default, in milliseconds.
    run_wait_ms: AtomicU64,
    /// Why the world ends with this server, when it does (then durable
    /// commands do too).
    world_ends: std::sync::Mutex<Option<String>>,
}

impl Commands {
    /// The command tools of the world `subprocess` and `fs` serve (the
    /// same world: spill files written by one are read through the other).
    pub fn new(subprocess: Arc<dyn SubprocessProvider>, fs: Arc<dyn FsProvider>) -> Commands {
        Commands {
            subprocess,
            fs,
            registry: Registry::new(Kind {
                prefix: "cmd",
                noun: "command",
                list_tool: "list_commands",
                end_tool: "kill",
                max: MAX_COMMANDS,
                max_kept_bytes: MAX_KEPT_SPILL_BYTES,
            }),
            adopting: tokio::sync::Mutex::new(()),
            run_wait_ms: AtomicU64::new(run::DEFAULT_RUN_WAIT_MS),
            world_ends: std::sync::Mutex::new(None),
        }
    }

    /// Says that the world ends when this server does, and why (`sandbox
    /// 1x2y is killed when this server ends (onDispose: kill)`), so that
    /// durable commands are not said to outlive it. Without it the world
    /// is taken to outlive the server (the local world; an E2B sandbox
    /// left or paused).
    pub fn set_world_ends_with_server(&self, why: String) {
        *self.world_ends.lock().unwrap_or_else(|p| p.into_inner()) = Some(why);
    }

    /// How long a command started in the background lives, in words that
    /// are true for this world.
    pub(crate) fn lifetime(&self, durable: bool) -> String {
        if !durable {
            return "it runs until it exits, kill, or this server ends".to_owned();
        }
        match &*self.world_ends.lock().unwrap_or_else(|p| p.into_inner()) {
            None => "durable: it outlives this server; a later server of this world reads and \
                     kills it by this id"
                .to_owned(),
            Some(why) => {
                format!("durable in the world, but {why}: it ends with this server all the same")
            }
        }
    }

    /// Sets how long a foreground `run` without `wait_ms` waits for its
    /// command before handing it over (default [`DEFAULT_RUN_WAIT_MS`]),
    /// clamped into 1 ms ..= [`MAX_RUN_WAIT_MS`]. Calls already waiting
    /// keep theirs.
    pub fn set_run_wait(&self, wait: Duration) {
        let ms = u64::try_from(wait.as_millis()).unwrap_or(u64::MAX);
        self.run_wait_ms
            .store(ms.clamp(1, run::MAX_RUN_WAIT_MS), Ordering::Relaxed);
    }

    /// How long a foreground `run` without `wait_ms` waits.
    fn run_wait(&self) -> Duration {
        Duration::from_millis(self.run_wait_ms.load(Ordering::Relaxed))
    }

    /// Refuses new commands, then ends every remembered command's process
    /// group (running or not: a finished command may have left descendants
    /// in it), retrying while the world reports a group busy, and removes
    /// every spill file. Durable commands are only detached from (they run
    /// on, their output retained in the world), except those `kill` ended,
    /// whose retained state is removed. Returns what could not be done —
    /// each group not proven gone, each spill file or retained state not
    /// removed; empty when everything ended. A second call has nothing
    /// left to do.
    pub async fn shutdown(&self) -> Vec<Error> {
        self.registry.shutdown().await
    }
}
