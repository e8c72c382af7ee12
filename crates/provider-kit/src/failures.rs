//! Several failures of one operation reported as one error — how `dispose`
//! (which goes on past a failed step, so that everything that can be
//! released is) reports what went wrong.

use dsh_plugin_api::{Error, Result};

/// One error for several: none is `Ok`, one is itself, more are one error
/// of the first one's kind whose message is
/// `"<operation>: <n> failures: <each error>; …"`.
pub fn aggregate(operation: &str, failures: Vec<Error>) -> Result<()> {
    match failures.as_slice() {
        [] => Ok(()),
        [only] => Err(only.clone()),
        [first, ..] => Err(Error::new(
            first.kind(),
            format!(
                "{operation}: {} failures: {}",
                failures.len(),
                failures
                    .iter()
                    .map(ToString::to_string)
                    .collect::<Vec<_>>()
                    .join("; ")
            ),
        )),
    }
}

#[cfg(test)]
mod tests {
    use dsh_plugin_api::ErrorKind;

    use super::*;

    #[test]
    fn none_one_and_several_failures() {
        assert!(aggregate("dispose", Vec::new()).is_ok());
        let busy = Error::new(ErrorKind::Busy, "dispose: tasks did not finish");
        let err = aggregate("dispose", vec![busy.clone()]).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Busy);
        assert_eq!(err.message(), busy.message());
        let io = Error::io("remove /tmp/x: denied");
        let err = aggregate("dispose", vec![busy, io]).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Busy);
        assert_eq!(
            err.message(),
            "dispose: 2 failures: dispose: tasks did not finish; remove /tmp/x: denied"
        );
    }
}
