//! `dsh-supervisor`: the helper `dsh-subprocess-e2b` runs inside the sandbox,
//! as root, from the owner's private runtime root.
//!
//! A static x86_64 Linux program (built by `dsh-supervisor-client`'s `build.rs` with
//! `crt-static`, embedded by `dsh-supervisor-client` in the plugins that link it,
//! uploaded once per provider). The wire it speaks is this crate's library
//! ([`dsh_supervisor::wire`]); process groups, the quiescence rule and the
//! ladders are `dsh-process-group`'s, as on the host.
//! One process does what a shell wrapper would need a dozen utilities and
//! careful quoting for: the environment boundary, `setsid`, the sandbox
//! user's identity, program lookup, spill copies, framed raw output, exact
//! exit and signal facts, and the signal ladders.
//!
//! ```text
//! dsh-supervisor run                      request in $DSH_E2B_REQUEST; frames on stdout
//! dsh-supervisor exec                     request in $DSH_E2B_REQUEST; becomes the program
//! dsh-supervisor resolve                  request in $DSH_E2B_REQUEST → ok <path> | error …
//! dsh-supervisor remove                   request in $DSH_E2B_REQUEST → ok | error …
//! dsh-supervisor terminate PGID GRACE_MS SETTLE_MS   → empty | busy …
//! dsh-supervisor teardown SID GRACE_MS SETTLE_MS     → empty | busy …
//! dsh-supervisor members group|session ID           → empty | busy …
//! dsh-supervisor wait-exit SID                       → exited <wait status> | gone
//! dsh-supervisor foreground SID                      → ok <pgid> | error …
//! dsh-supervisor signal-foreground SID SIGNAL        → ok <pgid> | error …
//! dsh-supervisor detach PID STARTTIME stdout|stderr|both → ok | gone
//! dsh-supervisor world                    identity and lease in $DSH_E2B_REQUEST; requests on stdin, frames on stdout (dsh_supervisor::world)
//! dsh-supervisor version                             → dsh-supervisor <wire version>
//! dsh-supervisor probe USER UPLOAD|- DIGEST|-        → version, account, environment (NUL-separated); `-` for both: a template's copy
//! dsh-supervisor durable-start                request in $DSH_E2B_REQUEST → ok <id> <pid> | failed <stage> <errno> <detail> | error …
//! dsh-supervisor durable-list DIR                    → entry <durable entry>… then end | error …
//! dsh-supervisor durable-info DIR ID                 → ok <durable entry> | error …
//! dsh-supervisor durable-follow DIR ID STDOUT_FROM STDERR_FROM [hold] [wait] [wide] → raw output; exits like the command (125: lost / unknown)
//! dsh-supervisor durable-terminate DIR ID GRACE_MS SETTLE_MS → empty | busy …
//! dsh-supervisor durable-forget DIR ID               → ok | error …
//! ```
//!
//! Durable commands (the `durable` module) outlive the caller that started
//! them: a detached supervisor retains their output in the state directory
//! DIR (created mode 0700 if missing; refused unless a real directory of
//! the helper's effective uid with no group or other bits). A durable
//! entry is `wire::DurableEntry::to_line`.
//!
//! Control lines end with a newline; `error <errno> <message>` reports a
//! failure of the operation (exit 0); a malformed invocation exits 2.

mod ctl;
mod durable;
mod exec;
mod launch;
mod probe;
mod run;
mod sys;
mod world_replace;
mod worldside;
mod xattr_names;

use std::time::Duration;

use dsh_process_group::ladder::{teardown_session, terminate_group};
use dsh_process_group::pause::{Blocking, run_blocking};
use dsh_supervisor::wire::{
    self, DurableStartRequest, ExecRequest, RemoveRequest, ResolveRequest, RunRequest,
};

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    std::process::exit(cli(&args));
}

/// Reads and removes the request from the environment.
fn request_bytes() -> Result<Vec<u8>, String> {
    let text = std::env::var(wire::REQUEST_ENV)
        .map_err(|_| format!("{} is not set", wire::REQUEST_ENV))?;
    // SAFETY: the helper is single-threaded: nothing reads the environment
    // concurrently.
    unsafe { std::env::remove_var(wire::REQUEST_ENV) };
    wire::base64_decode(&text).map_err(|err| format!("{}: {err}", wire::REQUEST_ENV))
}

fn number<T: std::str::FromStr>(text: &str, what: &str) -> Result<T, String> {
    text.parse()
        .map_err(|_| format!("{what} {text:?} is not a number"))
}

/// The id, grace and settle bound of a ladder subcommand.
fn ladder_args(
    id: &str,
    what: &str,
    grace: &str,
    settle: &str,
) -> Result<(i32, Duration, Duration), String> {
    Ok((number(id, what)?, ctl::millis(grace)?, ctl::millis(settle)?))
}

/// `error <errno> <message>` (the message on one line).
fn error_line((errno, message): (i32, String)) -> String {
    format!("error {errno} {}", durable::start::one_line(&message))
}

fn cli(args: &[String]) -> i32 {
    let words: Vec<&str> = args.iter().map(String::as_str).collect();
    // Binary output of its own (NUL-separated), not a control line.
    if let ["probe", user, upload, digest] = words.as_slice() {
        return probe::main(user, upload, digest);
    }
    // Raw output and an exit mirroring the command's.
    if let [
        "durable-follow",
        dir,
        id,
        stdout_from,
        stderr_from,
        flags @ ..,
    ] = words.as_slice()
        && flags
            .iter()
            .all(|flag| matches!(*flag, "hold" | "wait" | "wide"))
    {
        let flag = |name: &str| flags.contains(&name);
        return match (
            number(stdout_from, "stdout offset"),
            number(stderr_from, "stderr offset"),
        ) {
            (Ok(out), Ok(err)) => durable::follow::main(
                dir,
                id,
                [out, err],
                flag("hold"),
                flag("wait"),
                flag("wide"),
            ),
            // Silent for the same reason as the follow itself.
            _ => 2,
        };
    }
    // Frames of its own (`dsh_supervisor::world`).
    if let ["world"] = words.as_slice() {
        return match request_bytes()
            .and_then(|b| dsh_supervisor::world::WorldStart::decode(&b).map_err(|e| e.0))
        {
            Ok(start) => worldside::main(start),
            Err(message) => {
                eprintln!("dsh-supervisor: world: {message}");
                2
            }
        };
    }
    let result = match words.as_slice() {
        ["version"] => Ok(format!("dsh-supervisor {}", wire::VERSION)),
        ["run"] => match request_bytes().and_then(|b| RunRequest::decode(&b).map_err(|e| e.0)) {
            Ok(request) => run::main(&request),
            Err(message) => run::Frames::new().fail(wire::Stage::Request, libc::EINVAL, &message),
        },
        ["exec"] => match request_bytes().and_then(|b| ExecRequest::decode(&b).map_err(|e| e.0)) {
            Ok(request) => exec::main(&request),
            Err(message) => Err(message),
        },
        ["resolve"] => request_bytes()
            .and_then(|b| ResolveRequest::decode(&b).map_err(|e| e.0))
            .map(|request| match ctl::resolve(&request) {
                Ok(path) => format!("ok {path}"),
                Err((errno, message)) => format!("error {errno} {message}"),
            }),
        ["remove"] => request_bytes()
            .and_then(|b| RemoveRequest::decode(&b).map_err(|e| e.0))
            .map(|request| match ctl::remove(&request) {
                Ok(()) => "ok".to_owned(),
                Err((errno, message)) => format!("error {errno} {message}"),
            }),
        ["terminate", pgid, grace, settle] => (|| {
            let (pgid, grace, settle) = ladder_args(pgid, "process group", grace, settle)?;
            let outcome = run_blocking(terminate_group(pgid, grace, settle, &mut Blocking))
                .map_err(|err| err.to_string())?;
            Ok(ctl::outcome_line(&outcome))
        })(),
        ["teardown", sid, grace, settle] => (|| {
            let (sid, grace, settle) = ladder_args(sid, "session", grace, settle)?;
            let outcome = run_blocking(teardown_session(sid, grace, settle, &mut Blocking))
                .map_err(|err| err.to_string())?;
            Ok(ctl::outcome_line(&outcome))
        })(),
        ["members", kind @ ("group" | "session"), id] => number(id, "id")
            .and_then(|id| ctl::members(*kind == "session", id))
            .map(|outcome| ctl::outcome_line(&outcome)),
        ["wait-exit", sid] => number(sid, "session").and_then(|sid| {
            Ok(match ctl::wait_exit(sid)? {
                Some(raw) => format!("exited {raw}"),
                None => "gone".to_owned(),
            })
        }),
        ["foreground", sid] => number(sid, "session").map(|sid| match ctl::foreground(sid) {
            Ok(pgid) => format!("ok {pgid}"),
            Err(message) => format!("error 0 {message}"),
        }),
        ["signal-foreground", sid, signal] => (|| {
            let sid = number(sid, "session")?;
            let signal = number(signal, "signal")?;
            Ok(match ctl::signal_foreground(sid, signal) {
                Ok(pgid) => format!("ok {pgid}"),
                Err(message) => format!("error 0 {message}"),
            })
        })(),
        ["detach", pid, starttime, streams] => (|| {
            let delivered = ctl::detach(
                number(pid, "pid")?,
                number(starttime, "start time")?,
                streams,
            )?;
            Ok(if delivered { "ok" } else { "gone" }.to_owned())
        })(),
        ["durable-start"] => request_bytes()
            .and_then(|b| DurableStartRequest::decode(&b).map_err(|e| e.0))
            .map(|request| durable::start::main(&request)),
        ["durable-list", dir] => Ok(match durable::manage::list(dir) {
            Ok(lines) => lines.join("\n"),
            Err(failure) => error_line(failure),
        }),
        ["durable-info", dir, id] => Ok(durable::manage::info(dir, id).unwrap_or_else(error_line)),
        ["durable-terminate", dir, id, grace, settle] => (|| {
            let (grace, settle) = (ctl::millis(grace)?, ctl::millis(settle)?);
            Ok(match durable::manage::terminate(dir, id, grace, settle) {
                Ok(outcome) => ctl::outcome_line(&outcome),
                Err(failure) => error_line(failure),
            })
        })(),
        ["durable-forget", dir, id] => Ok(match durable::manage::forget(dir, id) {
            Ok(()) => "ok".to_owned(),
            Err(failure) => error_line(failure),
        }),
        _ => Err(format!(
            "usage: dsh-supervisor <subcommand> …; got {words:?}"
        )),
    };
    match result {
        Ok(line) => {
            println!("{line}");
            0
        }
        Err(message) => {
            eprintln!("dsh-supervisor: {message}");
            2
        }
    }
}
