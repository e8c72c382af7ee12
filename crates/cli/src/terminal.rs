//! `dsh sh` / `dsh terminal`: an interactive program on a terminal in the
//! world, wired to ours.
//!
//! Our tty goes to raw mode (restored on every exit path, including a
//! signal that stops the command), keystrokes — Ctrl-C included — go to the
//! world's terminal, whose line discipline turns them into signals for its
//! foreground job; its output comes back to our stdout unchanged; SIGWINCH
//! on our side resizes it.

use std::collections::BTreeMap;
use std::os::fd::AsFd;
use std::sync::Arc;
use std::time::Duration;

use dsh_host::Host;
use dsh_plugin_api::subprocess::{Terminal, TerminalSpec};
use futures::StreamExt;
use rustix::termios::{self, OptionalActions, Termios};
use tokio::signal::unix::{Signal, SignalKind, signal};

use crate::args::ShArgs;
use crate::failure::{EXIT_CLOSED_STDOUT, EXIT_FAILURE, Failure, exit_code_of};
use crate::streams::{Pumped, pump, stdin_chunks};
use dsh_plugin_api::Bytes;

/// How long output may still drain after the program exited.
const OUTPUT_DRAIN: Duration = Duration::from_secs(2);
/// How often the end of a non-terminal input is repeated (see
/// [`forward_keys`]).
const EOF_REPEAT: Duration = Duration::from_millis(200);

/// Runs the program until it exits; returns its exit code.
pub async fn run(host: &Host, args: ShArgs) -> Result<i32, Failure> {
    let subprocess = host.subprocess()?;
    let argv = if args.argv.is_empty() {
        vec![default_shell(host).await]
    } else {
        args.argv
    };
    let program = argv[0].clone();
    // Watched before the size is read and the terminal starts: a resize from
    // then on is followed, none lost between the two (SIGWINCH's default is
    // to be ignored).
    let winch = signal(SignalKind::window_change());
    let (cols, rows) = window_size().unwrap_or((80, 24));
    let mut spec = TerminalSpec::new(argv);
    spec.cwd = args.cwd;
    spec.cols = cols;
    spec.rows = rows;
    spec.env = terminal_env();
    let terminal = subprocess
        .spawn_terminal(spec)
        .await
        .map_err(|err| Failure::seam("sh", &program, &err))?;

    let _raw = RawMode::enter()
        .map_err(|err| Failure::new(EXIT_FAILURE, format!("sh: raw mode on stdin: {err}")))?;
    let mut output = tokio::spawn(pump(terminal.take_output(), tokio::io::stdout()));
    let input = tokio::spawn(forward_keys(terminal.clone()));
    let resize = tokio::spawn(follow_window_size(winch, terminal.clone()));
    let mut drained = None;
    let status = loop {
        tokio::select! {
            status = terminal.wait() => break Some(status),
            pumped = &mut output, if drained.is_none() => match pumped {
                // Our stdout's reader went away: nobody sees the terminal
                // any more, as when a terminal window closes — its session
                // is torn down (SIGHUP first, docs/design.md §5.2) and dsh
                // exits 141 as a pipeline stage whose reader closed (§8).
                Ok(Ok(Pumped::OutputClosed)) => break None,
                pumped => drained = Some(pumped),
            },
        }
    };
    input.abort();
    resize.abort();
    let Some(status) = status else {
        if let Err(err) = terminal.terminate().await {
            tracing::warn!("sh {program}: terminate after stdout closed: {err}");
        }
        return Ok(EXIT_CLOSED_STDOUT);
    };
    let status = status.map_err(|err| Failure::seam("sh", &program, &err))?;
    let pumped = match drained {
        Some(pumped) => Ok(pumped),
        None => tokio::time::timeout(OUTPUT_DRAIN, output).await,
    };
    match pumped {
        Ok(Ok(Err(message))) => tracing::warn!("sh {program}: output: {message}"),
        Ok(_) => {}
        Err(_) => tracing::warn!("sh {program}: output still open {OUTPUT_DRAIN:?} after exit"),
    }
    Ok(exit_code_of(&status))
}

/// bash when the world has it, else sh.
async fn default_shell(host: &Host) -> String {
    match host.subprocess() {
        Ok(subprocess) if subprocess.resolve_executable("bash", &[]).await.is_ok() => {
            "bash".to_owned()
        }
        _ => "sh".to_owned(),
    }
}

/// The terminal type is ours: pass TERM explicitly (a remote world does not
/// inherit our environment).
fn terminal_env() -> BTreeMap<String, String> {
    let term = std::env::var("TERM")
        .ok()
        .filter(|term| !term.is_empty() && term != "dumb")
        .unwrap_or_else(|| "xterm-256color".to_owned());
    BTreeMap::from([("TERM".to_owned(), term)])
}

/// Our terminal's size, if stdout (or stdin) is one.
fn window_size() -> Option<(u16, u16)> {
    let size = termios::tcgetwinsize(std::io::stdout())
        .or_else(|_| termios::tcgetwinsize(std::io::stdin()))
        .ok()?;
    (size.ws_col > 0 && size.ws_row > 0).then_some((size.ws_col, size.ws_row))
}

/// Our keystrokes to the world's terminal. At the end of our input (stdin
/// was a file or pipe) the terminal gets an end-of-file character, as a
/// person would type Ctrl-D — and again every [`EOF_REPEAT`] until the
/// task is stopped (the program exited): one Ctrl-D can be swallowed (a
/// shell that switches the line discipline while starting up discards
/// it) or end only a child's input (`cat` run by the shell), and every
/// reader must see the end of input so that the program exits.
async fn forward_keys(terminal: Arc<dyn Terminal>) {
    const END_OF_FILE: u8 = 0x04;
    let mut keys = stdin_chunks();
    while let Some(chunk) = keys.next().await {
        if terminal.write(chunk).await.is_err() {
            return;
        }
    }
    while terminal
        .write(Bytes::from_static(&[END_OF_FILE]))
        .await
        .is_ok()
    {
        tokio::time::sleep(EOF_REPEAT).await;
    }
}

async fn follow_window_size(winch: std::io::Result<Signal>, terminal: Arc<dyn Terminal>) {
    let Ok(mut winch) = winch else {
        tracing::warn!("sh: cannot watch SIGWINCH; the terminal keeps its size");
        return;
    };
    while winch.recv().await.is_some() {
        if let Some((cols, rows)) = window_size()
            && let Err(err) = terminal.resize(cols, rows).await
        {
            tracing::warn!("sh: resize to {cols}x{rows}: {err}");
        }
    }
}

/// Raw mode on our stdin while alive (nothing when stdin is not a tty).
struct RawMode {
    saved: Option<Termios>,
}

impl RawMode {
    fn enter() -> std::io::Result<RawMode> {
        let stdin = std::io::stdin();
        if !termios::isatty(stdin.as_fd()) {
            return Ok(RawMode { saved: None });
        }
        let saved = termios::tcgetattr(&stdin)?;
        let mut raw = saved.clone();
        raw.make_raw();
        termios::tcsetattr(&stdin, OptionalActions::Now, &raw)?;
        Ok(RawMode { saved: Some(saved) })
    }
}

impl Drop for RawMode {
    fn drop(&mut self) {
        if let Some(saved) = &self.saved {
            let _ = termios::tcsetattr(std::io::stdin(), OptionalActions::Now, saved);
        }
    }
}
