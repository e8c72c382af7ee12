//! `run`: start a command in the world, in the foreground (wait, return
//! bounded output) or the background (return its id at once).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use dsh_plugin_api::durable::DurableSpec;
use dsh_plugin_api::subprocess::{OutputMode, Process, SpawnSpec, SpillSpec, StdinMode};
use dsh_plugin_api::{Bytes, Error, ErrorKind, Result};

use super::Commands;
use super::durable::{self, DurableLink};
use super::errors::{from_seam, invalid};
use super::output::{CommandOutput, SPILL_LIMIT, TAIL_LIMIT};
use super::status::{CommandStatus, ExitInfo, state_text};
use super::terminate::TerminateOnDrop;
use super::text::{cut_character_start, decode_piece, quote_argv};
use super::tracked::{Stdin, TrackedCommand};

const TOOL: &str = "run";

/// How long a foreground `run` waits for its command by default before
/// handing it over (still running, as a background command): the
/// server's default unless [`Commands::set_run_wait`] changed it.
pub const DEFAULT_RUN_WAIT_MS: u64 = 10_000;
/// The longest a `run` may wait for its command (`wait_ms`).
pub const MAX_RUN_WAIT_MS: u64 = 600_000;
/// The longest timeout a foreground command may ask for.
pub const MAX_FOREGROUND_TIMEOUT_MS: u64 = 600_000;
/// The longest timeout a background command may ask for (it has none by
/// default).
pub const MAX_BACKGROUND_TIMEOUT_MS: u64 = 86_400_000;
/// The most bytes of `stdin` text a request may carry.
pub const MAX_STDIN_BYTES: usize = 1024 * 1024;
/// The most bytes a `command` string, or all `argv` entries together, may
/// have.
pub const MAX_COMMAND_BYTES: usize = 128 * 1024;
/// The most `env` entries a request may carry.
pub const MAX_ENV_ENTRIES: usize = 256;
/// Bytes of the output's beginning in a foreground result.
pub const HEAD_BYTES: usize = 16 * 1024;
/// Bytes of the output's end in a foreground result.
pub const TAIL_BYTES: usize = 16 * 1024;

/// Runs a command in the world.
#[derive(Debug, Clone, serde::Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RunRequest {
    /// A shell command line, run as `bash -c <command>` (pipes,
    /// redirections, `&&`, globs and variables work). Give exactly one of
    /// `command` and `argv`. Its stdout and stderr are merged into one
    /// output, in the order written.
    #[serde(default)]
    pub command: Option<String>,
    /// A program and its arguments, run without a shell: `argv[0]` is a
    /// name looked up on PATH, an absolute path, or a path relative to
    /// `cwd` (`./build.sh`). Give exactly one of `command` and `argv`.
    #[serde(default)]
    pub argv: Option<Vec<String>>,
    /// Working directory: absolute, or relative to the world's working
    /// directory (the default). Must exist.
    #[serde(default)]
    pub cwd: Option<String>,
    /// Environment variables to set for the command (name → value), on top
    /// of the world's environment. At most 256.
    #[serde(default)]
    pub env: Option<BTreeMap<String, String>>,
    /// Wall-clock limit in milliseconds. When it expires the command's
    /// whole process group gets SIGTERM, then SIGKILL after a grace, and
    /// the result says `timed_out`. No limit unless given; at most 600000
    /// in the foreground, 86400000 in the background.
    #[serde(default)]
    pub timeout_ms: Option<u64>,
    /// Foreground only: how long to wait for the command to end, in
    /// milliseconds. A command still running then is handed over: the
    /// result has its id, the output so far and status `running`, and it
    /// goes on as a background command of this session (`read_output`
    /// from `cursor` continues it, `kill` stops it). Default 10000 (or
    /// the server's setting), at most 600000.
    #[serde(default)]
    pub wait_ms: Option<u64>,
    /// Start the command and return its id at once, without waiting (read
    /// its output with `read_output`, stop it with `kill`). Default false:
    /// wait for it to exit and return its output.
    #[serde(default)]
    pub background: Option<bool>,
    /// Text to feed to the command's stdin, which is then closed (at most
    /// 1 MiB). Without it (and without `keep_stdin`) stdin is empty.
    #[serde(default)]
    pub stdin: Option<String>,
    /// Background only: keep the command's stdin open for `write_stdin`
    /// until `close_stdin`. Default false (stdin is empty). A command with
    /// an open stdin is not durable.
    #[serde(default)]
    pub keep_stdin: Option<bool>,
    /// Background only: make the command durable — the world keeps it,
    /// not this server: it keeps running when this server ends (for as
    /// long as the world lasts; the result says whether it does), and a
    /// later server of the same world reads its output by cursor and
    /// kills it by its id. A durable command has no stdin, so it cannot
    /// be combined with `stdin` text or `keep_stdin`; `true` fails if the
    /// world has no durable commands. Default false: a background command
    /// ends when this server ends.
    #[serde(default)]
    pub durable: Option<bool>,
}

/// What `run` did.
#[derive(Debug, Clone, serde::Serialize, schemars::JsonSchema)]
pub struct RunResult {
    /// The command's id: read its output by cursor with `read_output`
    /// (the complete output stays readable until 64 newer commands push
    /// it out), stop it with `kill`.
    pub id: String,
    /// `running` for a background start, else how it ended.
    pub status: CommandStatus,
    /// Whether the command is durable: the world keeps it, its id and
    /// its output, not this server (`lifetime` says whether the world
    /// outlives the server).
    pub durable: bool,
    /// Background starts: how long the command lives, in this world.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lifetime: Option<String>,
    #[serde(flatten)]
    pub exit: ExitInfo,
    /// Foreground only: stdout and stderr merged, as UTF-8 (invalid bytes
    /// replaced). Longer output keeps its first 16 KiB and last 16 KiB
    /// with a marker in between saying how many bytes were omitted and the
    /// cursor to read them from.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub output: Option<String>,
    /// Foreground only: bytes the command wrote in all.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub total_bytes: Option<u64>,
    /// Foreground only: bytes of the output left out of `output`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub omitted_bytes: Option<u64>,
    /// Foreground only: the file in the world holding the complete output
    /// (up to 1 GiB), removed when the command is forgotten.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub spill_path: Option<String>,
    /// A foreground command still running after the wait (handed over):
    /// the `read_output` cursor just after `output`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cursor: Option<u64>,
}

impl crate::Outcome for RunResult {
    fn text(&self) -> String {
        match &self.output {
            None => format!(
                "started {} in the background ({}); read its output with read_output",
                self.id,
                self.lifetime.as_deref().unwrap_or_default()
            ),
            Some(output) => {
                let state = match self.cursor {
                    Some(cursor) => format!(
                        "still running, now in the background: continue with read_output \
                         id={} cursor={cursor}, stop it with kill",
                        self.id
                    ),
                    None => state_text(self.status, &self.exit),
                };
                let body = if output.is_empty() {
                    "(no output)\n".to_owned()
                } else if output.ends_with('\n') {
                    output.clone()
                } else {
                    format!("{output}\n")
                };
                format!(
                    "{body}[{}: {state} · {} bytes of output{}]",
                    self.id,
                    self.total_bytes.unwrap_or(0),
                    if self.cursor.is_some() { " so far" } else { "" }
                )
            }
        }
    }
}

/// Whether a run is started durable.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Durability {
    /// An ordinary command of this session (the default).
    No,
    /// Durable or refused (`durable: true`).
    Required,
}

/// A checked request, ready to spawn.
struct RunPlan {
    spec: SpawnSpec,
    /// Foreground: how long to wait before handing the command over
    /// (`None`: the server's default).
    wait: Option<Duration>,
    /// `argv[0]` is a relative path (`./build.sh`): it names a file
    /// below the run's cwd, which the seam does not take.
    anchor: bool,
    line: String,
    background: bool,
    stdin_text: Option<String>,
    durability: Durability,
}

impl RunPlan {
    fn check(request: RunRequest) -> Result<RunPlan> {
        let (program, line) = match (request.command, request.argv) {
            (Some(command), None) => {
                if command.trim().is_empty() {
                    return Err(invalid(TOOL, "command is empty"));
                }
                if command.contains('\0') {
                    return Err(invalid(TOOL, "command contains a NUL byte"));
                }
                let line = command.clone();
                (vec!["bash".to_owned(), "-c".to_owned(), command], line)
            }
            (None, Some(argv)) => {
                if argv.first().is_none_or(String::is_empty) {
                    return Err(invalid(TOOL, "argv is empty (argv[0] names the program)"));
                }
                // Checked here to name the tool, not the seam.
                if let Some(index) = argv.iter().position(|arg| arg.contains('\0')) {
                    return Err(invalid(
                        TOOL,
                        format_args!("argv[{index}] contains a NUL byte"),
                    ));
                }
                let line = quote_argv(&argv);
                (argv, line)
            }
            (Some(_), Some(_)) => {
                return Err(invalid(
                    TOOL,
                    "give either command (a shell string) or argv (a program and its arguments), not both",
                ));
            }
            (None, None) => {
                return Err(invalid(
                    TOOL,
                    "give command (a shell string) or argv (a program and its arguments)",
                ));
            }
        };
        let size: usize = program.iter().map(String::len).sum();
        if size > MAX_COMMAND_BYTES {
            return Err(invalid(
                TOOL,
                format_args!(
                    "the command is {size} bytes, more than {MAX_COMMAND_BYTES}; put it in a script file"
                ),
            ));
        }
        let env = request.env.unwrap_or_default();
        if env.len() > MAX_ENV_ENTRIES {
            return Err(invalid(
                TOOL,
                format_args!("{} env entries, more than {MAX_ENV_ENTRIES}", env.len()),
            ));
        }
        if let Some(text) = &request.stdin
            && text.len() > MAX_STDIN_BYTES
        {
            return Err(invalid(
                TOOL,
                format_args!(
                    "stdin is {} bytes, more than {MAX_STDIN_BYTES}; write it to a file and redirect",
                    text.len()
                ),
            ));
        }
        let background = request.background.unwrap_or(false);
        let timeout = check_timeout(request.timeout_ms, background)?;
        let wait = match request.wait_ms {
            Some(_) if background => {
                return Err(invalid(
                    TOOL,
                    "wait_ms is for foreground runs (a background run returns at once)",
                ));
            }
            Some(0) => return Err(invalid(TOOL, "wait_ms must be at least 1")),
            Some(ms) if ms > MAX_RUN_WAIT_MS => {
                return Err(invalid(
                    TOOL,
                    format_args!("wait_ms {ms} is more than the maximum {MAX_RUN_WAIT_MS}"),
                ));
            }
            ms => ms.map(Duration::from_millis),
        };
        let keep_stdin = request.keep_stdin.unwrap_or(false);
        if !background {
            for (flag, given) in [
                ("keep_stdin", request.keep_stdin == Some(true)),
                ("durable", request.durable == Some(true)),
            ] {
                if given {
                    return Err(invalid(
                        TOOL,
                        format_args!("{flag} is for background runs (background: true)"),
                    ));
                }
            }
        }
        if keep_stdin && request.stdin.is_some() {
            return Err(invalid(
                TOOL,
                "give stdin text or keep_stdin, not both (keep_stdin leaves stdin open for write_stdin)",
            ));
        }
        let needs_stdin = keep_stdin || request.stdin.is_some();
        let durability = match (background, request.durable) {
            (false, _) | (true, None | Some(false)) => Durability::No,
            (true, Some(true)) if needs_stdin => {
                return Err(invalid(
                    TOOL,
                    "a durable command has no stdin: drop stdin/keep_stdin, or run without durable",
                ));
            }
            (true, Some(true)) => Durability::Required,
        };

        let mut spec = SpawnSpec::new(program);
        spec.cwd = request.cwd;
        spec.env = env;
        spec.stdin = if needs_stdin {
            StdinMode::Pipe
        } else {
            StdinMode::Null
        };
        spec.stdout = OutputMode::Collect { limit: TAIL_LIMIT };
        spec.stderr = OutputMode::IntoStdout;
        spec.spill = Some(SpillSpec { limit: SPILL_LIMIT });
        spec.timeout = timeout;
        let anchor = is_relative_path(&spec.argv[0]);
        if anchor {
            // Anchored to the cwd before the spawn (`Commands::run`); the
            // rest of the spec is checked now, as an absolute program.
            let mut anchored = spec.clone();
            anchored.argv[0].insert(0, '/');
            anchored.validate()
        } else {
            spec.validate()
        }
        .map_err(|err| from_seam(TOOL, err))?;
        Ok(RunPlan {
            spec,
            wait,
            anchor,
            line,
            background,
            stdin_text: request.stdin,
            durability,
        })
    }
}

/// A program path with a separator that is not absolute.
fn is_relative_path(program: &str) -> bool {
    !program.starts_with('/') && program.contains('/')
}

fn check_timeout(timeout_ms: Option<u64>, background: bool) -> Result<Option<Duration>> {
    let (max, hint) = if background {
        (MAX_BACKGROUND_TIMEOUT_MS, "")
    } else {
        (
            MAX_FOREGROUND_TIMEOUT_MS,
            "; run longer commands with background: true",
        )
    };
    match timeout_ms {
        None => Ok(None),
        Some(0) => Err(invalid(TOOL, "timeout_ms must be at least 1")),
        Some(ms) if ms > max => Err(invalid(
            TOOL,
            format_args!("timeout_ms {ms} is more than the maximum {max}{hint}"),
        )),
        Some(ms) => Ok(Some(Duration::from_millis(ms))),
    }
}

impl Commands {
    /// `run`: starts a command.
    ///
    /// **What reaches the world.** `argv` is spawned as given — the argv
    /// every `subprocess` decorator and the provider see — and a shell
    /// string `command` as the argv `bash -c <command>`, so it is parsed
    /// exactly as `bash -c` parses it (its syntax errors are part of its
    /// output; the world needs `bash` for it). A relative program path
    /// (`./build.sh`) is anchored to the run's cwd (resolved through `fs`)
    /// first; a bare name is looked up on the command's PATH by the
    /// provider, and a missing program is the seam's `NotFound`.
    ///
    /// **Merged output.** stdout and stderr are merged in the world by
    /// the spawn itself (stderr [`OutputMode::IntoStdout`]: the command's
    /// fd 2 is the same pipe as its fd 1), so both become one byte
    /// sequence in the order the program wrote them, and nothing about
    /// the program changes but where its fd 2 points (docs/design.md
    /// §5.2).
    ///
    /// Foreground: waits for the exit (a timeout terminates the whole
    /// group, TERM → grace → KILL) and returns the output bounded as head +
    /// tail; the id stays valid for `read_output`. A command still running
    /// after the wait (`wait_ms`, else [`Commands::set_run_wait`]'s, 10 s
    /// by default) is handed over instead: the result is its output so far
    /// with status `running` and the cursor to read on from, and it goes
    /// on as a background command. Dropping the future while waiting
    /// terminates the command's whole process group (its entry stays, so
    /// `list_commands` shows how it ended). Background: returns the id as
    /// soon as the command started; it runs until it exits, its timeout,
    /// `kill` or [`Commands::shutdown`].
    pub async fn run(&self, request: RunRequest) -> Result<RunResult> {
        let mut plan = RunPlan::check(request)?;
        if plan.anchor {
            let cwd = plan.spec.cwd.as_deref().unwrap_or(".");
            let dir = self
                .fs
                .resolve(cwd, None)
                .await
                .map_err(|err| from_seam(TOOL, err))?;
            let program = &mut plan.spec.argv[0];
            *program = format!("{}/{program}", dir.path.trim_end_matches('/'));
        }
        let seq = self.registry.reserve(TOOL)?;
        if plan.durability == Durability::Required {
            let (link, process) = self.spawn_durable(&plan.spec).await?;
            let output = CommandOutput::durable(Arc::clone(&process), link.clone());
            let command = Arc::new(TrackedCommand::new(
                seq,
                durable::tool_id(&link.id),
                plan.line,
                true,
                process,
                output,
                Stdin::NotOpen,
                None,
                Some(link),
            ));
            self.registry.insert(TOOL, Arc::clone(&command))?;
            return Ok(RunResult::started(&command, self.lifetime(true)));
        }
        let process = self
            .subprocess
            .spawn(plan.spec)
            .await
            .map_err(|err| from_seam(TOOL, err))?;
        let guard = (!plan.background).then(|| TerminateOnDrop::new(Arc::clone(&process)));

        let writer = process.take_stdin();
        let (stdin, feeder) = match (plan.stdin_text, writer) {
            (Some(text), Some(mut writer)) => {
                let pid = process.pid();
                let feeder = tokio::spawn(async move {
                    // A command may exit without reading all of it: that
                    // is its business, not an error of the run.
                    if let Err(err) = writer.write(Bytes::from(text)).await {
                        tracing::debug!(pid, %err, "run: stdin text not fully written");
                    }
                    if let Err(err) = writer.close().await {
                        tracing::debug!(pid, %err, "run: closing stdin failed");
                    }
                });
                (Stdin::NotOpen, Some(feeder.abort_handle()))
            }
            (None, Some(writer)) => (Stdin::Open(writer), None),
            (text, None) => {
                if text.is_some() {
                    tracing::warn!(
                        pid = process.pid(),
                        "run: the provider gave no stdin pipe; the stdin text is not fed"
                    );
                }
                (Stdin::NotOpen, None)
            }
        };
        let output = CommandOutput::new(Arc::clone(&process), Arc::clone(&self.fs));
        let command = Arc::new(TrackedCommand::new(
            seq,
            self.registry.id(seq),
            plan.line,
            plan.background,
            process,
            output,
            stdin,
            feeder,
            None,
        ));
        self.registry.insert(TOOL, Arc::clone(&command))?;
        let Some(guard) = guard else {
            return Ok(RunResult::started(&command, self.lifetime(false)));
        };

        let wait = plan.wait.unwrap_or_else(|| self.run_wait());
        let exit = command.wait_exit_for(wait).await;
        guard.disarm();
        let running = match exit {
            Some(exit) => {
                exit.map_err(|err| from_seam(TOOL, err))?;
                false
            }
            None => {
                // Handed over: from here on it is a background command of
                // these tools, ended by `kill` or at shutdown.
                command.hand_over();
                true
            }
        };
        let bounded = bounded_output(&command, running).await?;
        Ok(RunResult {
            id: command.id.clone(),
            status: command.status(),
            durable: false,
            lifetime: None,
            exit: ExitInfo::of(&command.exit()),
            output: Some(bounded.text),
            total_bytes: Some(bounded.total),
            omitted_bytes: Some(bounded.omitted),
            spill_path: bounded.spill_path,
            cursor: running.then_some(bounded.end),
        })
    }
}

impl RunResult {
    /// The result of a background start.
    /// The result of a background start; `lifetime` says how long it
    /// lives (see [`Commands::lifetime`]).
    fn started(command: &TrackedCommand, lifetime: String) -> RunResult {
        RunResult {
            id: command.id.clone(),
            status: CommandStatus::Running,
            durable: command.durable.is_some(),
            lifetime: Some(lifetime),
            exit: ExitInfo::default(),
            output: None,
            total_bytes: None,
            omitted_bytes: None,
            spill_path: None,
            cursor: None,
        }
    }
}

impl Commands {
    /// Starts `spec` as a durable command (no stdin, no spill file: the
    /// world retains the merged output, up to [`SPILL_LIMIT`] bytes like a
    /// spill file) with the newest output collected in memory.
    async fn spawn_durable(&self, spec: &SpawnSpec) -> Result<(DurableLink, Arc<dyn Process>)> {
        let mut spec = spec.clone();
        spec.stdin = StdinMode::Null;
        spec.spill = None;
        let keep = DurableSpec {
            retain: SPILL_LIMIT,
        };
        match self.subprocess.spawn_durable(spec, keep).await {
            Ok(attached) => Ok((
                DurableLink {
                    id: attached.id,
                    subprocess: Arc::clone(&self.subprocess),
                },
                attached.process,
            )),
            Err(err) if err.kind() == ErrorKind::Unsupported => Err(Error::new(
                ErrorKind::Unsupported,
                format!(
                    "run: durable: true, but this world has no durable commands ({}); run without durable",
                    err.message()
                ),
            )),
            Err(err) => Err(from_seam(TOOL, err)),
        }
    }
}

/// A command's output as a foreground result shows it.
struct BoundedOutput {
    text: String,
    total: u64,
    omitted: u64,
    spill_path: Option<String>,
    /// The offset just after `text`.
    end: u64,
}

/// The whole output if it fits in [`HEAD_BYTES`] + [`TAIL_BYTES`], else
/// its head and tail around a marker naming the omitted range. The head of
/// a long output comes from the spill file; if it cannot be read, the
/// head is counted as omitted (the marker still says where to read it).
/// Of a command still `running`, the output so far: a character its last
/// write cut is left for the next read.
async fn bounded_output(command: &TrackedCommand, running: bool) -> Result<BoundedOutput> {
    let snapshot = command
        .output
        .snapshot()
        .await
        .map_err(|err| from_seam(TOOL, err))?;
    let total = snapshot.total;
    let spill_path = snapshot.spill.map(|spill| spill.path);
    if total <= (HEAD_BYTES + TAIL_BYTES) as u64 {
        let piece = command
            .output
            .read(0, total as usize)
            .await
            .map_err(|err| from_seam(TOOL, err))?;
        let (text, used) = decode_piece(&piece.bytes, running);
        return Ok(BoundedOutput {
            text,
            total,
            omitted: piece.dropped,
            spill_path,
            end: piece.start + used as u64,
        });
    }
    let (head, head_len) = match command.output.read(0, HEAD_BYTES).await {
        Ok(piece) if piece.start == 0 => decode_piece(&piece.bytes, true),
        Ok(_) => (String::new(), 0),
        Err(err) => {
            tracing::warn!(id = %command.id, %err, "run: the head of the output is unreadable");
            (String::new(), 0)
        }
    };
    let piece = command
        .output
        .read(total - TAIL_BYTES as u64, TAIL_BYTES)
        .await
        .map_err(|err| from_seam(TOOL, err))?;
    let skip = cut_character_start(&piece.bytes);
    let (tail, used) = decode_piece(&piece.bytes[skip..], running);
    let tail_start = piece.start + skip as u64;
    let omitted = tail_start - head_len as u64;
    let text = format!(
        "{head}\n[… {omitted} bytes omitted (bytes {head_len}..{tail_start} of {total}); read them with read_output id={} cursor={head_len} …]\n{tail}",
        command.id
    );
    Ok(BoundedOutput {
        text,
        total,
        omitted,
        spill_path,
        end: tail_start + used as u64,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use dsh_plugin_api::ErrorKind;

    fn request() -> RunRequest {
        RunRequest {
            command: None,
            argv: None,
            cwd: None,
            env: None,
            timeout_ms: None,
            wait_ms: None,
            background: None,
            stdin: None,
            keep_stdin: None,
            durable: None,
        }
    }

    #[test]
    fn argv_reaches_the_seam_as_given_with_stderr_merged() {
        let plan = RunPlan::check(RunRequest {
            argv: Some(vec!["printf".into(), "a b".into()]),
            ..request()
        })
        .unwrap();
        assert_eq!(plan.spec.argv, ["printf", "a b"]);
        assert_eq!(plan.spec.stderr, OutputMode::IntoStdout);
        assert!(!plan.anchor);
        assert_eq!(plan.line, "printf 'a b'");
        assert_eq!(plan.spec.stdin, StdinMode::Null);
        assert_eq!(plan.spec.timeout, None, "the wait bounds a foreground run");
        assert_eq!(plan.wait, None, "the server's default wait");

        let plan = RunPlan::check(RunRequest {
            command: Some("echo hi >&2".into()),
            background: Some(true),
            ..request()
        })
        .unwrap();
        assert_eq!(plan.spec.argv, ["bash", "-c", "echo hi >&2"]);
        assert_eq!(plan.spec.stdin, StdinMode::Null);
        assert_eq!(
            plan.durability,
            Durability::No,
            "a background command is the session's unless durable: true"
        );
        assert_eq!(plan.spec.timeout, None, "background has no default timeout");

        let plan = RunPlan::check(RunRequest {
            argv: Some(vec!["./build.sh".into()]),
            ..request()
        })
        .unwrap();
        assert!(plan.anchor, "a relative program is anchored to the cwd");
    }

    #[test]
    fn durability_follows_background_and_stdin() {
        let plan = |value: serde_json::Value| {
            let mut value = value;
            value["command"] = "cat".into();
            RunPlan::check(serde_json::from_value(value).unwrap())
        };
        let ok = |value| plan(value).unwrap();
        let refused = |value| plan(value).err().map(|err| err.kind());
        use serde_json::json;
        assert_eq!(ok(json!({})).durability, Durability::No);
        assert_eq!(ok(json!({"durable": false})).durability, Durability::No);
        let kept = ok(json!({"background": true, "keep_stdin": true}));
        assert_eq!(kept.durability, Durability::No);
        assert_eq!(kept.spec.stdin, StdinMode::Pipe);
        let fed = ok(json!({"background": true, "stdin": "x"}));
        assert_eq!(fed.durability, Durability::No);
        assert_eq!(fed.spec.stdin, StdinMode::Pipe);
        assert_eq!(
            ok(json!({"background": true, "durable": true})).durability,
            Durability::Required
        );
        assert_eq!(
            ok(json!({"background": true, "durable": false})).durability,
            Durability::No
        );
        for bad in [
            json!({"durable": true}),
            json!({"keep_stdin": true}),
            json!({"background": true, "durable": true, "keep_stdin": true}),
            json!({"background": true, "durable": true, "stdin": "x"}),
            json!({"background": true, "keep_stdin": true, "stdin": "x"}),
        ] {
            assert_eq!(refused(bad.clone()), Some(ErrorKind::InvalidInput), "{bad}");
        }
    }

    #[test]
    fn bad_requests_are_refused_before_anything_starts() {
        let refused = |request: RunRequest| RunPlan::check(request).err().map(|err| err.kind());
        assert_eq!(refused(request()), Some(ErrorKind::InvalidInput));
        assert_eq!(
            refused(RunRequest {
                command: Some("true".into()),
                argv: Some(vec!["true".into()]),
                ..request()
            }),
            Some(ErrorKind::InvalidInput)
        );
        assert_eq!(
            refused(RunRequest {
                argv: Some(vec![]),
                ..request()
            }),
            Some(ErrorKind::InvalidInput)
        );
        assert_eq!(
            refused(RunRequest {
                command: Some("  ".into()),
                ..request()
            }),
            Some(ErrorKind::InvalidInput)
        );
        assert_eq!(
            refused(RunRequest {
                command: Some("true".into()),
                timeout_ms: Some(MAX_FOREGROUND_TIMEOUT_MS + 1),
                ..request()
            }),
            Some(ErrorKind::InvalidInput)
        );
        assert_eq!(
            refused(RunRequest {
                command: Some("true".into()),
                timeout_ms: Some(0),
                ..request()
            }),
            Some(ErrorKind::InvalidInput)
        );
        for (wait_ms, background) in [(0, false), (MAX_RUN_WAIT_MS + 1, false), (5, true)] {
            assert_eq!(
                refused(RunRequest {
                    command: Some("true".into()),
                    wait_ms: Some(wait_ms),
                    background: Some(background),
                    ..request()
                }),
                Some(ErrorKind::InvalidInput),
                "wait_ms {wait_ms}, background {background}"
            );
        }
        assert_eq!(
            refused(RunRequest {
                command: Some("a\0b".into()),
                ..request()
            }),
            Some(ErrorKind::InvalidInput)
        );
        let err = RunPlan::check(RunRequest {
            argv: Some(vec!["echo".into(), "a\0b".into()]),
            ..request()
        })
        .err()
        .unwrap();
        assert_eq!(err.message(), "run: argv[1] contains a NUL byte");
        assert_eq!(
            refused(RunRequest {
                command: Some("true".into()),
                stdin: Some("x".repeat(MAX_STDIN_BYTES + 1)),
                ..request()
            }),
            Some(ErrorKind::InvalidInput)
        );
        let err = RunPlan::check(RunRequest {
            command: Some("true".into()),
            env: Some(BTreeMap::from([("A=B".into(), "v".into())])),
            ..request()
        })
        .err()
        .unwrap();
        assert_eq!(err.kind(), ErrorKind::InvalidInput);
        assert!(err.message().starts_with("run: "), "{}", err.message());
    }
}
