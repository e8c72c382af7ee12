//! The direct child: its exit, observed through a pidfd, and its reaping.
//!
//! A pidfd refers to exactly one process, so waiting on it can never
//! observe a recycled pid, and it becomes readable when the process exits —
//! no SIGCHLD handler, no polling. Any number of tasks may await the exit;
//! the first one woken reaps.

use std::io;
use std::sync::Mutex;

use dsh_plugin_api::subprocess::Signal;
use dsh_provider_kit::status::Ended;
use rustix::process::{Pid, PidfdFlags, WaitId, WaitIdOptions};
use tokio::io::Interest;
use tokio::sync::watch;

use crate::fdio::NonBlocking;

/// The outcome of waiting: the exit, or why it could not be observed.
pub type Outcome = Result<Ended, String>;

/// One direct child, from spawn until it is reaped.
#[derive(Debug)]
pub struct Leader {
    pid: Pid,
    pidfd: NonBlocking,
    /// Makes "check, waitid, publish" atomic between concurrent reapers.
    reaping: Mutex<()>,
    exit_tx: watch::Sender<Option<Outcome>>,
}

impl Leader {
    /// Opens a pidfd for `pid`, which must be an unreaped child of this
    /// process. Must run inside a tokio runtime.
    pub fn open(pid: Pid) -> io::Result<Leader> {
        let pidfd = rustix::process::pidfd_open(pid, PidfdFlags::empty())?;
        Ok(Leader {
            pid,
            pidfd: NonBlocking::new(pidfd, Interest::READABLE)?,
            reaping: Mutex::new(()),
            exit_tx: watch::Sender::new(None),
        })
    }

    pub fn pid(&self) -> Pid {
        self.pid
    }

    /// Waits for the child to exit, reaps it and publishes the outcome;
    /// once published, returns it at once. Safe to call from several tasks
    /// at the same time: whichever is woken first reaps (under a lock, so
    /// the others find the outcome instead of an `ECHILD`). Cancel-safe.
    pub async fn reap(&self) -> Outcome {
        if let Some(outcome) = self.exit() {
            return outcome;
        }
        let result = self
            .pidfd
            .when_readable(|pidfd| {
                let _reaping = self.reaping.lock().expect("reap lock");
                if let Some(outcome) = self.exit() {
                    return Ok(Some(outcome));
                }
                // Readable means exited; NOHANG guards against a spurious wake.
                let outcome = match rustix::process::waitid(
                    WaitId::PidFd(pidfd),
                    WaitIdOptions::EXITED | WaitIdOptions::NOHANG,
                ) {
                    Ok(Some(status)) => Ok(decode(&status)),
                    Ok(None) => return Ok(None),
                    Err(rustix::io::Errno::INTR) => return Err(io::ErrorKind::Interrupted.into()),
                    Err(rustix::io::Errno::CHILD) => Err(format!(
                        "process {} was reaped by someone else (is SIGCHLD ignored in the host?)",
                        self.pid
                    )),
                    Err(errno) => Err(format!("waitid for process {}: {errno}", self.pid)),
                };
                self.exit_tx.send_replace(Some(outcome.clone()));
                Ok(Some(outcome))
            })
            .await;
        result.unwrap_or_else(|err| {
            let _reaping = self.reaping.lock().expect("reap lock");
            self.exit().unwrap_or_else(|| {
                let outcome = Err(format!("waiting for process {}: {err}", self.pid));
                self.exit_tx.send_replace(Some(outcome.clone()));
                outcome
            })
        })
    }

    /// The published exit, if any.
    pub fn exit(&self) -> Option<Outcome> {
        self.exit_tx.borrow().clone()
    }
}

fn decode(status: &rustix::process::WaitIdStatus) -> Ended {
    if let Some(signal) = status.terminating_signal() {
        Ended::Signal(Signal(signal))
    } else {
        Ended::Code(status.exit_status().unwrap_or(0))
    }
}
