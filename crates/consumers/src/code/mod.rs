//! Programs run in the world that call the world's tools as functions
//! ("code mode"): `code_run` (one-shot, or in a session), and sessions that
//! keep an interpreter's state from run to run (docs/design.md §11, the code runtime).
//!
//! The runtime needs nothing but the two seams: it writes its runner
//! programs (Python and JavaScript, in this crate) into the world through
//! `fs` and starts `python3` or `node` there through `subprocess`. A
//! program's calls of `dsh.<tool>(…)` come back to the host as frames and
//! are served by this library's own tools (and by host bindings an embedder
//! registers), so the program works in whatever world the agent works in —
//! a local directory, an E2B sandbox — with that world's files and
//! commands. TypeScript is stripped of its types on the host.
//!
//! Every run ends within its timeout: on expiry (or when the caller drops
//! the call) the runner's whole process group is terminated first, without
//! waiting for pipes a descendant may hold; a session whose run timed out
//! is ended with it. A one-shot run's runner is ended when the run ends, so
//! nothing it started is left; a session's runner (and what its programs
//! left running) is ended when the session is closed or at shutdown.

mod bindings;
mod capture;
mod protocol;
mod runner;
mod typescript;

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex as StdMutex};
use std::time::{Duration, Instant};

use dsh_plugin_api::fs::{FsProvider, WriteGuard};
use dsh_plugin_api::subprocess::SubprocessProvider;
use dsh_plugin_api::{Bytes, Error, ErrorKind, Result};
use serde_json::Value;
use tokio::sync::Mutex;
use tokio_util::task::TaskTracker;

pub use bindings::{Binding, BindingHandler};
pub use protocol::{ChannelError, MAX_FRAME_BYTES};
pub use runner::{MAX_CALLS_PER_RUN, MAX_CONCURRENT_CALLS};

use crate::Outcome;
use crate::commands::Commands;
use crate::files::Files;
use crate::lsp::Lsp;
use capture::Captured;
use runner::{Ended, Job, Runner};

/// A run's timeout when the request names none.
pub const DEFAULT_TIMEOUT_MS: u64 = 30_000;
/// The longest timeout a run may ask for.
pub const MAX_TIMEOUT_MS: u64 = 600_000;
/// The most bytes a program's source may have.
pub const MAX_CODE_BYTES: usize = 1024 * 1024;
/// The most bytes of JSON a program's result may have.
pub const MAX_RESULT_BYTES: usize = 1024 * 1024;
/// Sessions open at once.
pub const MAX_SESSIONS: usize = 16;

/// The header the JavaScript runner wraps a program in (runner.js's
/// `HEADER`): the program is an async function's body.
const JS_HEADER: &str = "(async function (dsh, require) {";
const PYTHON_RUNNER: &str = include_str!("runner.py");
const JS_RUNNER: &str = include_str!("runner.js");

/// A program's language.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum Language {
    /// `python3` in the world: the value of the last expression is the result;
    /// top-level `await` works; `import dsh` (also predefined).
    Python,
    /// `node` in the world: the body of an async function — `return` the
    /// result, `await` anywhere, `require` modules; `dsh` is predefined.
    Javascript,
    /// As javascript, its types stripped on the host first.
    Typescript,
}

impl Language {
    /// `"python"`, `"javascript"` or `"typescript"`.
    pub fn as_str(self) -> &'static str {
        match self {
            Language::Python => "python",
            Language::Javascript => "javascript",
            Language::Typescript => "typescript",
        }
    }

    /// The language of a file name's extension (`.py`, `.js`/`.mjs`/`.cjs`,
    /// `.ts`/`.mts`/`.cts`).
    pub fn from_extension(path: &str) -> Option<Language> {
        let extension = path.rsplit_once('.')?.1;
        match extension {
            "py" => Some(Language::Python),
            "js" | "mjs" | "cjs" => Some(Language::Javascript),
            "ts" | "mts" | "cts" => Some(Language::Typescript),
            _ => None,
        }
    }

    fn interpreter(self) -> &'static str {
        match self {
            Language::Python => "python3",
            Language::Javascript | Language::Typescript => "node",
        }
    }

    fn extension(self) -> &'static str {
        match self {
            Language::Python => "py",
            Language::Javascript => "js",
            Language::Typescript => "ts",
        }
    }
}

/// Arguments of `code_run`.
#[derive(Debug, Clone, serde::Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CodeRunRequest {
    /// The program. It calls the world's tools as `dsh.<tool>(args)` with the tools' argument
    /// names (JavaScript: `await dsh.grep({pattern: "x"})`; Python: `dsh.grep(pattern="x")`,
    /// or `await dsh.aio.grep(…)` for asyncio.gather). Python's result is the value of its
    /// last expression; JavaScript/TypeScript's is what the body `return`s. Results must be
    /// JSON (at most 1 MiB).
    pub code: String,
    /// python, javascript or typescript; required without session.
    #[serde(default)]
    pub language: Option<Language>,
    /// Run in this session (from code_session_open): its variables, imports and functions
    /// persist from run to run (JavaScript: globals, e.g. globalThis.x).
    #[serde(default)]
    pub session: Option<String>,
    /// Wall-clock limit in milliseconds (default 60,000, at most 600,000); on expiry the
    /// program and everything it started is killed (a session with it).
    #[serde(default)]
    pub timeout_ms: Option<u64>,
}

/// A stream of the program's output.
#[derive(Debug, Clone, serde::Serialize, schemars::JsonSchema)]
pub struct ProgramOutput {
    /// The text: the whole, or its head and tail around a marker naming the omitted bytes.
    pub text: String,
    /// Bytes written in all.
    pub bytes: u64,
    /// Bytes not shown in `text`.
    #[serde(skip_serializing_if = "is_zero")]
    pub omitted_bytes: u64,
}

fn is_zero(value: &u64) -> bool {
    *value == 0
}

impl From<Captured> for ProgramOutput {
    fn from(captured: Captured) -> ProgramOutput {
        ProgramOutput {
            text: captured.text,
            bytes: captured.bytes,
            omitted_bytes: captured.omitted_bytes,
        }
    }
}

/// Why a run did not return a value.
#[derive(Debug, Clone, serde::Serialize, schemars::JsonSchema)]
pub struct ProgramError {
    /// `exception` (the program raised), or `timeout` (killed at its timeout).
    pub kind: String,
    /// The exception's type (`ValueError`, `TypeError`, …).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub exception: Option<String>,
    pub message: String,
    /// The traceback in the program's own lines (innermost last); file run-N is the
    /// session's N-th run.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub traceback: Vec<TraceFrame>,
}

/// One frame of a traceback.
#[derive(Debug, Clone, serde::Serialize, schemars::JsonSchema)]
pub struct TraceFrame {
    pub file: String,
    pub line: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub column: Option<u64>,
    pub function: String,
    /// The source line.
    pub text: String,
}

/// Result of `code_run`.
#[derive(Debug, Clone, serde::Serialize, schemars::JsonSchema)]
pub struct CodeRunResult {
    /// Whether the program returned (no exception, no timeout).
    pub ok: bool,
    /// What the program returned (null when it returned nothing or failed).
    pub value: Value,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<ProgramError>,
    pub stdout: ProgramOutput,
    pub stderr: ProgramOutput,
    pub duration_ms: u64,
    /// Binding calls the program made.
    pub binding_calls: u64,
    /// The session it ran in.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub session: Option<String>,
    /// True when the session ended with this run (its timeout killed it).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub session_ended: bool,
}

impl Outcome for CodeRunResult {
    fn text(&self) -> String {
        let mut text = String::new();
        match &self.error {
            None => text.push_str(&format!("returned {}", self.value)),
            Some(error) => {
                text.push_str(&error.message);
                for frame in &error.traceback {
                    text.push_str(&format!(
                        "\n  {}:{} in {}: {}",
                        frame.file, frame.line, frame.function, frame.text
                    ));
                }
            }
        }
        for (name, output) in [("stdout", &self.stdout), ("stderr", &self.stderr)] {
            if output.bytes > 0 {
                text.push_str(&format!("\n[{name}]\n{}", output.text));
            }
        }
        if self.session_ended {
            text.push_str("\n[the session ended with this run]");
        }
        text
    }
}

/// Arguments of `code_session_open`.
#[derive(Debug, Clone, serde::Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SessionOpenRequest {
    /// python, javascript or typescript.
    pub language: Language,
}

/// Result of `code_session_open`.
#[derive(Debug, Clone, serde::Serialize, schemars::JsonSchema)]
pub struct SessionOpenResult {
    /// The session's id, for code_run's session.
    pub session: String,
    pub language: Language,
    /// The interpreter's version.
    pub version: String,
    /// The dsh functions a program can call, declared in the language (a TypeScript
    /// declaration or a Python stub).
    pub declarations: String,
}

impl Outcome for SessionOpenResult {
    fn text(&self) -> String {
        format!(
            "session {} ({} {})\n{}",
            self.session,
            self.language.as_str(),
            self.version,
            self.declarations
        )
    }
}

/// Arguments of `code_session_close`.
#[derive(Debug, Clone, serde::Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SessionCloseRequest {
    pub session: String,
}

/// Result of `code_session_close`.
#[derive(Debug, Clone, serde::Serialize, schemars::JsonSchema)]
pub struct SessionCloseResult {
    pub session: String,
    /// Runs the session ran.
    pub runs: u64,
}

impl Outcome for SessionCloseResult {
    fn text(&self) -> String {
        format!("closed session {} after {} runs", self.session, self.runs)
    }
}

/// Arguments of `code_sessions`.
#[derive(Debug, Clone, Default, serde::Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SessionListRequest {}

/// One open session.
#[derive(Debug, Clone, serde::Serialize, schemars::JsonSchema)]
pub struct SessionInfo {
    pub session: String,
    pub language: Language,
    pub version: String,
    pub runs: u64,
    /// Whether a run is in progress.
    pub busy: bool,
}

/// Result of `code_sessions`.
#[derive(Debug, Clone, serde::Serialize, schemars::JsonSchema)]
pub struct SessionListResult {
    pub sessions: Vec<SessionInfo>,
}

impl Outcome for SessionListResult {
    fn text(&self) -> String {
        if self.sessions.is_empty() {
            return "no code sessions".to_owned();
        }
        self.sessions
            .iter()
            .map(|info| {
                format!(
                    "{} {} {} runs{}",
                    info.session,
                    info.language.as_str(),
                    info.runs,
                    if info.busy { " (running)" } else { "" }
                )
            })
            .collect::<Vec<_>>()
            .join("\n")
    }
}

/// An open session: its runner, `None` once it ended.
struct Session {
    id: String,
    language: Language,
    version: String,
    runner: Mutex<Option<Runner>>,
}

/// The code runtime of one world.
pub struct Code {
    fs: Arc<dyn FsProvider>,
    subprocess: Arc<dyn SubprocessProvider>,
    bindings: StdMutex<BTreeMap<String, Binding>>,
    /// The world directory the runner programs were written to, once.
    materialized: Mutex<Option<String>>,
    sessions: StdMutex<BTreeMap<String, Arc<Session>>>,
    next_session: AtomicU64,
    closed: AtomicBool,
    /// The endings of runners whose call was dropped, waited for at shutdown.
    ending: TaskTracker,
}

impl Code {
    /// The code runtime of the world `fs` and `subprocess` serve, whose
    /// programs call `files`, `commands` and `lsp` of the same world.
    pub fn new(
        fs: Arc<dyn FsProvider>,
        subprocess: Arc<dyn SubprocessProvider>,
        files: &Arc<Files>,
        commands: &Arc<Commands>,
        lsp: &Arc<Lsp>,
    ) -> Code {
        let bindings = bindings::tool_bindings(files, commands, lsp)
            .into_iter()
            .map(|binding| (binding.name().to_owned(), binding))
            .collect();
        Code {
            fs,
            subprocess,
            bindings: StdMutex::new(bindings),
            materialized: Mutex::new(None),
            sessions: StdMutex::new(BTreeMap::new()),
            next_session: AtomicU64::new(1),
            closed: AtomicBool::new(false),
            ending: TaskTracker::new(),
        }
    }

    /// Adds a host binding, available to every run that starts after it.
    /// Refused when a binding of that name exists (the tools' names are
    /// taken).
    pub fn register(&self, binding: Binding) -> Result<()> {
        let mut bindings = lock(&self.bindings);
        if bindings.contains_key(binding.name()) {
            return Err(Error::new(
                ErrorKind::AlreadyExists,
                format!("code binding: {} is already bound", binding.name()),
            )
            .with_subject(binding.name().to_owned()));
        }
        bindings.insert(binding.name().to_owned(), binding);
        Ok(())
    }

    /// The names of the bindings a program can call.
    pub fn binding_names(&self) -> Vec<String> {
        lock(&self.bindings).keys().cloned().collect()
    }

    /// The declaration of the bindings for a program in `language`: a
    /// TypeScript declaration of `dsh`, or a Python stub of the `dsh`
    /// module — what a model reads to write a program.
    pub fn declarations(&self, language: Language) -> String {
        bindings::declarations(language, &lock(&self.bindings))
    }

    /// Runs a program: in a new runner ended when the run ends, or in
    /// `request.session`'s. The program's exception and its timeout are
    /// outcomes (`ok` false); errors are bad requests, an unknown session,
    /// a runner that cannot start, and a runner that breaks the protocol
    /// (garbage or an oversized frame on its channel, its own failure) —
    /// that runner is ended, its session with it.
    pub async fn code_run(&self, request: CodeRunRequest) -> Result<CodeRunResult> {
        const TOOL: &str = "code_run";
        if request.code.len() > MAX_CODE_BYTES {
            return Err(Error::invalid_input(format!(
                "{TOOL}: the program is {} bytes, over the limit of {MAX_CODE_BYTES}",
                request.code.len()
            )));
        }
        let timeout_ms = request.timeout_ms.unwrap_or(DEFAULT_TIMEOUT_MS);
        if timeout_ms == 0 || timeout_ms > MAX_TIMEOUT_MS {
            return Err(Error::invalid_input(format!(
                "{TOOL}: timeout_ms {timeout_ms} is outside 1..={MAX_TIMEOUT_MS}"
            )));
        }
        let timeout = Duration::from_millis(timeout_ms);
        let Some(id) = request.session else {
            let Some(language) = request.language else {
                return Err(Error::invalid_input(format!(
                    "{TOOL}: language (python, javascript or typescript) is required without a session"
                )));
            };
            let code = prepare(TOOL, language, &request.code, 1)?;
            let started = Instant::now();
            let mut runner = self.start(TOOL, language).await?;
            let outcome = self
                .run_in(&mut runner, TOOL, &code, &request.code, started + timeout)
                .await;
            let ended = runner.end().await;
            let mut result = outcome?;
            result.duration_ms = started.elapsed().as_millis() as u64;
            if let Err(err) = ended {
                tracing::warn!(%err, "code_run: the runner's group is not proven gone");
            }
            return Ok(result);
        };
        let session = self.session(TOOL, &id)?;
        if request
            .language
            .is_some_and(|language| language != session.language)
        {
            return Err(Error::invalid_input(format!(
                "{TOOL}: session {id} runs {}, not {}",
                session.language.as_str(),
                request.language.map_or("", Language::as_str)
            ))
            .with_subject(id));
        }
        let mut slot = session.runner.lock().await;
        let started = Instant::now();
        // Out of the slot while it runs: if this call is dropped mid-run, the runner is dropped
        // with it (its group terminated) and the session has ended, rather than a later run
        // reading this one's frames.
        let Some(mut runner) = slot.take() else {
            return Err(session_gone(TOOL, &id));
        };
        let code = match prepare(TOOL, session.language, &request.code, runner.runs + 1) {
            Ok(code) => code,
            Err(err) => {
                *slot = Some(runner);
                return Err(err);
            }
        };
        let outcome = self
            .run_in(&mut runner, TOOL, &code, &request.code, started + timeout)
            .await;
        let failed = match &outcome {
            Ok(result) => result
                .error
                .as_ref()
                .is_some_and(|error| error.kind == "timeout"),
            Err(_) => true,
        };
        if failed {
            let _ = runner.end().await;
            lock(&self.sessions).remove(&id);
        } else {
            *slot = Some(runner);
        }
        let mut result = outcome.map_err(|err| err.with_subject(id.clone()))?;
        result.duration_ms = started.elapsed().as_millis() as u64;
        result.session = Some(id);
        result.session_ended = failed;
        Ok(result)
    }

    async fn run_in(
        &self,
        runner: &mut Runner,
        operation: &str,
        code: &str,
        source: &str,
        deadline: Instant,
    ) -> Result<CodeRunResult> {
        let bindings = lock(&self.bindings).clone();
        let outcome = runner
            .run(Job {
                operation,
                code,
                source,
                bindings: &bindings,
                deadline,
            })
            .await?;
        let (value, error) = match outcome.ended {
            Ended::Returned(value) => (value, None),
            Ended::Raised(raised) => (
                Value::Null,
                Some(ProgramError {
                    kind: "exception".to_owned(),
                    exception: Some(raised.kind),
                    message: raised.message,
                    traceback: raised
                        .frames
                        .into_iter()
                        .map(|frame| TraceFrame {
                            file: frame.file,
                            line: frame.line,
                            column: frame.column,
                            function: frame.function,
                            text: frame.text,
                        })
                        .collect(),
                }),
            ),
            Ended::TimedOut => (
                Value::Null,
                Some(ProgramError {
                    kind: "timeout".to_owned(),
                    exception: None,
                    message: format!(
                        "{operation}: the program did not end within its timeout; it and everything it started were killed"
                    ),
                    traceback: Vec::new(),
                }),
            ),
        };
        Ok(CodeRunResult {
            ok: error.is_none(),
            value,
            error,
            stdout: outcome.stdout.finish().into(),
            stderr: outcome.stderr.finish().into(),
            duration_ms: 0,
            binding_calls: outcome.calls,
            session: None,
            session_ended: false,
        })
    }

    /// Opens a session: a runner of `request.language` kept until
    /// [`Code::code_session_close`] or [`Code::shutdown`].
    pub async fn code_session_open(
        &self,
        request: SessionOpenRequest,
    ) -> Result<SessionOpenResult> {
        const TOOL: &str = "code_session_open";
        if lock(&self.sessions).len() >= MAX_SESSIONS {
            return Err(Error::new(
                ErrorKind::Busy,
                format!(
                    "{TOOL}: {MAX_SESSIONS} sessions are open; close one with code_session (op close)"
                ),
            ));
        }
        let runner = self.start(TOOL, request.language).await?;
        let id = format!("code-{}", self.next_session.fetch_add(1, Ordering::Relaxed));
        let version = runner.version.clone();
        let session = Arc::new(Session {
            id: id.clone(),
            language: request.language,
            version: version.clone(),
            runner: Mutex::new(Some(runner)),
        });
        let refused = {
            let mut sessions = lock(&self.sessions);
            // Checked again under the lock: shutdown may have begun while the runner started.
            let refused = self.closed.load(Ordering::SeqCst) || sessions.len() >= MAX_SESSIONS;
            if !refused {
                sessions.insert(id.clone(), Arc::clone(&session));
            }
            refused
        };
        if refused {
            if let Some(runner) = session.runner.lock().await.take() {
                let _ = runner.end().await;
            }
            return Err(Error::new(
                ErrorKind::Busy,
                format!(
                    "{TOOL}: no more sessions can be opened now (shutting down, or {MAX_SESSIONS} open)"
                ),
            ));
        }
        Ok(SessionOpenResult {
            session: id,
            language: request.language,
            version,
            declarations: self.declarations(request.language),
        })
    }

    /// Closes a session: its runner's whole process group ends (with what
    /// its programs left running). A run in progress is waited for.
    pub async fn code_session_close(
        &self,
        request: SessionCloseRequest,
    ) -> Result<SessionCloseResult> {
        const TOOL: &str = "code_session_close";
        let removed = lock(&self.sessions).remove(&request.session);
        let session =
            removed.ok_or_else(|| unknown_session(TOOL, &request.session, &self.session_ids()))?;
        let runner = session.runner.lock().await.take();
        let runs = runner.as_ref().map_or(0, |runner| runner.runs);
        if let Some(runner) = runner {
            runner
                .end()
                .await
                .map_err(|err| err.context(format!("{TOOL}: session {}", session.id)))?;
        }
        Ok(SessionCloseResult {
            session: request.session,
            runs,
        })
    }

    /// The open sessions.
    pub async fn code_sessions(&self, _request: SessionListRequest) -> Result<SessionListResult> {
        let sessions: Vec<Arc<Session>> = lock(&self.sessions).values().cloned().collect();
        let mut listed = Vec::new();
        for session in sessions {
            let (busy, runs) = match session.runner.try_lock() {
                Ok(runner) => (false, runner.as_ref().map_or(0, |runner| runner.runs)),
                Err(_) => (true, 0),
            };
            listed.push(SessionInfo {
                session: session.id.clone(),
                language: session.language,
                version: session.version.clone(),
                runs,
                busy,
            });
        }
        Ok(SessionListResult { sessions: listed })
    }

    /// The process group ids of the open sessions' runners (for tests and
    /// diagnostics).
    pub async fn session_pids(&self) -> Vec<u32> {
        let sessions: Vec<Arc<Session>> = lock(&self.sessions).values().cloned().collect();
        let mut pids = Vec::new();
        for session in sessions {
            if let Some(runner) = session.runner.lock().await.as_ref() {
                pids.push(runner.pid());
            }
        }
        pids
    }

    /// Refuses new sessions, ends every session's runner, waits for the
    /// runners of dropped calls to end, and removes the runner programs
    /// from the world. Returns what could not be done.
    pub async fn shutdown(&self) -> Vec<Error> {
        self.closed.store(true, Ordering::SeqCst);
        let sessions: Vec<Arc<Session>> = std::mem::take(&mut *lock(&self.sessions))
            .into_values()
            .collect();
        let mut failures = Vec::new();
        for session in sessions {
            if let Some(runner) = session.runner.lock().await.take()
                && let Err(err) = runner.end().await
            {
                failures.push(err.context(format!("code session {}", session.id)));
            }
        }
        self.ending.close();
        self.ending.wait().await;
        if let Some(dir) = self.materialized.lock().await.take()
            && let Err(err) = self.fs.remove(&dir).await
        {
            failures.push(err.context("code: removing the runner programs"));
        }
        failures
    }

    fn session(&self, operation: &str, id: &str) -> Result<Arc<Session>> {
        // Two statements: the lookup's guard is dropped before the error lists the sessions.
        let found = lock(&self.sessions).get(id).cloned();
        found.ok_or_else(|| unknown_session(operation, id, &self.session_ids()))
    }

    fn session_ids(&self) -> Vec<String> {
        lock(&self.sessions).keys().cloned().collect()
    }

    /// Starts a runner, writing the runner programs into the world first
    /// if this runtime has not yet.
    async fn start(&self, operation: &str, language: Language) -> Result<Runner> {
        if self.closed.load(Ordering::SeqCst) {
            return Err(Error::closed(format!(
                "{operation}: the code runtime is shut down"
            )));
        }
        let dir = self.materialize(operation).await?;
        Runner::start(&self.subprocess, &dir, language, operation, &self.ending).await
    }

    /// The world directory holding the runner programs: a fresh one under
    /// `/tmp` (named at random, so two servers over one world do not share
    /// it), written once and removed at shutdown.
    async fn materialize(&self, operation: &str) -> Result<String> {
        let mut materialized = self.materialized.lock().await;
        if let Some(dir) = materialized.as_ref() {
            return Ok(dir.clone());
        }
        let dir = format!("/tmp/dsh-code-{:016x}", rand::random::<u64>());
        let write = |name: &str, program: &'static str| {
            let path = format!("{dir}/{name}");
            async move {
                self.fs
                    .write(
                        &path,
                        Bytes::from_static(program.as_bytes()),
                        WriteGuard::default(),
                    )
                    .await
                    .map_err(|err| err.context(format!("{operation}: writing the runner {path}")))
            }
        };
        self.fs
            .mkdir(&dir)
            .await
            .map_err(|err| err.context(format!("{operation}: making {dir}")))?;
        write("runner.py", PYTHON_RUNNER).await?;
        write("runner.js", JS_RUNNER).await?;
        *materialized = Some(dir.clone());
        Ok(dir)
    }
}

/// The code the runner runs: the program itself, or for TypeScript the
/// program stripped of its types (the same lines and columns).
fn prepare(operation: &str, language: Language, source: &str, run: u64) -> Result<String> {
    match language {
        Language::Typescript => {
            typescript::strip(operation, &format!("run-{run}.ts"), source, JS_HEADER)
        }
        Language::Python | Language::Javascript => Ok(source.to_owned()),
    }
}

fn unknown_session(operation: &str, id: &str, known: &[String]) -> Error {
    let known = if known.is_empty() {
        "none is open".to_owned()
    } else {
        format!("the open sessions are {}", known.join(", "))
    };
    Error::not_found(format!("{operation}: no code session {id}; {known}"))
        .with_subject(id.to_owned())
}

fn session_gone(operation: &str, id: &str) -> Error {
    Error::new(
        ErrorKind::Closed,
        format!("{operation}: session {id} has ended; open a new one"),
    )
    .with_subject(id.to_owned())
}

fn lock<T>(mutex: &StdMutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}
