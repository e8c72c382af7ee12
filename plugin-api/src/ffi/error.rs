//! Errors across the boundary: a `repr(C)` mirror of [`Error`].
//!
//! The kind crosses as its stable integer code, so a kind added in a later
//! API version survives as [`crate::ErrorKind::Other`] instead of breaking
//! the layout.

use abi_stable::StableAbi;
use abi_stable::std_types::{ROption, RResult, RString};

use crate::error::{Error, ErrorKind, Result};

/// [`Error`] as it crosses the ABI: kind code, message, optional subject.
#[repr(C)]
#[derive(StableAbi, Debug, Clone)]
pub struct FfiError {
    kind: u32,
    message: RString,
    subject: ROption<RString>,
}

/// The result type of every FFI call that can fail.
pub type FfiResult<T> = RResult<T, FfiError>;

impl From<Error> for FfiError {
    fn from(err: Error) -> FfiError {
        FfiError {
            kind: err.kind().code(),
            subject: err.subject().map(RString::from).into(),
            message: err.message().into(),
        }
    }
}

impl From<FfiError> for Error {
    fn from(err: FfiError) -> Error {
        let error = Error::new(ErrorKind::from_code(err.kind), err.message);
        match err.subject {
            ROption::RSome(subject) => error.with_subject(subject),
            ROption::RNone => error,
        }
    }
}

/// A plain result lowered to its FFI form, converting the value with `From`.
pub fn lower<T, U: From<T>>(result: Result<T>) -> FfiResult<U> {
    match result {
        Ok(value) => RResult::ROk(U::from(value)),
        Err(err) => RResult::RErr(err.into()),
    }
}

/// An FFI result lifted to its plain form, converting the value with `From`.
pub fn lift<T, U: From<T>>(result: FfiResult<T>) -> Result<U> {
    match result {
        RResult::ROk(value) => Ok(U::from(value)),
        RResult::RErr(err) => Err(err.into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_round_trip_with_kind_message_and_subject() {
        let err = Error::new(ErrorKind::Conflict, "write: stale version").with_subject("/a");
        let back = Error::from(FfiError::from(err.clone()));
        assert_eq!(back, err);
        let err = Error::new(ErrorKind::Other(4242), "from a newer peer");
        assert_eq!(Error::from(FfiError::from(err.clone())), err);
    }

    #[test]
    fn results_lower_and_lift_with_conversion() {
        let lowered: FfiResult<RString> = lower(Ok::<_, Error>("x".to_owned()));
        let lifted: Result<String> = lift(lowered);
        assert_eq!(lifted.unwrap(), "x");
        let lowered: FfiResult<RString> = lower(Err::<String, _>(Error::closed("gone")));
        let lifted: Result<String> = lift(lowered);
        assert_eq!(lifted.unwrap_err().kind(), ErrorKind::Closed);
    }
}
