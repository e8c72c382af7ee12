//! The `process.Process` Connect service (docs/e2b-protocol.md §5).

mod events;
mod exit;
mod fanout;
mod managed;
mod pty;
mod spawn;
pub(crate) mod table;

use std::sync::Arc;

use connectrpc::{
    ConnectError, InboundStream, RequestContext, Response, ServiceRequest, ServiceResult,
    ServiceStream,
};
use envd_proto::process::process_input::Input;
use envd_proto::process::process_selector::Selector as ProtoSelector;
use envd_proto::process::stream_input_request::Event as StreamInputEvent;
use envd_proto::process::{
    CloseStdinRequest, CloseStdinResponse, ConnectRequest, ConnectResponse, ListRequest,
    ListResponse, Process, ProcessInfo, ProcessInput, ProcessSelector, SendInputRequest,
    SendInputResponse, SendSignalRequest, SendSignalResponse, Signal, StartRequest, StartResponse,
    StreamInputRequest, StreamInputResponse, UpdateRequest, UpdateResponse,
};
use futures::StreamExt;

use crate::env_vars::validate_env_var;
use crate::paths::expand_and_resolve;
use crate::rpc_context::{request_timeout, request_user};
use crate::sandbox_log::Level;
use crate::state::Daemon;
use crate::stream_timing::keepalive_interval;
use managed::InputError;
pub(crate) use managed::ManagedProcess;
use spawn::{SpawnSpec, StdioMode};
use table::Selector;

/// The PATH commands get when the daemon itself has none.
const FALLBACK_PATH: &str = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

/// `process.Process` over the daemon's process table.
pub(crate) struct ProcessService {
    pub daemon: Arc<Daemon>,
}

fn selector(selector: &ProcessSelector) -> Result<Selector, ConnectError> {
    match &selector.selector {
        Some(ProtoSelector::Pid(pid)) => Ok(Selector::Pid(*pid)),
        Some(ProtoSelector::Tag(tag)) => Ok(Selector::Tag(tag.clone())),
        None => Err(ConnectError::invalid_argument(
            "process selector is required: set process.pid or process.tag",
        )),
    }
}

fn input_error(err: InputError) -> ConnectError {
    match err {
        InputError::Internal(message) => ConnectError::internal(message),
        InputError::Unknown(message) => ConnectError::unknown(message),
    }
}

impl ProcessService {
    fn live(&self, selector: &ProcessSelector) -> Result<Arc<ManagedProcess>, ConnectError> {
        let selector = self::selector(selector)?;
        self.daemon
            .processes
            .live(&selector)
            .ok_or_else(|| ConnectError::not_found(selector.not_found_message()))
    }

    async fn apply_input(
        process: &ManagedProcess,
        input: &ProcessInput,
    ) -> Result<(), ConnectError> {
        match &input.input {
            Some(Input::Stdin(data)) => process.write_stdin(data).await.map_err(input_error),
            Some(Input::Pty(data)) => process.write_pty(data).await.map_err(input_error),
            None => Err(ConnectError::invalid_argument(
                "input is required: set input.stdin or input.pty",
            )),
        }
    }

    /// Validates a `Start` request and builds what to spawn (errors are `invalid_argument`, as
    /// envd reports them before anything runs).
    fn spawn_spec(
        &self,
        request: &StartRequest,
        ctx: &RequestContext,
    ) -> Result<SpawnSpec, ConnectError> {
        let user = request_user(&self.daemon, ctx)?;
        let config = &request.process;
        if config.cmd.is_empty() {
            return Err(ConnectError::invalid_argument(
                "start: process.cmd is required",
            ));
        }
        if config.cmd.contains('\0') || config.args.iter().any(|arg| arg.contains('\0')) {
            return Err(ConnectError::invalid_argument(
                "start: process.cmd and process.args must not contain NUL bytes",
            ));
        }
        let cwd_request = config.cwd.as_deref().unwrap_or("");
        let cwd = expand_and_resolve(cwd_request, &user, self.daemon.default_workdir().as_deref())
            .map_err(|err| ConnectError::invalid_argument(err.to_string()))?;
        if !cwd.exists() {
            return Err(ConnectError::invalid_argument(format!(
                "cwd '{}' does not exist",
                cwd.display()
            )));
        }
        let groups = self.daemon.users.groups(&user).map_err(|err| {
            ConnectError::internal(format!(
                "start: supplementary groups of '{}': {err}",
                user.name
            ))
        })?;

        // envd's environment, later entries winning: PATH, the user's identity, the
        // sandbox-global variables, then the request's own.
        let mut env: Vec<(String, String)> = vec![
            (
                "PATH".to_owned(),
                std::env::var("PATH").unwrap_or_else(|_| FALLBACK_PATH.to_owned()),
            ),
            ("HOME".to_owned(), user.home.to_string_lossy().into_owned()),
            ("USER".to_owned(), user.name.clone()),
            ("LOGNAME".to_owned(), user.name.clone()),
        ];
        env.extend(
            self.daemon
                .settings()
                .env_vars
                .all()
                .map(|(name, value)| (name.to_owned(), value.to_owned())),
        );
        let mut request_envs: Vec<(&String, &String)> = config.envs.iter().collect();
        request_envs.sort();
        for (name, value) in request_envs {
            validate_env_var(name, value)
                .map_err(|err| ConnectError::invalid_argument(format!("start: {err}")))?;
            env.push((name.clone(), value.clone()));
        }

        let stdio = match request.pty.as_option() {
            Some(pty) => StdioMode::Pty {
                cols: pty.size.cols,
                rows: pty.size.rows,
            },
            None => StdioMode::Pipes {
                stdin: request.stdin.unwrap_or(true),
            },
        };
        Ok(SpawnSpec {
            cmd: config.cmd.clone(),
            args: config.args.clone(),
            env,
            cwd,
            uid: user.uid,
            gid: user.gid,
            groups,
            stdio,
        })
    }
}

fn start_response(event: envd_proto::process::ProcessEvent) -> StartResponse {
    StartResponse {
        event: event.into(),
        ..Default::default()
    }
}

fn connect_response(event: envd_proto::process::ProcessEvent) -> ConnectResponse {
    ConnectResponse {
        event: event.into(),
        ..Default::default()
    }
}

#[allow(
    refining_impl_trait,
    reason = "the generated service trait returns `impl Future`; ours are `async fn`"
)]
impl Process for ProcessService {
    async fn list(
        &self,
        _ctx: RequestContext,
        _request: ServiceRequest<'_, ListRequest>,
    ) -> ServiceResult<ListResponse> {
        let processes = self
            .daemon
            .processes
            .list()
            .into_iter()
            .map(|process| ProcessInfo {
                config: process.config.clone().into(),
                pid: process.pid,
                tag: process.tag.clone(),
                ..Default::default()
            })
            .collect();
        Ok(Response::new(ListResponse {
            processes,
            ..Default::default()
        }))
    }

    async fn connect(
        &self,
        ctx: RequestContext,
        request: ServiceRequest<'_, ConnectRequest>,
    ) -> ServiceResult<ServiceStream<ConnectResponse>> {
        let request = request.to_owned_message();
        let selector = selector(&request.process)?;
        let keepalive = keepalive_interval(ctx.headers());
        let deadline = request_timeout(&ctx)?
            .and(ctx.deadline())
            .map(tokio::time::Instant::from_std);
        let (pid, subscription) = match self.daemon.processes.live(&selector) {
            Some(process) => (process.pid, process.subscribe()),
            None => match self.daemon.processes.retained(&selector) {
                Some(exit) => (exit.pid, fanout::Subscription::Ended(exit.end)),
                None => return Err(ConnectError::not_found(selector.not_found_message())),
            },
        };
        Ok(Response::stream(events::process_events(
            pid,
            subscription,
            keepalive,
            deadline,
            connect_response,
        )))
    }

    async fn start(
        &self,
        ctx: RequestContext,
        request: ServiceRequest<'_, StartRequest>,
    ) -> ServiceResult<ServiceStream<StartResponse>> {
        let request = request.to_owned_message();
        let timeout = request_timeout(&ctx)?;
        let spec = self.spawn_spec(&request, &ctx)?;
        let keepalive = keepalive_interval(ctx.headers());
        // connectrpc computed the same deadline from the header; it ignores values beyond the
        // Connect spec's 10 digits, which then mean "no limit" here too (never an overflow).
        let deadline = timeout.and_then(|timeout| {
            ctx.deadline()
                .map(tokio::time::Instant::from_std)
                .or_else(|| tokio::time::Instant::now().checked_add(timeout))
        });

        let command_line = std::iter::once(spec.cmd.as_str())
            .chain(spec.args.iter().map(String::as_str))
            .collect::<Vec<_>>()
            .join(" ");
        let log = &self.daemon.log;
        let spawned = spawn::spawn(&spec).map_err(|err| {
            log.entry(
                Level::Error,
                "process",
                "Process failed to start",
                &[("cmd", command_line.clone()), ("error", err.to_string())],
            );
            ConnectError::invalid_argument(format!(
                "error starting process '{command_line}': {err}"
            ))
        })?;
        let daemon = Arc::clone(&self.daemon);
        let sequence = daemon.processes.next_sequence();
        let (process, subscription) = ManagedProcess::start(
            spawned,
            request.process.clone().into_option().unwrap_or_default(),
            request.tag.clone(),
            sequence,
            |process| self.daemon.processes.insert(Arc::clone(process)),
            move |process, end| {
                daemon.log.entry(
                    Level::Info,
                    "process",
                    "Process ended",
                    &[
                        ("pid", process.pid.to_string()),
                        ("exitCode", end.exit_code.to_string()),
                        ("status", end.status.clone()),
                    ],
                );
                daemon.processes.retire(process, end);
            },
        );
        let mut fields = vec![
            ("pid", process.pid.to_string()),
            ("cmd", command_line),
            ("uid", spec.uid.to_string()),
            ("cwd", spec.cwd.display().to_string()),
        ];
        if let Some(tag) = &request.tag {
            fields.push(("tag", tag.clone()));
        }
        log.entry(Level::Info, "process", "Process started", &fields);

        // The request timeout is also the process's lifetime (envd's exec.CommandContext):
        // past it the process is killed, whether or not a client is still attached.
        if let Some(deadline) = deadline {
            let process = Arc::clone(&process);
            tokio::spawn(async move {
                tokio::time::sleep_until(deadline).await;
                if !process.has_ended() {
                    process.stop_output();
                    if let Err(err) = process.signal(rustix::process::Signal::KILL) {
                        tracing::warn!(pid = process.pid, %err, "kill at deadline failed");
                    }
                }
            });
        }

        Ok(Response::stream(events::process_events(
            process.pid,
            subscription,
            keepalive,
            deadline,
            start_response,
        )))
    }

    async fn update(
        &self,
        _ctx: RequestContext,
        request: ServiceRequest<'_, UpdateRequest>,
    ) -> ServiceResult<UpdateResponse> {
        let request = request.to_owned_message();
        let process = self.live(&request.process)?;
        if let Some(pty) = request.pty.as_option() {
            process
                .resize(pty.size.cols, pty.size.rows)
                .map_err(input_error)?;
        }
        Ok(Response::new(UpdateResponse::default()))
    }

    async fn stream_input(
        &self,
        _ctx: RequestContext,
        mut requests: InboundStream<StreamInputRequest>,
    ) -> ServiceResult<StreamInputResponse> {
        let mut process: Option<Arc<ManagedProcess>> = None;
        while let Some(message) = requests.next().await {
            let message = message?.to_owned_message();
            match message.event {
                Some(StreamInputEvent::Start(start)) => {
                    process = Some(self.live(&start.process)?);
                }
                Some(StreamInputEvent::Data(data)) => {
                    let Some(process) = &process else {
                        return Err(ConnectError::failed_precondition(
                            "stream input: a start event selecting the process must come before data",
                        ));
                    };
                    Self::apply_input(process, &data.input).await?;
                }
                Some(StreamInputEvent::Keepalive(_)) => {}
                None => {
                    return Err(ConnectError::invalid_argument(
                        "stream input: event is required (start, data or keepalive)",
                    ));
                }
            }
        }
        Ok(Response::new(StreamInputResponse::default()))
    }

    async fn send_input(
        &self,
        _ctx: RequestContext,
        request: ServiceRequest<'_, SendInputRequest>,
    ) -> ServiceResult<SendInputResponse> {
        let request = request.to_owned_message();
        let process = self.live(&request.process)?;
        Self::apply_input(&process, &request.input).await?;
        Ok(Response::new(SendInputResponse::default()))
    }

    async fn send_signal(
        &self,
        _ctx: RequestContext,
        request: ServiceRequest<'_, SendSignalRequest>,
    ) -> ServiceResult<SendSignalResponse> {
        let request = request.to_owned_message();
        let process = self.live(&request.process)?;
        let signal = match request.signal.as_known() {
            Some(Signal::SIGNAL_SIGKILL) => rustix::process::Signal::KILL,
            Some(Signal::SIGNAL_SIGTERM) => rustix::process::Signal::TERM,
            _ => {
                return Err(ConnectError::unimplemented(format!(
                    "invalid signal: {}",
                    match request.signal.as_known() {
                        Some(known) => buffa::Enumeration::proto_name(&known).to_owned(),
                        None => request.signal.to_i32().to_string(),
                    }
                )));
            }
        };
        // As envd: after SIGKILL/SIGTERM stop reading output, so the end event comes promptly
        // even when orphans keep the pipes open.
        process.stop_output();
        process
            .signal(signal)
            .map_err(|err| ConnectError::internal(format!("error sending signal: {err}")))?;
        Ok(Response::new(SendSignalResponse::default()))
    }

    async fn close_stdin(
        &self,
        _ctx: RequestContext,
        request: ServiceRequest<'_, CloseStdinRequest>,
    ) -> ServiceResult<CloseStdinResponse> {
        let request = request.to_owned_message();
        let process = self.live(&request.process)?;
        process.close_stdin().await.map_err(input_error)?;
        Ok(Response::new(CloseStdinResponse::default()))
    }
}
