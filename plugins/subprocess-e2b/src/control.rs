//! Running the helper's one-shot subcommands as root through the owner's
//! [`ControlShell`], and reading their one-line answers.
//!
//! Every call is one envd round trip: a whole signal ladder runs inside the
//! sandbox. A call whose failure means the sandbox is gone says so
//! ([`ControlError::Gone`]); cleanup treats that as quiescence.

use std::sync::Arc;
use std::time::Duration;

use dsh_e2b_gateway::{ControlShell, Liveness, Presence};
use dsh_plugin_api::{Error, ErrorKind};
use e2b_client::{CallOptions, Command, Envd, ProcessEvent, ProcessStream, Selector, Signal};
use futures::StreamExt;

use crate::errors;
use crate::transport::EnvdTransport;
use crate::wire;

/// How much of a control command's output is read.
const OUTPUT_LIMIT: usize = 64 * 1024;
/// Slack on top of the time a ladder may take by itself.
const LADDER_SLACK: Duration = Duration::from_secs(15);
/// Bound on the quick subcommands.
const QUICK: Duration = Duration::from_secs(30);

/// Why a control call did not answer.
#[derive(Debug, Clone)]
pub enum ControlError {
    /// The sandbox is gone: nothing in it runs any more.
    Gone(Error),
    /// Anything else (the error names the operation).
    Failed(Error),
}

impl ControlError {
    pub fn into_error(self) -> Error {
        match self {
            ControlError::Gone(err) | ControlError::Failed(err) => err,
        }
    }
}

/// What a ladder found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Ladder {
    Empty,
    /// Not proven empty: what the helper said (live pids and failures).
    Busy(String),
}

/// Runs helper subcommands for one provider; cheap to clone.
pub struct Controller<T> {
    envd: Envd<T>,
    shell: ControlShell,
    liveness: Arc<dyn Liveness>,
    helper: Arc<str>,
}

impl<T: Clone> Clone for Controller<T> {
    fn clone(&self) -> Self {
        Controller {
            envd: self.envd.clone(),
            shell: self.shell.clone(),
            liveness: Arc::clone(&self.liveness),
            helper: Arc::clone(&self.helper),
        }
    }
}

impl<T: EnvdTransport> Controller<T> {
    pub fn new(
        envd: Envd<T>,
        shell: ControlShell,
        liveness: Arc<dyn Liveness>,
        helper: &str,
    ) -> Controller<T> {
        Controller {
            envd,
            shell,
            liveness,
            helper: Arc::from(helper),
        }
    }

    pub fn envd(&self) -> &Envd<T> {
        &self.envd
    }

    /// The helper this control runs.
    pub fn helper(&self) -> &str {
        &self.helper
    }

    /// SIGKILL, through envd, to the process `target` selects (not its
    /// group), bounded by envd's request timeout.
    pub async fn kill(&self, target: Selector) -> Result<(), e2b_client::Error> {
        self.envd
            .send_signal(target, Signal::Kill, &CallOptions::default())
            .await
    }

    pub fn shell(&self) -> &ControlShell {
        &self.shell
    }

    /// A command running the helper with `args`, as root, with the control
    /// environment (no login shell, a fresh `HOME`).
    pub fn helper_command(&self, args: &[&str]) -> Command {
        self.shell.exec(&self.helper, args.iter().copied())
    }

    /// Starts the helper `command` (tagged `tag`) as root, with no bound on
    /// its life, and returns its stream once envd reported it started. A
    /// start that fails in a way that may still have started the helper
    /// (anything but a refusal) kills it by its tag: its death SIGKILLs a
    /// command it had started.
    pub async fn start_helper(
        &self,
        operation: &str,
        command: &Command,
        tag: &str,
    ) -> Result<ProcessStream, Error> {
        match self.envd.start(command, &self.shell.options()).await {
            Ok(stream) => Ok(stream),
            Err(err) => {
                if !matches!(err, e2b_client::Error::InvalidArgument { .. }) {
                    let _ = self.kill(Selector::Tag(tag.to_owned())).await;
                }
                Err(self.classify(operation, &err).await.into_error())
            }
        }
    }

    /// SIGKILL to the helper envd started as `pid` (best effort: a helper
    /// that is gone already is fine); its death SIGKILLs its command.
    pub async fn kill_helper(&self, pid: u32) {
        let _ = self.kill(Selector::Pid(pid)).await;
    }

    /// Whether `err` means the sandbox is gone: envd's edge said so, or a
    /// transport failure happened and the control plane says it is gone.
    pub async fn is_gone(&self, err: &e2b_client::Error) -> bool {
        if err.is_sandbox_gone() {
            return true;
        }
        err.is_unavailable() && matches!(self.liveness.presence().await, Presence::Gone(_))
    }

    /// Classifies a failure of `operation`.
    pub async fn classify(&self, operation: &str, err: &e2b_client::Error) -> ControlError {
        let mapped = errors::client(operation, err);
        if self.is_gone(err).await {
            ControlError::Gone(Error::unavailable(mapped.message().to_owned()))
        } else {
            ControlError::Failed(mapped)
        }
    }

    /// Runs the helper with `args` (and `request` in its environment) and
    /// returns its answer line.
    async fn line(
        &self,
        operation: &str,
        args: &[&str],
        request: Option<&[u8]>,
        timeout: Duration,
    ) -> Result<String, ControlError> {
        let mut command = self.helper_command(args);
        if let Some(request) = request {
            command = command.env(wire::REQUEST_ENV, wire::base64_encode(request));
        }
        let output = match self
            .shell
            .run(&self.envd, &command, timeout, OUTPUT_LIMIT)
            .await
        {
            Ok(output) => output,
            Err(err) => return Err(self.classify(operation, &err).await),
        };
        if !output.status.success() {
            return Err(ControlError::Failed(Error::io(format!(
                "{operation}: the sandbox helper failed ({}): {}",
                output.status.status,
                output.stderr_text()
            ))));
        }
        let text = String::from_utf8_lossy(&output.stdout);
        Ok(text.trim_end_matches('\n').to_owned())
    }

    /// Runs a `durable-*` subcommand of the helper (with `request` in its
    /// environment) and returns its answer line.
    pub async fn durable(
        &self,
        operation: &str,
        args: &[&str],
        request: Option<&[u8]>,
        timeout: Duration,
    ) -> Result<String, Error> {
        self.line(operation, args, request, timeout)
            .await
            .map_err(ControlError::into_error)
    }

    /// The `terminate` ladder on process group `pgid`.
    pub async fn terminate_group(
        &self,
        pgid: u32,
        grace: Duration,
        settle: Duration,
    ) -> Result<Ladder, ControlError> {
        self.ladder("terminate", "terminate", pgid, grace, settle)
            .await
    }

    /// The `teardown` ladder on session `sid`.
    pub async fn teardown_session(
        &self,
        sid: u32,
        grace: Duration,
        settle: Duration,
    ) -> Result<Ladder, ControlError> {
        self.ladder("terminate", "teardown", sid, grace, settle)
            .await
    }

    async fn ladder(
        &self,
        operation: &str,
        subcommand: &str,
        id: u32,
        grace: Duration,
        settle: Duration,
    ) -> Result<Ladder, ControlError> {
        let id = id.to_string();
        let grace_ms = grace.as_millis().to_string();
        let settle_ms = settle.as_millis().to_string();
        let line = self
            .line(
                operation,
                &[subcommand, &id, &grace_ms, &settle_ms],
                None,
                grace + settle + LADDER_SLACK,
            )
            .await?;
        parse_ladder(operation, &line).map_err(ControlError::Failed)
    }

    /// Waits, without a bound, for session leader `sid` (a terminal's
    /// program) to exit and returns its raw wait status; `Ok(None)` when it
    /// is gone or was reaped before the status could be read. Dropping the
    /// future abandons the wait (the watcher ends with the program).
    pub async fn wait_exit(&self, sid: u32) -> Result<Option<i32>, ControlError> {
        const OP: &str = "wait for the terminal's program";
        let command = self.helper_command(&["wait-exit", &sid.to_string()]);
        let mut stream = match self.envd.start(&command, &self.shell.options()).await {
            Ok(stream) => stream,
            Err(err) => return Err(self.classify(OP, &err).await),
        };
        let mut line = Vec::new();
        while let Some(event) = stream.next().await {
            match event {
                Ok(ProcessEvent::Stdout(bytes)) => {
                    let room = 256usize.saturating_sub(line.len());
                    line.extend_from_slice(&bytes[..bytes.len().min(room)]);
                }
                Ok(_) => {}
                Err(err) => return Err(self.classify(OP, &err).await),
            }
        }
        let line = String::from_utf8_lossy(&line);
        match line.trim_end() {
            "gone" => Ok(None),
            other => other
                .strip_prefix("exited ")
                .and_then(|raw| raw.parse().ok())
                .map(Some)
                .ok_or_else(|| ControlError::Failed(unexpected(OP, other))),
        }
    }

    /// Whether session `sid` has live members (nothing is signalled).
    pub async fn session_members(&self, sid: u32) -> Result<Ladder, ControlError> {
        let line = self
            .line(
                "probe session",
                &["members", "session", &sid.to_string()],
                None,
                QUICK,
            )
            .await?;
        parse_ladder("probe session", &line).map_err(ControlError::Failed)
    }

    /// The foreground process group of session `sid`'s terminal.
    pub async fn foreground(&self, sid: u32) -> Result<u32, ControlError> {
        let line = self
            .line(
                "foreground_pgid",
                &["foreground", &sid.to_string()],
                None,
                QUICK,
            )
            .await?;
        parse_ok_number("foreground_pgid", &line).map_err(ControlError::Failed)
    }

    /// Sends `signal` to session `sid`'s foreground group; returns the group.
    pub async fn signal_foreground(&self, sid: u32, signal: i32) -> Result<u32, ControlError> {
        let line = self
            .line(
                "signal",
                &["signal-foreground", &sid.to_string(), &signal.to_string()],
                None,
                QUICK,
            )
            .await?;
        parse_ok_number("signal", &line).map_err(ControlError::Failed)
    }

    /// Asks the supervising helper `pid` to detach `streams` (`stdout`,
    /// `stderr` or `both`). `Ok(false)`: that helper is gone.
    pub async fn detach(
        &self,
        pid: u32,
        starttime: u64,
        streams: &str,
    ) -> Result<bool, ControlError> {
        let line = self
            .line(
                "detach output",
                &["detach", &pid.to_string(), &starttime.to_string(), streams],
                None,
                QUICK,
            )
            .await?;
        match line.as_str() {
            "ok" => Ok(true),
            "gone" => Ok(false),
            other => Err(ControlError::Failed(unexpected("detach output", other))),
        }
    }

    /// Resolves a program as the sandbox user: `Ok(Ok(path))`, or
    /// `Ok(Err((errno, reason)))` when it cannot be run.
    pub async fn resolve(
        &self,
        request: &wire::ResolveRequest,
    ) -> Result<Result<String, (i32, String)>, ControlError> {
        let line = self
            .line(
                "resolve_executable",
                &["resolve"],
                Some(&request.encode()),
                QUICK,
            )
            .await?;
        if let Some(path) = line.strip_prefix("ok ") {
            return Ok(Ok(path.to_owned()));
        }
        parse_error_line(&line)
            .map(Err)
            .ok_or_else(|| ControlError::Failed(unexpected("resolve_executable", &line)))
    }
}

fn unexpected(operation: &str, line: &str) -> Error {
    Error::new(
        ErrorKind::Remote,
        format!("{operation}: unexpected answer from the sandbox helper: {line:?}"),
    )
}

/// `empty` or `busy …`.
fn parse_ladder(operation: &str, line: &str) -> Result<Ladder, Error> {
    if line == "empty" {
        Ok(Ladder::Empty)
    } else if let Some(rest) = line.strip_prefix("busy ") {
        Ok(Ladder::Busy(rest.to_owned()))
    } else {
        Err(unexpected(operation, line))
    }
}

/// `ok <number>`, or `error <errno> <message>` as an error.
fn parse_ok_number(operation: &str, line: &str) -> Result<u32, Error> {
    if let Some(number) = line.strip_prefix("ok ") {
        return number.parse().map_err(|_| unexpected(operation, line));
    }
    match parse_error_line(line) {
        Some((_, message)) => Err(Error::new(
            ErrorKind::NotFound,
            format!("{operation}: {message}"),
        )),
        None => Err(unexpected(operation, line)),
    }
}

/// `error <errno> <message>`.
fn parse_error_line(line: &str) -> Option<(i32, String)> {
    let rest = line.strip_prefix("error ")?;
    let (errno, message) = rest.split_once(' ').unwrap_or((rest, ""));
    Some((errno.parse().ok()?, message.to_owned()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_parse() {
        assert_eq!(parse_ladder("t", "empty").unwrap(), Ladder::Empty);
        assert_eq!(
            parse_ladder("t", "busy 7,8; SIGTERM: denied").unwrap(),
            Ladder::Busy("7,8; SIGTERM: denied".into())
        );
        assert_eq!(
            parse_ladder("t", "what").unwrap_err().kind(),
            ErrorKind::Remote
        );
        assert_eq!(parse_ok_number("f", "ok 42").unwrap(), 42);
        let err = parse_ok_number("foreground_pgid", "error 0 no foreground group").unwrap_err();
        assert_eq!(err.kind(), ErrorKind::NotFound);
        assert_eq!(err.message(), "foreground_pgid: no foreground group");
        assert_eq!(
            parse_error_line("error 2 not found"),
            Some((2, "not found".into()))
        );
        assert_eq!(parse_error_line("ok x"), None);
    }
}
