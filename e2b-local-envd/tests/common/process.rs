//! Helpers for driving `process.Process` through the generated client.
#![allow(dead_code)]

use std::collections::HashMap;

use connectrpc::ConnectError;
use connectrpc::client::{CallOptions, HttpClient};
use envd_proto::process::process_event::data_event::Output;
use envd_proto::process::process_event::{EndEvent, Event};
use envd_proto::process::{ProcessClient, ProcessConfig, StartRequest, StartResponse};

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

/// Records one event into `outcome`.
pub fn record(outcome: &mut Outcome, response: StartResponse) {
    match response.event.into_option().and_then(|event| event.event) {
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
    let mut outcome = Outcome::default();
    let mut stream = match client.start_with_options(request, options).await {
        Ok(stream) => stream,
        Err(err) => {
            outcome.error = Some(err);
            return outcome;
        }
    };
    loop {
        match stream.message().await {
            Ok(Some(message)) => record(&mut outcome, message.to_owned_message()),
            Ok(None) => break,
            Err(err) => {
                outcome.error = Some(err);
                break;
            }
        }
    }
    outcome
}
