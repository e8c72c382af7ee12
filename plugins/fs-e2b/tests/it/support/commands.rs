//! [`EnvdCommands`]: a minimal `subprocess` provider over envd's `Start`,
//! for the conformance kit's fixtures only (symlinks, modes and FIFOs the
//! `fs` seam cannot make). It is test support, not the E2B subprocess
//! provider: it runs a command with piped output and reports how it ended;
//! it does not feed stdin (the kit writes files through `fs`, so its
//! fixtures send none), has no terminals, no output retention and no
//! process-group control. Whatever it does not do fails with
//! `Unsupported`, saying so.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use dsh_plugin_api::stream::{ByteStream, ByteWriter};
use dsh_plugin_api::subprocess::{
    ExitStatus, OutputMode, OutputSnapshot, OutputStream, Process, Signal, SpawnSpec, StdinMode,
    SubprocessProvider, Terminal, TerminalSpec,
};
use dsh_plugin_api::{Bytes, Error, ErrorKind, Result, async_trait};
use e2b_client::{Command, Envd, ProcessEvent, SandboxTransport, StreamOptions};
use futures::StreamExt;
use tokio::sync::{mpsc, watch};

/// Runs fixture commands in one sandbox as its default user.
pub struct EnvdCommands {
    envd: Envd<SandboxTransport>,
    cwd: String,
}

impl EnvdCommands {
    pub fn new(envd: Envd<SandboxTransport>, cwd: &str) -> EnvdCommands {
        EnvdCommands {
            envd,
            cwd: cwd.to_owned(),
        }
    }
}

fn unsupported(what: &str) -> Error {
    Error::new(
        ErrorKind::Unsupported,
        format!("{what}: not supported by the test fixture command provider"),
    )
}

#[async_trait]
impl SubprocessProvider for EnvdCommands {
    async fn resolve_executable(&self, _name: &str, _extra_path: &[String]) -> Result<String> {
        Err(unsupported("resolve_executable"))
    }

    async fn spawn(&self, spec: SpawnSpec) -> Result<Arc<dyn Process>> {
        spec.validate()?;
        let piped = |mode: &OutputMode| matches!(mode, OutputMode::Pipe | OutputMode::Null);
        if !piped(&spec.stdout) || !piped(&spec.stderr) || spec.spill.is_some() {
            return Err(unsupported("spawn with collect, inherit or spill output"));
        }
        let command = Command::new(spec.argv[0].clone())
            .args(spec.argv[1..].iter().cloned())
            .envs(spec.env.clone())
            .cwd(spec.cwd.clone().unwrap_or_else(|| self.cwd.clone()))
            .stdin(false);
        let mut options = StreamOptions::default();
        if let Some(timeout) = spec.timeout {
            options = options.timeout(timeout);
        }
        let mut stream = self
            .envd
            .start(&command, &options)
            .await
            .map_err(|err| Error::new(ErrorKind::Remote, err.to_string()))?;
        let pid = stream.pid();
        let (stdout_tx, stdout_rx) = mpsc::channel::<Result<Bytes>>(16);
        let (stderr_tx, stderr_rx) = mpsc::channel::<Result<Bytes>>(16);
        let (status_tx, status_rx) = watch::channel(None);
        let keep_stdout = matches!(spec.stdout, OutputMode::Pipe);
        let keep_stderr = matches!(spec.stderr, OutputMode::Pipe);
        tokio::spawn(async move {
            let mut status = Err(Error::new(
                ErrorKind::Remote,
                "the process stream ended without an end event",
            ));
            while let Some(event) = stream.next().await {
                match event {
                    Ok(ProcessEvent::Stdout(bytes)) if keep_stdout => {
                        let _ = stdout_tx.send(Ok(bytes)).await;
                    }
                    Ok(ProcessEvent::Stderr(bytes)) if keep_stderr => {
                        let _ = stderr_tx.send(Ok(bytes)).await;
                    }
                    Ok(ProcessEvent::End(end)) => {
                        status = Ok(ExitStatus {
                            code: end.exited.then_some(end.exit_code),
                            signal: (!end.exited).then_some(Signal::KILL),
                            timed_out: false,
                        });
                    }
                    Ok(_) => {}
                    Err(err) => {
                        status = Err(Error::new(ErrorKind::Remote, err.to_string()));
                        break;
                    }
                }
            }
            let _ = status_tx.send(Some(status));
        });
        Ok(Arc::new(EnvdProcess {
            pid,
            stdin: Mutex::new((spec.stdin == StdinMode::Pipe).then_some(NoInput)),
            stdout: Mutex::new(keep_stdout.then(|| receiver_stream(stdout_rx))),
            stderr: Mutex::new(keep_stderr.then(|| receiver_stream(stderr_rx))),
            status: status_rx,
            envd: self.envd.clone(),
        }))
    }

    async fn spawn_terminal(&self, _spec: TerminalSpec) -> Result<Arc<dyn Terminal>> {
        Err(unsupported("spawn_terminal"))
    }
}

fn receiver_stream(receiver: mpsc::Receiver<Result<Bytes>>) -> ByteStream {
    Box::pin(futures::stream::unfold(
        receiver,
        |mut receiver| async move { receiver.recv().await.map(|item| (item, receiver)) },
    ))
}

struct EnvdProcess {
    pid: u32,
    stdin: Mutex<Option<NoInput>>,
    stdout: Mutex<Option<ByteStream>>,
    stderr: Mutex<Option<ByteStream>>,
    status: watch::Receiver<Option<Result<ExitStatus>>>,
    envd: Envd<SandboxTransport>,
}

#[async_trait]
impl Process for EnvdProcess {
    fn pid(&self) -> u32 {
        self.pid
    }

    fn take_stdin(&self) -> Option<Box<dyn ByteWriter>> {
        self.stdin
            .lock()
            .unwrap()
            .take()
            .map(|input| Box::new(input) as Box<dyn ByteWriter>)
    }

    fn take_stdout(&self) -> Option<ByteStream> {
        self.stdout.lock().unwrap().take()
    }

    fn take_stderr(&self) -> Option<ByteStream> {
        self.stderr.lock().unwrap().take()
    }

    async fn wait(&self) -> Result<ExitStatus> {
        let mut status = self.status.clone();
        let done = status
            .wait_for(Option::is_some)
            .await
            .map_err(|_| Error::new(ErrorKind::Remote, "the process pump is gone"))?;
        done.clone().expect("waited for a status")
    }

    async fn read_output(
        &self,
        _stream: OutputStream,
        _offset: u64,
        _max_len: usize,
    ) -> Result<OutputSnapshot> {
        Err(unsupported("read_output"))
    }

    /// SIGKILLs the process (a fixture that hung), through a command: the
    /// direct child only, which is all a fixture `sh -c` runs here.
    async fn terminate(&self, _grace: Duration) -> Result<()> {
        if self.status.borrow().is_some() {
            return Ok(());
        }
        let kill = Command::new("/bin/kill")
            .args(["-KILL", &self.pid.to_string()])
            .stdin(false);
        let stream = self
            .envd
            .start(&kill, &StreamOptions::default())
            .await
            .map_err(|err| Error::new(ErrorKind::Remote, err.to_string()))?;
        stream
            .wait()
            .await
            .map_err(|err| Error::new(ErrorKind::Remote, err.to_string()))?;
        Ok(())
    }
}

/// The stdin of a fixture: fixtures send no input (envd starts them with
/// stdin on `/dev/null`), so only an empty write and close are accepted.
struct NoInput;

#[async_trait]
impl ByteWriter for NoInput {
    async fn write(&mut self, chunk: Bytes) -> Result<()> {
        if chunk.is_empty() {
            Ok(())
        } else {
            Err(unsupported("writing to a fixture's stdin"))
        }
    }

    async fn close(&mut self) -> Result<()> {
        Ok(())
    }
}
