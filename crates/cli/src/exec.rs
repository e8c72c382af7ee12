//! `dsh exec -- ARGV…`: one command in the world, output streamed.

use std::collections::BTreeMap;
use std::time::Duration;

use dsh_host::Host;
use dsh_plugin_api::ErrorKind;
use dsh_plugin_api::durable::DurableSpec;
use dsh_plugin_api::stream::ByteWriter;
use dsh_plugin_api::subprocess::{OutputMode, Process, SpawnSpec, StdinMode};
use futures::StreamExt;

use crate::args::ExecArgs;
use crate::failure::{
    EXIT_CLOSED_STDOUT, EXIT_CONFIG, EXIT_FAILURE, Failure, detail, exit_code_of,
};
use crate::streams::{Pumped, pump, stdin_chunks};

/// Exit code when the program does not exist (as shells report it).
const EXIT_NOT_FOUND: i32 = 127;
/// Exit code when the program exists but cannot be run.
const EXIT_CANNOT_RUN: i32 = 126;
/// How long a child may take to end after our stdout closed (and, after
/// it exited, how long its stderr may still drain).
const CLOSED_STDOUT_GRACE: Duration = Duration::from_secs(1);

/// Spawns `argv` with stdin forwarded from ours (a null stdin when ours is
/// `/dev/null`) and stdout/stderr streamed to ours; returns the child's exit
/// code (128+signal for a signal death).
/// When our stdout's reader goes away the child's stdout is closed; a
/// child still running [`CLOSED_STDOUT_GRACE`] later is terminated and the
/// result is 141 (128 + SIGPIPE).
/// Dropping the future (on SIGINT/SIGTERM) stops forwarding; the child's
/// group is terminated by the subprocess provider's disposal.
pub async fn run(host: &Host, args: ExecArgs, json: bool) -> Result<i32, Failure> {
    let subprocess = host.subprocess()?;
    let program = args.argv[0].clone();
    let mut spec = SpawnSpec::new(args.argv);
    spec.cwd = args.cwd;
    spec.env = parse_env(&args.env)?;
    let start_failed = |err: dsh_plugin_api::Error| {
        let code = match err.kind() {
            ErrorKind::NotFound => EXIT_NOT_FOUND,
            ErrorKind::PermissionDenied | ErrorKind::IsADirectory => EXIT_CANNOT_RUN,
            ErrorKind::InvalidInput if names_the_program(&err, &program) => EXIT_CANNOT_RUN,
            ErrorKind::InvalidInput => EXIT_CONFIG,
            _ => EXIT_FAILURE,
        };
        Failure::new(code, format!("exec {program}: {}", detail(&program, &err)))
    };
    if args.detach {
        // Nothing is streamed: the output stays retained in the world for
        // `dsh attach`, and the attachment ends with this process.
        spec.stdout = OutputMode::Null;
        spec.stderr = OutputMode::Null;
        let durable = DurableSpec {
            retain: args.retain.unwrap_or(DurableSpec::default().retain),
        };
        let attached = subprocess
            .spawn_durable(spec, durable)
            .await
            .map_err(start_failed)?;
        return crate::durable::print_started(host, &attached, json);
    }
    // Input from /dev/null (or none at all) is what a null stdin gives the
    // command: no pipe to forward into, and no round trip to close it.
    spec.stdin = if stdin_is_null() {
        StdinMode::Null
    } else {
        StdinMode::Pipe
    };
    spec.stdout = OutputMode::Pipe;
    spec.stderr = OutputMode::Pipe;
    let process = subprocess.spawn(spec).await.map_err(start_failed)?;
    if let Some(writer) = process.take_stdin() {
        // Detached: the child may exit without reading its input.
        tokio::spawn(forward_input(writer));
    }
    stream_to_end(&*process, &program).await
}

/// Streams `process`'s stdout and stderr to ours until it ends; returns its
/// exit code (see [`run`] for a reader of our stdout going away).
pub async fn stream_to_end(process: &dyn Process, program: &str) -> Result<i32, Failure> {
    let stdout = process.take_stdout();
    let stderr = process.take_stderr();
    let errors = AbortOnDrop(tokio::spawn(pump(stderr, tokio::io::stderr())));
    let out = pump(stdout, tokio::io::stdout()).await;
    let wait = async {
        process
            .wait()
            .await
            .map_err(|err| Failure::new(EXIT_FAILURE, format!("exec {program}: wait: {err}")))
    };
    let status = if out == Ok(Pumped::OutputClosed) {
        // Our reader is gone and the child's stdout closed with it: a
        // writer dies of SIGPIPE (or sees EPIPE) and exits with its own
        // status, as in a shell pipeline. A child that outlives the grace
        // (it ignores the closed pipe, or the provider keeps writing to a
        // buffer) is ended, and dsh exits as a pipeline stage killed by
        // SIGPIPE would (docs/design.md §8).
        match tokio::time::timeout(CLOSED_STDOUT_GRACE, wait).await {
            Ok(Ok(status)) => status,
            // A durable command's attachment ends with our reader; the
            // command itself goes on.
            Ok(Err(_)) => return Ok(EXIT_CLOSED_STDOUT),
            Err(_) => {
                tracing::info!("exec {program}: stdout closed; ending it");
                if let Err(err) = process.terminate(CLOSED_STDOUT_GRACE).await {
                    tracing::warn!("exec {program}: terminate after stdout closed: {err}");
                }
                return Ok(EXIT_CLOSED_STDOUT);
            }
        }
    } else {
        wait.await?
    };
    let err = match tokio::time::timeout(CLOSED_STDOUT_GRACE, errors.join()).await {
        Ok(Ok(result)) => result.map(drop),
        Ok(Err(join)) => Err(join.to_string()),
        Err(_) => Err(format!("still open {CLOSED_STDOUT_GRACE:?} after exit")),
    };
    for (stream, result) in [("stdout", out.map(drop)), ("stderr", err)] {
        if let Err(message) = result {
            tracing::warn!("exec {program}: {stream}: {message}");
        }
    }
    Ok(exit_code_of(&status))
}

/// A spawned task that ends with its owner (the command's future dropped on
/// a signal stops copying).
struct AbortOnDrop<T>(tokio::task::JoinHandle<T>);

impl<T> AbortOnDrop<T> {
    /// Waits for the task's outcome.
    async fn join(mut self) -> Result<T, tokio::task::JoinError> {
        (&mut self.0).await
    }
}

impl<T> Drop for AbortOnDrop<T> {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// Whether a spawn refusal is about the program file itself — the file
/// was found (its resolved absolute path is the subject) but cannot be run
/// (not an executable format, not a regular file): 126, as a shell says,
/// rather than a usage error about the arguments.
fn names_the_program(err: &dsh_plugin_api::Error, program: &str) -> bool {
    let Some(subject) = err.subject() else {
        return false;
    };
    let name = program.rsplit('/').next().unwrap_or(program);
    subject.starts_with('/') && (subject == program || subject.ends_with(&format!("/{name}")))
}

fn parse_env(entries: &[String]) -> Result<BTreeMap<String, String>, Failure> {
    entries
        .iter()
        .map(|entry| match entry.split_once('=') {
            Some((name, value)) if !name.is_empty() => Ok((name.to_owned(), value.to_owned())),
            _ => Err(Failure::new(
                EXIT_CONFIG,
                format!("exec: --env {entry:?}: expected NAME=VALUE"),
            )),
        })
        .collect()
}

/// Whether our stdin is `/dev/null` (`dsh exec … </dev/null`, a parent's
/// `Stdio::null()`, or none at all: Rust's runtime opens `/dev/null` on a
/// closed fd 0 before `main`): input that ends before it begins.
fn stdin_is_null() -> bool {
    use std::os::fd::AsFd;
    let stdin = std::io::stdin();
    let (Ok(ours), Ok(null)) = (
        rustix::fs::fstat(stdin.as_fd()),
        rustix::fs::stat("/dev/null"),
    ) else {
        return false;
    };
    rustix::fs::FileType::from_raw_mode(ours.st_mode) == rustix::fs::FileType::CharacterDevice
        && ours.st_rdev == null.st_rdev
}

/// Copies our stdin into the world until EOF, then closes the writer.
async fn forward_input(mut writer: Box<dyn ByteWriter>) {
    let mut chunks = stdin_chunks();
    while let Some(chunk) = chunks.next().await {
        if writer.write(chunk).await.is_err() {
            return;
        }
    }
    let _ = writer.close().await;
}
