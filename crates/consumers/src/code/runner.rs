//! One runner in the world: started through the `subprocess` seam from the
//! runner program the host wrote through the `fs` seam, spoken to in frames
//! (see [`super::protocol`]), ended by terminating its whole process group
//! (docs/design.md §11, the code runtime).
//!
//! A run sends one `run` frame and reads frames until the run's `done`:
//! `out` frames are the program's stdout and stderr, accounted here with
//! `run`'s bounds; `call` frames are binding calls, served concurrently (at
//! most [`MAX_CONCURRENT_CALLS`] at once, at most [`MAX_CALLS_PER_RUN`] in
//! a run) and each answered by a `reply` frame. The run's own task reads
//! the channel and drives the calls — no task or queue between the pipe
//! and a call, so a call costs no wake-up of another task.
//! Anything else — a frame that breaks the protocol, the channel closed,
//! the runner's own failure — ends the run with an error and the runner
//! must be ended.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use dsh_plugin_api::stream::{ByteStream, ByteWriter};
use dsh_plugin_api::subprocess::{
    OutputMode, OutputStream, Process, SpawnSpec, StdinMode, SubprocessProvider,
};
use dsh_plugin_api::{Bytes, Error, ErrorKind, Result};
use futures::StreamExt;
use futures::stream::FuturesUnordered;
use serde_json::Value;
use tokio::sync::{Mutex, Semaphore};
use tokio_util::task::TaskTracker;

use super::bindings::Binding;
use super::capture::Capture;
use super::protocol::{
    self, ChannelError, FromRunner, Lines, MAX_FRAME_BYTES, OutStream, RaisedError, ReplyError,
    ToRunner,
};
use super::{Language, MAX_RESULT_BYTES};
use crate::commands::{TerminateOnDrop, until_proven_gone};

/// Binding calls a run may make; the next is refused (the program sees a
/// `BindingError`).
pub const MAX_CALLS_PER_RUN: u64 = 10_000;
/// Binding calls running on the host at once; more wait their turn.
pub const MAX_CONCURRENT_CALLS: usize = 16;
/// How long a runner may take to start and say it is ready.
const START_TIMEOUT: Duration = Duration::from_secs(30);
/// The grace between SIGTERM and SIGKILL when a runner is ended: its state
/// is lost either way, and a timed-out run must end promptly, but the
/// runner's SIGTERM handler is what kills the processes that left its group
/// (docs/design.md §11), so it must get to run on a loaded machine. With
/// 200 ms a CI run once saw an escaped process outlive its one-shot run.
/// A group that obeys SIGTERM ends as soon as it does.
const END_GRACE: Duration = Duration::from_secs(1);
/// Bytes of the runner's own stderr kept (what it says when it cannot
/// start: a missing interpreter module, a too-old interpreter).
const RUNNER_STDERR_BYTES: usize = 16 * 1024;

/// Why the frames stopped.
#[derive(Debug)]
enum Stopped {
    Channel(ChannelError),
    Closed,
    Read(Error),
}

/// A started runner.
pub(crate) struct Runner {
    process: Arc<dyn Process>,
    writer: Arc<Mutex<Box<dyn ByteWriter>>>,
    channel: Channel,
    /// Ends the group if the runner is dropped without [`Runner::end`].
    guard: Option<TerminateOnDrop>,
    pub(crate) language: Language,
    /// The interpreter's version, as the runner reported it.
    pub(crate) version: String,
    /// Runs sent so far (names each run's file).
    pub(crate) runs: u64,
}

/// How one run ended.
pub(crate) enum Ended {
    Returned(Value),
    Raised(RaisedError),
    TimedOut,
}

/// One run's outcome.
pub(crate) struct Outcome {
    pub(crate) ended: Ended,
    pub(crate) stdout: Capture,
    pub(crate) stderr: Capture,
    pub(crate) calls: u64,
}

/// What a run runs.
pub(crate) struct Job<'a> {
    pub(crate) operation: &'a str,
    pub(crate) code: &'a str,
    pub(crate) source: &'a str,
    pub(crate) bindings: &'a BTreeMap<String, Binding>,
    pub(crate) deadline: Instant,
}

impl Runner {
    /// Starts the runner of `language` from `dir` (where the runner
    /// programs were written) and waits for its `ready`.
    /// A runner dropped without [`Runner::end`] (its call dropped) is
    /// ended by a task `ending` tracks.
    pub(crate) async fn start(
        subprocess: &Arc<dyn SubprocessProvider>,
        dir: &str,
        language: Language,
        operation: &str,
        ending: &TaskTracker,
    ) -> Result<Runner> {
        let argv = match language {
            Language::Python => vec!["python3".to_owned(), format!("{dir}/runner.py")],
            Language::Javascript | Language::Typescript => vec![
                "node".to_owned(),
                format!("{dir}/runner.js"),
                "controller".to_owned(),
                MAX_FRAME_BYTES.to_string(),
            ],
        };
        let mut spec = SpawnSpec::new(argv);
        spec.stdin = StdinMode::Pipe;
        spec.stderr = OutputMode::Collect {
            limit: RUNNER_STDERR_BYTES,
        };
        spec.env
            .insert("PYTHONIOENCODING".to_owned(), "utf-8".to_owned());
        let process = subprocess.spawn(spec).await.map_err(|err| {
            Error::new(
                err.kind(),
                format!(
                    "{operation}: the {} runner could not start ({} is needed in the world): {}",
                    language.as_str(),
                    language.interpreter(),
                    err.message()
                ),
            )
        })?;
        let guard = TerminateOnDrop::tracked(Arc::clone(&process), ending);
        let (Some(stdin), Some(stdout)) = (process.take_stdin(), process.take_stdout()) else {
            return Err(Error::io(format!(
                "{operation}: the runner's pipes were not provided by the subprocess seam"
            )));
        };
        let mut runner = Runner {
            process,
            writer: Arc::new(Mutex::new(stdin)),
            channel: Channel {
                stdout,
                lines: Lines::default(),
                stopped: false,
            },
            guard: Some(guard),
            language,
            version: String::new(),
            runs: 0,
        };
        let ready = tokio::time::timeout(START_TIMEOUT, runner.channel.next()).await;
        match ready {
            Ok(Ok(FromRunner::Ready { version })) => {
                runner.version = version;
                Ok(runner)
            }
            Ok(Ok(other)) => Err(Error::io(format!(
                "{operation}: the runner spoke before it was ready: {other:?}"
            ))),
            Ok(Err(stopped)) => Err(failure(&*runner.process, operation, stopped).await),
            Err(_) => Err(Error::new(
                ErrorKind::Timeout,
                format!(
                    "{operation}: the {} runner did not start within {} s",
                    language.as_str(),
                    START_TIMEOUT.as_secs()
                ),
            )),
        }
    }

    /// Runs one program; `Err` when the runner broke the protocol, ended or
    /// could not be written to (the caller ends it). A timeout is an
    /// outcome (the caller ends the runner too).
    pub(crate) async fn run(&mut self, job: Job<'_>) -> Result<Outcome> {
        self.runs += 1;
        let filename = format!("run-{}.{}", self.runs, self.language.extension());
        let names: Vec<String> = job.bindings.keys().cloned().collect();
        let frame = protocol::encode(&ToRunner::Run {
            filename: &filename,
            code: job.code,
            source: job.source,
            bindings: &names,
            max_result_bytes: MAX_RESULT_BYTES,
        });
        let mut outcome = Outcome {
            ended: Ended::TimedOut,
            stdout: Capture::default(),
            stderr: Capture::default(),
            calls: 0,
        };
        let deadline = tokio::time::Instant::from_std(job.deadline);
        let exchange = self.exchange(&job, frame, &mut outcome);
        match tokio::time::timeout_at(deadline, exchange).await {
            Ok(Ok(ended)) => outcome.ended = ended,
            Ok(Err(err)) => return Err(err),
            Err(_) => outcome.ended = Ended::TimedOut,
        }
        Ok(outcome)
    }

    async fn exchange(
        &mut self,
        job: &Job<'_>,
        frame: Vec<u8>,
        outcome: &mut Outcome,
    ) -> Result<Ended> {
        let operation = job.operation;
        write(&self.writer, frame).await.map_err(|err| {
            Error::io(format!(
                "{operation}: the runner cannot be written to: {err}"
            ))
        })?;
        let permits = Arc::new(Semaphore::new(MAX_CONCURRENT_CALLS));
        // Polled by this task; dropped with the run, which cancels the calls still running.
        let mut calls = FuturesUnordered::new();
        loop {
            let frame = tokio::select! {
                frame = self.channel.next() => frame,
                Some(()) = calls.next(), if !calls.is_empty() => continue,
            };
            let message = match frame {
                Ok(message) => message,
                Err(stopped) => return Err(failure(&*self.process, operation, stopped).await),
            };
            match message {
                FromRunner::Out { s, b } => {
                    let bytes = protocol::decode_bytes(&b).map_err(|err| {
                        Error::io(format!("{operation}: the runner's channel carried {err}"))
                    })?;
                    match s {
                        OutStream::Stdout => outcome.stdout.push(&bytes),
                        OutStream::Stderr => outcome.stderr.push(&bytes),
                    }
                }
                FromRunner::Call { id, name, args } => {
                    outcome.calls += 1;
                    let binding = job.bindings.get(&name).cloned();
                    if outcome.calls > MAX_CALLS_PER_RUN {
                        // Answered in line: a flood of calls waits on its own refusals. The
                        // calls still running are driven meanwhile: one may hold the writer.
                        let refusal = Error::new(
                            ErrorKind::Busy,
                            format!(
                                "{name}: the run made more than {MAX_CALLS_PER_RUN} binding calls; no more are answered in this run"
                            ),
                        );
                        let written = write(&self.writer, reply(id, Err(refusal)));
                        tokio::pin!(written);
                        let written = loop {
                            tokio::select! {
                                written = &mut written => break written,
                                Some(()) = calls.next(), if !calls.is_empty() => {}
                            }
                        };
                        written.map_err(|err| {
                            Error::io(format!(
                                "{operation}: the runner cannot be written to: {err}"
                            ))
                        })?;
                        continue;
                    }
                    let writer = Arc::clone(&self.writer);
                    let permits = Arc::clone(&permits);
                    let known: Vec<String> = job.bindings.keys().cloned().collect();
                    calls.push(async move {
                        let result = match binding {
                            None => Err(Error::not_found(format!(
                                "dsh.{name}: no such binding; the bindings are: {}",
                                known.join(", ")
                            ))),
                            Some(binding) => {
                                let _permit = permits.acquire_owned().await;
                                binding.call(args).await
                            }
                        };
                        // A runner gone is noticed by the run loop.
                        let _ = write(&writer, reply(id, result)).await;
                    });
                }
                FromRunner::Done {
                    ok: true, value, ..
                } => return Ok(Ended::Returned(value)),
                FromRunner::Done {
                    ok: false,
                    error: Some(error),
                    ..
                } => return Ok(Ended::Raised(error)),
                FromRunner::Done { .. } => {
                    return Err(Error::io(format!(
                        "{operation}: the runner reported a failed run without its error; the runner was ended"
                    )));
                }
                FromRunner::Fatal { message } => {
                    return Err(Error::io(format!(
                        "{operation}: the runner failed: {message}; the runner was ended"
                    )));
                }
                FromRunner::Ready { .. } => {
                    return Err(Error::io(format!(
                        "{operation}: the runner's channel carried a second ready frame; the runner was ended"
                    )));
                }
            }
        }
    }

    /// Ends the runner's whole process group (the runner, its worker, and
    /// whatever the programs left running in it).
    pub(crate) async fn end(mut self) -> Result<()> {
        let process = Arc::clone(&self.process);
        let ended = until_proven_gone(|| process.terminate(END_GRACE)).await;
        if let Some(guard) = self.guard.take() {
            guard.disarm();
        }
        ended
    }

    /// The process group's id (the runner's pid).
    pub(crate) fn pid(&self) -> u32 {
        self.process.pid()
    }
}

/// The error of a runner whose frames stopped, with what it wrote to
/// its own stderr (an interpreter's complaint). A function of the process,
/// not of the runner, whose channel is not `Sync`: the future stays `Send`.
async fn failure(process: &dyn Process, operation: &str, stopped: Stopped) -> Error {
    let said = match process
        .read_output(OutputStream::Stderr, 0, RUNNER_STDERR_BYTES)
        .await
    {
        Ok(snapshot) if !snapshot.bytes.is_empty() => format!(
            "; it said: {}",
            String::from_utf8_lossy(&snapshot.bytes).trim()
        ),
        _ => String::new(),
    };
    let what = match stopped {
        Stopped::Channel(err) => format!("the runner's channel carried {err}"),
        Stopped::Closed => "the runner ended".to_owned(),
        Stopped::Read(err) => format!("the runner's channel failed: {err}"),
    };
    Error::io(format!("{operation}: {what}; the runner was ended{said}"))
}

/// The runner's side of the channel: its stdout, split into frames.
struct Channel {
    stdout: ByteStream,
    lines: Lines,
    /// Set once the frames stopped (a broken frame, the end): every later
    /// read says the channel is closed.
    stopped: bool,
}

impl Channel {
    /// The next frame, validated. Cancel-safe: a chunk read is kept in
    /// `lines` before anything else is awaited.
    async fn next(&mut self) -> std::result::Result<FromRunner, Stopped> {
        loop {
            if self.stopped {
                return Err(Stopped::Closed);
            }
            match self.lines.next_line() {
                Ok(Some(line)) => {
                    let frame = protocol::decode(&line).map_err(Stopped::Channel);
                    self.stopped = frame.is_err();
                    return frame;
                }
                Ok(None) => {}
                Err(err) => {
                    self.stopped = true;
                    return Err(Stopped::Channel(err));
                }
            }
            match self.stdout.next().await {
                Some(Ok(chunk)) => self.lines.push(&chunk),
                Some(Err(err)) => {
                    self.stopped = true;
                    return Err(Stopped::Read(err));
                }
                None => {
                    self.stopped = true;
                    return Err(Stopped::Closed);
                }
            }
        }
    }
}

/// The reply frame of call `id`: its value, or its error; a value too
/// large for a frame is replaced by an error saying so.
fn reply(id: u64, result: Result<Value>) -> Vec<u8> {
    let error = |err: Error| ToRunner::Reply {
        id,
        value: None,
        error: Some(ReplyError {
            kind: err.kind().as_str().to_owned(),
            message: err.to_string(),
        }),
    };
    let frame = match result {
        Ok(value) => protocol::encode(&ToRunner::Reply {
            id,
            value: Some(value),
            error: None,
        }),
        Err(err) => protocol::encode(&error(err)),
    };
    if frame.len() <= MAX_FRAME_BYTES {
        return frame;
    }
    protocol::encode(&error(Error::invalid_input(format!(
        "the binding's result is {} bytes as a frame, over the limit of {MAX_FRAME_BYTES}; ask for less",
        frame.len()
    ))))
}

async fn write(writer: &Mutex<Box<dyn ByteWriter>>, frame: Vec<u8>) -> Result<()> {
    writer.lock().await.write(Bytes::from(frame)).await
}
