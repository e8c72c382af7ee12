//! The one error type every seam returns.
//!
//! An [`Error`] carries an open [`ErrorKind`] (what went wrong, in a
//! vocabulary shared by every provider), a human message that names the
//! operation (`"read_text: not valid UTF-8"`), and optionally the subject it
//! concerns (a path, a pid, a plugin id). It crosses the plugin ABI as a
//! stable integer kind plus strings, so a host built against a newer API
//! still understands an older plugin's errors and vice versa: unknown codes
//! survive as [`ErrorKind::Other`].

use std::fmt;

/// What went wrong, independent of which provider or world reported it.
///
/// The set is open: new kinds may be added in later API versions, and a code
/// this build does not know is preserved as [`ErrorKind::Other`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ErrorKind {
    /// The path, process, sandbox or service does not exist.
    NotFound,
    /// The world refused the operation for lack of permission.
    PermissionDenied,
    /// The target exists and the operation required that it did not.
    AlreadyExists,
    /// A guard failed: the target changed since the caller observed it
    /// (stale version).
    Conflict,
    /// A path component that must be a directory is not one.
    NotADirectory,
    /// The operation needs a non-directory and found a directory.
    IsADirectory,
    /// Content is not valid UTF-8 (never replaced, always reported).
    InvalidUtf8,
    /// Content is binary (a NUL byte in the first 8192 bytes).
    Binary,
    /// The caller's input is malformed (empty argv, bad env name, NUL in a
    /// path, an edit matching zero or several times, …).
    InvalidInput,
    /// The operation was cancelled before it took effect.
    Cancelled,
    /// The world is gone or unreachable (sandbox deleted, expired, killed).
    Unavailable,
    /// A deadline elapsed.
    Timeout,
    /// The handle or service was closed or disposed.
    Closed,
    /// The operation could not complete now; retrying may succeed (e.g. a
    /// process group not yet proven empty after a terminate).
    Busy,
    /// A plugin panicked; the panic was caught at the ABI boundary.
    Panicked,
    /// Configuration or manifest error.
    Config,
    /// An I/O failure not covered by a more specific kind.
    Io,
    /// A remote service failed in a way that maps to no other kind.
    Remote,
    /// The provider does not support this operation.
    Unsupported,
    /// A kind this build does not know (from a newer peer), by its code.
    Other(u32),
}

impl ErrorKind {
    /// The stable integer code that crosses the ABI.
    pub fn code(self) -> u32 {
        match self {
            ErrorKind::NotFound => 1,
            ErrorKind::PermissionDenied => 2,
            ErrorKind::AlreadyExists => 3,
            ErrorKind::Conflict => 4,
            ErrorKind::NotADirectory => 5,
            ErrorKind::IsADirectory => 6,
            ErrorKind::InvalidUtf8 => 7,
            ErrorKind::Binary => 8,
            ErrorKind::InvalidInput => 9,
            ErrorKind::Cancelled => 10,
            ErrorKind::Unavailable => 11,
            ErrorKind::Timeout => 12,
            ErrorKind::Closed => 13,
            ErrorKind::Busy => 14,
            ErrorKind::Panicked => 15,
            ErrorKind::Config => 16,
            ErrorKind::Io => 17,
            ErrorKind::Remote => 18,
            ErrorKind::Unsupported => 19,
            ErrorKind::Other(code) => code,
        }
    }

    /// The kind for a code; codes this build does not know become
    /// [`ErrorKind::Other`] so they survive a round trip.
    pub fn from_code(code: u32) -> ErrorKind {
        match code {
            1 => ErrorKind::NotFound,
            2 => ErrorKind::PermissionDenied,
            3 => ErrorKind::AlreadyExists,
            4 => ErrorKind::Conflict,
            5 => ErrorKind::NotADirectory,
            6 => ErrorKind::IsADirectory,
            7 => ErrorKind::InvalidUtf8,
            8 => ErrorKind::Binary,
            9 => ErrorKind::InvalidInput,
            10 => ErrorKind::Cancelled,
            11 => ErrorKind::Unavailable,
            12 => ErrorKind::Timeout,
            13 => ErrorKind::Closed,
            14 => ErrorKind::Busy,
            15 => ErrorKind::Panicked,
            16 => ErrorKind::Config,
            17 => ErrorKind::Io,
            18 => ErrorKind::Remote,
            19 => ErrorKind::Unsupported,
            other => ErrorKind::Other(other),
        }
    }

    /// A short lowercase name (`not found`, `conflict`, …) for messages.
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorKind::NotFound => "not found",
            ErrorKind::PermissionDenied => "permission denied",
            ErrorKind::AlreadyExists => "already exists",
            ErrorKind::Conflict => "conflict",
            ErrorKind::NotADirectory => "not a directory",
            ErrorKind::IsADirectory => "is a directory",
            ErrorKind::InvalidUtf8 => "invalid UTF-8",
            ErrorKind::Binary => "binary content",
            ErrorKind::InvalidInput => "invalid input",
            ErrorKind::Cancelled => "cancelled",
            ErrorKind::Unavailable => "unavailable",
            ErrorKind::Timeout => "timed out",
            ErrorKind::Closed => "closed",
            ErrorKind::Busy => "busy",
            ErrorKind::Panicked => "panicked",
            ErrorKind::Config => "configuration error",
            ErrorKind::Io => "I/O error",
            ErrorKind::Remote => "remote error",
            ErrorKind::Unsupported => "unsupported",
            ErrorKind::Other(_) => "error",
        }
    }
}

impl fmt::Display for ErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ErrorKind::Other(code) => write!(f, "error (kind {code})"),
            kind => f.write_str(kind.as_str()),
        }
    }
}

/// An error from a seam operation: kind, message and optional subject.
///
/// `Display` renders `"<subject>: <message>"` when a subject is set and the
/// message alone otherwise, so a caller can print it as is. Messages should name the operation (`"write: staging directory
/// could not be created"`); the host adds the plugin id and service.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Error {
    kind: ErrorKind,
    message: String,
    subject: Option<String>,
}

impl Error {
    /// An error of `kind` with a message naming the operation.
    pub fn new(kind: ErrorKind, message: impl Into<String>) -> Error {
        Error {
            kind,
            message: message.into(),
            subject: None,
        }
    }

    /// The same error about `subject` (a path, pid, plugin id …).
    #[must_use]
    pub fn with_subject(mut self, subject: impl Into<String>) -> Error {
        self.subject = Some(subject.into());
        self
    }

    /// The same error with `context` prepended to its message
    /// (`"<context>: <message>"`).
    #[must_use]
    pub fn context(mut self, context: impl fmt::Display) -> Error {
        self.message = format!("{context}: {}", self.message);
        self
    }

    /// What went wrong.
    pub fn kind(&self) -> ErrorKind {
        self.kind
    }

    /// The message, without the subject.
    pub fn message(&self) -> &str {
        &self.message
    }

    /// What the error is about, if known.
    pub fn subject(&self) -> Option<&str> {
        self.subject.as_deref()
    }

    /// Shorthand for [`ErrorKind::NotFound`].
    pub fn not_found(message: impl Into<String>) -> Error {
        Error::new(ErrorKind::NotFound, message)
    }

    /// Shorthand for [`ErrorKind::InvalidInput`].
    pub fn invalid_input(message: impl Into<String>) -> Error {
        Error::new(ErrorKind::InvalidInput, message)
    }

    /// Shorthand for [`ErrorKind::Unavailable`].
    pub fn unavailable(message: impl Into<String>) -> Error {
        Error::new(ErrorKind::Unavailable, message)
    }

    /// Shorthand for [`ErrorKind::Closed`].
    pub fn closed(message: impl Into<String>) -> Error {
        Error::new(ErrorKind::Closed, message)
    }

    /// Shorthand for [`ErrorKind::Config`].
    pub fn config(message: impl Into<String>) -> Error {
        Error::new(ErrorKind::Config, message)
    }

    /// Shorthand for [`ErrorKind::Io`].
    pub fn io(message: impl Into<String>) -> Error {
        Error::new(ErrorKind::Io, message)
    }

    /// Maps a host `std::io::Error` onto the shared vocabulary, keeping its
    /// text; `operation` names what was being done.
    pub fn from_io(operation: &str, err: &std::io::Error) -> Error {
        use std::io::ErrorKind as Io;
        let kind = match err.kind() {
            Io::NotFound => ErrorKind::NotFound,
            Io::PermissionDenied => ErrorKind::PermissionDenied,
            Io::AlreadyExists => ErrorKind::AlreadyExists,
            Io::NotADirectory => ErrorKind::NotADirectory,
            Io::IsADirectory => ErrorKind::IsADirectory,
            Io::InvalidInput | Io::InvalidFilename => ErrorKind::InvalidInput,
            Io::TimedOut => ErrorKind::Timeout,
            Io::Interrupted => ErrorKind::Cancelled,
            Io::BrokenPipe => ErrorKind::Closed,
            Io::Unsupported => ErrorKind::Unsupported,
            _ => ErrorKind::Io,
        };
        Error::new(kind, format!("{operation}: {err}"))
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.subject {
            Some(subject) => write!(f, "{subject}: {}", self.message),
            None => f.write_str(&self.message),
        }
    }
}

impl std::error::Error for Error {}

/// The result type of every seam operation.
pub type Result<T, E = Error> = std::result::Result<T, E>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_known_kind_round_trips_through_its_code() {
        for code in 1..=19 {
            let kind = ErrorKind::from_code(code);
            assert!(!matches!(kind, ErrorKind::Other(_)), "code {code}");
            assert_eq!(kind.code(), code);
        }
    }

    #[test]
    fn unknown_codes_survive_as_other() {
        let kind = ErrorKind::from_code(4242);
        assert_eq!(kind, ErrorKind::Other(4242));
        assert_eq!(kind.code(), 4242);
        assert_eq!(kind.to_string(), "error (kind 4242)");
    }

    #[test]
    fn display_puts_the_subject_first() {
        let err = Error::not_found("stat: no such file").with_subject("/tmp/x");
        assert_eq!(err.to_string(), "/tmp/x: stat: no such file");
        let err = err.context("fs-local");
        assert_eq!(err.message(), "fs-local: stat: no such file");
    }

    #[test]
    fn io_errors_map_onto_the_vocabulary() {
        let io = std::io::Error::from(std::io::ErrorKind::NotFound);
        let err = Error::from_io("open", &io);
        assert_eq!(err.kind(), ErrorKind::NotFound);
        assert!(err.message().starts_with("open: "));
    }
}
