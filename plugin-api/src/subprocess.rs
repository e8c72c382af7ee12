//! The `subprocess` seam: one-shot commands and interactive terminals of one
//! execution world (docs/design.md §5.2).
//!
//! Every spawned command is the leader of its own process group (`setsid`),
//! and its handle owns that group until `terminate` proves it empty or the
//! provider is disposed. Cancellation: dropping `spawn`'s future before it
//! resolves rolls the start back completely (nothing keeps running); dropping
//! a handle does **not** stop the process — the provider still owns its group
//! and terminates it on disposal.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;

use crate::durable::{AttachSpec, Attached, DurableCommand, DurableSpec, unsupported};
use crate::error::{Error, Result};
use crate::stream::{ByteStream, ByteWriter};
use bytes::Bytes;

/// A POSIX signal by its Linux number. Named constants cover the signals a
/// coding agent sends; any number can be carried.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Signal(pub i32);

impl Signal {
    pub const HUP: Signal = Signal(1);
    pub const INT: Signal = Signal(2);
    pub const QUIT: Signal = Signal(3);
    pub const KILL: Signal = Signal(9);
    pub const USR1: Signal = Signal(10);
    pub const USR2: Signal = Signal(12);
    pub const TERM: Signal = Signal(15);
    pub const CONT: Signal = Signal(18);
    pub const STOP: Signal = Signal(19);
    pub const TSTP: Signal = Signal(20);
    pub const WINCH: Signal = Signal(28);

    /// The conventional name (`"SIGTERM"`), if this is a named constant.
    pub fn name(self) -> Option<&'static str> {
        Some(match self {
            Signal::HUP => "SIGHUP",
            Signal::INT => "SIGINT",
            Signal::QUIT => "SIGQUIT",
            Signal::KILL => "SIGKILL",
            Signal::USR1 => "SIGUSR1",
            Signal::USR2 => "SIGUSR2",
            Signal::TERM => "SIGTERM",
            Signal::CONT => "SIGCONT",
            Signal::STOP => "SIGSTOP",
            Signal::TSTP => "SIGTSTP",
            Signal::WINCH => "SIGWINCH",
            _ => return None,
        })
    }
}

impl std::fmt::Display for Signal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.name() {
            Some(name) => f.write_str(name),
            None => write!(f, "signal {}", self.0),
        }
    }
}

/// Where a command's stdin comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum StdinMode {
    /// `/dev/null`.
    #[default]
    Null,
    /// A pipe written through [`Process::take_stdin`].
    Pipe,
}

/// What happens to one output stream (stdout or stderr).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OutputMode {
    /// Lossless raw bytes through [`Process::take_stdout`] /
    /// [`Process::take_stderr`], with backpressure: an unread pipe
    /// eventually stops the writer.
    Pipe,
    /// Copied to the host's own stdout / stderr.
    Inherit,
    /// The last `limit` bytes kept in host memory, with the total byte count
    /// and a truncation flag, readable through [`Process::read_output`].
    Collect { limit: usize },
    /// Discarded.
    Null,
    /// stderr only: written to stdout's own descriptor — one pipe for
    /// both, as `2>&1` in a shell — so the two are one byte sequence in
    /// the order the command wrote them, handled by stdout's mode (and
    /// spilled with stdout). The stderr stream itself then produces
    /// nothing: no pipe, `total` 0. As stdout's mode it is
    /// `InvalidInput`. Nothing about the command changes but where its
    /// fd 2 points, so `argv` reaches the world (and every decorator) as
    /// given; a provider that cannot share one pipe between two
    /// descriptors starts [`SpawnSpec::merged_by_shell`] instead.
    IntoStdout,
}

/// Which output stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum OutputStream {
    Stdout,
    Stderr,
}

impl OutputStream {
    /// `"stdout"` or `"stderr"`.
    pub fn as_str(self) -> &'static str {
        match self {
            OutputStream::Stdout => "stdout",
            OutputStream::Stderr => "stderr",
        }
    }
}

/// A lossless copy of both output streams in private files on the world's
/// disk, each cut at `limit` bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SpillSpec {
    pub limit: u64,
}

/// The default drain grace: how long collect/inherit output may stay open
/// after the direct child exited (see [`SpawnSpec::drain_grace`]).
pub const DEFAULT_DRAIN_GRACE: Duration = Duration::from_millis(500);

/// What to run and how.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SpawnSpec {
    /// Program and arguments; `argv[0]` is an absolute path, a bare name
    /// searched on the world's PATH, never a relative path with a separator.
    pub argv: Vec<String>,
    /// Working directory; `None` = the world's cwd. Must exist.
    pub cwd: Option<String>,
    /// Explicit environment entries, restored after the ambient environment
    /// has been scrubbed of `DSH_*` and credential-shaped names.
    pub env: BTreeMap<String, String>,
    pub stdin: StdinMode,
    pub stdout: OutputMode,
    pub stderr: OutputMode,
    pub spill: Option<SpillSpec>,
    /// Wall-clock limit: on expiry the group is terminated and `wait`
    /// reports `timed_out` with whatever output was produced.
    pub timeout: Option<Duration>,
    /// For collect/inherit output: after the direct child exits, how long
    /// descendants may keep the output open before it is disconnected and
    /// the status returned (the group stays owned for `terminate`).
    pub drain_grace: Duration,
}

impl SpawnSpec {
    /// A spec for `argv` with stdin null, both outputs piped, no spill, no
    /// timeout and the default drain grace.
    pub fn new<I, S>(argv: I) -> SpawnSpec
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        SpawnSpec {
            argv: argv.into_iter().map(Into::into).collect(),
            cwd: None,
            env: BTreeMap::new(),
            stdin: StdinMode::Null,
            stdout: OutputMode::Pipe,
            stderr: OutputMode::Pipe,
            spill: None,
            timeout: None,
            drain_grace: DEFAULT_DRAIN_GRACE,
        }
    }

    /// Rejects what must never reach a world: empty argv, an empty
    /// `argv[0]`, a relative program path containing `/`, NUL anywhere, and
    /// env names that are empty or contain `=` or NUL. Providers call this
    /// before anything starts.
    pub fn validate(&self) -> Result<()> {
        if self.stdout == OutputMode::IntoStdout {
            return Err(Error::invalid_input(
                "spawn: stdout cannot be IntoStdout (that is stderr's mode: 2>&1)",
            ));
        }
        validate_command("spawn", &self.argv, self.cwd.as_deref(), &self.env)
    }

    /// The default for a provider without a native [`OutputMode::IntoStdout`]:
    /// the same command under `sh -c 'exec "$@" 2>&1' sh <argv…>` with
    /// stderr [`OutputMode::Null`] — the shell replaces itself with the
    /// program (same pid and group), whose fd 2 is then its fd 1. Only the
    /// provider sees the wrapper: decorators in front of it saw `argv`
    /// as given. Any other spec is returned unchanged. The world needs a
    /// POSIX `sh`.
    pub fn merged_by_shell(mut self) -> SpawnSpec {
        if self.stderr == OutputMode::IntoStdout {
            let wrapper = ["sh", "-c", "exec \"$@\" 2>&1", "sh"];
            self.argv = wrapper
                .into_iter()
                .map(str::to_owned)
                .chain(self.argv)
                .collect();
            self.stderr = OutputMode::Null;
        }
        self
    }
}

/// What to run on a new pseudo-terminal.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TerminalSpec {
    /// Program and arguments (same rules as [`SpawnSpec::argv`]).
    pub argv: Vec<String>,
    pub cwd: Option<String>,
    pub env: BTreeMap<String, String>,
    pub cols: u16,
    pub rows: u16,
}

impl TerminalSpec {
    /// A spec for `argv` on an 80×24 terminal.
    pub fn new<I, S>(argv: I) -> TerminalSpec
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        TerminalSpec {
            argv: argv.into_iter().map(Into::into).collect(),
            cwd: None,
            env: BTreeMap::new(),
            cols: 80,
            rows: 24,
        }
    }

    /// The same checks as [`SpawnSpec::validate`], plus a non-zero size.
    pub fn validate(&self) -> Result<()> {
        validate_command("spawn_terminal", &self.argv, self.cwd.as_deref(), &self.env)?;
        if self.cols == 0 || self.rows == 0 {
            return Err(Error::invalid_input(format!(
                "spawn_terminal: terminal size {}x{} must be at least 1x1",
                self.cols, self.rows
            )));
        }
        Ok(())
    }
}

/// Validates an environment variable name as every provider must.
pub fn validate_env_name(operation: &str, name: &str) -> Result<()> {
    if name.is_empty() {
        return Err(Error::invalid_input(format!(
            "{operation}: empty environment variable name"
        )));
    }
    if let Some(bad) = name.chars().find(|c| *c == '=' || *c == '\0') {
        let what = if bad == '=' { "'='" } else { "NUL" };
        return Err(Error::invalid_input(format!(
            "{operation}: environment variable name {name:?} contains {what}"
        ))
        .with_subject(name.replace('\0', "\\0")));
    }
    Ok(())
}

fn validate_command(
    operation: &str,
    argv: &[String],
    cwd: Option<&str>,
    env: &BTreeMap<String, String>,
) -> Result<()> {
    let Some(program) = argv.first() else {
        return Err(Error::invalid_input(format!("{operation}: argv is empty")));
    };
    if program.is_empty() {
        return Err(Error::invalid_input(format!(
            "{operation}: argv[0] is empty"
        )));
    }
    if !program.starts_with('/') && program.contains('/') {
        return Err(Error::invalid_input(format!(
            "{operation}: relative program path {program:?} contains '/'; use an absolute path or a bare name"
        ))
        .with_subject(program.clone()));
    }
    if let Some((index, _)) = argv.iter().enumerate().find(|(_, arg)| arg.contains('\0')) {
        return Err(Error::invalid_input(format!(
            "{operation}: argv[{index}] contains NUL"
        )));
    }
    if cwd.is_some_and(|cwd| cwd.contains('\0')) {
        return Err(Error::invalid_input(format!(
            "{operation}: cwd contains NUL"
        )));
    }
    for (name, value) in env {
        validate_env_name(operation, name)?;
        if value.contains('\0') {
            return Err(Error::invalid_input(format!(
                "{operation}: value of environment variable {name} contains NUL"
            ))
            .with_subject(name.clone()));
        }
    }
    Ok(())
}

/// How a process ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ExitStatus {
    /// The exit code, if the process exited normally.
    pub code: Option<i32>,
    /// The signal that ended it, if one did (including the provider's own
    /// TERM/KILL from a timeout or `terminate`).
    pub signal: Option<Signal>,
    /// Whether the spec's timeout expired.
    pub timed_out: bool,
}

impl ExitStatus {
    /// Exited normally with code 0 and did not time out.
    pub fn success(&self) -> bool {
        self.code == Some(0) && !self.timed_out
    }
}

/// The spill file of one output stream.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SpillInfo {
    /// Path in the world (readable through the `fs` seam of the same world).
    pub path: String,
    /// Bytes written to it so far.
    pub len: u64,
    /// False once the limit cut the copy short.
    pub complete: bool,
}

/// A view of one output stream at one moment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OutputSnapshot {
    /// Bytes the stream has produced so far (every mode).
    pub total: u64,
    /// Absolute stream offset of `bytes[0]`.
    pub offset: u64,
    /// Retained bytes from `offset` (collect mode; empty otherwise).
    pub bytes: Bytes,
    /// Whether bytes before the retained tail were dropped.
    pub truncated: bool,
    /// The spill file, when the spec asked for one.
    pub spill: Option<SpillInfo>,
}

/// A running (or finished) command. Shared between tasks: every method takes
/// `&self` and is safe to call concurrently.
#[async_trait]
pub trait Process: Send + Sync + 'static {
    /// The process id, which is also its process-group id (always > 1).
    fn pid(&self) -> u32;

    /// The stdin writer, once (`None` on later calls or without
    /// [`StdinMode::Pipe`]).
    fn take_stdin(&self) -> Option<Box<dyn ByteWriter>>;

    /// The stdout stream, once (`None` later or unless [`OutputMode::Pipe`]).
    fn take_stdout(&self) -> Option<ByteStream>;

    /// The stderr stream, once (`None` later or unless [`OutputMode::Pipe`]).
    fn take_stderr(&self) -> Option<ByteStream>;

    /// Waits for the direct child to end (and, for collect/inherit output,
    /// for its output to drain or the drain grace to pass). Idempotent: every
    /// call returns the same status. Dropping the future stops waiting only.
    async fn wait(&self) -> Result<ExitStatus>;

    /// Up to `max_len` retained bytes of `stream` from absolute `offset`
    /// (clamped to the retained tail's start; an offset past `total` yields
    /// no bytes), with totals and spill info. Outside collect mode nothing is
    /// retained: the snapshot is empty at `offset == total`, with `total`
    /// counted in every mode and `truncated` set once any byte was produced.
    async fn read_output(
        &self,
        stream: OutputStream,
        offset: u64,
        max_len: usize,
    ) -> Result<OutputSnapshot>;

    /// SIGTERM to the whole group, `grace`, SIGKILL; succeeds only once a
    /// bounded probe proves the group empty (zombies count as gone),
    /// otherwise fails with [`crate::ErrorKind::Busy`] and may be retried.
    /// After proven quiescence it is a no-op.
    async fn terminate(&self, grace: Duration) -> Result<()>;
}

/// An interactive program on a pseudo-terminal. Shared between tasks.
#[async_trait]
pub trait Terminal: Send + Sync + 'static {
    /// The pid of the requested program (its session and group leader).
    fn pid(&self) -> u32;

    /// Everything the requested program writes to the terminal — and
    /// nothing else (no bootstrap prompt or echoed wrapper command) — once.
    /// Output keeps flowing into the stream's buffer while the consumer is
    /// paused.
    fn take_output(&self) -> Option<ByteStream>;

    /// Writes input to the terminal.
    async fn write(&self, data: Bytes) -> Result<()>;

    /// Changes the window size; the foreground program sees SIGWINCH.
    async fn resize(&self, cols: u16, rows: u16) -> Result<()>;

    /// The terminal's foreground process group (`tcgetpgrp`).
    async fn foreground_pgid(&self) -> Result<u32>;

    /// Sends `signal` to the foreground process group.
    async fn signal(&self, signal: Signal) -> Result<()>;

    /// Tears down every process group in the terminal's session; new
    /// operations are rejected from the start, in-flight ones are joined.
    /// Fails with [`crate::ErrorKind::Busy`] if the session is not proven
    /// empty; retrying is allowed. A no-op once it succeeded.
    async fn terminate(&self) -> Result<()>;

    /// Waits for the requested program to exit. Idempotent.
    async fn wait(&self) -> Result<ExitStatus>;
}

/// Commands and terminals of one execution world.
#[async_trait]
pub trait SubprocessProvider: Send + Sync + 'static {
    /// Resolves `name` to an absolute executable path: an absolute path is
    /// verified (exists, executable); a bare name is searched on the world's
    /// PATH followed by `extra_path`; a relative path containing `/` is
    /// rejected with `InvalidInput`.
    async fn resolve_executable(&self, name: &str, extra_path: &[String]) -> Result<String>;

    /// Starts a command as the leader of its own process group and resolves
    /// once its pid (> 1) is known. `spec` is validated before anything
    /// starts. Dropping the future before it resolves rolls the start back.
    async fn spawn(&self, spec: SpawnSpec) -> Result<Arc<dyn Process>>;

    /// Starts `spec.argv` on a new pseudo-terminal in its own session.
    async fn spawn_terminal(&self, spec: TerminalSpec) -> Result<Arc<dyn Terminal>>;

    /// Starts `spec` as a durable command (see [`crate::durable`]) and
    /// attaches to it from offset 0 with `spec`'s output modes. `spec.stdin`
    /// must be [`StdinMode::Null`]; its timeout and drain grace are applied
    /// by the world's supervisor of the command, so they hold with no host
    /// attached. Dropping the future before it resolves may leave the
    /// command running (it is listed). The default: `Unsupported`.
    async fn spawn_durable(&self, spec: SpawnSpec, durable: DurableSpec) -> Result<Attached> {
        let _ = (spec, durable);
        Err(unsupported("spawn_durable"))
    }

    /// Every durable command of this world, running or not, until it is
    /// forgotten. The default: `Unsupported`.
    async fn list_durable(&self) -> Result<Vec<DurableCommand>> {
        Err(unsupported("list_durable"))
    }

    /// A new handle on durable command `spec.id` of this world (`NotFound`
    /// for an id this world does not know, `InvalidInput` for a malformed
    /// one). The default: `Unsupported`.
    async fn attach(&self, spec: AttachSpec) -> Result<Attached> {
        let _ = spec;
        Err(unsupported("attach"))
    }

    /// Removes everything retained of ended durable command `id`; `Busy`
    /// while it still runs (terminate it first). The default:
    /// `Unsupported`.
    async fn forget(&self, id: &str) -> Result<()> {
        let _ = id;
        Err(unsupported("forget"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ErrorKind;

    fn kind_of(spec: &SpawnSpec) -> Option<ErrorKind> {
        spec.validate().err().map(|e| e.kind())
    }

    #[test]
    fn validation_rejects_what_must_never_start() {
        assert_eq!(
            kind_of(&SpawnSpec::new(Vec::<String>::new())),
            Some(ErrorKind::InvalidInput)
        );
        assert_eq!(
            kind_of(&SpawnSpec::new([""])),
            Some(ErrorKind::InvalidInput)
        );
        assert_eq!(
            kind_of(&SpawnSpec::new(["bin/ls"])),
            Some(ErrorKind::InvalidInput)
        );
        assert_eq!(
            kind_of(&SpawnSpec::new(["ls", "a\0b"])),
            Some(ErrorKind::InvalidInput)
        );
        for name in ["", "A=B", "A\0"] {
            let mut spec = SpawnSpec::new(["ls"]);
            spec.env.insert(name.to_owned(), "v".to_owned());
            assert_eq!(
                kind_of(&spec),
                Some(ErrorKind::InvalidInput),
                "name {name:?}"
            );
        }
        let mut spec = SpawnSpec::new(["ls"]);
        spec.env.insert("OK".to_owned(), "v\0".to_owned());
        assert_eq!(kind_of(&spec), Some(ErrorKind::InvalidInput));
        let mut spec = SpawnSpec::new(["ls"]);
        spec.cwd = Some("/tmp\0".to_owned());
        assert_eq!(kind_of(&spec), Some(ErrorKind::InvalidInput));
    }

    #[test]
    fn validation_accepts_bare_names_and_absolute_paths() {
        assert!(SpawnSpec::new(["ls", "-l"]).validate().is_ok());
        let mut spec = SpawnSpec::new(["/bin/echo", "hi"]);
        spec.env.insert("MY_VAR".to_owned(), "x=y".to_owned());
        assert!(spec.validate().is_ok());
    }

    #[test]
    fn merged_stderr_is_stderr_s_mode_only() {
        let mut spec = SpawnSpec::new(["ls"]);
        spec.stderr = OutputMode::IntoStdout;
        assert!(spec.validate().is_ok());
        spec.stdout = OutputMode::IntoStdout;
        assert_eq!(kind_of(&spec), Some(ErrorKind::InvalidInput));
    }

    #[test]
    fn merging_by_shell_wraps_only_a_merged_spec() {
        let mut spec = SpawnSpec::new(["printf", "a b"]);
        assert_eq!(spec.clone().merged_by_shell(), spec);
        spec.stderr = OutputMode::IntoStdout;
        let wrapped = spec.merged_by_shell();
        assert_eq!(
            wrapped.argv,
            ["sh", "-c", "exec \"$@\" 2>&1", "sh", "printf", "a b"]
        );
        assert_eq!(wrapped.stderr, OutputMode::Null);
        assert!(wrapped.validate().is_ok());
    }

    #[test]
    fn terminal_size_must_be_positive() {
        let mut spec = TerminalSpec::new(["bash"]);
        assert!(spec.validate().is_ok());
        spec.cols = 0;
        assert_eq!(spec.validate().unwrap_err().kind(), ErrorKind::InvalidInput);
    }

    #[test]
    fn signals_have_names() {
        assert_eq!(Signal::TERM.to_string(), "SIGTERM");
        assert_eq!(Signal(64).to_string(), "signal 64");
    }
}
