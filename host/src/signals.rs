//! Orderly disposal on SIGINT, SIGTERM, SIGHUP and SIGQUIT.
//!
//! [`ShutdownSignals`] waits for any of them — Ctrl-C, `kill`, a closed
//! terminal (tmux kill-session, an SSH drop) and Ctrl-\ all end a program
//! the user started, and each must clean up the same way; [`dispose_on_signal`] is the
//! opt-in helper for embedders: on the first signal it disposes the host
//! (reverse order, every dispose attempted) and exits the process with
//! `128 + signal`, as a shell reports a signal death.
//!
//! Installing a handler replaces the default action for the rest of the
//! process's life (tokio's rule): once either function has run, none of the
//! four signals kills the process by itself. After SIGHUP the terminal is
//! usually gone, so writes to stdout/stderr fail: nothing here lets such a
//! failure stop the disposal.

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
    /// SIGHUP: the controlling terminal went away.
    Hangup,
    /// SIGQUIT (Ctrl-\).
    Quit,
}

impl ShutdownSignal {
    /// The signal number (2, 15, 1 or 3).
    pub fn number(self) -> i32 {
        match self {
            ShutdownSignal::Interrupt => libc::SIGINT,
            ShutdownSignal::Terminate => libc::SIGTERM,
            ShutdownSignal::Hangup => libc::SIGHUP,
            ShutdownSignal::Quit => libc::SIGQUIT,
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
            ShutdownSignal::Hangup => "SIGHUP",
            ShutdownSignal::Quit => "SIGQUIT",
        })
    }
}

/// Installed SIGINT, SIGTERM, SIGHUP and SIGQUIT handlers.
#[derive(Debug)]
pub struct ShutdownSignals {
    interrupt: tokio::signal::unix::Signal,
    terminate: tokio::signal::unix::Signal,
    hangup: tokio::signal::unix::Signal,
    quit: tokio::signal::unix::Signal,
}

impl ShutdownSignals {
    /// Installs the handlers now (from this moment on none of the four
    /// signals kills the process by default). Must be called inside a tokio
    /// runtime with I/O enabled.
    pub fn install() -> std::io::Result<ShutdownSignals> {
        Ok(ShutdownSignals {
            interrupt: signal(SignalKind::interrupt())?,
            terminate: signal(SignalKind::terminate())?,
            hangup: signal(SignalKind::hangup())?,
            quit: signal(SignalKind::quit())?,
        })
    }

    /// Waits for the next shutdown signal (signals received since the
    /// install and not yet consumed count). Cancel-safe.
    pub async fn recv(&mut self) -> ShutdownSignal {
        tokio::select! {
            _ = self.interrupt.recv() => ShutdownSignal::Interrupt,
            _ = self.terminate.recv() => ShutdownSignal::Terminate,
            _ = self.hangup.recv() => ShutdownSignal::Hangup,
            _ = self.quit.recv() => ShutdownSignal::Quit,
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
/// watcher that, on any [`ShutdownSignal`], disposes `host`, reports
/// dispose failures on stderr (a closed stderr loses the report, never the
/// disposal) and exits the process with `128 + signal`. The
/// handlers are installed before this returns; failing to install them is
/// the error.
pub fn dispose_on_signal(host: Arc<Host>) -> std::io::Result<SignalWatch> {
    let mut signals = ShutdownSignals::install()?;
    let task = tokio::spawn(async move {
        let received = signals.recv().await;
        tracing::info!("{received}: disposing {}", host.origin());
        if let Err(err) = host.dispose().await {
            use std::io::Write;
            // Not eprintln!: it panics when stderr is gone (after SIGHUP).
            let _ = writeln!(
                std::io::stderr(),
                "{}: dispose after {received}: {err}",
                host.origin()
            );
        }
        std::process::exit(received.exit_code());
    });
    Ok(SignalWatch { task })
}
