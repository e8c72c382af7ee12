//! Durable background commands: a background `run` with `durable: true`
//! (and no stdin) is started through the `subprocess` seam's durable
//! extension (docs/design.md §5.2.1, §11), so it outlives the tools for as
//! long as the world lasts — a later server of the same scope lists it,
//! any server reads its output by cursor and kills it by its id.
//!
//! - **Ids** are `cmd-<durable id>` (32 hex digits), the world's own id, so
//!   they mean the same command to every server of the world; other
//!   commands keep `cmd-<n>`.
//! - **Output** is merged in the world as for every command (the spawn
//!   points fd 2 at fd 1), so the command's retained stdout *is* the
//!   merged output and cursors are offsets into it. The tools hold one
//!   attachment per command collecting the newest bytes in memory; older
//!   ones are read from the world's retention through a new attachment
//!   from the cursor (see [`super::output`]).
//! - **Adoption**: an id of the world's that these tools do not hold yet
//!   is attached on first use (`read_output`, `kill`, …) from the end of
//!   its output, and held from then on like a command started here.
//! - **Ending**: [`super::Commands::shutdown`] only detaches from durable
//!   commands. Their retained state is removed (`forget`) when the tools
//!   let one go for good: once newer commands push it out, or at shutdown
//!   if `kill` ended it (the agent is done with it). A durable command that
//!   ended on its own stays in the world, listed and readable, for a later
//!   server.

use std::sync::Arc;
use std::time::Duration;

use dsh_plugin_api::durable::{AttachSpec, DurableCommand, DurableState, validate_id};
use dsh_plugin_api::subprocess::{ExitStatus, OutputMode, SubprocessProvider};
use dsh_plugin_api::{Error, ErrorKind, Result};

use super::Commands;
use super::errors::from_seam;
use super::output::{CommandOutput, TAIL_LIMIT};
use super::text::quote_argv;
use super::tracked::{Exit, Stdin, TrackedCommand};

/// How long forgetting a command waits, in all, for its supervisor to
/// record the end after its group was proven gone.
const FORGET_WAIT: Duration = Duration::from_secs(10);
const FORGET_RETRY: Duration = Duration::from_millis(100);
/// How long adopting a command that already ended waits for its
/// attachment to report the end.
const ENDED_REPORT_WAIT: Duration = Duration::from_secs(5);

/// A durable command of the world, as the tools hold it.
#[derive(Clone)]
pub(crate) struct DurableLink {
    /// The world's id (32 lowercase hex digits).
    pub id: String,
    pub subprocess: Arc<dyn SubprocessProvider>,
}

impl DurableLink {
    /// Removes what the world retains of the command, once its
    /// supervisor has recorded the end (`Busy` until then is waited out,
    /// bounded). An id already gone is success.
    pub(crate) async fn forget(&self) -> Result<()> {
        let deadline = tokio::time::Instant::now() + FORGET_WAIT;
        loop {
            match self.subprocess.forget(&self.id).await {
                Ok(()) => return Ok(()),
                Err(err) if err.kind() == ErrorKind::NotFound => return Ok(()),
                Err(err)
                    if err.kind() == ErrorKind::Busy && tokio::time::Instant::now() < deadline =>
                {
                    tokio::time::sleep(FORGET_RETRY).await;
                }
                Err(err) => return Err(err),
            }
        }
    }
}

/// The tool id of durable command `id`.
pub(crate) fn tool_id(id: &str) -> String {
    format!("cmd-{id}")
}

/// The durable id in a tool id `cmd-<32 hex digits>`.
pub(crate) fn durable_id(tool_id: &str) -> Option<&str> {
    tool_id
        .strip_prefix("cmd-")
        .filter(|id| validate_id("read_output", id).is_ok())
}

/// The command line a listing shows for `argv`: a shell string's line
/// (`bash -c <line>`, as `run` starts `command`), else argv quoted.
pub(crate) fn line_of(argv: &[String]) -> String {
    match argv {
        [bash, c, line] if bash == "bash" && c == "-c" => line.clone(),
        _ => quote_argv(argv),
    }
}

/// A durable command's state as the tools report a command's exit.
pub(crate) fn exit_of(state: &DurableState, id: &str) -> Exit {
    match state {
        DurableState::Running => None,
        DurableState::Ended(status) => Some(Ok::<ExitStatus, Error>(*status)),
        DurableState::Lost => Some(Err(Error::unavailable(format!(
            "durable command {id} was lost: its supervisor ended without recording how it ended"
        )))),
    }
}

impl Commands {
    /// The command `id` names: one the tools hold, or a durable command of
    /// the world they adopt now (attached from the end of its output).
    pub(crate) async fn lookup(&self, tool: &str, id: &str) -> Result<Arc<TrackedCommand>> {
        let unknown = match self.registry.get(tool, id) {
            Ok(command) => return Ok(command),
            Err(err) => err,
        };
        let Some(durable) = durable_id(id) else {
            return Err(unknown);
        };
        let held = || {
            self.registry.find(|command| {
                command
                    .durable
                    .as_ref()
                    .is_some_and(|link| link.id == durable)
            })
        };
        if let Some(command) = held() {
            return Ok(command);
        }
        let _one_at_a_time = self.adopting.lock().await;
        if let Some(command) = held() {
            return Ok(command);
        }
        match self.adopt(tool, durable).await {
            Ok(command) => Ok(command),
            Err(err) if matches!(err.kind(), ErrorKind::NotFound | ErrorKind::Unsupported) => {
                Err(unknown)
            }
            Err(err) => Err(err),
        }
    }

    /// Attaches to durable command `id` of the world and holds it: one
    /// this session's scope lists, or — named explicitly — another
    /// scope's, which the world attaches to by its id alone
    /// (docs/design.md §5.2.1).
    async fn adopt(&self, tool: &str, id: &str) -> Result<Arc<TrackedCommand>> {
        let listed = self
            .subprocess
            .list_durable()
            .await
            .map_err(|err| from_seam(tool, err))?;
        let command = listed.into_iter().find(|command| command.id == id);
        let seq = self.registry.reserve(tool)?;
        let mut spec = AttachSpec::new(id, u64::MAX);
        spec.stdout = OutputMode::Collect { limit: TAIL_LIMIT };
        spec.stderr = OutputMode::Null;
        let attached = self.subprocess.attach(spec).await.map_err(|err| {
            if err.kind() == ErrorKind::NotFound {
                Error::not_found(format!("{tool}: no durable command {id}"))
            } else {
                from_seam(tool, err)
            }
        })?;
        let link = DurableLink {
            id: id.to_owned(),
            subprocess: Arc::clone(&self.subprocess),
        };
        let process = attached.process;
        let output = CommandOutput::durable(Arc::clone(&process), link.clone());
        let tracked = Arc::new(TrackedCommand::new(
            seq,
            tool_id(id),
            command.as_ref().map_or_else(
                || format!("(durable command of another session: {id})"),
                |command| line_of(&command.argv),
            ),
            true,
            process,
            output,
            Stdin::NotOpen,
            None,
            Some(link),
        ));
        self.registry.insert(tool, Arc::clone(&tracked))?;
        if command.is_some_and(|command| command.state != DurableState::Running) {
            // It ended before: its attachment reports that at once, and a
            // read right after adoption should see it ended.
            let _ = tracked.wait_exit_for(ENDED_REPORT_WAIT).await;
        }
        Ok(tracked)
    }

    /// The world's durable commands the tools do not hold, oldest first
    /// (none when the provider has no durable commands or cannot list
    /// them now: the listing shows what the tools hold regardless).
    pub(crate) async fn unheld_durable(&self) -> Vec<DurableCommand> {
        let mut listed = match self.subprocess.list_durable().await {
            Ok(listed) => listed,
            Err(err) => {
                if err.kind() != ErrorKind::Unsupported {
                    tracing::warn!(%err, "list_commands: the world's durable commands are not listed");
                }
                return Vec::new();
            }
        };
        listed.retain(|command| {
            self.registry
                .find(|held| {
                    held.durable
                        .as_ref()
                        .is_some_and(|link| link.id == command.id)
                })
                .is_none()
        });
        listed.sort_by_key(|command| command.started_unix_ms);
        listed
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_and_lines() {
        let hex = "0123456789abcdef0123456789abcdef";
        assert_eq!(durable_id(&tool_id(hex)), Some(hex));
        for bad in [
            "cmd-1",
            "cmd-",
            "term-0123456789abcdef0123456789abcdef",
            hex,
        ] {
            assert_eq!(durable_id(bad), None, "{bad}");
        }
        let argv = |words: &[&str]| -> Vec<String> {
            words.iter().map(|word| (*word).to_owned()).collect()
        };
        assert_eq!(line_of(&argv(&["bash", "-c", "echo a; b"])), "echo a; b");
        assert_eq!(line_of(&argv(&["printf", "a b"])), "printf 'a b'");
        assert_eq!(line_of(&["sleep".into(), "5".into()]), "sleep 5");
    }
}
