//! How the command and terminal tools word their errors: every message
//! starts with the tool's name, and seam errors keep their kind and
//! subject.

use dsh_plugin_api::{Error, ErrorKind};

/// A seam error re-worded to name `tool` (`"run: spawn: …"`), with its
/// kind and subject unchanged.
pub(crate) fn from_seam(tool: &str, err: Error) -> Error {
    let reworded = Error::new(err.kind(), format!("{tool}: {}", err.message()));
    match err.subject() {
        Some(subject) => reworded.with_subject(subject),
        None => reworded,
    }
}

/// `InvalidInput` from `tool` about the caller's request.
pub(crate) fn invalid(tool: &str, what: impl std::fmt::Display) -> Error {
    Error::new(ErrorKind::InvalidInput, format!("{tool}: {what}"))
}

/// `NotFound` for an id that names nothing the tools hold; `what` says
/// what kind of handle it should have been and `hint` where to find the
/// known ones.
pub(crate) fn unknown_id(tool: &str, what: &str, id: &str, hint: &str) -> Error {
    Error::new(
        ErrorKind::NotFound,
        format!("{tool}: no {what} with id {id:?} ({hint})"),
    )
    .with_subject(id)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seam_errors_keep_kind_and_subject() {
        let err = Error::not_found("spawn: no such directory").with_subject("/nope");
        let reworded = from_seam("run", err);
        assert_eq!(reworded.kind(), ErrorKind::NotFound);
        assert_eq!(reworded.message(), "run: spawn: no such directory");
        assert_eq!(reworded.subject(), Some("/nope"));
    }
}
