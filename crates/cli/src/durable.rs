//! Durable commands from the command line: `exec --detach` starts one
//! (see `exec`), `ps` lists them, `attach` streams one from an offset,
//! `kill` ends one, `forget` removes one — each a thin shell over the
//! `subprocess` seam's durable extension (docs/design.md §5.2.1).

use std::io::Write;
use std::time::Duration;

use dsh_host::Host;
use dsh_plugin_api::OwnerKind;
use dsh_plugin_api::durable::{AttachSpec, Attached, DurableCommand, DurableState};
use dsh_plugin_api::subprocess::{ExitStatus, OutputMode};
use serde_json::json;

use crate::args::{AttachArgs, ForgetArgs, KillArgs};
use crate::failure::Failure;
use crate::plugins::print_json;
use crate::stdout::outln;

/// Prints what `exec --detach` started: its id (alone on the line, for
/// scripts: `id=$(dsh exec --detach …)`), or JSON; in an E2B world also
/// the sandbox that holds it (in the JSON, or on stderr), which a later
/// `dsh` reconnects to with `sandboxId`.
pub fn print_started(host: &Host, attached: &Attached, json: bool) -> Result<i32, Failure> {
    let sandbox = host
        .owner(OwnerKind::E2B)
        .ok()
        .map(|owner| owner.info().sandbox_id.clone());
    if json {
        print_json(&json!({
            "id": attached.id,
            "pid": attached.process.pid(),
            "sandboxId": sandbox,
        }))?;
        return Ok(0);
    }
    outln!("{}", attached.id)?;
    if let Some(sandbox) = sandbox {
        // Advice only: a closed stderr loses it and nothing else.
        let _ = writeln!(
            std::io::stderr(),
            "dsh: durable command {} runs in sandbox {sandbox}; it outlives this dsh if the \
             manifest's dsh-e2b-owner entry has `onDispose: leave` (or `pause`), and a later dsh \
             reaches it with `sandboxId: {sandbox}` in place of the entry's `template`",
            attached.id
        );
    }
    Ok(0)
}

/// `dsh ps`: the world's durable commands, oldest first.
pub async fn ps(host: &Host, json: bool) -> Result<i32, Failure> {
    let subprocess = host.subprocess()?;
    let mut commands = subprocess
        .list_durable()
        .await
        .map_err(|err| Failure::seam("ps", "durable commands", &err))?;
    commands.sort_by_key(|command| command.started_unix_ms);
    if json {
        let rows: Vec<_> = commands.iter().map(row_json).collect();
        print_json(&rows)?;
        return Ok(0);
    }
    outln!(
        "{:<32}  {:>7}  {:<12}  {:>10}  {:>10}  ARGV",
        "ID",
        "PID",
        "STATE",
        "STDOUT",
        "STDERR"
    )?;
    for command in &commands {
        outln!(
            "{:<32}  {:>7}  {:<12}  {:>10}  {:>10}  {}",
            command.id,
            command.pid,
            state_text(&command.state),
            command.totals[0],
            command.totals[1],
            command.argv.join(" ")
        )?;
    }
    Ok(0)
}

fn row_json(command: &DurableCommand) -> serde_json::Value {
    let (state, status) = match command.state {
        DurableState::Running => ("running", None),
        DurableState::Ended(status) => ("ended", Some(status_json(&status))),
        DurableState::Lost => ("lost", None),
    };
    json!({
        "id": command.id,
        "pid": command.pid,
        "argv": command.argv,
        "cwd": command.cwd,
        "startedUnixMs": command.started_unix_ms,
        "state": state,
        "status": status,
        "stdoutBytes": command.totals[0],
        "stderrBytes": command.totals[1],
        "stdoutRetainedFrom": command.retained_from[0],
        "stderrRetainedFrom": command.retained_from[1],
    })
}

fn status_json(status: &ExitStatus) -> serde_json::Value {
    json!({
        "code": status.code,
        "signal": status.signal.map(|signal| signal.0),
        "timedOut": status.timed_out,
    })
}

fn state_text(state: &DurableState) -> String {
    match state {
        DurableState::Running => "running".to_owned(),
        DurableState::Lost => "lost".to_owned(),
        DurableState::Ended(status) => match (status.code, status.signal) {
            (_, Some(signal)) => format!("killed {signal}"),
            (Some(code), None) => format!("exited {code}"),
            (None, None) => "ended".to_owned(),
        },
    }
}

/// `dsh attach ID --from N`: the command's output from offset N to ours,
/// then its exit code. Bytes dropped from retention are reported on stderr.
pub async fn attach(host: &Host, args: AttachArgs) -> Result<i32, Failure> {
    let subprocess = host.subprocess()?;
    let attached = subprocess
        .attach(AttachSpec::new(args.id.clone(), args.from))
        .await
        .map_err(|err| Failure::seam("attach", &args.id, &err))?;
    for (stream, from) in ["stdout", "stderr"].iter().zip(attached.from) {
        if from > args.from {
            tracing::warn!(
                "attach {}: {stream}: {} bytes before offset {from} are no longer retained",
                args.id,
                from - args.from
            );
        }
    }
    crate::exec::stream_to_end(&*attached.process, &args.id).await
}

/// `dsh kill ID`: the terminate ladder on the command's group.
pub async fn kill(host: &Host, args: KillArgs, json: bool) -> Result<i32, Failure> {
    let subprocess = host.subprocess()?;
    let mut spec = AttachSpec::new(args.id.clone(), u64::MAX);
    spec.stdout = OutputMode::Null;
    spec.stderr = OutputMode::Null;
    let attached = subprocess
        .attach(spec)
        .await
        .map_err(|err| Failure::seam("kill", &args.id, &err))?;
    let process = attached.process;
    process
        .terminate(Duration::from_millis(args.grace_ms))
        .await
        .map_err(|err| Failure::seam("kill", &args.id, &err))?;
    let status = process
        .wait()
        .await
        .map_err(|err| Failure::seam("kill", &args.id, &err))?;
    if json {
        print_json(&status_json(&status))?;
    } else {
        outln!("{}", state_text(&DurableState::Ended(status)))?;
    }
    Ok(0)
}

/// `dsh forget ID`.
pub async fn forget(host: &Host, args: ForgetArgs) -> Result<i32, Failure> {
    host.subprocess()?
        .forget(&args.id)
        .await
        .map_err(|err| Failure::seam("forget", &args.id, &err))?;
    Ok(0)
}
