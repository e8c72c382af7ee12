//! Signals by name or number, as a model writes them.

use dsh_plugin_api::Result;
use dsh_plugin_api::subprocess::Signal;

use crate::commands::invalid;

/// The highest signal number accepted (Linux real-time signals end at 64).
const MAX_SIGNAL: i32 = 64;

/// A signal: a name (`INT`, `SIGINT`, `term`, …) or a number (`2`).
#[derive(Debug, Clone, serde::Deserialize, schemars::JsonSchema)]
#[serde(untagged)]
pub enum SignalName {
    /// A signal number, 1 to 64.
    Number(i32),
    /// A signal name, with or without `SIG`: HUP, INT, QUIT, KILL, USR1,
    /// USR2, TERM, CONT, STOP, TSTP, WINCH — or a number as text.
    Name(String),
}

const NAMED: [Signal; 11] = [
    Signal::HUP,
    Signal::INT,
    Signal::QUIT,
    Signal::KILL,
    Signal::USR1,
    Signal::USR2,
    Signal::TERM,
    Signal::CONT,
    Signal::STOP,
    Signal::TSTP,
    Signal::WINCH,
];

impl SignalName {
    /// The signal meant, or `InvalidInput` from `tool` naming the known
    /// ones.
    pub(crate) fn resolve(&self, tool: &str) -> Result<Signal> {
        let name = match self {
            SignalName::Number(number) => return by_number(tool, *number),
            SignalName::Name(name) => name.trim(),
        };
        if let Ok(number) = name.parse::<i32>() {
            return by_number(tool, number);
        }
        let wanted = name.to_ascii_uppercase();
        let wanted = if wanted.starts_with("SIG") {
            wanted
        } else {
            format!("SIG{wanted}")
        };
        NAMED
            .into_iter()
            .find(|signal| signal.name() == Some(wanted.as_str()))
            .ok_or_else(|| {
                invalid(
                    tool,
                    format_args!(
                        "unknown signal {name:?}; use a number or one of HUP, INT, QUIT, KILL, USR1, USR2, TERM, CONT, STOP, TSTP, WINCH"
                    ),
                )
            })
    }
}

fn by_number(tool: &str, number: i32) -> Result<Signal> {
    if (1..=MAX_SIGNAL).contains(&number) {
        Ok(Signal(number))
    } else {
        Err(invalid(
            tool,
            format_args!("signal {number} is not between 1 and {MAX_SIGNAL}"),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn resolve(name: SignalName) -> Result<Signal> {
        name.resolve("terminal_signal")
    }

    #[test]
    fn names_and_numbers() {
        for name in ["INT", "sigint", "SIGINT", " int ", "2"] {
            assert_eq!(
                resolve(SignalName::Name(name.into())).unwrap(),
                Signal::INT,
                "{name}"
            );
        }
        assert_eq!(resolve(SignalName::Number(9)).unwrap(), Signal::KILL);
        assert_eq!(resolve(SignalName::Number(34)).unwrap(), Signal(34));
        for bad in [
            SignalName::Number(0),
            SignalName::Number(65),
            SignalName::Name("BOGUS".into()),
        ] {
            let err = resolve(bad).unwrap_err();
            assert_eq!(err.kind(), dsh_plugin_api::ErrorKind::InvalidInput);
            assert!(err.message().starts_with("terminal_signal: "));
        }
    }
}
