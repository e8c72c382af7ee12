//! `dsh`: the command-line face of the dsh host (docs/design.md §8).

#![forbid(unsafe_code)]

mod args;
mod code;
mod conformance;
mod durable;
mod exec;
mod failure;
mod fs;
mod lsp;
mod mcp;
mod plugins;
mod stdout;
mod streams;
mod template;
mod terminal;

use std::future::Future;
use std::io::Write;
use std::pin::Pin;
use std::time::Duration;

use clap::Parser;
use dsh_host::{Composition, Host, ShutdownSignal, ShutdownSignals, Started};
use dsh_plugin_api::OwnerKind;
use tokio::time::Instant;

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
    if let Command::Template(args) = &cli.command {
        return template::write(args).unwrap_or_else(report);
    }
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
            with_host(&composition, |host, _| {
                Box::pin(exec::run(host, args, json))
            })
            .await
        }
        Command::Ps => with_host(&composition, |host, _| Box::pin(durable::ps(host, json))).await,
        Command::Attach(args) => {
            with_host(&composition, |host, _| {
                Box::pin(durable::attach(host, args))
            })
            .await
        }
        Command::Kill(args) => {
            with_host(&composition, |host, _| {
                Box::pin(durable::kill(host, args, json))
            })
            .await
        }
        Command::Forget(args) => {
            with_host(&composition, |host, _| {
                Box::pin(durable::forget(host, args))
            })
            .await
        }
        Command::Sh(args) => {
            with_host(&composition, |host, _| Box::pin(terminal::run(host, args))).await
        }
        Command::Fs(command) => {
            with_host(&composition, |host, _| {
                Box::pin(fs::run(host, command, json))
            })
            .await
        }
        Command::Conformance(args) => {
            with_host(&composition, |host, _| {
                Box::pin(conformance::run(host, args, json))
            })
            .await
        }
        Command::Mcp(args) => match (
            lsp::config(cli.lsp_config.as_deref()),
            mcp::preflight(&args),
        ) {
            (Ok(lsp_config), Ok(token)) => {
                with_host(&composition, |host, stop| {
                    Box::pin(mcp::run(host, args, token, lsp_config, stop))
                })
                .await
            }
            (Err(failure), _) | (_, Err(failure)) => Err(failure),
        },
        Command::Code(command) => match lsp::config(cli.lsp_config.as_deref()) {
            Ok(lsp_config) => {
                with_host(&composition, |host, stop| {
                    Box::pin(code::run(host, command, lsp_config, json, stop))
                })
                .await
            }
            Err(failure) => Err(failure),
        },
        Command::Template(_) => unreachable!("written before the composition loads"),
        Command::Lsp(command) => match lsp::config(cli.lsp_config.as_deref()) {
            Ok(lsp_config) => {
                with_host(&composition, |host, _| {
                    Box::pin(lsp::run(host, command, lsp_config, json))
                })
                .await
            }
            Err(failure) => Err(failure),
        },
    };
    match outcome {
        Ok(code) => code,
        Err(failure) => report(failure),
    }
}

/// Prints `failure` on stderr and returns its exit code. A closed stderr
/// loses the message but never the exit code.
fn report(failure: Failure) -> i32 {
    say(&failure.message);
    failure.code
}

/// Prints `message` on stderr, each line prefixed `dsh: `; a closed stderr
/// (after SIGHUP, the terminal is gone) loses the message and nothing else.
fn say(message: &str) {
    let mut err = std::io::stderr().lock();
    for line in message.lines() {
        if writeln!(err, "dsh: {line}").is_err() {
            break;
        }
    }
}

/// A command running against a host it borrows.
type CommandFuture<'h> = Pin<Box<dyn Future<Output = Result<i32, Failure>> + 'h>>;

/// A shutdown signal, for a command that ends by itself when told — `dsh
/// mcp`, whose tools end what they started, which dropping its future
/// would skip. A command that drops its `Stop` is dropped on a signal
/// instead; one that keeps it gets [`WIND_DOWN`] to end.
pub struct Stop(tokio::sync::oneshot::Receiver<()>);

impl Stop {
    /// Resolves once a shutdown signal came (or nobody waits for the
    /// command any more).
    pub async fn requested(self) {
        let _ = self.0.await;
    }
}

/// How long a command that kept its [`Stop`] may take to end after a
/// signal before it is dropped; the disposal's [`SHUTDOWN_BOUND`] follows.
const WIND_DOWN: Duration = Duration::from_secs(3);

/// How long the orderly disposal after a shutdown signal may take before
/// dsh abandons it (docs/design.md §8): a signal means the user wants out,
/// and a frozen or unreachable E2B service must not hold them.
const SHUTDOWN_BOUND: Duration = Duration::from_secs(3);
/// How long a create in flight may still take after a signal before it is
/// abandoned; the rest of [`SHUTDOWN_BOUND`] disposes what was created.
const CREATE_GRACE: Duration = Duration::from_secs(2);
/// A disposal still running this long after a signal is announced on
/// stderr, saying what it waits for.
const SHUTDOWN_NOTICE: Duration = Duration::from_millis(500);

/// Starts the composition, runs `command` against it, and disposes it.
///
/// A shutdown signal (SIGINT, SIGTERM, SIGHUP, SIGQUIT) stops whatever is
/// running — a start in flight (no further plugin is created; the create
/// in flight is rolled back with the rest, docs/design.md §4.4) or the
/// command (its future is dropped, restoring e.g. the terminal; one that
/// kept its [`Stop`] is told and waited for, up to [`WIND_DOWN`]) — then
/// disposes within [`SHUTDOWN_BOUND`] and exits 128+signal. A second
/// signal, or the bound passing, abandons the disposal (a create that never
/// answers is abandoned with it) and names what may be left (the sandbox
/// id). The handlers are installed before any plugin is created, so no
/// signal can skip the disposal. A disposal error is reported on stderr;
/// it never replaces the command's own exit status.
async fn with_host<F>(composition: &Composition, command: F) -> Result<i32, Failure>
where
    F: for<'h> FnOnce(&'h Host, Stop) -> CommandFuture<'h>,
{
    let mut signals = ShutdownSignals::install()
        .map_err(|err| Failure::new(EXIT_FAILURE, format!("install signal handlers: {err}")))?;
    let (cancel, cancelled) = tokio::sync::oneshot::channel::<()>();
    let start = composition.start_or_cancel(async {
        match cancelled.await {
            Ok(()) => CREATE_GRACE,
            // Never cancelled: the start runs to its end.
            Err(_) => std::future::pending().await,
        }
    });
    tokio::pin!(start);
    let host: Host = tokio::select! {
        host = &mut start => match host? {
            Started::Running(host) => host,
            Started::Cancelled { .. } => unreachable!("the start is cancelled only below"),
        },
        signal = signals.recv() => {
            tracing::info!("{signal} during start: cancelling it");
            let _ = cancel.send(());
            let deadline = Instant::now() + SHUTDOWN_BOUND;
            return Ok(finish_start(start, signal, deadline, &mut signals).await);
        }
    };
    let leftover = leftover(&host);
    let (stop, stopped) = tokio::sync::oneshot::channel();
    let mut command = command(&host, Stop(stopped));
    let (outcome, deadline) = tokio::select! {
        outcome = &mut command => (outcome, None),
        signal = signals.recv() => {
            tracing::info!("{signal}: stopping and disposing");
            wind_down(command, stop, signal, &mut signals).await;
            (Ok(signal.exit_code()), Some((signal, Instant::now() + SHUTDOWN_BOUND)))
        }
    };
    let disposal_failed = match dispose(&host, &mut signals, deadline, &leftover).await {
        Ok(failed) => failed,
        Err(Abandoned { signal, why }) => {
            say(&format!("{why}; {leftover} may be left running"));
            return Ok(signal.exit_code());
        }
    };
    match (outcome, disposal_failed) {
        (outcome, None) => outcome,
        // The command's status stands; the disposal problem is said.
        (Ok(code), Some(problem)) => {
            say(&format!("{problem} {DETAILS}"));
            Ok(code)
        }
        // Both failed — typically the world went away mid-command (the
        // server was killed): one line for both, the nested causes at
        // `--log debug`.
        (Err(failure), Some(problem)) => {
            tracing::debug!("{}", failure.message);
            Err(Failure::new(
                failure.code,
                format!("{}; {problem} {DETAILS}", brief(&failure.message)),
            ))
        }
    }
}

/// Where a shortened message's full causes are.
const DETAILS: &str = "(details: --log debug)";

/// The head of a long, nested error message: its first line, up to its
/// first parenthesised cause, at most 160 characters.
fn brief(message: &str) -> String {
    const MAX: usize = 160;
    let line = message.lines().next().unwrap_or_default();
    let line = match line.find(" (") {
        Some(cause) if cause > 0 => &line[..cause],
        _ => line,
    };
    if line.len() <= MAX {
        return line.to_owned();
    }
    let mut end = MAX;
    while !line.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &line[..end])
}

/// One line for a failed disposal: which plugins failed and what may be
/// left; the full error goes to the debug log.
fn disposal_problem(origin: &str, err: &dsh_host::HostError, leftover: &str) -> String {
    tracing::debug!("dispose {origin}: {err}");
    let what = match err {
        dsh_host::HostError::Dispose(failed) => failed
            .failures
            .iter()
            .map(|failure| format!("{:?}", failure.id))
            .collect::<Vec<_>>()
            .join(", "),
        other => brief(&other.to_string()),
    };
    format!("disposal of {origin} failed ({what}); {leftover} may be left running")
}

/// After a signal during the start, which was told to cancel: waits,
/// until `deadline` or a second signal, for its rollback (or, if it had
/// just finished, disposes its host in what is left of the bound).
/// Returns the exit code.
async fn finish_start(
    start: Pin<&mut impl Future<Output = Result<Started, dsh_host::HostError>>>,
    signal: ShutdownSignal,
    deadline: Instant,
    signals: &mut ShutdownSignals,
) -> i32 {
    let left = "whatever it was creating (a sandbox) may be left running";
    let started = tokio::select! {
        started = start => started,
        () = tokio::time::sleep_until(deadline) => {
            say(&format!(
                "{signal}: the cancelled start did not roll back within {}s; {left}",
                SHUTDOWN_BOUND.as_secs()
            ));
            return signal.exit_code();
        }
        again = signals.recv() => {
            say(&format!("{again}: rollback of the cancelled start abandoned; {left}"));
            return signal.exit_code();
        }
    };
    match started {
        Ok(Started::Running(host)) => {
            let leftover = leftover(&host);
            match dispose(&host, signals, Some((signal, deadline)), &leftover).await {
                Ok(None) => {}
                Ok(Some(problem)) => say(&format!("{problem} {DETAILS}")),
                Err(Abandoned { why, .. }) => {
                    say(&format!("{why}; {leftover} may be left running"));
                }
            }
        }
        Ok(Started::Cancelled {
            abandoned: Some(id),
        }) => say(&format!(
            "{signal}: start cancelled; {id:?} did not finish creating within {}s: {left}",
            CREATE_GRACE.as_secs()
        )),
        // Rolled back (cancelled, or failed on its own): nothing is left.
        Ok(Started::Cancelled { abandoned: None }) => {}
        Err(err) => tracing::info!("start failed after {signal}: {err}"),
    }
    signal.exit_code()
}

/// After `signal`: a command that kept its [`Stop`] is told and given
/// [`WIND_DOWN`] (or until another signal) to end by itself; its status
/// gives way to the signal's. One that did not keep it is dropped at once.
async fn wind_down(
    command: CommandFuture<'_>,
    stop: tokio::sync::oneshot::Sender<()>,
    signal: ShutdownSignal,
    signals: &mut ShutdownSignals,
) {
    if stop.send(()).is_err() {
        return;
    }
    tokio::select! {
        outcome = command => {
            if let Err(failure) = outcome {
                tracing::info!("after {signal}: {}", failure.message);
            }
        }
        () = tokio::time::sleep(WIND_DOWN) => say(&format!(
            "{signal}: the command did not stop within {}s; disposing",
            WIND_DOWN.as_secs()
        )),
        again = signals.recv() => tracing::info!("{again}: no longer waiting for the command to stop"),
    }
}

/// A disposal given up on, and why.
struct Abandoned {
    /// The signal whose exit code dsh ends with.
    signal: ShutdownSignal,
    why: String,
}

/// Disposes `host`. Without `deadline` (no signal yet) it waits as long as
/// the plugins take; the first signal sets the deadline, a second one — or
/// the deadline passing — abandons the disposal (the plugins' own disposal
/// keeps running until the process exits). A disposal error comes back as
/// one line to say (never as the caller's failure).
async fn dispose(
    host: &Host,
    signals: &mut ShutdownSignals,
    mut deadline: Option<(ShutdownSignal, Instant)>,
    leftover: &str,
) -> Result<Option<String>, Abandoned> {
    let disposal = host.dispose();
    tokio::pin!(disposal);
    let mut noticed = false;
    loop {
        let notice_at = deadline.map(|(_, at)| at - SHUTDOWN_BOUND + SHUTDOWN_NOTICE);
        tokio::select! {
            disposed = &mut disposal => {
                return Ok(disposed
                    .err()
                    .map(|err| disposal_problem(host.origin(), &err, leftover)));
            }
            signal = signals.recv() => match deadline {
                None => {
                    tracing::info!("{signal} during disposal: bounding it");
                    deadline = Some((signal, Instant::now() + SHUTDOWN_BOUND));
                }
                Some((first, _)) => {
                    return Err(Abandoned {
                        signal: first,
                        why: format!("{signal}: disposal of {} abandoned", host.origin()),
                    });
                }
            },
            () = sleep_until_some(notice_at), if !noticed => {
                noticed = true;
                say(&format!(
                    "disposing {}: waiting for its plugins to release {leftover} \
                     (up to {}s; interrupt again to abandon)",
                    host.origin(),
                    SHUTDOWN_BOUND.as_secs()
                ));
            }
            () = sleep_until_some(deadline.map(|(_, at)| at)) => {
                let (signal, _) = deadline.expect("the deadline is set");
                return Err(Abandoned {
                    signal,
                    why: format!(
                        "disposal of {} did not finish within {}s",
                        host.origin(),
                        SHUTDOWN_BOUND.as_secs()
                    ),
                });
            }
        }
    }
}

/// Sleeps until `at`, or forever without one.
async fn sleep_until_some(at: Option<Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

/// What the disposal releases, named so that a user can clean up after an
/// abandoned one: the sandbox (by id) of an E2B composition, else the
/// world's processes. Taken before disposal begins (the accessors refuse
/// afterwards).
fn leftover(host: &Host) -> String {
    match host.owner(OwnerKind::E2B) {
        Ok(owner) => format!("sandbox {}", owner.info().sandbox_id),
        Err(_) => "the world's processes".to_owned(),
    }
}
