//! How a command's state is reported: running or ended, and how it ended.

use super::tracked::Exit;

/// Whether a command is still running.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum CommandStatus {
    /// Its program has not exited yet.
    Running,
    /// Its program exited; `exit_code`, `signal` and `timed_out` say how.
    Exited,
    /// The world could not report how it ended (for example, the world is
    /// gone); its output stays readable.
    Lost,
}

impl CommandStatus {
    pub(crate) fn of(exit: &Exit) -> CommandStatus {
        match exit {
            None => CommandStatus::Running,
            Some(Ok(_)) => CommandStatus::Exited,
            Some(Err(_)) => CommandStatus::Lost,
        }
    }
}

/// How a command ended, as every command result reports it.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, schemars::JsonSchema)]
pub struct ExitInfo {
    /// The exit code, when the program exited normally.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub exit_code: Option<i32>,
    /// The signal that ended the program (`SIGKILL`, `SIGTERM`, …), when
    /// one did — including the tools' own, after a timeout or `kill`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub signal: Option<String>,
    /// Whether the timeout expired and the command's process group was
    /// terminated.
    pub timed_out: bool,
}

impl ExitInfo {
    pub(crate) fn of(exit: &Exit) -> ExitInfo {
        match exit {
            Some(Ok(status)) => ExitInfo {
                exit_code: status.code,
                signal: status.signal.map(|signal| signal.to_string()),
                timed_out: status.timed_out,
            },
            None | Some(Err(_)) => ExitInfo::default(),
        }
    }
}

/// `running`, `exit 0`, `killed by SIGTERM (timed out)`: the state in a
/// few words, for texts a model reads.
pub(crate) fn state_text(status: CommandStatus, exit: &ExitInfo) -> String {
    let ended = match (status, exit.exit_code, &exit.signal) {
        (CommandStatus::Running, ..) => return "running".to_owned(),
        (CommandStatus::Lost, ..) => return "ended, exit unknown (lost)".to_owned(),
        (CommandStatus::Exited, Some(code), _) => format!("exit {code}"),
        (CommandStatus::Exited, None, Some(signal)) => format!("killed by {signal}"),
        (CommandStatus::Exited, None, None) => "ended".to_owned(),
    };
    if exit.timed_out {
        format!("{ended} (timed out)")
    } else {
        ended
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use dsh_plugin_api::Error;
    use dsh_plugin_api::subprocess::{ExitStatus, Signal};

    #[test]
    fn states_read_as_a_model_expects() {
        let killed = Some(Ok(ExitStatus {
            code: None,
            signal: Some(Signal::KILL),
            timed_out: true,
        }));
        let info = ExitInfo::of(&killed);
        assert_eq!(CommandStatus::of(&killed), CommandStatus::Exited);
        assert_eq!(info.signal.as_deref(), Some("SIGKILL"));
        assert_eq!(
            state_text(CommandStatus::Exited, &info),
            "killed by SIGKILL (timed out)"
        );

        let exited = Some(Ok(ExitStatus {
            code: Some(3),
            signal: None,
            timed_out: false,
        }));
        assert_eq!(
            state_text(CommandStatus::of(&exited), &ExitInfo::of(&exited)),
            "exit 3"
        );
        assert_eq!(
            state_text(CommandStatus::of(&None), &ExitInfo::of(&None)),
            "running"
        );
        let lost: Exit = Some(Err(Error::unavailable("wait: world gone")));
        assert_eq!(CommandStatus::of(&lost), CommandStatus::Lost);
        assert_eq!(ExitInfo::of(&lost), ExitInfo::default());
    }
}
