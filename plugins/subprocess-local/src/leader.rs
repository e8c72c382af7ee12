//! The direct child: its exit, observed through a pidfd, and its reaping.
//!
//! A pidfd refers to exactly one process, so waiting on it can never
//! observe a recycled pid, and it becomes readable when the process exits —
//! no SIGCHLD handler, no polling. The exit is published on a watch channel
//! so any number of tasks can await it.

use std::io;

use dsh_plugin_api::subprocess::Signal;
use rustix::process::{Pid, PidfdFlags, WaitId, WaitIdOptions};
use tokio::io::Interest;
use tokio::sync::watch;

use crate::fdio::NonBlocking;

/// How the direct child ended, as the kernel reported it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exit {
    Code(i32),
    Signal(Signal),
}

/// The outcome of waiting: the exit, or why it could not be observed.
pub type Outcome = Result<Exit, String>;

/// One direct child, from spawn until it is reaped.
#[derive(Debug)]
pub struct Leader {
    pid: Pid,
    pidfd: NonBlocking,
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
            exit_tx: watch::Sender::new(None),
        })
    }

    pub fn pid(&self) -> Pid {
        self.pid
    }

    /// Waits for the child to exit, reaps it and publishes the outcome.
    /// Call from one task only (the handle's supervisor); others use
    /// [`Leader::exited`]. Cancel-safe.
    pub async fn reap(&self) -> Outcome {
        if let Some(outcome) = self.exit_tx.borrow().clone() {
            return outcome;
        }
        let result = self
            .pidfd
            .when_readable(|pidfd| {
                // Readable means exited; NOHANG guards against a spurious wake.
                match rustix::process::waitid(
                    WaitId::PidFd(pidfd),
                    WaitIdOptions::EXITED | WaitIdOptions::NOHANG,
                ) {
                    Ok(Some(status)) => Ok(Some(decode(&status))),
                    Ok(None) => Ok(None),
                    Err(errno) => Err(errno.into()),
                }
            })
            .await;
        let outcome = result.map_err(|err| {
            if err.raw_os_error() == Some(libc::ECHILD) {
                format!(
                    "process {} was reaped by someone else (is SIGCHLD ignored in the host?)",
                    self.pid
                )
            } else {
                format!("waiting for process {}: {err}", self.pid)
            }
        });
        self.exit_tx.send_replace(Some(outcome.clone()));
        outcome
    }

    /// Waits until [`Leader::reap`] has published the exit. Cancel-safe.
    pub async fn exited(&self) -> Outcome {
        let mut rx = self.exit_tx.subscribe();
        let guard = rx
            .wait_for(Option::is_some)
            .await
            .expect("the sender lives in self");
        guard.clone().expect("waited for Some")
    }

    /// The published exit, if any.
    pub fn exit(&self) -> Option<Outcome> {
        self.exit_tx.borrow().clone()
    }
}

fn decode(status: &rustix::process::WaitIdStatus) -> Exit {
    if let Some(signal) = status.terminating_signal() {
        Exit::Signal(Signal(signal))
    } else {
        Exit::Code(status.exit_status().unwrap_or(0))
    }
}
