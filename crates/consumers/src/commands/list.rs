//! `list_commands`: every command the tools remember.

use dsh_plugin_api::Result;

use super::Commands;
use super::durable;
use super::errors::from_seam;
use super::status::{CommandStatus, ExitInfo, state_text};
use super::tracked::Stdin;

/// The most characters of a command line a listing shows.
pub const MAX_LISTED_LINE_CHARS: usize = 200;

/// Lists the commands the tools remember (running and finished).
#[derive(Debug, Clone, serde::Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ListCommandsRequest {}

/// The remembered commands, oldest first.
#[derive(Debug, Clone, serde::Serialize, schemars::JsonSchema)]
pub struct ListCommandsResult {
    pub commands: Vec<CommandInfo>,
}

/// One remembered command.
#[derive(Debug, Clone, serde::Serialize, schemars::JsonSchema)]
pub struct CommandInfo {
    pub id: String,
    /// The command as given (a shell string, or argv quoted), cut at 200
    /// characters.
    pub command: String,
    pub background: bool,
    pub status: CommandStatus,
    #[serde(flatten)]
    pub exit: ExitInfo,
    /// Bytes of output written so far.
    pub total_bytes: u64,
    /// Whether `write_stdin` can write to it.
    pub stdin_open: bool,
    /// Whether it is durable: kept by the world, not this server — it
    /// runs on after this server for as long as the world does, and a
    /// later server of the same scope lists and reads it by the same id.
    pub durable: bool,
}

impl crate::Outcome for ListCommandsResult {
    fn text(&self) -> String {
        if self.commands.is_empty() {
            return "no commands".to_owned();
        }
        self.commands
            .iter()
            .map(|info| {
                format!(
                    "{}  {}  {} bytes{}{}  {}",
                    info.id,
                    state_text(info.status, &info.exit),
                    info.total_bytes,
                    if info.stdin_open { "  stdin open" } else { "" },
                    if info.durable { "  durable" } else { "" },
                    info.command
                )
            })
            .collect::<Vec<_>>()
            .join("\n")
    }
}

impl Commands {
    /// `list_commands`: every remembered command with its state and output
    /// size, after the world's durable commands these tools do not hold
    /// (started by an earlier server, or outside the tools: for those, the
    /// output shown and read is their stdout). Dropping the future has no
    /// effect.
    pub async fn list_commands(&self, _request: ListCommandsRequest) -> Result<ListCommandsResult> {
        let mut commands = Vec::new();
        for durable in self.unheld_durable().await {
            let exit = durable::exit_of(&durable.state, &durable.id);
            commands.push(CommandInfo {
                id: durable::tool_id(&durable.id),
                command: cut_line(&durable::line_of(&durable.argv)),
                background: true,
                status: CommandStatus::of(&exit),
                exit: ExitInfo::of(&exit),
                total_bytes: durable.totals[0],
                stdin_open: false,
                durable: true,
            });
        }
        for command in self.registry.all() {
            let exit = command.exit();
            let total_bytes = command
                .output
                .snapshot()
                .await
                .map_err(|err| from_seam("list_commands", err))?
                .total;
            // Locked only while a write is in progress: then it is open.
            let stdin_open = command
                .stdin
                .try_lock()
                .map_or(true, |stdin| matches!(*stdin, Stdin::Open(_)));
            commands.push(CommandInfo {
                id: command.id.clone(),
                command: cut_line(&command.line),
                background: command.is_background(),
                status: CommandStatus::of(&exit),
                exit: ExitInfo::of(&exit),
                total_bytes,
                stdin_open,
                durable: command.durable.is_some(),
            });
        }
        Ok(ListCommandsResult { commands })
    }
}

/// `line` cut at [`MAX_LISTED_LINE_CHARS`] characters, marked when cut.
fn cut_line(line: &str) -> String {
    let mut cut: String = line.chars().take(MAX_LISTED_LINE_CHARS).collect();
    if cut.len() < line.len() {
        cut.push('…');
    }
    cut
}
