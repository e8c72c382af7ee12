//! Write guards ([`WriteGuard`]) checked against a target's current state,
//! as `write` and `edit` promise: the check every provider makes under the
//! target's lock, right before it publishes.

use dsh_plugin_api::fs::{Version, WriteGuard};
use dsh_plugin_api::{ErrorKind, Result};

use crate::ErrorContext;

/// Checks `guard` against the target's current version (`None`: the
/// target is absent). `Overwrite` always holds; `CreateNew` fails with
/// `AlreadyExists` when the target exists; `IfVersion` fails with
/// `NotFound` when it is absent and `Conflict` when its version differs,
/// naming both versions.
///
/// Whether the target is a file at all (not a directory, not a symlink that
/// appeared since canonicalisation) is the provider's to check first: only
/// it knows how its world tells them apart.
pub fn check(op: &impl ErrorContext, current: Option<&Version>, guard: &WriteGuard) -> Result<()> {
    match (guard, current) {
        (WriteGuard::Overwrite, _) | (WriteGuard::CreateNew, None) => Ok(()),
        (WriteGuard::CreateNew, Some(_)) => Err(already_exists(op)),
        (WriteGuard::IfVersion(expected), None) => Err(op.error(
            ErrorKind::NotFound,
            format_args!("the file no longer exists (guard: version {expected})"),
        )),
        (WriteGuard::IfVersion(expected), Some(found)) if found == expected => Ok(()),
        (WriteGuard::IfVersion(expected), Some(found)) => Err(op.error(
            ErrorKind::Conflict,
            format_args!("stale version: the file changed since version {expected} (now {found})"),
        )),
    }
}

/// The `AlreadyExists` error of a `CreateNew` guard, also for a provider
/// whose publishing step itself refuses to replace (a no-replace rename).
pub fn already_exists(op: &impl ErrorContext) -> dsh_plugin_api::Error {
    op.error(
        ErrorKind::AlreadyExists,
        "the file already exists (guard: create new)",
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::TestOp;

    const WRITE: TestOp = TestOp {
        name: "write",
        subject: "/w/a",
    };

    #[test]
    fn guards_hold_against_the_current_state() {
        let version = Version("v1".into());
        check(&WRITE, None, &WriteGuard::Overwrite).unwrap();
        check(&WRITE, Some(&version), &WriteGuard::Overwrite).unwrap();
        check(&WRITE, None, &WriteGuard::CreateNew).unwrap();
        check(
            &WRITE,
            Some(&version),
            &WriteGuard::IfVersion(version.clone()),
        )
        .unwrap();
    }

    #[test]
    fn failed_guards_name_the_operation_and_the_versions() {
        let version = Version("v1".into());
        let err = check(&WRITE, Some(&version), &WriteGuard::CreateNew).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::AlreadyExists);
        assert_eq!(
            err.message(),
            "write: the file already exists (guard: create new)"
        );
        let err = check(&WRITE, None, &WriteGuard::IfVersion(version.clone())).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::NotFound);
        assert!(err.message().contains("version v1"), "{err}");
        let err = check(
            &WRITE,
            Some(&version),
            &WriteGuard::IfVersion(Version("v0".into())),
        )
        .unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Conflict);
        assert_eq!(
            err.message(),
            "write: stale version: the file changed since version v0 (now v1)"
        );
        assert_eq!(err.subject(), Some("/w/a"));
    }
}
