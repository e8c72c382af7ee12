//! The `process.Process` service: start, attach to, list, feed and signal
//! processes in the sandbox (docs/e2b-protocol.md §5).

use std::collections::BTreeMap;
use std::fmt;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context as TaskContext, Poll};
use std::time::Duration;

use bytes::Bytes;
use connectrpc::StreamMessage;
use connectrpc::client::ClientTransport;
use envd_proto::process as pb;
use envd_proto::process::__buffa::view::oneof::process_event::{
    Event as EventView, data_event::Output as OutputView,
};
use futures::{Stream, StreamExt};
use http_body::Body;

use super::options::{Bound, CallOptions, DEFAULT_KEEPALIVE_INTERVAL, StreamOptions};
use super::stream::{self, Fault, RawStream, StreamItem};
use super::{Access, Envd};
use crate::classify::Stage;
use crate::error::{Context, Error, Result};

/// A PTY size in character cells.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PtySize {
    /// Columns.
    pub cols: u32,
    /// Rows.
    pub rows: u32,
}

impl PtySize {
    fn validate(&self, context: &Context) -> Result<()> {
        if self.cols == 0 || self.rows == 0 {
            return Err(Error::invalid_argument(
                context.clone(),
                format!("PTY size {}x{} has a zero dimension", self.cols, self.rows),
            ));
        }
        Ok(())
    }
}

/// A process to start: executable, arguments, environment additions,
/// working directory, and whether it gets a PTY or a stdin pipe.
///
/// envd adds no shell: `cmd` is executed directly with `args` (use
/// [`Command::shell`] for a login shell like the SDKs' `commands.run`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Command {
    cmd: String,
    args: Vec<String>,
    envs: BTreeMap<String, String>,
    cwd: Option<String>,
    pty: Option<PtySize>,
    tag: Option<String>,
    stdin: Option<bool>,
}

impl Command {
    /// Runs `cmd` (a path or a name envd resolves on its `PATH`).
    pub fn new(cmd: impl Into<String>) -> Self {
        Command {
            cmd: cmd.into(),
            args: Vec::new(),
            envs: BTreeMap::new(),
            cwd: None,
            pty: None,
            tag: None,
            stdin: None,
        }
    }

    /// `/bin/bash -l -c <script>`, what the SDKs' `commands.run` sends.
    pub fn shell(script: impl Into<String>) -> Self {
        Command::new("/bin/bash").args(["-l".to_owned(), "-c".to_owned(), script.into()])
    }

    /// Appends one argument.
    #[must_use]
    pub fn arg(mut self, arg: impl Into<String>) -> Self {
        self.args.push(arg.into());
        self
    }

    /// Appends arguments.
    #[must_use]
    pub fn args<I, S>(mut self, args: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.args.extend(args.into_iter().map(Into::into));
        self
    }

    /// Sets one environment variable (on top of envd's environment).
    #[must_use]
    pub fn env(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        self.envs.insert(name.into(), value.into());
        self
    }

    /// Sets environment variables.
    #[must_use]
    pub fn envs<I, K, V>(mut self, envs: I) -> Self
    where
        I: IntoIterator<Item = (K, V)>,
        K: Into<String>,
        V: Into<String>,
    {
        self.envs
            .extend(envs.into_iter().map(|(k, v)| (k.into(), v.into())));
        self
    }

    /// The working directory (relative paths resolve against the user's
    /// home; unset means envd's default workdir).
    #[must_use]
    pub fn cwd(mut self, cwd: impl Into<String>) -> Self {
        self.cwd = Some(cwd.into());
        self
    }

    /// Runs on a new PTY of this size; output then arrives as
    /// [`ProcessEvent::Pty`].
    #[must_use]
    pub fn pty(mut self, size: PtySize) -> Self {
        self.pty = Some(size);
        self
    }

    /// A tag that [`Selector::Tag`] can find the process by.
    #[must_use]
    pub fn tag(mut self, tag: impl Into<String>) -> Self {
        self.tag = Some(tag.into());
        self
    }

    /// `true`: a stdin pipe is created (feed it with `send_stdin`, end it
    /// with `close_stdin`); `false`: stdin is `/dev/null`. Unset: envd's
    /// default, a pipe.
    #[must_use]
    pub fn stdin(mut self, enabled: bool) -> Self {
        self.stdin = Some(enabled);
        self
    }

    /// The executable.
    pub fn program(&self) -> &str {
        &self.cmd
    }

    fn validate(&self, context: &Context) -> Result<()> {
        let bad = |message: String| Err(Error::invalid_argument(context.clone(), message));
        if self.cmd.is_empty() {
            return bad("the command is empty".to_owned());
        }
        if self.cmd.contains('\0') || self.args.iter().any(|a| a.contains('\0')) {
            return bad("the command or an argument contains a NUL byte".to_owned());
        }
        for (name, value) in &self.envs {
            if name.is_empty() || name.contains('=') || name.contains('\0') {
                return bad(format!(
                    "environment variable name {name:?} is empty or contains '=' or NUL"
                ));
            }
            if value.contains('\0') {
                return bad(format!("environment variable {name} contains a NUL byte"));
            }
        }
        if self.cwd.as_deref().is_some_and(|cwd| cwd.contains('\0')) {
            return bad("the working directory contains a NUL byte".to_owned());
        }
        if let Some(size) = self.pty {
            size.validate(context)?;
        }
        Ok(())
    }

    fn to_proto(&self) -> pb::StartRequest {
        pb::StartRequest {
            process: buffa::MessageField::some(pb::ProcessConfig {
                cmd: self.cmd.clone(),
                args: self.args.clone(),
                envs: self
                    .envs
                    .iter()
                    .map(|(k, v)| (k.clone(), v.clone()))
                    .collect(),
                cwd: self.cwd.clone(),
                ..Default::default()
            }),
            pty: self.pty.map(pty_proto).into(),
            tag: self.tag.clone(),
            stdin: self.stdin,
            ..Default::default()
        }
    }
}

fn pty_proto(size: PtySize) -> pb::PTY {
    pb::PTY {
        size: buffa::MessageField::some(pb::pty::Size {
            cols: size.cols,
            rows: size.rows,
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// Which process a call addresses.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Selector {
    /// By pid (in the sandbox's pid namespace).
    Pid(u32),
    /// By tag given at start (the first live process with it).
    Tag(String),
}

impl From<u32> for Selector {
    fn from(pid: u32) -> Self {
        Selector::Pid(pid)
    }
}

impl fmt::Display for Selector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Selector::Pid(pid) => write!(f, "pid {pid}"),
            Selector::Tag(tag) => write!(f, "tag {tag:?}"),
        }
    }
}

impl Selector {
    fn to_proto(&self) -> pb::ProcessSelector {
        use envd_proto::process::__buffa::oneof::process_selector::Selector as S;
        pb::ProcessSelector {
            selector: Some(match self {
                Selector::Pid(pid) => S::Pid(*pid),
                Selector::Tag(tag) => S::Tag(tag.clone()),
            }),
            ..Default::default()
        }
    }

    fn validate(&self, context: &Context) -> Result<()> {
        match self {
            Selector::Tag(tag) if tag.is_empty() => {
                Err(Error::invalid_argument(context.clone(), "the tag is empty"))
            }
            _ => Ok(()),
        }
    }
}

/// A signal envd can deliver (to the process only, not its group).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Signal {
    /// SIGTERM.
    Term,
    /// SIGKILL.
    Kill,
}

/// How a process ended, from envd's end event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExitStatus {
    /// The exit status, or -1 when a signal ended the process.
    pub exit_code: i32,
    /// True only for a normal exit.
    pub exited: bool,
    /// Go's rendering, e.g. `"exit status 1"`, `"signal: killed"`.
    pub status: String,
    /// The wait error text, absent on success.
    pub error: Option<String>,
}

impl ExitStatus {
    /// Exited normally with status 0.
    pub fn success(&self) -> bool {
        self.exited && self.exit_code == 0
    }
}

/// One event of a process stream. Output chunks are passed on as they
/// arrive (at most 32 KiB from pipes, 16 KiB from a PTY, not aligned to
/// UTF-8 boundaries) and never retained by the stream.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ProcessEvent {
    /// Bytes the process wrote to stdout.
    Stdout(Bytes),
    /// Bytes the process wrote to stderr.
    Stderr(Bytes),
    /// Bytes from the PTY (stdout and stderr combined).
    Pty(Bytes),
    /// The process ended; the stream ends after this.
    End(ExitStatus),
}

/// A live process as `List` reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProcessInfo {
    /// Its pid.
    pub pid: u32,
    /// Its tag, if it was started with one.
    pub tag: Option<String>,
    /// The executable as the starter sent it.
    pub cmd: String,
    /// The arguments.
    pub args: Vec<String>,
    /// The environment additions.
    pub envs: BTreeMap<String, String>,
    /// The working directory, if one was given.
    pub cwd: Option<String>,
}

/// Input for a process: stdin bytes or PTY input.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ProcessInput {
    /// Written to the stdin pipe.
    Stdin(Bytes),
    /// Written to the PTY master.
    Pty(Bytes),
}

impl ProcessInput {
    fn to_proto(&self) -> pb::ProcessInput {
        use envd_proto::process::__buffa::oneof::process_input::Input;
        pb::ProcessInput {
            input: Some(match self {
                ProcessInput::Stdin(bytes) => Input::Stdin(bytes.to_vec()),
                ProcessInput::Pty(bytes) => Input::Pty(bytes.to_vec()),
            }),
            ..Default::default()
        }
    }
}

/// What the wire can carry on a process stream, before keepalives are
/// dropped.
#[derive(Debug)]
enum RawEvent {
    Start(u32),
    /// A keepalive, or an event kind this client does not know.
    Ignored,
    Event(ProcessEvent),
}

impl StreamItem for RawEvent {
    fn is_keepalive(&self) -> bool {
        matches!(self, RawEvent::Ignored)
    }
}

fn convert_start(message: &StreamMessage<pb::StartResponse>) -> Result<RawEvent, String> {
    raw_event(message.view().event.as_option(), message.bytes())
}

fn convert_connect(message: &StreamMessage<pb::ConnectResponse>) -> Result<RawEvent, String> {
    raw_event(message.view().event.as_option(), message.bytes())
}

/// Reads one event from its zero-copy view; output bytes are sliced out of
/// the message buffer rather than copied.
fn raw_event(
    event: Option<&pb::ProcessEventView<'_>>,
    backing: &Bytes,
) -> Result<RawEvent, String> {
    let Some(event) = event.and_then(|e| e.event.as_ref()) else {
        return Ok(RawEvent::Ignored);
    };
    Ok(match event {
        EventView::Start(start) => RawEvent::Start(start.pid),
        EventView::Keepalive(_) => RawEvent::Ignored,
        EventView::Data(data) => match &data.output {
            Some(OutputView::Stdout(bytes)) => {
                RawEvent::Event(ProcessEvent::Stdout(share(backing, bytes)))
            }
            Some(OutputView::Stderr(bytes)) => {
                RawEvent::Event(ProcessEvent::Stderr(share(backing, bytes)))
            }
            Some(OutputView::Pty(bytes)) => {
                RawEvent::Event(ProcessEvent::Pty(share(backing, bytes)))
            }
            None => RawEvent::Ignored,
        },
        EventView::End(end) => RawEvent::Event(ProcessEvent::End(ExitStatus {
            exit_code: end.exit_code,
            exited: end.exited,
            status: end.status.to_owned(),
            error: end.error.map(str::to_owned),
        })),
    })
}

/// `part` as a `Bytes` sharing `backing`'s buffer when it lies inside it.
fn share(backing: &Bytes, part: &[u8]) -> Bytes {
    let start = backing.as_ptr() as usize;
    let at = part.as_ptr() as usize;
    if !part.is_empty() && at >= start && at + part.len() <= start + backing.len() {
        backing.slice_ref(part)
    } else {
        Bytes::copy_from_slice(part)
    }
}

/// The events of one process after its start event: output chunks, then
/// [`ProcessEvent::End`], then the end of the stream.
///
/// Errors are yielded once and end the stream: a process that ends without
/// an end event yields [`Error::Protocol`]; a stream timeout yields
/// [`Error::Timeout`]; a sandbox that dies yields an error for which
/// [`Error::is_unavailable`] holds.
///
/// Dropping the stream aborts its HTTP request; the process keeps running
/// (envd does not kill on disconnect) and can be re-attached with
/// `connect_process`, though output produced meanwhile is lost.
pub struct ProcessStream {
    pid: u32,
    raw: RawStream<RawEvent>,
    context: Context,
    sandbox_id: Arc<str>,
    ended: bool,
    finished: bool,
}

impl fmt::Debug for ProcessStream {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ProcessStream")
            .field("pid", &self.pid)
            .field("ended", &self.ended)
            .field("finished", &self.finished)
            .finish_non_exhaustive()
    }
}

impl ProcessStream {
    /// The process id envd reported in the start event.
    pub fn pid(&self) -> u32 {
        self.pid
    }

    /// Drains the stream, discarding output, and returns the exit status.
    ///
    /// # Errors
    /// The first error the stream yields.
    pub async fn wait(mut self) -> Result<ExitStatus> {
        let mut status = None;
        while let Some(event) = self.next().await {
            if let ProcessEvent::End(end) = event? {
                status = Some(end);
            }
        }
        status.ok_or_else(|| {
            Error::protocol(
                self.context.clone(),
                "the stream ended without an end event",
            )
        })
    }
}

impl Stream for ProcessStream {
    type Item = Result<ProcessEvent>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut TaskContext<'_>) -> Poll<Option<Self::Item>> {
        let this = self.get_mut();
        if this.finished {
            return Poll::Ready(None);
        }
        loop {
            return match this.raw.poll_next_unpin(cx) {
                Poll::Pending => Poll::Pending,
                Poll::Ready(Some(Ok(RawEvent::Ignored))) => continue,
                Poll::Ready(Some(Ok(RawEvent::Start(pid)))) => {
                    this.finished = true;
                    Poll::Ready(Some(Err(Error::protocol(
                        this.context.clone(),
                        format!("a second start event (pid {pid})"),
                    ))))
                }
                Poll::Ready(Some(Ok(RawEvent::Event(event)))) => {
                    if matches!(event, ProcessEvent::End(_)) {
                        this.ended = true;
                    }
                    Poll::Ready(Some(Ok(event)))
                }
                Poll::Ready(Some(Err(fault))) => {
                    this.finished = true;
                    let fault: Fault = fault;
                    Poll::Ready(Some(Err(fault.into_error(
                        this.context.clone(),
                        &this.sandbox_id,
                        Stage::Call,
                    ))))
                }
                Poll::Ready(None) => {
                    this.finished = true;
                    if this.ended {
                        Poll::Ready(None)
                    } else {
                        Poll::Ready(Some(Err(Error::protocol(
                            this.context.clone(),
                            "the stream ended without an end event",
                        ))))
                    }
                }
            };
        }
    }
}

/// `input`'s items as `Some`, with a `None` (a keepalive) whenever it has
/// yielded nothing for `interval`; ends when `input` ends.
fn keepalive_when_idle<S>(
    input: S,
    interval: Duration,
) -> impl Stream<Item = Option<ProcessInput>> + Send + 'static
where
    S: Stream<Item = ProcessInput> + Send + 'static,
{
    futures::stream::unfold(Box::pin(input), move |mut input| async move {
        // `next` is cancel-safe: an item is never lost to the timeout.
        match tokio::time::timeout(interval, input.next()).await {
            Ok(Some(item)) => Some((Some(item), input)),
            Ok(None) => None,
            Err(_) => Some((None, input)),
        }
    })
}

impl<T> Envd<T>
where
    T: ClientTransport,
    T::ResponseBody: Unpin,
    <T::ResponseBody as Body>::Error: fmt::Display,
{
    /// Starts `command` and waits for its start event (bounded by the
    /// handshake timeout), returning the stream of its events.
    ///
    /// Dropping the future before it resolves aborts the request; the
    /// process may already have started (envd does not kill it).
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for a malformed command (nothing is sent)
    /// or one envd rejects (e.g. a missing cwd); [`Error::SandboxNotFound`]
    /// when the sandbox is not running; [`Error::Timeout`] when no start
    /// event arrives in time.
    pub async fn start(&self, command: &Command, options: &StreamOptions) -> Result<ProcessStream> {
        let context = Context::new("start process", command.cmd.clone());
        command.validate(&context)?;
        let call = self.rpc_options(
            &context,
            Access::AsUser(options.user.as_deref()),
            options.timeout,
            options.keepalive_interval,
        )?;
        let request = command.to_proto();
        let (first, raw) = stream::handshake(
            &context,
            &self.sandbox_id,
            options.handshake_timeout.resolve(self.request_timeout),
            async {
                let server = self.process.start_with_options(request, call).await?;
                Ok(stream::raw_stream(server, convert_start))
            },
        )
        .await?;
        self.process_stream(context, first, raw)
    }

    /// Attaches to a running process (or one that exited in the last 30 s)
    /// and streams its events from now on; earlier output is not replayed.
    /// `options.user` must be unset (`Connect` does not act as a user).
    ///
    /// # Errors
    /// [`Error::NotFound`] for an unknown process; otherwise as
    /// [`Envd::start`].
    pub async fn connect_process(
        &self,
        selector: impl Into<Selector>,
        options: &StreamOptions,
    ) -> Result<ProcessStream> {
        let selector = selector.into();
        let context = Context::new("connect to process", selector.to_string());
        selector.validate(&context)?;
        let call = self.rpc_options(
            &context,
            Access::Anonymous(options.user.as_deref()),
            options.timeout,
            options.keepalive_interval,
        )?;
        let request = pb::ConnectRequest {
            process: buffa::MessageField::some(selector.to_proto()),
            ..Default::default()
        };
        let (first, raw) = stream::handshake(
            &context,
            &self.sandbox_id,
            options.handshake_timeout.resolve(self.request_timeout),
            async {
                let server = self.process.connect_with_options(request, call).await?;
                Ok(stream::raw_stream(server, convert_connect))
            },
        )
        .await?;
        self.process_stream(context, first, raw)
    }

    fn process_stream(
        &self,
        context: Context,
        first: RawEvent,
        raw: RawStream<RawEvent>,
    ) -> Result<ProcessStream> {
        match first {
            RawEvent::Start(pid) => {
                tracing::debug!(sandbox_id = %self.sandbox_id, pid, op = context.op, "process stream started");
                Ok(ProcessStream {
                    pid,
                    raw,
                    context,
                    sandbox_id: Arc::clone(&self.sandbox_id),
                    ended: false,
                    finished: false,
                })
            }
            other => Err(Error::protocol(
                context,
                format!("expected a start event first, got {other:?}"),
            )),
        }
    }

    /// Every live process.
    ///
    /// # Errors
    /// As any unary call; `options.user` must be unset.
    pub async fn list_processes(&self, options: &CallOptions) -> Result<Vec<ProcessInfo>> {
        let context = Context::new("list processes", "");
        let call = self.anonymous_call(&context, options)?;
        let response = self.unary(
            &context,
            self.process
                .list_with_options(pb::ListRequest::default(), call)
                .await,
        )?;
        Ok(response
            .processes
            .into_iter()
            .map(|info| {
                let config = info.config.into_option().unwrap_or_default();
                ProcessInfo {
                    pid: info.pid,
                    tag: info.tag,
                    cmd: config.cmd,
                    args: config.args,
                    envs: config.envs.into_iter().collect(),
                    cwd: config.cwd,
                }
            })
            .collect())
    }

    /// Writes `data` to the process's stdin pipe.
    ///
    /// # Errors
    /// [`Error::NotFound`] for an unknown process; `internal` (as
    /// [`Error::Rpc`]) when stdin is closed, disabled or the process has a
    /// PTY.
    pub async fn send_stdin(
        &self,
        selector: impl Into<Selector>,
        data: Bytes,
        options: &CallOptions,
    ) -> Result<()> {
        self.send_input(selector.into(), ProcessInput::Stdin(data), options)
            .await
    }

    /// Writes `data` to the process's PTY.
    ///
    /// # Errors
    /// As [`Envd::send_stdin`]; `internal` for a process without a PTY.
    pub async fn send_pty_input(
        &self,
        selector: impl Into<Selector>,
        data: Bytes,
        options: &CallOptions,
    ) -> Result<()> {
        self.send_input(selector.into(), ProcessInput::Pty(data), options)
            .await
    }

    async fn send_input(
        &self,
        selector: Selector,
        input: ProcessInput,
        options: &CallOptions,
    ) -> Result<()> {
        let (context, call) = self.process_call("send input to process", &selector, options)?;
        let request = pb::SendInputRequest {
            process: buffa::MessageField::some(selector.to_proto()),
            input: buffa::MessageField::some(input.to_proto()),
            ..Default::default()
        };
        self.unary(
            &context,
            self.process.send_input_with_options(request, call).await,
        )?;
        Ok(())
    }

    /// Sends `signal` to the process (not its group).
    ///
    /// # Errors
    /// [`Error::NotFound`] for an unknown process.
    pub async fn send_signal(
        &self,
        selector: impl Into<Selector>,
        signal: Signal,
        options: &CallOptions,
    ) -> Result<()> {
        let selector = selector.into();
        let (context, call) = self.process_call("signal process", &selector, options)?;
        let request = pb::SendSignalRequest {
            process: buffa::MessageField::some(selector.to_proto()),
            signal: match signal {
                Signal::Term => pb::Signal::SIGNAL_SIGTERM,
                Signal::Kill => pb::Signal::SIGNAL_SIGKILL,
            }
            .into(),
            ..Default::default()
        };
        self.unary(
            &context,
            self.process.send_signal_with_options(request, call).await,
        )?;
        Ok(())
    }

    /// Closes the process's stdin pipe so it reads EOF (a no-op when already
    /// closed; needs envd ≥ 0.5.2).
    ///
    /// # Errors
    /// [`Error::NotFound`] for an unknown process; `unknown` for a PTY
    /// process (send byte 0x04 instead).
    pub async fn close_stdin(
        &self,
        selector: impl Into<Selector>,
        options: &CallOptions,
    ) -> Result<()> {
        let selector = selector.into();
        let (context, call) = self.process_call("close stdin of process", &selector, options)?;
        let request = pb::CloseStdinRequest {
            process: buffa::MessageField::some(selector.to_proto()),
            ..Default::default()
        };
        self.unary(
            &context,
            self.process.close_stdin_with_options(request, call).await,
        )?;
        Ok(())
    }

    /// Resizes the process's PTY.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for a zero dimension; `internal` for a
    /// process without a PTY.
    pub async fn resize_pty(
        &self,
        selector: impl Into<Selector>,
        size: PtySize,
        options: &CallOptions,
    ) -> Result<()> {
        let selector = selector.into();
        let (context, call) = self.process_call("resize PTY of process", &selector, options)?;
        size.validate(&context)?;
        let request = pb::UpdateRequest {
            process: buffa::MessageField::some(selector.to_proto()),
            pty: buffa::MessageField::some(pty_proto(size)),
            ..Default::default()
        };
        self.unary(
            &context,
            self.process.update_with_options(request, call).await,
        )?;
        Ok(())
    }

    /// Streams `input` to the process over one client-streaming request
    /// (`StreamInput`), returning when `input` ends and envd has written
    /// every item (envd answers only then, or at the first item it could not
    /// write, which ends the request). Here an unset `options.timeout` means
    /// no bound (the stream lasts as long as the caller feeds it).
    ///
    /// While `input` yields nothing for [`DEFAULT_KEEPALIVE_INTERVAL`] a
    /// keepalive event is sent (envd ignores it): an idle request body is
    /// what proxies on the way time out.
    ///
    /// Dropping the future aborts the request; input not yet sent is lost.
    ///
    /// # Errors
    /// As [`Envd::send_stdin`]; an envd without `StreamInput` answers
    /// `unimplemented` (as [`Error::Rpc`]).
    ///
    /// [`DEFAULT_KEEPALIVE_INTERVAL`]: crate::DEFAULT_KEEPALIVE_INTERVAL
    pub async fn stream_input<S>(
        &self,
        selector: impl Into<Selector>,
        input: S,
        options: &CallOptions,
    ) -> Result<()>
    where
        S: Stream<Item = ProcessInput> + Send + 'static,
    {
        use envd_proto::process::__buffa::oneof::stream_input_request::Event as InputEvent;
        let selector = selector.into();
        let unbounded_by_default = CallOptions {
            timeout: match options.timeout {
                Bound::Default => Bound::Unlimited,
                other => other,
            },
            ..options.clone()
        };
        let (context, call) =
            self.process_call("stream input to process", &selector, &unbounded_by_default)?;
        let start = pb::StreamInputRequest {
            event: Some(InputEvent::Start(Box::new(
                pb::stream_input_request::StartEvent {
                    process: buffa::MessageField::some(selector.to_proto()),
                    ..Default::default()
                },
            ))),
            ..Default::default()
        };
        let data = keepalive_when_idle(input, DEFAULT_KEEPALIVE_INTERVAL).map(|item| {
            pb::StreamInputRequest {
                event: Some(match item {
                    Some(item) => InputEvent::Data(Box::new(pb::stream_input_request::DataEvent {
                        input: buffa::MessageField::some(item.to_proto()),
                        ..Default::default()
                    })),
                    None => InputEvent::Keepalive(Box::default()),
                }),
                ..Default::default()
            }
        });
        let requests = futures::stream::once(async move { start }).chain(data);
        self.unary(
            &context,
            self.process.stream_input_with_options(requests, call).await,
        )?;
        Ok(())
    }

    /// Context and options of a unary call addressing one process; such
    /// calls never act as a user.
    fn process_call(
        &self,
        op: &'static str,
        selector: &Selector,
        options: &CallOptions,
    ) -> Result<(Context, connectrpc::client::CallOptions)> {
        let context = Context::new(op, selector.to_string());
        selector.validate(&context)?;
        let call = self.anonymous_call(&context, options)?;
        Ok((context, call))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn command_validation_rejects_bad_input() {
        let context = Context::new("start process", "x");
        let cases = [
            Command::new(""),
            Command::new("ls").arg("a\0b"),
            Command::new("ls").env("", "v"),
            Command::new("ls").env("A=B", "v"),
            Command::new("ls").env("A", "v\0"),
            Command::new("ls").cwd("/tmp\0"),
            Command::new("ls").pty(PtySize { cols: 0, rows: 24 }),
        ];
        for command in cases {
            let err = command.validate(&context).unwrap_err();
            assert!(
                matches!(err, Error::InvalidArgument { .. }),
                "{command:?}: {err:?}"
            );
        }
        Command::shell("echo hi")
            .env("A", "1")
            .validate(&context)
            .unwrap();
    }

    #[test]
    fn shell_matches_the_sdk() {
        let command = Command::shell("echo hi");
        assert_eq!(command.program(), "/bin/bash");
        assert_eq!(command.args, ["-l", "-c", "echo hi"]);
    }

    #[test]
    fn start_request_carries_every_field() {
        let request = Command::new("/bin/cat")
            .arg("-")
            .env("X", "1")
            .cwd("/tmp")
            .tag("t1")
            .stdin(true)
            .pty(PtySize { cols: 80, rows: 24 })
            .to_proto();
        let process = request.process.as_option().unwrap();
        assert_eq!(process.cmd, "/bin/cat");
        assert_eq!(process.args, ["-"]);
        assert_eq!(process.envs.get("X").map(String::as_str), Some("1"));
        assert_eq!(process.cwd.as_deref(), Some("/tmp"));
        assert_eq!(request.tag.as_deref(), Some("t1"));
        assert_eq!(request.stdin, Some(true));
        let size = request.pty.as_option().unwrap().size.as_option().unwrap();
        assert_eq!((size.cols, size.rows), (80, 24));
        // Unset stdin stays absent on the wire (envd's default: a pipe).
        assert_eq!(Command::new("x").to_proto().stdin, None);
    }

    #[test]
    fn selectors_display_and_validate() {
        assert_eq!(Selector::from(7).to_string(), "pid 7");
        assert_eq!(Selector::Tag("a".into()).to_string(), "tag \"a\"");
        let context = Context::new("signal process", "tag");
        assert!(Selector::Tag(String::new()).validate(&context).is_err());
    }

    #[tokio::test(start_paused = true)]
    async fn idle_input_gets_keepalives_and_items_are_never_lost() {
        let (tx, rx) = futures::channel::mpsc::unbounded();
        let mut events = Box::pin(keepalive_when_idle(rx, Duration::from_secs(50)));
        let first = tokio::spawn(async move {
            tokio::time::sleep(Duration::from_secs(120)).await;
            tx.unbounded_send(ProcessInput::Stdin(Bytes::from_static(b"a")))
                .unwrap();
            tokio::time::sleep(Duration::from_secs(10)).await;
            tx.unbounded_send(ProcessInput::Stdin(Bytes::from_static(b"b")))
                .unwrap();
        });
        let mut seen = Vec::new();
        while let Some(item) = events.next().await {
            seen.push(item.map(|input| match input {
                ProcessInput::Stdin(bytes) | ProcessInput::Pty(bytes) => bytes,
            }));
        }
        first.await.unwrap();
        assert_eq!(
            seen,
            [
                None,
                None,
                Some(Bytes::from_static(b"a")),
                Some(Bytes::from_static(b"b"))
            ],
            "a keepalive at 50 s and 100 s of silence, none between items 10 s apart"
        );
    }

    #[test]
    fn share_slices_inside_and_copies_outside() {
        let backing = Bytes::from_static(b"hello world");
        let inside = share(&backing, &backing[6..]);
        assert_eq!(&inside[..], b"world");
        assert_eq!(inside.as_ptr(), backing[6..].as_ptr());
        let outside = share(&backing, b"other");
        assert_eq!(&outside[..], b"other");
        assert!(share(&backing, b"").is_empty());
    }
}
