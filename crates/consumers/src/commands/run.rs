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

/// The default timeout of a foreground command.
pub const DEFAULT_TIMEOUT_MS: u64 = 120_000;
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

/// The wrapper that merges stderr into stdout in the world (see
/// [`Commands::run`]).
pub(crate) const MERGE_WRAPPER: [&str; 4] = ["bash", "-c", "exec -- \"$@\" 2>&1", "bash"];

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
    /// name looked up on PATH or a path. Give exactly one of `command` and
    /// `argv`.
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
    /// the result says `timed_out`. Foreground: default 120000, at most
    /// 600000. Background: no limit unless given, at most 86400000.
    #[serde(default)]
    pub timeout_ms: Option<u64>,
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
    /// Background only: make the command durable — it keeps running when
    /// this server ends, and a later server of the same world lists it,
    /// reads its output by cursor and kills it (its id stays valid). A
    /// durable command has no stdin, so it cannot be combined with `stdin`
    /// text or `keep_stdin`. Default: durable when the world supports it
    /// and the run has no stdin (otherwise an ordinary background command,
    /// ended when the server ends); `true` fails if the world cannot;
    /// `false` never.
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
    /// Whether the command is durable: it outlives this server, keeping
    /// its id and its output.
    pub durable: bool,
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
}

impl crate::Outcome for RunResult {
    fn text(&self) -> String {
        match &self.output {
            None => format!(
                "started {} in the background{}; read its output with read_output",
                self.id,
                if self.durable {
                    " (durable: it outlives this server)"
                } else {
                    ""
                }
            ),
            Some(output) => {
                let state = state_text(self.status, &self.exit);
                let body = if output.is_empty() {
                    "(no output)\n".to_owned()
                } else if output.ends_with('\n') {
                    output.clone()
                } else {
                    format!("{output}\n")
                };
                format!(
                    "{body}[{}: {state} · {} bytes of output]",
                    self.id,
                    self.total_bytes.unwrap_or(0)
                )
            }
        }
    }
}

/// Whether a run is started durable.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Durability {
    /// An ordinary command (foreground, with stdin, or `durable: false`).
    No,
    /// Durable if the provider has durable commands, else ordinary.
    IfSupported,
    /// Durable or refused (`durable: true`).
    Required,
}

/// A checked request, ready to spawn.
struct RunPlan {
    spec: SpawnSpec,
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
                // Checked here: behind the wrapper, the seam's own check
                // would report shifted indices.
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
            (false, _) | (true, Some(false)) => Durability::No,
            (true, Some(true)) if needs_stdin => {
                return Err(invalid(
                    TOOL,
                    "a durable command has no stdin: drop stdin/keep_stdin, or run with durable: false",
                ));
            }
            (true, Some(true)) => Durability::Required,
            (true, None) if needs_stdin => Durability::No,
            (true, None) => Durability::IfSupported,
        };

        let mut spec = SpawnSpec::new(MERGE_WRAPPER.into_iter().map(str::to_owned).chain(program));
        spec.cwd = request.cwd;
        spec.env = env;
        spec.stdin = if needs_stdin {
            StdinMode::Pipe
        } else {
            StdinMode::Null
        };
        spec.stdout = OutputMode::Collect { limit: TAIL_LIMIT };
        spec.stderr = OutputMode::Null;
        spec.spill = Some(SpillSpec { limit: SPILL_LIMIT });
        spec.timeout = timeout;
        spec.validate().map_err(|err| from_seam(TOOL, err))?;
        Ok(RunPlan {
            spec,
            line,
            background,
            stdin_text: request.stdin,
            durability,
        })
    }
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
        None if background => Ok(None),
        None => Ok(Some(Duration::from_millis(DEFAULT_TIMEOUT_MS))),
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
    /// **Merged output.** stdout and stderr are merged in the world, by the
    /// command itself: it runs as `bash -c 'exec -- "$@" 2>&1' bash
    /// <argv…>`, so the wrapper shell replaces itself (`exec`: same pid,
    /// same process group) with the program, whose fd 2 is then the same
    /// pipe as its fd 1. Both streams become one byte sequence in the order
    /// the program wrote them, and nothing about the program changes but
    /// where its fd 2 points. A shell string `command` is run as the argv
    /// `bash -c <command>` the same way, so it is parsed exactly as `bash
    /// -c` parses it (its syntax errors are part of its output). What the
    /// wrapper itself could write to stderr before the redirection (nothing,
    /// short of a broken bash) is discarded. `argv[0]` is looked up on PATH
    /// by bash (a relative path like `./build.sh` resolves against `cwd`);
    /// a missing program is exit code 127 with bash's message as output.
    /// The world needs `bash`.
    ///
    /// Foreground: waits for the exit (the timeout terminates the whole
    /// group, TERM → grace → KILL) and returns the output bounded as head +
    /// tail; the id stays valid for `read_output`. Dropping the future
    /// terminates the command's whole process group (its entry stays, so
    /// `list_commands` shows how it ended). Background: returns the id as
    /// soon as the command started; it runs until it exits, its timeout,
    /// `kill` or [`Commands::shutdown`].
    pub async fn run(&self, request: RunRequest) -> Result<RunResult> {
        let plan = RunPlan::check(request)?;
        let seq = self.registry.reserve(TOOL)?;
        let durable = match plan.durability {
            Durability::No => None,
            durability => self.spawn_durable(&plan.spec, durability).await?,
        };
        if let Some((link, process)) = durable {
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
            return Ok(RunResult::started(&command));
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
            return Ok(RunResult::started(&command));
        };

        let exit = command.wait_exit().await;
        guard.disarm();
        exit.map_err(|err| from_seam(TOOL, err))?;
        let bounded = bounded_output(&command).await?;
        Ok(RunResult {
            id: command.id.clone(),
            status: command.status(),
            durable: false,
            exit: ExitInfo::of(&command.exit()),
            output: Some(bounded.text),
            total_bytes: Some(bounded.total),
            omitted_bytes: Some(bounded.omitted),
            spill_path: bounded.spill_path,
        })
    }
}

impl RunResult {
    /// The result of a background start.
    fn started(command: &TrackedCommand) -> RunResult {
        RunResult {
            id: command.id.clone(),
            status: CommandStatus::Running,
            durable: command.durable.is_some(),
            exit: ExitInfo::default(),
            output: None,
            total_bytes: None,
            omitted_bytes: None,
            spill_path: None,
        }
    }
}

impl Commands {
    /// Starts `spec` as a durable command (no stdin, no spill file: the
    /// world retains the merged output, up to [`SPILL_LIMIT`] bytes like a
    /// spill file) with the newest output collected in memory. `None` when
    /// the provider has no durable commands and `durability` allows an
    /// ordinary command instead.
    async fn spawn_durable(
        &self,
        spec: &SpawnSpec,
        durability: Durability,
    ) -> Result<Option<(DurableLink, Arc<dyn Process>)>> {
        let mut spec = spec.clone();
        spec.stdin = StdinMode::Null;
        spec.spill = None;
        let keep = DurableSpec {
            retain: SPILL_LIMIT,
        };
        match self.subprocess.spawn_durable(spec, keep).await {
            Ok(attached) => Ok(Some((
                DurableLink {
                    id: attached.id,
                    subprocess: Arc::clone(&self.subprocess),
                },
                attached.process,
            ))),
            Err(err)
                if err.kind() == ErrorKind::Unsupported
                    && durability == Durability::IfSupported =>
            {
                tracing::debug!(%err, "run: no durable commands in this world; an ordinary background command");
                Ok(None)
            }
            Err(err) if err.kind() == ErrorKind::Unsupported => Err(Error::new(
                ErrorKind::Unsupported,
                format!(
                    "run: durable: true, but this world has no durable commands ({}); run with durable: false",
                    err.message()
                ),
            )),
            Err(err) => Err(from_seam(TOOL, err)),
        }
    }
}

/// A finished command's output as a foreground result shows it.
struct BoundedOutput {
    text: String,
    total: u64,
    omitted: u64,
    spill_path: Option<String>,
}

/// The whole output if it fits in [`HEAD_BYTES`] + [`TAIL_BYTES`], else
/// its head and tail around a marker naming the omitted range. The head of
/// a long output comes from the spill file; if it cannot be read, the
/// head is counted as omitted (the marker still says where to read it).
async fn bounded_output(command: &TrackedCommand) -> Result<BoundedOutput> {
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
        let (text, _) = decode_piece(&piece.bytes, false);
        return Ok(BoundedOutput {
            text,
            total,
            omitted: piece.dropped,
            spill_path,
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
    let (tail, _) = decode_piece(&piece.bytes[skip..], false);
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
            background: None,
            stdin: None,
            keep_stdin: None,
            durable: None,
        }
    }

    #[test]
    fn argv_and_command_run_under_the_merging_wrapper() {
        let plan = RunPlan::check(RunRequest {
            argv: Some(vec!["printf".into(), "a b".into()]),
            ..request()
        })
        .unwrap();
        assert_eq!(
            plan.spec.argv,
            ["bash", "-c", "exec -- \"$@\" 2>&1", "bash", "printf", "a b"]
        );
        assert_eq!(plan.line, "printf 'a b'");
        assert_eq!(plan.spec.stdin, StdinMode::Null);
        assert_eq!(
            plan.spec.timeout,
            Some(Duration::from_millis(DEFAULT_TIMEOUT_MS))
        );

        let plan = RunPlan::check(RunRequest {
            command: Some("echo hi >&2".into()),
            background: Some(true),
            ..request()
        })
        .unwrap();
        assert_eq!(&plan.spec.argv[4..], ["bash", "-c", "echo hi >&2"]);
        assert_eq!(plan.spec.stdin, StdinMode::Null);
        assert_eq!(plan.durability, Durability::IfSupported);
        assert_eq!(plan.spec.timeout, None, "background has no default timeout");
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
