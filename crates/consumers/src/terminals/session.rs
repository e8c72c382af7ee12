//! One open terminal: its handle, and the task that drains everything the
//! program prints into a screen emulator and a bounded byte log.
//!
//! The drain runs from the open to the end of the output, whether or not
//! anyone reads, so the program never blocks on an unread terminal; host
//! memory stays bounded by the log's [`LOG_LIMIT`] and the screen's size.

use std::num::NonZeroU16;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use dsh_plugin_api::stream::ByteStream;
use dsh_plugin_api::subprocess::{ExitStatus, Terminal};
use dsh_plugin_api::{Error, Result};
use dsh_provider_kit::tail::Tail;
use futures::StreamExt;
use tokio::sync::watch;
use tokio::task::AbortHandle;
use tokio::time::Instant;

use crate::commands::{Retire, Tracked, until_proven_gone};

/// Bytes of a terminal's raw output kept for reading by cursor; older
/// bytes are reported as dropped (the screen still shows their effect).
pub const LOG_LIMIT: usize = 256 * 1024;

/// After the program exits, how long its last output may take to arrive
/// before the exit is reported.
const OUTPUT_SETTLE: Duration = Duration::from_millis(500);

/// What the drain task maintains.
pub(crate) struct Shared {
    pub parser: vt100::Parser,
    pub log: Tail,
    /// The program's exit, once it happened (and its output settled).
    pub exit: Option<Result<ExitStatus>>,
    /// The output stream ended (the terminal closed).
    output_ended: bool,
}

/// An open terminal.
pub(crate) struct TerminalSession {
    pub id: String,
    pub seq: u64,
    /// The program as given, for listings.
    pub line: String,
    pub terminal: Arc<dyn Terminal>,
    shared: Arc<Mutex<Shared>>,
    /// Bumped whenever output arrives or the program exits.
    changes: watch::Receiver<u64>,
    read_cursor: AtomicU64,
    tasks: [AbortHandle; 2],
}

impl TerminalSession {
    /// Starts draining `terminal`'s output (taken here) into a screen of
    /// `cols` × `rows`, and watching for its exit.
    pub(crate) fn start(
        seq: u64,
        id: String,
        line: String,
        terminal: Arc<dyn Terminal>,
        cols: NonZeroU16,
        rows: NonZeroU16,
    ) -> TerminalSession {
        let shared = Arc::new(Mutex::new(Shared {
            parser: vt100::Parser::new(rows, cols, 0),
            log: Tail::new(LOG_LIMIT),
            exit: None,
            output_ended: false,
        }));
        let (bump, changes) = watch::channel(0_u64);
        let bump = Arc::new(bump);
        let drain = tokio::spawn(drain(
            terminal.take_output(),
            Arc::clone(&shared),
            Arc::clone(&bump),
        ));
        let waiter = tokio::spawn(watch_exit(
            Arc::clone(&terminal),
            Arc::clone(&shared),
            bump,
            changes.clone(),
        ));
        TerminalSession {
            id,
            seq,
            line,
            terminal,
            shared,
            changes,
            read_cursor: AtomicU64::new(0),
            tasks: [drain.abort_handle(), waiter.abort_handle()],
        }
    }

    /// The drained state. Held briefly, never across an await.
    pub(crate) fn shared(&self) -> MutexGuard<'_, Shared> {
        lock(&self.shared)
    }

    /// Where a read without a cursor starts.
    pub(crate) fn default_cursor(&self) -> u64 {
        self.read_cursor.load(Ordering::Relaxed)
    }

    pub(crate) fn advance_cursor(&self, to: u64) {
        self.read_cursor.store(to, Ordering::Relaxed);
    }

    /// Waits until output after `cursor` has arrived and then nothing more
    /// for `quiet`, or the program exited, or `wait` passed.
    pub(crate) async fn wait_for_quiet(&self, cursor: u64, wait: Duration, quiet: Duration) {
        let deadline = Instant::now() + wait;
        let mut changes = self.changes.clone();
        changes.borrow_and_update();
        loop {
            let (total, exited) = {
                let shared = self.shared();
                (shared.log.total(), shared.exit.is_some())
            };
            let now = Instant::now();
            if exited || now >= deadline {
                return;
            }
            let limit = if total > cursor {
                quiet.min(deadline - now)
            } else {
                deadline - now
            };
            match tokio::time::timeout(limit, changes.changed()).await {
                Ok(Ok(())) => {}
                // Quiet (or the deadline), or nothing will ever change.
                Err(_) | Ok(Err(_)) => return,
            }
        }
    }

    /// Tears the terminal's session down (every group in it), retrying
    /// while the world reports it busy, and stops the drain.
    pub(crate) async fn terminate(&self) -> Result<()> {
        let terminal = &self.terminal;
        until_proven_gone(|| terminal.terminate()).await?;
        // Let the exit be recorded (the session is gone, so it comes
        // at once) before the tasks stop.
        let mut changes = self.changes.clone();
        let recorded = async {
            while self.shared().exit.is_none() {
                if changes.changed().await.is_err() {
                    break;
                }
            }
        };
        let _ = tokio::time::timeout(OUTPUT_SETTLE * 4, recorded).await;
        for task in &self.tasks {
            task.abort();
        }
        Ok(())
    }
}

impl Tracked for TerminalSession {
    fn seq(&self) -> u64 {
        self.seq
    }

    fn is_finished(&self) -> bool {
        self.shared().exit.is_some()
    }

    /// Nothing: a terminal's log and screen live in the tools' memory.
    fn kept_bytes(&self) -> u64 {
        0
    }

    /// Terminals never outlive the tools: ended whatever the reason.
    async fn retire(self: Arc<Self>, _why: Retire) -> Vec<Error> {
        match self.terminate().await {
            Ok(()) => Vec::new(),
            Err(err) => vec![
                Error::new(
                    err.kind(),
                    format!(
                        "shutdown: the session of terminal {} ({}) is not proven gone: {}",
                        self.id,
                        self.line,
                        err.message()
                    ),
                )
                .with_subject(self.id.clone()),
            ],
        }
    }
}

fn lock(shared: &Mutex<Shared>) -> MutexGuard<'_, Shared> {
    // The parser and the log are updated by one call each; a panic inside
    // vt100 would leave a screen at worst garbled, still worth showing.
    shared
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Feeds every output chunk to the screen and the log until the output
/// ends.
async fn drain(
    output: Option<ByteStream>,
    shared: Arc<Mutex<Shared>>,
    bump: Arc<watch::Sender<u64>>,
) {
    if let Some(mut output) = output {
        while let Some(chunk) = output.next().await {
            match chunk {
                Ok(bytes) => {
                    let mut shared = lock(&shared);
                    shared.parser.process(&bytes);
                    shared.log.push(&bytes);
                }
                Err(err) => {
                    tracing::warn!(%err, "terminal output failed; the terminal shows what came before");
                    break;
                }
            }
            bump.send_modify(|n| *n += 1);
        }
    }
    lock(&shared).output_ended = true;
    bump.send_modify(|n| *n += 1);
}

/// Records the program's exit once its output has ended or had
/// [`OUTPUT_SETTLE`] to arrive.
async fn watch_exit(
    terminal: Arc<dyn Terminal>,
    shared: Arc<Mutex<Shared>>,
    bump: Arc<watch::Sender<u64>>,
    mut changes: watch::Receiver<u64>,
) {
    let status = terminal.wait().await;
    let settled = async {
        while !lock(&shared).output_ended {
            if changes.changed().await.is_err() {
                break;
            }
        }
    };
    let _ = tokio::time::timeout(OUTPUT_SETTLE, settled).await;
    lock(&shared).exit = Some(status);
    bump.send_modify(|n| *n += 1);
}
