//! Errors in the fs vocabulary: every error this crate returns names the
//! operation in its message (`"write: …"`) and carries the path the caller
//! named as its subject, so it renders as
//! `"/home/user/a.txt: write: not found: …"`.
//!
//! envd reports many filesystem failures as a generic Connect `internal`
//! (or `invalid_argument`) carrying the OS error text (`lstat …: not a
//! directory`); [`Op::remote`] refines those onto the fs vocabulary from
//! that text, which is the kernel's `strerror` wording in both Go and Rust
//! servers.

use std::fmt::Display;

use dsh_e2b_gateway::plugin_error;
use dsh_plugin_api::{Error, ErrorKind};

/// One operation on one subject path: the context every error is built in.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Op<'a> {
    /// The seam operation (`"read_text"`, `"write"` …).
    pub name: &'static str,
    /// The path the caller named, made absolute.
    pub subject: &'a str,
}

impl<'a> Op<'a> {
    pub(crate) fn new(name: &'static str, subject: &'a str) -> Op<'a> {
        Op { name, subject }
    }

    /// An error of `kind` whose message is `"<op>: <detail>"`.
    pub(crate) fn error(&self, kind: ErrorKind, detail: impl Display) -> Error {
        Error::new(kind, format!("{}: {detail}", self.name)).with_subject(self.subject)
    }

    /// A failure of an envd call made for this operation, in the fs
    /// vocabulary (see [`classify`]).
    pub(crate) fn remote(&self, err: &e2b_client::Error) -> Error {
        self.error(classify(err), describe(self.subject, err))
    }

    /// An owned copy, for work that outlives the caller's borrow (streams,
    /// detached tasks).
    pub(crate) fn to_owned(self) -> OwnedOp {
        OwnedOp {
            name: self.name,
            subject: self.subject.to_owned(),
        }
    }
}

impl dsh_provider_kit::ErrorContext for Op<'_> {
    fn error(&self, kind: ErrorKind, detail: impl Display) -> Error {
        Op::error(self, kind, detail)
    }
}

/// [`Op`] with an owned subject.
#[derive(Debug, Clone)]
pub(crate) struct OwnedOp {
    name: &'static str,
    subject: String,
}

impl OwnedOp {
    pub(crate) fn op(&self) -> Op<'_> {
        Op::new(self.name, &self.subject)
    }
}

/// The fs kind of an `e2b_client` error: [`plugin_error`]'s mapping (a gone
/// sandbox or a broken connection is `Unavailable`), refined from the OS
/// error text for the generic classes envd uses for filesystem failures.
pub(crate) fn classify(err: &e2b_client::Error) -> ErrorKind {
    let base = plugin_error(err).kind();
    if !matches!(base, ErrorKind::Remote | ErrorKind::InvalidInput) {
        return base;
    }
    let message = match err {
        e2b_client::Error::Rpc { message, .. }
        | e2b_client::Error::InvalidArgument { message, .. }
        | e2b_client::Error::Http { message, .. } => message,
        _ => return base,
    };
    refine(&message.to_ascii_lowercase()).unwrap_or(base)
}

/// The kind an OS error text (lowercased) names, if it names one the fs
/// vocabulary has. Order matters: "path already exists but it is not a
/// directory" is about something already existing.
fn refine(text: &str) -> Option<ErrorKind> {
    const PATTERNS: &[(&str, ErrorKind)] = &[
        ("already exists", ErrorKind::AlreadyExists),
        ("file exists", ErrorKind::AlreadyExists),
        ("directory not empty", ErrorKind::AlreadyExists),
        ("not a directory", ErrorKind::NotADirectory),
        ("is a directory", ErrorKind::IsADirectory),
        ("no such file or directory", ErrorKind::NotFound),
        ("permission denied", ErrorKind::PermissionDenied),
        ("operation not permitted", ErrorKind::PermissionDenied),
        ("read-only file system", ErrorKind::PermissionDenied),
        ("too many levels of symbolic links", ErrorKind::Io),
        ("no space left on device", ErrorKind::Io),
    ];
    PATTERNS
        .iter()
        .find(|(pattern, _)| text.contains(pattern))
        .map(|&(_, kind)| kind)
}

/// The error's text saying each thing once, as the local provider does
/// (`stream_text: No such file or directory (os error 2)`, not
/// `stream_text: stat: not found: file not found: /w/a: No such file or
/// directory (os error 2)`): `e2b_client` errors read `"<call> <subject>:
/// <class>: <message>"`; the call is kept only when it was about another
/// path (a link's target) — about the operation's own subject it is how
/// the operation is done, not what went wrong —; where envd's message
/// names the path again, what follows its last mention is the reason; and
/// the class is kept only when the message does not already say it.
fn describe(subject: &str, err: &e2b_client::Error) -> String {
    let text = err.to_string();
    let Some(context) = err.context() else {
        return text;
    };
    let Some(rest) = text.strip_prefix(&format!("{context}: ")) else {
        return text;
    };
    let rest = match rest.rsplit_once(&format!("{}: ", context.subject)) {
        Some((_, reason)) if !reason.is_empty() => reason,
        _ => rest,
    };
    let rest = match rest.split_once(": ") {
        Some((class, message))
            if message
                .to_ascii_lowercase()
                .contains(&class.to_ascii_lowercase()) =>
        {
            message
        }
        _ => rest,
    };
    if context.subject == subject {
        rest.to_owned()
    } else {
        format!("{context}: {rest}")
    }
}

#[cfg(test)]
mod tests {
    use e2b_client::{Context, ErrorCode};

    use super::*;

    fn internal(message: &str) -> e2b_client::Error {
        e2b_client::Error::Rpc {
            context: Context::new("stat", "/w/a"),
            code: ErrorCode::Internal,
            message: message.into(),
        }
    }

    #[test]
    fn os_error_text_refines_generic_failures() {
        let cases = [
            (
                "error getting file info: lstat /w/a/b: not a directory",
                ErrorKind::NotADirectory,
            ),
            (
                "error renaming: rename /x /w/a: Is a directory (os error 21)",
                ErrorKind::IsADirectory,
            ),
            ("rename: directory not empty", ErrorKind::AlreadyExists),
            (
                "open /root/x: permission denied",
                ErrorKind::PermissionDenied,
            ),
            ("something else entirely", ErrorKind::Remote),
        ];
        for (message, kind) in cases {
            assert_eq!(classify(&internal(message)), kind, "{message}");
        }
        let exists = e2b_client::Error::InvalidArgument {
            context: Context::new("make directory", "/w/a"),
            message: "path already exists but it is not a directory: /w/a".into(),
        };
        assert_eq!(classify(&exists), ErrorKind::AlreadyExists);
        let listed = e2b_client::Error::InvalidArgument {
            context: Context::new("list directory", "/w/a"),
            message: "path is not a directory: /w/a".into(),
        };
        assert_eq!(classify(&listed), ErrorKind::NotADirectory);
    }

    #[test]
    fn specific_classes_are_kept() {
        let gone = e2b_client::Error::SandboxNotFound {
            context: Context::new("stat", "/w/a"),
            sandbox_id: "sbx".into(),
            message: "The sandbox was not found: not a directory".into(),
        };
        assert_eq!(classify(&gone), ErrorKind::Unavailable);
        let missing = e2b_client::Error::NotFound {
            context: Context::new("stat", "/w/a"),
            message: "file not found".into(),
        };
        assert_eq!(classify(&missing), ErrorKind::NotFound);
    }

    #[test]
    fn messages_name_the_operation_and_do_not_repeat_the_subject() {
        let err = Op::new("read_text", "/w/a").remote(&e2b_client::Error::NotFound {
            context: Context::new("stat", "/w/a"),
            message: "file not found".into(),
        });
        assert_eq!(err.kind(), ErrorKind::NotFound);
        assert_eq!(err.subject(), Some("/w/a"));
        // Said once: not the envd call made for it, nor the class envd's
        // message restates.
        assert_eq!(err.message(), "read_text: file not found");
        let err = Op::new("stat", "/w/a").remote(&e2b_client::Error::NotFound {
            context: Context::new("stat", "/w/a"),
            message: "file not found".into(),
        });
        assert_eq!(err.message(), "stat: file not found");
        // envd naming the path again before the OS's reason (e2b-local's).
        let err = Op::new("stream_text", "/w/a").remote(&e2b_client::Error::NotFound {
            context: Context::new("stat", "/w/a"),
            message: "file not found: /w/a: No such file or directory (os error 2)".into(),
        });
        assert_eq!(
            err.message(),
            "stream_text: No such file or directory (os error 2)"
        );
        // A class the message does not say is kept.
        let err = Op::new("write", "/w/a").remote(&e2b_client::Error::NotFound {
            context: Context::new("upload", "/w/a"),
            message: "no such sandbox path".into(),
        });
        assert_eq!(err.message(), "write: not found: no such sandbox path");
        // About another path (a link's target): that path is kept.
        let err = Op::new("stat", "/w/link").remote(&e2b_client::Error::NotFound {
            context: Context::new("stat", "/w/target"),
            message: "file not found".into(),
        });
        assert_eq!(
            err.to_string(),
            "/w/link: stat: stat /w/target: file not found"
        );
    }
}
