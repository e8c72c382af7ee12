//! `terminal_open`: a program on a new pseudo-terminal.

use std::collections::BTreeMap;
use std::num::NonZeroU16;
use std::sync::Arc;

use dsh_plugin_api::Result;
use dsh_plugin_api::subprocess::TerminalSpec;

use super::Terminals;
use super::session::TerminalSession;
use crate::commands::{from_seam, invalid, quote_argv};

const TOOL: &str = "terminal_open";

/// Columns when `cols` is not given.
pub const DEFAULT_COLS: u16 = 80;
/// Rows when `rows` is not given.
pub const DEFAULT_ROWS: u16 = 24;
/// The widest terminal accepted (the screen is kept in memory).
pub const MAX_COLS: u16 = 500;
/// The tallest terminal accepted.
pub const MAX_ROWS: u16 = 200;
/// The terminal type announced to programs (`TERM`) unless `env` sets one:
/// what the screen emulator understands.
pub const DEFAULT_TERM: &str = "xterm-256color";
/// The most bytes a `command`, or all `argv` entries together, may have.
const MAX_COMMAND_BYTES: usize = 128 * 1024;
/// The most `env` entries a request may carry.
const MAX_ENV_ENTRIES: usize = 256;

/// Opens a terminal running a program (by default a login shell).
#[derive(Debug, Clone, serde::Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TerminalOpenRequest {
    /// A shell command line to run on the terminal (`bash -c <command>`,
    /// e.g. `python3` or `vim notes.txt`). Default (with no `argv`
    /// either): an interactive login shell, `bash -l` (`sh -l` where the
    /// world has no bash). At most one of `command` and `argv`.
    #[serde(default)]
    pub command: Option<String>,
    /// A program and its arguments, run without a shell. At most one of
    /// `command` and `argv`.
    #[serde(default)]
    pub argv: Option<Vec<String>>,
    /// Working directory: absolute, or relative to the world's working
    /// directory (the default). Must exist.
    #[serde(default)]
    pub cwd: Option<String>,
    /// Environment variables to set (name → value), on top of the world's
    /// environment. `TERM` defaults to `xterm-256color`.
    #[serde(default)]
    pub env: Option<BTreeMap<String, String>>,
    /// Width in columns. Default 80, at most 500.
    #[serde(default)]
    pub cols: Option<u16>,
    /// Height in rows. Default 24, at most 200.
    #[serde(default)]
    pub rows: Option<u16>,
}

/// The opened terminal.
#[derive(Debug, Clone, serde::Serialize, schemars::JsonSchema)]
pub struct TerminalOpenResult {
    /// The terminal's id, for the other terminal tools.
    pub id: String,
    /// What runs on it.
    pub command: String,
    /// The program's process id in the world.
    pub pid: u32,
    pub cols: u16,
    pub rows: u16,
}

impl crate::Outcome for TerminalOpenResult {
    fn text(&self) -> String {
        format!(
            "opened {} ({}x{}) running {}; send input with terminal_send, see it with terminal_read",
            self.id, self.cols, self.rows, self.command
        )
    }
}

/// A terminal dimension: the default when absent, else 1 ..= `max`.
pub(crate) fn dimension(
    tool: &str,
    name: &str,
    value: Option<u16>,
    default: u16,
    max: u16,
) -> Result<NonZeroU16> {
    let value = value.unwrap_or(default);
    NonZeroU16::new(value)
        .filter(|value| value.get() <= max)
        .ok_or_else(|| {
            invalid(
                tool,
                format_args!("{name} {value} is not between 1 and {max}"),
            )
        })
}

impl Terminals {
    /// `terminal_open`: starts the program on a new pseudo-terminal in its
    /// own session and begins draining its output. Once the provider has
    /// started it, the terminal is remembered without another await, so
    /// dropping the future can only interrupt the start itself (whatever
    /// that left is the provider's, ended at its disposal). An open
    /// terminal lives until `terminal_close` or shutdown.
    pub async fn terminal_open(&self, request: TerminalOpenRequest) -> Result<TerminalOpenResult> {
        let cols = dimension(TOOL, "cols", request.cols, DEFAULT_COLS, MAX_COLS)?;
        let rows = dimension(TOOL, "rows", request.rows, DEFAULT_ROWS, MAX_ROWS)?;
        let mut env = request.env.unwrap_or_default();
        if env.len() > MAX_ENV_ENTRIES {
            return Err(invalid(
                TOOL,
                format_args!("{} env entries, more than {MAX_ENV_ENTRIES}", env.len()),
            ));
        }
        env.entry("TERM".to_owned())
            .or_insert_with(|| DEFAULT_TERM.to_owned());
        let argv = match (request.command, request.argv) {
            (Some(_), Some(_)) => {
                return Err(invalid(TOOL, "give command or argv, not both"));
            }
            (Some(command), None) => vec![self.shell().await, "-c".to_owned(), command],
            (None, Some(argv)) => {
                if argv.first().is_none_or(String::is_empty) {
                    return Err(invalid(TOOL, "argv is empty (argv[0] names the program)"));
                }
                argv
            }
            (None, None) => vec![self.shell().await, "-l".to_owned()],
        };
        let size: usize = argv.iter().map(String::len).sum();
        if size > MAX_COMMAND_BYTES {
            return Err(invalid(
                TOOL,
                format_args!("the command is {size} bytes, more than {MAX_COMMAND_BYTES}"),
            ));
        }
        let line = quote_argv(&argv);
        let mut spec = TerminalSpec::new(argv);
        spec.cwd = request.cwd;
        spec.env = env;
        spec.cols = cols.get();
        spec.rows = rows.get();
        spec.validate().map_err(|err| from_seam(TOOL, err))?;

        let seq = self.registry.reserve(TOOL)?;
        let terminal = self
            .subprocess
            .spawn_terminal(spec)
            .await
            .map_err(|err| from_seam(TOOL, err))?;
        let pid = terminal.pid();
        let session = Arc::new(TerminalSession::start(
            seq,
            self.registry.id(seq),
            line.clone(),
            terminal,
            cols,
            rows,
        ));
        self.registry.insert(TOOL, Arc::clone(&session))?;
        Ok(TerminalOpenResult {
            id: session.id.clone(),
            command: line,
            pid,
            cols: cols.get(),
            rows: rows.get(),
        })
    }

    /// `bash` where the world has it, else `sh`.
    async fn shell(&self) -> String {
        match self.subprocess.resolve_executable("bash", &[]).await {
            Ok(_) => "bash".to_owned(),
            Err(_) => "sh".to_owned(),
        }
    }
}
