//! The one error type of this crate.
//!
//! Every error names the operation and its subject (`stat /home/user/x: not
//! found: …`, `kill sandbox i123: sandbox i123 not found: …`). Variants are
//! the classes a caller acts on; [`Error::is_sandbox_gone`] and
//! [`Error::is_unavailable`] answer the two questions a sandbox owner keeps
//! asking ("is the world gone?", "should I treat it as unreachable?").

use std::fmt;

use connectrpc::{ErrorCode, SharedSource};

/// Shorthand for `Result<T, e2b_client::Error>`.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// What was being done, to what: rendered `"<op> <subject>"`, or just
/// `"<op>"` when there is no subject (e.g. `list processes`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Context {
    /// The operation, e.g. `"stat"`, `"create sandbox"`, `"upload"`.
    pub op: &'static str,
    /// What it acted on: a path, a sandbox id, a pid; may be empty.
    pub subject: String,
}

impl Context {
    /// A context for `op` acting on `subject`.
    pub fn new(op: &'static str, subject: impl Into<String>) -> Self {
        Self {
            op,
            subject: subject.into(),
        }
    }
}

impl fmt::Display for Context {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.subject.is_empty() {
            f.write_str(self.op)
        } else {
            write!(f, "{} {}", self.op, self.subject)
        }
    }
}

/// Everything that can go wrong talking to E2B.
///
/// Classification works from the HTTP response alone (status, headers,
/// body), so an `Envd` over any transport (including one relayed across a
/// plugin boundary) reports the same variants.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A setting (option or environment variable) is malformed; nothing was
    /// sent. The message never contains secret values.
    #[error("{op}: invalid setting {setting}: {message}")]
    Config {
        /// The operation that read the setting.
        op: &'static str,
        /// The option or environment variable, e.g. `E2B_API_KEY`.
        setting: &'static str,
        /// What is wrong with it.
        message: String,
    },
    /// Missing or rejected credentials: HTTP 401 from the API or `/files`,
    /// Connect `unauthenticated` (also an unknown envd user).
    #[error("{context}: authentication failed: {message}")]
    Authentication {
        /// Operation and subject.
        context: Context,
        /// Server's message.
        message: String,
    },
    /// The sandbox does not exist (any more), or is paused: a 404 carrying
    /// `"code": 404` on a sandbox endpoint, HTTP 502 from the edge proxy on
    /// an envd call, or Connect `unavailable` before the first event of
    /// `Start`/`Connect`/`WatchDir`.
    #[error("{context}: sandbox {sandbox_id} not found: {message}")]
    SandboxNotFound {
        /// Operation and subject.
        context: Context,
        /// The sandbox the call was for.
        sandbox_id: String,
        /// Server's message.
        message: String,
    },
    /// A file, directory, process or watcher does not exist (Connect
    /// `not_found`, `/files` 404).
    #[error("{context}: not found: {message}")]
    NotFound {
        /// Operation and subject.
        context: Context,
        /// Server's message.
        message: String,
    },
    /// The request was rejected as malformed, by the server (Connect
    /// `invalid_argument`, HTTP 400) or before sending (bad input).
    #[error("{context}: invalid argument: {message}")]
    InvalidArgument {
        /// Operation and subject.
        context: Context,
        /// What is wrong.
        message: String,
    },
    /// The target already exists (Connect `already_exists`).
    #[error("{context}: already exists: {message}")]
    AlreadyExists {
        /// Operation and subject.
        context: Context,
        /// Server's message.
        message: String,
    },
    /// Connect `permission_denied` or HTTP 403.
    #[error("{context}: permission denied: {message}")]
    PermissionDenied {
        /// Operation and subject.
        context: Context,
        /// Server's message.
        message: String,
    },
    /// A deadline passed: Connect `deadline_exceeded` (the server's or the
    /// client's own), or this crate's request/handshake timeout.
    #[error("{context}: timed out: {message}")]
    Timeout {
        /// Operation and subject.
        context: Context,
        /// Which deadline.
        message: String,
    },
    /// HTTP 429 or Connect `resource_exhausted`.
    #[error("{context}: rate limited: {message}")]
    RateLimited {
        /// Operation and subject.
        context: Context,
        /// Server's message.
        message: String,
    },
    /// The sandbox disk is full (`/files` 507).
    #[error("{context}: not enough space: {message}")]
    NotEnoughSpace {
        /// Operation and subject.
        context: Context,
        /// Server's message.
        message: String,
    },
    /// The state forbids the operation (HTTP 409, e.g. pausing a sandbox
    /// that is already paused).
    #[error("{context}: conflict: {message}")]
    Conflict {
        /// Operation and subject.
        context: Context,
        /// Server's message.
        message: String,
    },
    /// Any other Connect error code from envd.
    #[error("{context}: {code}: {message}", code = code.as_str())]
    Rpc {
        /// Operation and subject.
        context: Context,
        /// The Connect code.
        code: ErrorCode,
        /// Server's message.
        message: String,
    },
    /// Any other non-success HTTP status.
    #[error("{context}: HTTP {status}: {message}")]
    Http {
        /// Operation and subject.
        context: Context,
        /// The status code.
        status: u16,
        /// Server's message (or a prefix of the body).
        message: String,
    },
    /// The request never got an answer: connection refused or reset, DNS or
    /// TLS failure, or the response body broke off. Treat as "unavailable".
    #[error("{context}: transport failure: {message}")]
    Transport {
        /// Operation and subject.
        context: Context,
        /// What failed.
        message: String,
        /// The underlying error, when there is one.
        #[source]
        source: Option<SharedSource>,
    },
    /// The caller's upload stream yielded an error; the upload was aborted
    /// and the target may be left partially written.
    #[error("{context}: upload source failed: {message}")]
    UploadSource {
        /// Operation and subject.
        context: Context,
        /// The stream's error.
        message: String,
    },
    /// The server answered something this client cannot accept: malformed
    /// JSON, a stream that did not start with a start event, an invalid
    /// `envdVersion`.
    #[error("{context}: unexpected response: {message}")]
    Protocol {
        /// Operation and subject.
        context: Context,
        /// What was wrong.
        message: String,
    },
}

impl Error {
    /// The operation and subject, for every variant except [`Error::Config`].
    pub fn context(&self) -> Option<&Context> {
        match self {
            Error::Config { .. } => None,
            Error::Authentication { context, .. }
            | Error::SandboxNotFound { context, .. }
            | Error::NotFound { context, .. }
            | Error::InvalidArgument { context, .. }
            | Error::AlreadyExists { context, .. }
            | Error::PermissionDenied { context, .. }
            | Error::Timeout { context, .. }
            | Error::RateLimited { context, .. }
            | Error::NotEnoughSpace { context, .. }
            | Error::Conflict { context, .. }
            | Error::Rpc { context, .. }
            | Error::Http { context, .. }
            | Error::Transport { context, .. }
            | Error::UploadSource { context, .. }
            | Error::Protocol { context, .. } => Some(context),
        }
    }

    /// True when the sandbox itself is gone (killed, expired, paused or never
    /// existed): nothing in it can still run, so callers may settle handles
    /// as quiescent instead of retrying.
    pub fn is_sandbox_gone(&self) -> bool {
        matches!(self, Error::SandboxNotFound { .. })
    }

    /// True when the sandbox could not be reached or answered "unavailable":
    /// [`Error::SandboxNotFound`], [`Error::Transport`] and Connect
    /// `unavailable`. A superset of [`Error::is_sandbox_gone`].
    pub fn is_unavailable(&self) -> bool {
        matches!(
            self,
            Error::SandboxNotFound { .. }
                | Error::Transport { .. }
                | Error::Rpc {
                    code: ErrorCode::Unavailable,
                    ..
                }
        )
    }

    /// True for [`Error::NotFound`] (a missing file, process or watcher; not
    /// a missing sandbox).
    pub fn is_not_found(&self) -> bool {
        matches!(self, Error::NotFound { .. })
    }

    /// True for [`Error::Timeout`].
    pub fn is_timeout(&self) -> bool {
        matches!(self, Error::Timeout { .. })
    }

    pub(crate) fn invalid_argument(context: Context, message: impl Into<String>) -> Self {
        Error::InvalidArgument {
            context,
            message: message.into(),
        }
    }

    pub(crate) fn protocol(context: Context, message: impl Into<String>) -> Self {
        Error::Protocol {
            context,
            message: message.into(),
        }
    }

    pub(crate) fn timeout(context: Context, message: impl Into<String>) -> Self {
        Error::Timeout {
            context,
            message: message.into(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn display_names_operation_and_subject() {
        let err = Error::NotFound {
            context: Context::new("stat", "/home/user/x"),
            message: "file not found".into(),
        };
        assert_eq!(
            err.to_string(),
            "stat /home/user/x: not found: file not found"
        );
    }

    #[test]
    fn display_without_subject_has_no_trailing_space() {
        let err = Error::Rpc {
            context: Context::new("list processes", ""),
            code: ErrorCode::Internal,
            message: "boom".into(),
        };
        assert_eq!(err.to_string(), "list processes: internal: boom");
    }

    #[test]
    fn gone_and_unavailable_predicates() {
        let gone = Error::SandboxNotFound {
            context: Context::new("kill sandbox", "abc"),
            sandbox_id: "abc".into(),
            message: "not found".into(),
        };
        assert!(gone.is_sandbox_gone());
        assert!(gone.is_unavailable());
        assert_eq!(
            gone.to_string(),
            "kill sandbox abc: sandbox abc not found: not found"
        );

        let transport = Error::Transport {
            context: Context::new("stat", "/x"),
            message: "connection refused".into(),
            source: None,
        };
        assert!(!transport.is_sandbox_gone());
        assert!(transport.is_unavailable());

        let unavailable = Error::Rpc {
            context: Context::new("stat", "/x"),
            code: ErrorCode::Unavailable,
            message: "try later".into(),
        };
        assert!(unavailable.is_unavailable());
        assert!(!unavailable.is_sandbox_gone());

        let not_found = Error::NotFound {
            context: Context::new("stat", "/x"),
            message: "nope".into(),
        };
        assert!(not_found.is_not_found());
        assert!(!not_found.is_unavailable());
    }

    #[test]
    fn config_error_has_no_context() {
        let err = Error::Config {
            op: "load configuration",
            setting: "E2B_API_KEY",
            message: "bad".into(),
        };
        assert!(err.context().is_none());
        assert_eq!(
            err.to_string(),
            "load configuration: invalid setting E2B_API_KEY: bad"
        );
    }
}
