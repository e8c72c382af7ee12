//! Fake processes: programs run as tasks on the plugin's runtime, with
//! output plumbing that honours every output mode.
//!
//! Programs (by `argv[0]` or its basename under `/probe/bin/`):
//!
//! | program | behaviour |
//! |---|---|
//! | `echo-argv` | prints each argv element on its own line on stdout, `stderr of <pid>` on stderr; exits with `$PROBE_EXIT_CODE` (spec env, default 0) |
//! | `exit <code>` | exits with `code`, no output |
//! | `cat` | copies stdin to stdout until stdin is closed, exits 0 |
//! | `sleep` | runs until terminated (or its timeout) |
//! | `flood <n>` | writes `n` chunks of 4096 bytes to stdout (byte = chunk index), lazily |
//! | `state` | prints the world's counters (see [`crate::magic::Counters`]) as JSON |
//! | `fs …`, `e2b …` | calls the injected services (see [`crate::script`]) |
//!
//! Pipes are bounded channels of [`PIPE_CHUNKS`] chunks: an unread pipe
//! stops the program (backpressure). Collect keeps the last `limit` bytes.
//! Inherit and null discard (a probe does not write to the host's
//! terminal) but count. `terminate` ends the program with SIGTERM; a
//! timeout ends it with SIGKILL and `timed_out`.

use std::collections::BTreeMap;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use dsh_plugin_api::fs::FsProvider;
use dsh_plugin_api::owner::Owner;
use dsh_plugin_api::stream::{ByteStream, ByteWriter};
use dsh_plugin_api::subprocess::{
    ExitStatus, OutputMode, OutputSnapshot, OutputStream, Process, Signal, SpawnSpec, StdinMode,
};
use dsh_plugin_api::{Bytes, Error, Result, async_trait};
use tokio::sync::mpsc;

use crate::exit::Exit;
use crate::magic::Counters;
use crate::script;

/// Capacity of a pipe, in chunks.
pub const PIPE_CHUNKS: usize = 4;

/// Chunk size of `flood`.
pub const FLOOD_CHUNK: usize = 4096;

/// The programs the fake world knows.
pub const PROGRAMS: [&str; 8] = [
    "echo-argv",
    "exit",
    "cat",
    "sleep",
    "flood",
    "state",
    "fs",
    "e2b",
];

/// The program name of `argv[0]` (`/probe/bin/cat` → `cat`).
pub fn program_name(argv0: &str) -> &str {
    argv0.strip_prefix("/probe/bin/").unwrap_or(argv0)
}

/// The retained tail of one collected stream.
#[derive(Debug, Default)]
struct Tail {
    total: u64,
    bytes: Vec<u8>,
    limit: usize,
    truncated: bool,
}

impl Tail {
    fn push(&mut self, chunk: &[u8]) {
        self.total += chunk.len() as u64;
        self.bytes.extend_from_slice(chunk);
        if self.bytes.len() > self.limit {
            let excess = self.bytes.len() - self.limit;
            self.bytes.drain(..excess);
            self.truncated = true;
        }
    }

    fn snapshot(&self, offset: u64, max_len: usize) -> OutputSnapshot {
        let start = self.total - self.bytes.len() as u64;
        let offset = offset.clamp(start, self.total);
        let from = (offset - start) as usize;
        let to = (from + max_len).min(self.bytes.len());
        OutputSnapshot {
            total: self.total,
            offset,
            bytes: Bytes::copy_from_slice(&self.bytes[from..to]),
            truncated: self.truncated,
            spill: None,
        }
    }
}

/// Where a program's output stream goes.
pub struct Sink {
    mode: OutputMode,
    pipe: Option<mpsc::Sender<Bytes>>,
    tail: Arc<Mutex<Tail>>,
}

impl Sink {
    fn new(mode: OutputMode) -> (Sink, Option<ByteStream>, Arc<Mutex<Tail>>) {
        let limit = match mode {
            OutputMode::Collect { limit } => limit,
            _ => 0,
        };
        let tail = Arc::new(Mutex::new(Tail {
            limit,
            ..Tail::default()
        }));
        let (pipe, stream) = if mode == OutputMode::Pipe {
            let (sender, receiver) = mpsc::channel::<Bytes>(PIPE_CHUNKS);
            let stream: ByteStream = Box::pin(futures::stream::unfold(
                receiver,
                |mut receiver| async move { receiver.recv().await.map(|chunk| (Ok(chunk), receiver)) },
            ));
            (Some(sender), Some(stream))
        } else {
            (None, None)
        };
        (
            Sink {
                mode,
                pipe,
                tail: tail.clone(),
            },
            stream,
            tail,
        )
    }

    /// Writes a chunk; waits while a pipe is full. Empty chunks are dropped.
    pub async fn write(&mut self, chunk: impl Into<Bytes>) {
        let chunk = chunk.into();
        if chunk.is_empty() {
            return;
        }
        match self.mode {
            OutputMode::Collect { .. } => self
                .tail
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .push(&chunk),
            _ => {
                self.tail
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .total += chunk.len() as u64
            }
        }
        if let Some(pipe) = &self.pipe {
            // A reader that went away makes the rest of the output vanish,
            // like writes to a closed pipe that the program ignores.
            if pipe.send(chunk).await.is_err() {
                self.pipe = None;
            }
        }
    }
}

/// A running program's I/O and environment.
pub struct Io {
    pub stdin: Option<mpsc::Receiver<Bytes>>,
    pub stdout: Sink,
    pub stderr: Sink,
}

/// What programs may use besides their I/O.
#[derive(Clone)]
pub struct World {
    pub counters: Arc<Counters>,
    pub fs: Option<Arc<dyn FsProvider>>,
    pub e2b: Option<Arc<dyn Owner>>,
}

/// The stdin writer of a fake process.
struct StdinWriter {
    sender: Option<mpsc::Sender<Bytes>>,
}

#[async_trait]
impl ByteWriter for StdinWriter {
    async fn write(&mut self, chunk: Bytes) -> Result<()> {
        let Some(sender) = &self.sender else {
            return Err(Error::closed("write: stdin was closed"));
        };
        sender
            .send(chunk)
            .await
            .map_err(|_| Error::closed("write: the process no longer reads stdin"))
    }

    async fn close(&mut self) -> Result<()> {
        self.sender = None;
        Ok(())
    }
}

/// A fake process handle.
pub struct FakeProcess {
    pid: u32,
    stdin: Mutex<Option<Box<dyn ByteWriter>>>,
    stdout: Mutex<Option<ByteStream>>,
    stderr: Mutex<Option<ByteStream>>,
    tails: [Arc<Mutex<Tail>>; 2],
    status: Exit,
    task: Mutex<Option<tokio::task::AbortHandle>>,
}

impl FakeProcess {
    /// Starts `spec` (already validated, program known) as a task of the
    /// current (plugin) runtime.
    pub fn start(pid: u32, spec: SpawnSpec, world: World) -> Arc<FakeProcess> {
        let (stdin_writer, stdin) = match spec.stdin {
            StdinMode::Pipe => {
                let (sender, receiver) = mpsc::channel::<Bytes>(PIPE_CHUNKS);
                (
                    Some(Box::new(StdinWriter {
                        sender: Some(sender),
                    }) as Box<dyn ByteWriter>),
                    Some(receiver),
                )
            }
            StdinMode::Null => (None, None),
        };
        let (stdout, stdout_stream, stdout_tail) = Sink::new(spec.stdout);
        let (stderr, stderr_stream, stderr_tail) = Sink::new(spec.stderr);
        let process = Arc::new(FakeProcess {
            pid,
            stdin: Mutex::new(stdin_writer),
            stdout: Mutex::new(stdout_stream),
            stderr: Mutex::new(stderr_stream),
            tails: [stdout_tail, stderr_tail],
            status: Exit::default(),
            task: Mutex::new(None),
        });
        let io = Io {
            stdin,
            stdout,
            stderr,
        };
        let done = process.status.clone();
        let timeout = spec.timeout;
        let task = tokio::spawn(async move {
            let program = run(pid, spec.argv, spec.env, io, world);
            let status = match timeout {
                None => ExitStatus {
                    code: Some(program.await),
                    signal: None,
                    timed_out: false,
                },
                Some(limit) => match tokio::time::timeout(limit, program).await {
                    Ok(code) => ExitStatus {
                        code: Some(code),
                        signal: None,
                        timed_out: false,
                    },
                    Err(_) => ExitStatus {
                        code: None,
                        signal: Some(Signal::KILL),
                        timed_out: true,
                    },
                },
            };
            done.settle(status);
        });
        *process.task.lock().unwrap_or_else(PoisonError::into_inner) = Some(task.abort_handle());
        process
    }

    /// Ends the program with `signal` unless it already ended.
    pub fn kill(&self, signal: Signal) {
        self.status.settle(ExitStatus {
            code: None,
            signal: Some(signal),
            timed_out: false,
        });
        if let Some(task) = self
            .task
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take()
        {
            task.abort();
        }
    }
}

async fn run(
    pid: u32,
    argv: Vec<String>,
    env: BTreeMap<String, String>,
    mut io: Io,
    world: World,
) -> i32 {
    let args = &argv[1..];
    match program_name(&argv[0]) {
        "echo-argv" => {
            for arg in &argv {
                io.stdout.write(format!("{arg}\n").into_bytes()).await;
            }
            io.stderr
                .write(format!("stderr of {pid}\n").into_bytes())
                .await;
            env.get("PROBE_EXIT_CODE")
                .and_then(|code| code.parse().ok())
                .unwrap_or(0)
        }
        "exit" => args.first().and_then(|code| code.parse().ok()).unwrap_or(0),
        "cat" => {
            if let Some(stdin) = io.stdin.as_mut() {
                while let Some(chunk) = stdin.recv().await {
                    io.stdout.write(chunk).await;
                }
            }
            0
        }
        "sleep" => loop {
            tokio::time::sleep(Duration::from_secs(3600)).await;
        },
        "flood" => {
            let count: usize = args
                .first()
                .and_then(|count| count.parse().ok())
                .unwrap_or(0);
            for index in 0..count {
                world
                    .counters
                    .chunks_produced
                    .fetch_add(1, Ordering::SeqCst);
                io.stdout.write(vec![index as u8; FLOOD_CHUNK]).await;
            }
            0
        }
        "state" => {
            io.stdout
                .write(world.counters.snapshot().to_string().into_bytes())
                .await;
            0
        }
        "fs" => script::run_fs(world.fs.as_ref(), args, &mut io).await,
        "e2b" => script::run_e2b(world.e2b.as_ref(), args, &mut io).await,
        other => {
            io.stderr
                .write(format!("{other}: unknown program\n").into_bytes())
                .await;
            127
        }
    }
}

#[async_trait]
impl Process for FakeProcess {
    fn pid(&self) -> u32 {
        self.pid
    }

    fn take_stdin(&self) -> Option<Box<dyn ByteWriter>> {
        self.stdin
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take()
    }

    fn take_stdout(&self) -> Option<ByteStream> {
        self.stdout
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take()
    }

    fn take_stderr(&self) -> Option<ByteStream> {
        self.stderr
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take()
    }

    async fn wait(&self) -> Result<ExitStatus> {
        self.status.wait().await
    }

    async fn read_output(
        &self,
        stream: OutputStream,
        offset: u64,
        max_len: usize,
    ) -> Result<OutputSnapshot> {
        let tail = match stream {
            OutputStream::Stdout => &self.tails[0],
            OutputStream::Stderr => &self.tails[1],
        };
        Ok(tail
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .snapshot(offset, max_len))
    }

    async fn terminate(&self, _grace: Duration) -> Result<()> {
        self.kill(Signal::TERM);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tails_keep_the_last_bytes_and_clamp_offsets() {
        let mut tail = Tail {
            limit: 4,
            ..Tail::default()
        };
        tail.push(b"abc");
        tail.push(b"def");
        let snapshot = tail.snapshot(0, 100);
        assert_eq!(snapshot.total, 6);
        assert_eq!(snapshot.offset, 2);
        assert_eq!(snapshot.bytes, &b"cdef"[..]);
        assert!(snapshot.truncated);
        assert_eq!(tail.snapshot(4, 1).bytes, &b"e"[..]);
        assert_eq!(tail.snapshot(99, 10).bytes, &b""[..]);
    }
}
