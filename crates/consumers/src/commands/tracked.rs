//! One command the tools started and still remember: its handle, its exit
//! as a watched value, its stdin and its output.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use dsh_plugin_api::stream::ByteWriter;
use dsh_plugin_api::subprocess::{ExitStatus, OutputStream, Process};
use dsh_plugin_api::{Error, Result};
use tokio::sync::watch;
use tokio::task::AbortHandle;

use super::durable::DurableLink;
use super::errors::from_seam;
use super::output::{CommandOutput, SPILL_LIMIT};
use super::registry::{Retire, Tracked};
use super::status::CommandStatus;
use super::terminate::until_proven_gone;

/// The grace between SIGTERM and SIGKILL when the tools forget a command
/// or shut down.
const RETIRE_GRACE: Duration = Duration::from_millis(1000);

/// The exit as `Process::wait` reported it, once it did.
pub(crate) type Exit = Option<Result<ExitStatus>>;

/// The state of a command's stdin as the tools hold it.
pub(crate) enum Stdin {
    /// `/dev/null` or fed from the request's text: nothing to write.
    NotOpen,
    /// A pipe `write_stdin` writes to.
    Open(Box<dyn ByteWriter>),
    /// Was open; `close_stdin` closed it.
    Closed,
}

/// A started command.
pub(crate) struct TrackedCommand {
    /// The id the tools answer to (`cmd-<seq>`, or `cmd-<durable id>`).
    pub id: String,
    /// Start order: the oldest finished command is forgotten first.
    pub seq: u64,
    /// The command as the caller gave it, for listings.
    pub line: String,
    /// Started in the background, or handed over there by a foreground
    /// `run` that waited long enough ([`TrackedCommand::hand_over`]).
    background: AtomicBool,
    pub process: Arc<dyn Process>,
    pub output: CommandOutput,
    pub stdin: tokio::sync::Mutex<Stdin>,
    /// The world's durable command this is, if it is one.
    pub durable: Option<DurableLink>,
    /// Set by `kill`: the agent is done with it (a durable command's
    /// retained state goes when the tools let it go).
    pub killed: AtomicBool,
    /// Where a `read_output` without a cursor starts.
    read_cursor: AtomicU64,
    /// The spill bytes kept in the world, measured once the command ended
    /// (before its exit is published).
    kept: Arc<AtomicU64>,
    exit: watch::Receiver<Exit>,
    /// The task that waits for the exit, and the one feeding stdin text.
    tasks: Vec<AbortHandle>,
}

impl TrackedCommand {
    /// Tracks `process`: spawns the task that publishes its exit. `feeder`
    /// is the task writing the request's stdin text, if any.
    #[expect(
        clippy::too_many_arguments,
        reason = "one constructor assembling the parts run prepared"
    )]
    pub(crate) fn new(
        seq: u64,
        id: String,
        line: String,
        background: bool,
        process: Arc<dyn Process>,
        output: CommandOutput,
        stdin: Stdin,
        feeder: Option<AbortHandle>,
        durable: Option<DurableLink>,
    ) -> TrackedCommand {
        let (publish, exit) = watch::channel(None);
        let waited = Arc::clone(&process);
        let kept = Arc::new(AtomicU64::new(0));
        let measured = Arc::clone(&kept);
        let retained = durable.is_some();
        let waiter = tokio::spawn(async move {
            let status = waited.wait().await;
            let snapshot = waited.read_output(OutputStream::Stdout, u64::MAX, 0).await;
            let bytes = match snapshot {
                // What the world retains of a durable command's output.
                Ok(snapshot) if retained => snapshot.total.min(SPILL_LIMIT),
                Ok(snapshot) => snapshot.spill.map_or(0, |spill| spill.len),
                Err(_) => 0,
            };
            measured.store(bytes, Ordering::Relaxed);
            publish.send_replace(Some(status));
        });
        TrackedCommand {
            id,
            seq,
            line,
            background: AtomicBool::new(background),
            process,
            output,
            stdin: tokio::sync::Mutex::new(stdin),
            durable,
            killed: AtomicBool::new(false),
            read_cursor: AtomicU64::new(0),
            kept,
            exit,
            tasks: std::iter::once(waiter.abort_handle())
                .chain(feeder)
                .collect(),
        }
    }

    /// Whether it runs in the background (started there or handed over).
    pub(crate) fn is_background(&self) -> bool {
        self.background.load(Ordering::Relaxed)
    }

    /// A foreground command that outlasted its `run`'s wait goes on in
    /// the background.
    pub(crate) fn hand_over(&self) {
        self.background.store(true, Ordering::Relaxed);
    }

    /// The exit, if the command has ended.
    pub(crate) fn exit(&self) -> Exit {
        self.exit.borrow().clone()
    }

    /// Waits for the exit. Dropping the future stops waiting only.
    pub(crate) async fn wait_exit(&self) -> Result<ExitStatus> {
        let mut exit = self.exit.clone();
        loop {
            if let Some(status) = exit.borrow_and_update().clone() {
                return status;
            }
            if exit.changed().await.is_err() {
                return Err(Error::closed(format!(
                    "the tools stopped watching {} (shut down)",
                    self.id
                )));
            }
        }
    }

    /// Waits up to `limit` for the exit; `None` if it did not come.
    pub(crate) async fn wait_exit_for(&self, limit: Duration) -> Option<Result<ExitStatus>> {
        tokio::time::timeout(limit, self.wait_exit()).await.ok()
    }

    /// The command's status as the tools report it.
    pub(crate) fn status(&self) -> CommandStatus {
        CommandStatus::of(&self.exit())
    }

    /// Where a `read_output` without a cursor starts: where the previous
    /// one ended.
    pub(crate) fn default_cursor(&self) -> u64 {
        self.read_cursor.load(Ordering::Relaxed)
    }

    pub(crate) fn advance_cursor(&self, to: u64) {
        self.read_cursor.store(to, Ordering::Relaxed);
    }

    /// Stops the tasks that serve this command (its process is not
    /// touched).
    fn abort_tasks(&self) {
        for task in &self.tasks {
            task.abort();
        }
    }
}

impl Tracked for TrackedCommand {
    fn seq(&self) -> u64 {
        self.seq
    }

    fn is_finished(&self) -> bool {
        self.exit.borrow().is_some()
    }

    /// Its spill (stdout's: the spawn merged stderr into it), or what
    /// the world retains of a durable command's output.
    fn kept_bytes(&self) -> u64 {
        self.kept.load(Ordering::Relaxed)
    }

    /// Ends what is left of the command's group (its program has usually
    /// exited, but descendants may remain), stops its tasks and removes
    /// its spill files — or its retained state in the world, for a durable
    /// command. At shutdown a durable command that `kill` did not end is
    /// only detached from: it runs on, and a later server finds it.
    async fn retire(self: Arc<Self>, why: Retire) -> Vec<Error> {
        let mut failures = Vec::new();
        if self.durable.is_some() {
            self.output.close_reader().await;
            if why == Retire::Shutdown && !self.killed.load(Ordering::Relaxed) {
                self.abort_tasks();
                return failures;
            }
        }
        let process = &self.process;
        if let Err(err) = until_proven_gone(|| process.terminate(RETIRE_GRACE)).await {
            failures.push(
                Error::new(
                    err.kind(),
                    format!(
                        "shutdown: the process group of {} ({}) is not proven gone: {}",
                        self.id,
                        self.line,
                        err.message()
                    ),
                )
                .with_subject(self.id.clone()),
            );
        }
        self.abort_tasks();
        if let Some(link) = &self.durable
            && failures.is_empty()
            && let Err(err) = link.forget().await
        {
            failures.push(from_seam(
                &format!("shutdown: forget durable command {}", self.id),
                err,
            ));
        }
        for err in self.output.remove_spill_files().await {
            failures.push(from_seam(
                &format!("shutdown: spill file of {}", self.id),
                err,
            ));
        }
        failures
    }
}
