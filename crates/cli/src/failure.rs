//! How a command fails: a message for stderr and the exit code.

use std::fmt;

use dsh_host::HostError;
use dsh_plugin_api::{Error as PluginError, ErrorKind};

/// Exit code for usage, manifest and configuration errors.
pub const EXIT_CONFIG: i32 = 2;
/// Exit code for an operation that failed at run time.
pub const EXIT_FAILURE: i32 = 1;
/// Exit code when our stdout's reader went away: 128 + SIGPIPE, as shells
/// report a program killed by a closed pipe.
pub const EXIT_CLOSED_STDOUT: i32 = 128 + 13;

/// A command's failure: printed as `dsh: <message>` (nothing when the
/// message is empty), then exit `code`.
#[derive(Debug)]
pub struct Failure {
    pub code: i32,
    pub message: String,
}

impl Failure {
    pub fn new(code: i32, message: impl Into<String>) -> Failure {
        Failure {
            code,
            message: message.into(),
        }
    }

    /// Our stdout's reader went away: a quiet exit, as `| head` expects.
    pub fn closed_stdout() -> Failure {
        Failure::new(EXIT_CLOSED_STDOUT, "")
    }

    /// A host error: configuration problems (manifest, validation, a
    /// plugin's `Config` error at create, a seam the composition does not
    /// provide) exit 2, the rest 1.
    pub fn host(err: &HostError) -> Failure {
        // A command needing a seam the composition lacks (or cannot pick)
        // is the configuration's fault, as a plugin's Config error is.
        let config = err.is_config_error()
            || matches!(
                err,
                HostError::ServiceMissing { .. } | HostError::ServiceNotServed { .. }
            )
            || matches!(err, HostError::Create(create) if create.error.kind() == ErrorKind::Config);
        Failure::new(
            if config { EXIT_CONFIG } else { EXIT_FAILURE },
            err.to_string(),
        )
    }

    /// A seam error of `operation` on `subject`: `<operation> <subject>:
    /// <what went wrong>`, naming the subject once (the error's own subject
    /// is left out when it is the same).
    pub fn seam(operation: &str, subject: &str, err: &PluginError) -> Failure {
        let code = if err.kind() == ErrorKind::InvalidInput || err.kind() == ErrorKind::Config {
            EXIT_CONFIG
        } else {
            EXIT_FAILURE
        };
        Failure::new(
            code,
            format!("{operation} {subject}: {}", detail(subject, err)),
        )
    }

    /// A seam error of an operation the world refused on what it found —
    /// an edit whose text does not match, or matches more than once —
    /// like [`Failure::seam`] but always a failed operation (1), never a
    /// usage error: the command line was right.
    pub fn refused(operation: &str, subject: &str, err: &PluginError) -> Failure {
        Failure {
            code: EXIT_FAILURE,
            ..Failure::seam(operation, subject, err)
        }
    }
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl From<HostError> for Failure {
    fn from(err: HostError) -> Failure {
        Failure::host(&err)
    }
}

/// What `err` says beyond `subject`: its message alone when its subject is
/// `subject`, else the whole error.
pub fn detail(subject: &str, err: &PluginError) -> String {
    match err.subject() {
        Some(own) if own == subject => err.message().to_owned(),
        _ => err.to_string(),
    }
}

/// The exit code for a process status: its code, else 128 + its signal.
pub fn exit_code_of(status: &dsh_plugin_api::subprocess::ExitStatus) -> i32 {
    match (status.code, status.signal) {
        (Some(code), _) => code,
        (None, Some(signal)) => 128 + signal.0,
        (None, None) => EXIT_FAILURE,
    }
}
