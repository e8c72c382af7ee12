//! `dsh`: the command-line face of the dsh host (docs/design.md §8).

#![forbid(unsafe_code)]

mod args;
mod conformance;
mod exec;
mod failure;
mod fs;
mod plugins;
mod stdout;
mod streams;
mod terminal;

use std::future::Future;
use std::io::Write;
use std::pin::Pin;

use clap::Parser;
use dsh_host::{Composition, Host, ShutdownSignals};

use crate::args::{Cli, Command};
use crate::failure::{EXIT_CONFIG, EXIT_FAILURE, Failure};

fn main() {
    let cli = Cli::parse();
    init_logging(cli.log.as_deref());
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .thread_name("dsh")
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(err) => {
            eprintln!("dsh: start the async runtime: {err}");
            std::process::exit(EXIT_FAILURE);
        }
    };
    let code = runtime.block_on(run(cli));
    let _ = std::io::stdout().flush();
    // A thread blocked reading our stdin (exec/sh forwarding) must not hold
    // the exit; everything that matters has been disposed by now.
    runtime.shutdown_background();
    std::process::exit(code);
}

fn init_logging(level: Option<&str>) {
    use tracing_subscriber::EnvFilter;
    let filter = match level {
        Some(level) => EnvFilter::try_new(level),
        None => EnvFilter::try_from_default_env().or_else(|_| EnvFilter::try_new("warn")),
    };
    let filter = filter.unwrap_or_else(|err| {
        eprintln!("dsh: --log {}: {err}", level.unwrap_or_default());
        std::process::exit(EXIT_CONFIG);
    });
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .init();
}

async fn run(cli: Cli) -> i32 {
    let composition = match &cli.config {
        Some(path) => Composition::load(path),
        None => Composition::embedded_local(),
    };
    let composition = match composition {
        Ok(composition) => composition,
        Err(err) => return report(Failure::host(&err)),
    };
    let json = cli.json;
    let outcome = match cli.command {
        Command::Plugins => plugins::list(&composition, json),
        Command::Check => plugins::check(&composition, json),
        Command::Exec(args) => {
            with_host(&composition, |host| Box::pin(exec::run(host, args))).await
        }
        Command::Sh(args) => {
            with_host(&composition, |host| Box::pin(terminal::run(host, args))).await
        }
        Command::Fs(command) => {
            with_host(&composition, |host| Box::pin(fs::run(host, command, json))).await
        }
        Command::Conformance(args) => {
            with_host(&composition, |host| {
                Box::pin(conformance::run(host, args, json))
            })
            .await
        }
    };
    match outcome {
        Ok(code) => code,
        Err(failure) => report(failure),
    }
}

/// Prints `failure` on stderr and returns its exit code. A closed stderr
/// loses the message but never the exit code.
fn report(failure: Failure) -> i32 {
    let mut err = std::io::stderr().lock();
    for line in failure.message.lines() {
        if writeln!(err, "dsh: {line}").is_err() {
            break;
        }
    }
    failure.code
}

/// A command running against a host it borrows.
type CommandFuture<'h> = Pin<Box<dyn Future<Output = Result<i32, Failure>> + 'h>>;

/// Starts the composition, runs `command` against it, and disposes it —
/// also when SIGINT or SIGTERM arrives first, which stops the command (its
/// future is dropped, restoring e.g. the terminal) and exits 128+signal.
/// The signal handlers are installed before any plugin is created, so no
/// signal can skip the disposal.
async fn with_host<F>(composition: &Composition, command: F) -> Result<i32, Failure>
where
    F: for<'h> FnOnce(&'h Host) -> CommandFuture<'h>,
{
    let mut signals = ShutdownSignals::install()
        .map_err(|err| Failure::new(EXIT_FAILURE, format!("install signal handlers: {err}")))?;
    let start = composition.start();
    tokio::pin!(start);
    let (host, early_signal) = tokio::select! {
        host = &mut start => (host, None),
        // Let the start finish (or roll back) before disposing: a
        // half-created composition must not be abandoned.
        signal = signals.recv() => (start.await, Some(signal)),
    };
    let host: Host = host?;
    let outcome = match early_signal {
        Some(signal) => {
            tracing::info!("{signal} during start: disposing");
            Ok(signal.exit_code())
        }
        None => tokio::select! {
            outcome = command(&host) => outcome,
            signal = signals.recv() => {
                tracing::info!("{signal}: stopping and disposing");
                Ok(signal.exit_code())
            }
        },
    };
    let disposed = host.dispose().await;
    match (outcome, disposed) {
        (outcome, Ok(())) => outcome,
        (Ok(code), Err(err)) => {
            report(Failure::host(&err));
            Ok(if code == 0 { EXIT_FAILURE } else { code })
        }
        (Err(failure), Err(err)) => {
            report(Failure::host(&err));
            Err(failure)
        }
    }
}
