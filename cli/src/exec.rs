//! `dsh exec -- ARGV…`: one command in the world, output streamed.

use std::collections::BTreeMap;

use dsh_host::Host;
use dsh_plugin_api::stream::ByteWriter;
use dsh_plugin_api::subprocess::{OutputMode, SpawnSpec, StdinMode};
use dsh_plugin_api::{Bytes, ErrorKind};
use futures::StreamExt;

use crate::args::ExecArgs;
use crate::failure::{EXIT_CONFIG, EXIT_FAILURE, Failure, detail, exit_code_of};
use crate::streams::{pump, stdin_chunks};

/// Exit code when the program does not exist (as shells report it).
const EXIT_NOT_FOUND: i32 = 127;
/// Exit code when the program exists but cannot be run.
const EXIT_CANNOT_RUN: i32 = 126;

/// Spawns `argv` with stdin forwarded from ours and stdout/stderr streamed
/// to ours; returns the child's exit code (128+signal for a signal death).
/// Dropping the future (on SIGINT/SIGTERM) stops forwarding; the child's
/// group is terminated by the subprocess provider's disposal.
pub async fn run(host: &Host, args: ExecArgs) -> Result<i32, Failure> {
    let subprocess = host.subprocess()?;
    let program = args.argv[0].clone();
    let mut spec = SpawnSpec::new(args.argv);
    spec.cwd = args.cwd;
    spec.env = parse_env(&args.env)?;
    spec.stdin = StdinMode::Pipe;
    spec.stdout = OutputMode::Pipe;
    spec.stderr = OutputMode::Pipe;
    let process = subprocess.spawn(spec).await.map_err(|err| {
        let code = match err.kind() {
            ErrorKind::NotFound => EXIT_NOT_FOUND,
            ErrorKind::PermissionDenied => EXIT_CANNOT_RUN,
            ErrorKind::InvalidInput => EXIT_CONFIG,
            _ => EXIT_FAILURE,
        };
        Failure::new(code, format!("exec {program}: {}", detail(&program, &err)))
    })?;

    let stdout = process.take_stdout();
    let stderr = process.take_stderr();
    if let Some(writer) = process.take_stdin() {
        // Detached: the child may exit without reading its input.
        tokio::spawn(forward_input(writer));
    }
    let (out, err) = tokio::join!(
        pump(stdout, tokio::io::stdout()),
        pump(stderr, tokio::io::stderr())
    );
    let status = process
        .wait()
        .await
        .map_err(|err| Failure::new(EXIT_FAILURE, format!("exec {program}: wait: {err}")))?;
    for (stream, result) in [("stdout", out), ("stderr", err)] {
        if let Err(message) = result {
            tracing::warn!("exec {program}: {stream}: {message}");
        }
    }
    Ok(exit_code_of(&status))
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

/// Copies our stdin into the world until EOF, then closes the writer.
async fn forward_input(mut writer: Box<dyn ByteWriter>) {
    let mut chunks = stdin_chunks();
    while let Some(chunk) = chunks.next().await {
        if writer.write(Bytes::from(chunk)).await.is_err() {
            return;
        }
    }
    let _ = writer.close().await;
}
