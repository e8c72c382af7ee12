//! Mapping host I/O failures onto the shared error vocabulary.
//!
//! Every error this crate returns names the operation in its message
//! (`"write: …"`) and carries the path the caller named as its subject, so
//! it renders as `"/abs/path: write: No such file or directory (os error 2)"`.

use std::fmt::Display;
use std::io;
use std::path::{Path, PathBuf};

use dsh_plugin_api::{Error, ErrorKind};

/// One operation on one subject path: the context every error is built in.
#[derive(Debug, Clone, Copy)]
pub struct Op<'a> {
    /// The seam operation (`"read_text"`, `"write"` …).
    pub name: &'static str,
    /// The absolute path the caller named.
    pub path: &'a Path,
}

impl<'a> Op<'a> {
    pub fn new(name: &'static str, path: &'a Path) -> Op<'a> {
        Op { name, path }
    }

    /// An error of `kind` whose message is `"<op>: <detail>"`.
    pub(crate) fn error(&self, kind: ErrorKind, detail: impl Display) -> Error {
        Error::new(kind, format!("{}: {detail}", self.name)).with_subject(subject(self.path))
    }

    /// A host I/O failure of the operation itself.
    pub(crate) fn io(&self, err: &io::Error) -> Error {
        self.error(classify(err), err)
    }

    /// A host I/O failure of one step of the operation (`what` names the
    /// step and, where it differs from the subject, its own path).
    pub(crate) fn io_at(&self, what: impl Display, err: &io::Error) -> Error {
        self.error(classify(err), format_args!("{what}: {err}"))
    }

    /// An owned copy, for work that outlives the caller's borrow (stream
    /// work handed to the blocking pool).
    pub(crate) fn to_owned(self) -> OwnedOp {
        OwnedOp {
            name: self.name,
            path: self.path.to_path_buf(),
        }
    }
}

impl dsh_provider_kit::ErrorContext for Op<'_> {
    fn error(&self, kind: ErrorKind, detail: impl Display) -> Error {
        Op::error(self, kind, detail)
    }
}

/// [`Op`] with an owned path.
#[derive(Debug, Clone)]
pub(crate) struct OwnedOp {
    name: &'static str,
    path: PathBuf,
}

impl OwnedOp {
    pub(crate) fn op(&self) -> Op<'_> {
        Op::new(self.name, &self.path)
    }
}

/// The subject string of a path (lossless for the UTF-8 paths callers pass).
pub(crate) fn subject(path: &Path) -> String {
    path.to_string_lossy().into_owned()
}

/// The vocabulary kind of a host I/O error.
pub(crate) fn classify(err: &io::Error) -> ErrorKind {
    use io::ErrorKind as Io;
    match err.kind() {
        Io::NotFound => ErrorKind::NotFound,
        // EROFS refuses a mutation just as EACCES/EPERM do.
        Io::PermissionDenied | Io::ReadOnlyFilesystem => ErrorKind::PermissionDenied,
        // A non-empty directory in the way of a rename is "something already
        // exists there".
        Io::AlreadyExists | Io::DirectoryNotEmpty => ErrorKind::AlreadyExists,
        Io::NotADirectory => ErrorKind::NotADirectory,
        Io::IsADirectory => ErrorKind::IsADirectory,
        Io::InvalidInput | Io::InvalidFilename => ErrorKind::InvalidInput,
        Io::Unsupported => ErrorKind::Unsupported,
        _ => ErrorKind::Io,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_name_operation_and_subject() {
        let path = Path::new("/w/a.txt");
        let err = Op::new("stat", path).io(&io::Error::from_raw_os_error(2));
        assert_eq!(err.kind(), ErrorKind::NotFound);
        assert_eq!(err.subject(), Some("/w/a.txt"));
        assert!(err.message().starts_with("stat: "), "{err}");
        assert!(err.to_string().starts_with("/w/a.txt: stat: "), "{err}");
    }

    #[test]
    fn os_errors_map_onto_the_vocabulary() {
        let cases = [
            (libc::ENOENT, ErrorKind::NotFound),
            (libc::EACCES, ErrorKind::PermissionDenied),
            (libc::EPERM, ErrorKind::PermissionDenied),
            (libc::EROFS, ErrorKind::PermissionDenied),
            (libc::EEXIST, ErrorKind::AlreadyExists),
            (libc::ENOTEMPTY, ErrorKind::AlreadyExists),
            (libc::ENOTDIR, ErrorKind::NotADirectory),
            (libc::EISDIR, ErrorKind::IsADirectory),
            (libc::EINVAL, ErrorKind::InvalidInput),
            (libc::ENAMETOOLONG, ErrorKind::InvalidInput),
            (libc::ENOSPC, ErrorKind::Io),
            (libc::EXDEV, ErrorKind::Io),
        ];
        for (errno, kind) in cases {
            assert_eq!(
                classify(&io::Error::from_raw_os_error(errno)),
                kind,
                "errno {errno}"
            );
        }
    }
}
