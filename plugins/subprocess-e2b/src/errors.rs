//! Errors in the seam's vocabulary: from `e2b-client` failures, from the
//! errno values the helper reports, and from a start that failed at one of
//! its stages. Every message names the operation and its subject.

use dsh_plugin_api::{Error, ErrorKind};

use crate::wire::Stage;

/// An `e2b-client` failure of `operation` (`"spawn"`, `"terminate"`, …);
/// the client's text already names the envd call and its subject.
pub fn client(operation: &str, err: &e2b_client::Error) -> Error {
    dsh_e2b_gateway::plugin_error(err).context(operation)
}

/// The seam's kind for an errno from the sandbox.
pub fn kind_of_errno(errno: i32) -> ErrorKind {
    const EPERM: i32 = 1;
    const ENOENT: i32 = 2;
    const ENOEXEC: i32 = 8;
    const EACCES: i32 = 13;
    const ENOTDIR: i32 = 20;
    const EISDIR: i32 = 21;
    const E2BIG: i32 = 7;
    const ENAMETOOLONG: i32 = 36;
    const ELOOP: i32 = 40;
    match errno {
        ENOENT => ErrorKind::NotFound,
        EPERM | EACCES => ErrorKind::PermissionDenied,
        ENOTDIR => ErrorKind::NotADirectory,
        EISDIR => ErrorKind::IsADirectory,
        ENOEXEC | E2BIG | ENAMETOOLONG | ELOOP => ErrorKind::InvalidInput,
        _ => ErrorKind::Io,
    }
}

/// `strerror` text for an errno, as the sandbox's C library would say it.
pub fn describe_errno(errno: i32) -> String {
    let text = std::io::Error::from_raw_os_error(errno).to_string();
    // std appends " (os error N)"; keep the words.
    match text.rsplit_once(" (os error ") {
        Some((words, _)) => words.to_owned(),
        None => text,
    }
}

/// What a start failure is about.
#[derive(Debug, Clone, Copy)]
pub struct StartContext<'a> {
    /// `"spawn"` or `"spawn_terminal"`.
    pub operation: &'a str,
    pub program: &'a str,
    pub cwd: &'a str,
    /// The directories a bare program name was searched in.
    pub search: &'a [String],
}

/// The error for a command that could not start at `stage`.
pub fn start_failure(cx: StartContext<'_>, stage: Stage, errno: i32, detail: &str) -> Error {
    const ENOENT: i32 = 2;
    const ENOEXEC: i32 = 8;
    const EACCES: i32 = 13;
    const EISDIR: i32 = 21;
    let op = cx.operation;
    let program = cx.program;
    let why = describe_errno(errno);
    match stage {
        Stage::Cwd => {
            let message = match errno {
                ENOENT => format!("{op}: cwd {}: no such directory", cx.cwd),
                _ => format!("{op}: cwd {}: {why}", cx.cwd),
            };
            Error::new(kind_of_errno(errno), message).with_subject(cx.cwd.to_owned())
        }
        Stage::Program => {
            let bare = !program.starts_with('/');
            let (kind, message) = match errno {
                ENOENT if bare => (
                    ErrorKind::NotFound,
                    format!(
                        "{op}: command not found (searched {})",
                        if cx.search.is_empty() {
                            "no directories".to_owned()
                        } else {
                            cx.search.join(":")
                        }
                    ),
                ),
                ENOENT => (ErrorKind::NotFound, format!("{op}: no such file")),
                EISDIR => (
                    ErrorKind::IsADirectory,
                    format!("{op}: is a directory, not an executable"),
                ),
                ENOEXEC => (ErrorKind::InvalidInput, format!("{op}: not a regular file")),
                EACCES => (ErrorKind::PermissionDenied, format!("{op}: not executable")),
                _ => (kind_of_errno(errno), format!("{op}: {why}")),
            };
            Error::new(kind, message).with_subject(program.to_owned())
        }
        Stage::Exec => {
            let (kind, message) = match errno {
                ENOENT => (
                    ErrorKind::NotFound,
                    format!("{op}: {program}: program or its interpreter not found"),
                ),
                ENOEXEC => (
                    ErrorKind::InvalidInput,
                    format!("{op}: {program}: not an executable format"),
                ),
                _ => (kind_of_errno(errno), format!("{op}: {program}: {why}")),
            };
            Error::new(kind, message).with_subject(detail.to_owned())
        }
        Stage::Spill => Error::new(
            kind_of_errno(errno),
            format!("{op}: create spill file: {why}"),
        )
        .with_subject(detail.to_owned()),
        Stage::Identity => Error::io(format!(
            "{op}: {program}: could not take on the sandbox user's identity: {why}"
        )),
        Stage::Request | Stage::Resources => Error::io(format!(
            "{op}: {program}: the sandbox helper could not start it ({detail}): {why}"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cx<'a>(program: &'a str, search: &'a [String]) -> StartContext<'a> {
        StartContext {
            operation: "spawn",
            program,
            cwd: "/w/missing-cwd",
            search,
        }
    }

    #[test]
    fn stages_map_to_kinds_and_name_their_subject() {
        let search = vec!["/usr/bin".to_owned(), "/bin".to_owned()];
        let err = start_failure(cx("nope", &search), Stage::Program, 2, "");
        assert_eq!(err.kind(), ErrorKind::NotFound);
        assert_eq!(
            err.message(),
            "spawn: command not found (searched /usr/bin:/bin)"
        );
        assert_eq!(err.subject(), Some("nope"));
        let err = start_failure(cx("/x/prog", &search), Stage::Program, 2, "");
        assert_eq!(err.message(), "spawn: no such file");
        let err = start_failure(cx("sh", &search), Stage::Cwd, 2, "/w/missing-cwd");
        assert_eq!(err.kind(), ErrorKind::NotFound);
        assert_eq!(err.subject(), Some("/w/missing-cwd"));
        let err = start_failure(cx("sh", &search), Stage::Cwd, 20, "/w/f");
        assert_eq!(err.kind(), ErrorKind::NotADirectory);
        assert!(err.message().contains("Not a directory"), "{err}");
        let err = start_failure(cx("/tmp", &search), Stage::Program, 21, "");
        assert_eq!(err.kind(), ErrorKind::IsADirectory);
        let err = start_failure(cx("/x", &search), Stage::Program, 13, "");
        assert_eq!(err.kind(), ErrorKind::PermissionDenied);
        let err = start_failure(cx("/x", &search), Stage::Exec, 8, "/x");
        assert_eq!(err.kind(), ErrorKind::InvalidInput);
        let err = start_failure(cx("x", &search), Stage::Spill, 28, "/tmp/s/1.stdout");
        assert_eq!(err.kind(), ErrorKind::Io);
        assert_eq!(err.subject(), Some("/tmp/s/1.stdout"));
    }

    #[test]
    fn errno_words_drop_the_os_error_suffix() {
        assert_eq!(describe_errno(2), "No such file or directory");
    }
}
