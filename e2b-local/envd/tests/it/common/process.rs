//! Helpers for driving `process.Process` through the generated client.

use std::collections::HashMap;
use std::time::Duration;

use buffa::view::MessageView;
use connectrpc::client::{CallOptions, ClientTransport, HttpClient, ServerStream};
use connectrpc::{ConnectError, HasMessageView};
use envd_proto::process::process_event::data_event::Output;
use envd_proto::process::process_event::{EndEvent, Event};
use envd_proto::process::process_input::Input;
use envd_proto::process::process_selector::Selector;
use envd_proto::process::{
    CloseStdinRequest, ConnectRequest, ConnectResponse, PTY, ProcessClient, ProcessConfig,
    ProcessEvent, ProcessInput, ProcessSelector, SendInputRequest, SendSignalRequest, Signal,
    StartRequest, StartResponse, StartResponseView, pty,
};

/// A `Start` stream as the generated client returns it.
pub type StartStream =
    ServerStream<<HttpClient as ClientTransport>::ResponseBody, StartResponseView<'static>>;

/// What a `Start` stream delivered.
#[derive(Debug, Default)]
pub struct Outcome {
    pub pid: u32,
    pub stdout: Vec<u8>,
    pub stderr: Vec<u8>,
    pub pty: Vec<u8>,
    pub chunks: Vec<usize>,
    pub keepalives: usize,
    pub end: Option<EndEvent>,
    pub error: Option<ConnectError>,
    /// Event kinds in arrival order: "start", "data", "keepalive", "end".
    pub order: Vec<&'static str>,
}

impl Outcome {
    pub fn stdout_text(&self) -> String {
        String::from_utf8_lossy(&self.stdout).into_owned()
    }
    pub fn stderr_text(&self) -> String {
        String::from_utf8_lossy(&self.stderr).into_owned()
    }
    pub fn end(&self) -> &EndEvent {
        self.end
            .as_ref()
            .unwrap_or_else(|| panic!("no end event: {self:?}"))
    }
}

pub fn shell(script: &str) -> StartRequest {
    StartRequest {
        process: ProcessConfig {
            cmd: "/bin/bash".to_owned(),
            args: vec!["-c".to_owned(), script.to_owned()],
            ..Default::default()
        }
        .into(),
        stdin: Some(false),
        ..Default::default()
    }
}

pub fn command(cmd: &str, args: &[&str]) -> StartRequest {
    StartRequest {
        process: ProcessConfig {
            cmd: cmd.to_owned(),
            args: args.iter().map(|arg| (*arg).to_owned()).collect(),
            ..Default::default()
        }
        .into(),
        ..Default::default()
    }
}

pub fn with_envs(mut request: StartRequest, envs: &[(&str, &str)]) -> StartRequest {
    let mut map: HashMap<String, String> = HashMap::new();
    for (name, value) in envs {
        map.insert((*name).to_owned(), (*value).to_owned());
    }
    request.process.get_or_insert_default().envs = map.into_iter().collect();
    request
}

pub fn with_cwd(mut request: StartRequest, cwd: &str) -> StartRequest {
    request.process.get_or_insert_default().cwd = Some(cwd.to_owned());
    request
}

/// Records one event (of a `Start` or `Connect` response) into `outcome`.
pub fn record(outcome: &mut Outcome, event: impl Into<Option<ProcessEvent>>) {
    match event.into().and_then(|event| event.event) {
        Some(Event::Start(start)) => {
            outcome.pid = start.pid;
            outcome.order.push("start");
        }
        Some(Event::Data(data)) => {
            outcome.order.push("data");
            match data.output {
                Some(Output::Stdout(bytes)) => {
                    outcome.chunks.push(bytes.len());
                    outcome.stdout.extend(bytes);
                }
                Some(Output::Stderr(bytes)) => {
                    outcome.chunks.push(bytes.len());
                    outcome.stderr.extend(bytes);
                }
                Some(Output::Pty(bytes)) => {
                    outcome.chunks.push(bytes.len());
                    outcome.pty.extend(bytes);
                }
                None => panic!("data event without output"),
            }
        }
        Some(Event::End(end)) => {
            outcome.order.push("end");
            outcome.end = Some(*end);
        }
        Some(Event::Keepalive(_)) => {
            outcome.order.push("keepalive");
            outcome.keepalives += 1;
        }
        None => panic!("event without a kind"),
    }
}

/// Starts `request` and reads the stream to its end.
pub async fn run(client: &ProcessClient<HttpClient>, request: StartRequest) -> Outcome {
    run_with(client, request, CallOptions::default()).await
}

pub async fn run_with(
    client: &ProcessClient<HttpClient>,
    request: StartRequest,
    options: CallOptions,
) -> Outcome {
    match client.start_with_options(request, options).await {
        Ok(stream) => finish(stream).await,
        Err(err) => Outcome {
            error: Some(err),
            ..Outcome::default()
        },
    }
}

/// Starts `request` and reads only the start event: returns the pid and the open stream.
pub async fn started(
    client: &ProcessClient<HttpClient>,
    request: StartRequest,
) -> (u32, StartStream) {
    let mut stream = client.start(request).await.expect("start");
    let mut outcome = Outcome::default();
    let first = stream
        .message()
        .await
        .expect("start stream")
        .expect("a start event");
    record(&mut outcome, first.to_owned_message().event);
    assert_eq!(outcome.order, ["start"], "the first event is start");
    (outcome.pid, stream)
}

/// Reads a `Start` stream to its end (within 30 s).
pub async fn finish(stream: StartStream) -> Outcome {
    drain(stream, |response: StartResponse| {
        response.event.into_option()
    })
    .await
}

/// `Connect`s to `selector` and reads the stream to its end (within 30 s).
pub async fn attach(client: &ProcessClient<HttpClient>, selector: ProcessSelector) -> Outcome {
    let request = ConnectRequest {
        process: selector.into(),
        ..Default::default()
    };
    match client.connect(request).await {
        Ok(stream) => {
            drain(stream, |response: ConnectResponse| {
                response.event.into_option()
            })
            .await
        }
        Err(err) => Outcome {
            error: Some(err),
            ..Outcome::default()
        },
    }
}

/// Records every event of a `Start` or `Connect` stream until its end.
async fn drain<V, M>(
    mut stream: ServerStream<<HttpClient as ClientTransport>::ResponseBody, V>,
    event: fn(M) -> Option<ProcessEvent>,
) -> Outcome
where
    V: MessageView<'static, Owned = M> + Send,
    M: HasMessageView<View<'static> = V> + buffa::Message + connectrpc::JsonDeserialize,
{
    let mut outcome = Outcome::default();
    loop {
        let message = tokio::time::timeout(Duration::from_secs(30), stream.message())
            .await
            .expect("stream ends in time");
        match message {
            Ok(Some(message)) => record(&mut outcome, event(message.to_owned_message())),
            Ok(None) => break,
            Err(err) => {
                outcome.error = Some(err);
                break;
            }
        }
    }
    outcome
}

pub fn by_pid(pid: u32) -> ProcessSelector {
    ProcessSelector {
        selector: Some(Selector::Pid(pid)),
        ..Default::default()
    }
}

pub fn by_tag(tag: &str) -> ProcessSelector {
    ProcessSelector {
        selector: Some(Selector::Tag(tag.to_owned())),
        ..Default::default()
    }
}

/// `SendInput` of `input` to `selector`.
pub fn send_input(selector: ProcessSelector, input: Input) -> SendInputRequest {
    SendInputRequest {
        process: selector.into(),
        input: ProcessInput {
            input: Some(input),
            ..Default::default()
        }
        .into(),
        ..Default::default()
    }
}

/// `SendSignal` of `signal` to `pid`.
pub fn signal(pid: u32, signal: Signal) -> SendSignalRequest {
    SendSignalRequest {
        process: by_pid(pid).into(),
        signal: signal.into(),
        ..Default::default()
    }
}

/// `CloseStdin` of `pid`.
pub fn close_stdin(pid: u32) -> CloseStdinRequest {
    CloseStdinRequest {
        process: by_pid(pid).into(),
        ..Default::default()
    }
}

/// `request` started on a new `cols`×`rows` terminal instead of pipes.
pub fn on_pty(mut request: StartRequest, cols: u32, rows: u32) -> StartRequest {
    request.stdin = None;
    request.pty = Some(PTY {
        size: pty::Size {
            cols,
            rows,
            ..Default::default()
        }
        .into(),
        ..Default::default()
    })
    .into();
    request
}
