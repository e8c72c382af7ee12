//! Orderly disposal on SIGINT / SIGTERM.
//!
//! [`ShutdownSignals`] waits for either signal; [`dispose_on_signal`] is the
//! opt-in helper for embedders: on the first signal it disposes the host
//! (reverse order, every dispose attempted) and exits the process with
//! `128 + signal`, as a shell reports a signal death.
//!
//! Installing a handler replaces the default action for the rest of the
//! process's life (tokio's rule): once either function has run, SIGINT and
//! SIGTERM no longer kill the process by themselves.

use std::sync::Arc;

use tokio::signal::unix::{SignalKind, signal};

use crate::host::Host;

/// A shutdown request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ShutdownSignal {
    /// SIGINT (Ctrl-C).
    Interrupt,
    /// SIGTERM.
    Terminate,
}

impl ShutdownSignal {
    /// The signal number (2 or 15).
    pub fn number(self) -> i32 {
        match self {
            ShutdownSignal::Interrupt => libc::SIGINT,
            ShutdownSignal::Terminate => libc::SIGTERM,
        }
    }

    /// The conventional exit code after this signal: `128 + number`.
    pub fn exit_code(self) -> i32 {
        128 + self.number()
    }
}

impl std::fmt::Display for ShutdownSignal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            ShutdownSignal::Interrupt => "SIGINT",
            ShutdownSignal::Terminate => "SIGTERM",
        })
    }
}

/// Installed SIGINT and SIGTERM handlers.
#[derive(Debug)]
pub struct ShutdownSignals {
    interrupt: tokio::signal::unix::Signal,
    terminate: tokio::signal::unix::Signal,
}

impl ShutdownSignals {
    /// Installs the handlers now (from this moment on neither signal kills
    /// the process by default). Must be called inside a tokio runtime with
    /// I/O enabled.
    pub fn install() -> std::io::Result<ShutdownSignals> {
        Ok(ShutdownSignals {
            interrupt: signal(SignalKind::interrupt())?,
            terminate: signal(SignalKind::terminate())?,
        })
    }

    /// Waits for the next SIGINT or SIGTERM (signals received since the
    /// install and not yet consumed count). Cancel-safe.
    pub async fn recv(&mut self) -> ShutdownSignal {
        tokio::select! {
            _ = self.interrupt.recv() => ShutdownSignal::Interrupt,
            _ = self.terminate.recv() => ShutdownSignal::Terminate,
        }
    }
}

/// A running [`dispose_on_signal`] watcher; dropping it stops watching
/// (the handlers stay installed, see the module docs).
#[derive(Debug)]
pub struct SignalWatch {
    task: tokio::task::JoinHandle<()>,
}

impl Drop for SignalWatch {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Spawns (on the current tokio runtime, which must have I/O enabled) a
/// watcher that, on SIGINT or SIGTERM, disposes `host`, reports dispose
/// failures on stderr and exits the process with `128 + signal`. The
/// handlers are installed before this returns; failing to install them is
/// the error.
pub fn dispose_on_signal(host: Arc<Host>) -> std::io::Result<SignalWatch> {
    let mut signals = ShutdownSignals::install()?;
    let task = tokio::spawn(async move {
        let received = signals.recv().await;
        tracing::info!("{received}: disposing {}", host.origin());
        if let Err(err) = host.dispose().await {
            eprintln!("{}: dispose after {received}: {err}", host.origin());
        }
        std::process::exit(received.exit_code());
    });
    Ok(SignalWatch { task })
}
