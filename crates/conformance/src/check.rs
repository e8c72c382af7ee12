//! How a case states a failure: [`Failure`] carries one precise message —
//! what was checked, what was expected, what came back — and the helpers
//! here build such messages without dumping megabytes of content.

use std::any::type_name;
use std::fmt::Debug;
use std::future::Future;
use std::time::Duration;

use dsh_plugin_api::{Error, ErrorKind, Result};

/// Why a case failed: what was checked, expected and seen.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Failure {
    pub(crate) message: String,
    /// The world lacks what the case needs (a program it runs): reported
    /// skipped with the message, never passed.
    pub(crate) unsupported: bool,
}

impl Failure {
    pub(crate) fn new(message: impl Into<String>) -> Failure {
        Failure {
            message: message.into(),
            unsupported: false,
        }
    }

    /// The case cannot run in this world; `reason` says what is missing.
    pub(crate) fn unsupported(reason: impl Into<String>) -> Failure {
        Failure {
            message: reason.into(),
            unsupported: true,
        }
    }
}

/// What every case returns.
pub(crate) type CaseResult = std::result::Result<(), Failure>;

/// Returns early from a case with a formatted [`Failure`].
macro_rules! fail {
    ($($arg:tt)*) => {
        return Err($crate::check::Failure::new(format!($($arg)*)))
    };
}
pub(crate) use fail;

/// Fails the case with a formatted message unless `cond` holds.
macro_rules! ensure {
    ($cond:expr, $($arg:tt)*) => {
        if !$cond {
            $crate::check::fail!($($arg)*);
        }
    };
}
pub(crate) use ensure;

/// Awaits `fut` for at most `limit`; a provider that does not answer fails
/// the case with a message naming the operation.
pub(crate) async fn within<T>(
    limit: Duration,
    what: &str,
    fut: impl Future<Output = T>,
) -> std::result::Result<T, Failure> {
    tokio::time::timeout(limit, fut)
        .await
        .map_err(|_| Failure::new(format!("{what}: no answer within {} ms", limit.as_millis())))
}

/// Awaits a provider call that must succeed.
pub(crate) async fn expect_ok<T>(
    limit: Duration,
    what: &str,
    fut: impl Future<Output = Result<T>>,
) -> std::result::Result<T, Failure> {
    match within(limit, what, fut).await? {
        Ok(value) => Ok(value),
        Err(err) => Err(Failure::new(format!(
            "{what}: expected success, got {}: {err}",
            err.kind()
        ))),
    }
}

/// Awaits a provider call that must fail with `kind`; returns the error so
/// the case can check its message.
pub(crate) async fn expect_err<T>(
    limit: Duration,
    what: &str,
    kind: ErrorKind,
    fut: impl Future<Output = Result<T>>,
) -> std::result::Result<Error, Failure> {
    expect_err_of(limit, what, &[kind], fut).await
}

/// Awaits a provider call that must fail with one of `kinds` (for the few
/// places where the contract allows more than one).
pub(crate) async fn expect_err_of<T>(
    limit: Duration,
    what: &str,
    kinds: &[ErrorKind],
    fut: impl Future<Output = Result<T>>,
) -> std::result::Result<Error, Failure> {
    let expected = kinds
        .iter()
        .map(|kind| kind.to_string())
        .collect::<Vec<_>>()
        .join(" or ");
    match within(limit, what, fut).await? {
        Ok(_) => Err(Failure::new(format!(
            "{what}: expected a {expected} error, but the call succeeded (returned a {})",
            short_type_name::<T>()
        ))),
        Err(err) if kinds.contains(&err.kind()) => Ok(err),
        Err(err) => Err(Failure::new(format!(
            "{what}: expected a {expected} error, got {}: {err}",
            err.kind()
        ))),
    }
}

/// `Metadata` rather than `dsh_plugin_api::fs::Metadata`, for messages.
fn short_type_name<T>() -> String {
    let full = type_name::<T>();
    let mut out = String::with_capacity(full.len());
    let mut segment_start = 0;
    for (i, c) in full.char_indices() {
        if c == ':' {
            segment_start = i + 1;
        } else if !(c.is_alphanumeric() || c == '_') {
            out.push_str(&full[segment_start..i]);
            out.push(c);
            segment_start = i + 1;
        }
    }
    out.push_str(&full[segment_start..]);
    out
}

/// Checks that an error's rendering names `needle` (its subject or the
/// operation): errors must say what they are about.
pub(crate) fn ensure_names(what: &str, err: &Error, needle: &str) -> CaseResult {
    let text = err.to_string();
    if text.contains(needle) {
        Ok(())
    } else {
        Err(Failure::new(format!(
            "{what}: the {} error does not name {needle:?}: {text:?}",
            err.kind()
        )))
    }
}

/// Compares two values, failing with both rendered.
pub(crate) fn ensure_eq<T: PartialEq + Debug>(what: &str, actual: &T, expected: &T) -> CaseResult {
    if actual == expected {
        Ok(())
    } else {
        Err(Failure::new(format!(
            "{what}: expected {}, got {}",
            clip(&format!("{expected:?}"), 300),
            clip(&format!("{actual:?}"), 300)
        )))
    }
}

/// Compares byte content, reporting lengths and the first difference.
pub(crate) fn ensure_bytes(what: &str, actual: &[u8], expected: &[u8]) -> CaseResult {
    if actual == expected {
        return Ok(());
    }
    let first = actual
        .iter()
        .zip(expected)
        .position(|(a, b)| a != b)
        .unwrap_or(actual.len().min(expected.len()));
    let window = |bytes: &[u8]| {
        let start = first.saturating_sub(8);
        let end = (first + 24).min(bytes.len());
        show(&bytes[start.min(end)..end])
    };
    Err(Failure::new(format!(
        "{what}: content differs: expected {} bytes, got {}; first difference at byte {first}: expected {} got {}",
        expected.len(),
        actual.len(),
        window(expected),
        window(actual)
    )))
}

/// Renders bytes for a message: escaped, at most 160 of them.
pub(crate) fn show(bytes: &[u8]) -> String {
    const MAX: usize = 160;
    let shown: String = bytes[..bytes.len().min(MAX)].escape_ascii().to_string();
    if bytes.len() > MAX {
        format!("b\"{shown}\"… ({} bytes)", bytes.len())
    } else {
        format!("b\"{shown}\"")
    }
}

/// Cuts a rendered value to `max` characters.
pub(crate) fn clip(text: &str, max: usize) -> String {
    match text.char_indices().nth(max) {
        None => text.to_owned(),
        Some((cut, _)) => format!("{}…", &text[..cut]),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn byte_differences_name_the_first_offset() {
        let message = ensure_bytes("read", b"abcXef", b"abcdef")
            .unwrap_err()
            .message;
        assert!(message.contains("first difference at byte 3"), "{message}");
        assert!(message.contains("expected 6 bytes, got 6"), "{message}");
        let message = ensure_bytes("read", b"abc", b"abcdef").unwrap_err().message;
        assert!(message.contains("first difference at byte 3"), "{message}");
        assert!(ensure_bytes("read", b"same", b"same").is_ok());
    }

    #[test]
    fn shown_bytes_are_escaped_and_bounded() {
        assert_eq!(show(b"a\n\xff"), "b\"a\\n\\xff\"");
        let long = vec![b'x'; 1000];
        assert!(show(&long).ends_with("… (1000 bytes)"));
        assert_eq!(clip("héllo", 2), "hé…");
        assert_eq!(clip("hé", 2), "hé");
    }

    #[tokio::test]
    async fn expected_errors_report_what_came_back() {
        let limit = Duration::from_secs(1);
        let got = expect_err(limit, "stat x", ErrorKind::NotFound, async {
            Ok::<_, Error>(5)
        })
        .await
        .unwrap_err()
        .message;
        assert_eq!(
            got,
            "stat x: expected a not found error, but the call succeeded (returned a i32)"
        );
        assert_eq!(short_type_name::<Vec<std::string::String>>(), "Vec<String>");
        let got = expect_err(limit, "stat x", ErrorKind::NotFound, async {
            Err::<u8, _>(Error::io("stat: boom"))
        })
        .await
        .unwrap_err()
        .message;
        assert_eq!(
            got,
            "stat x: expected a not found error, got I/O error: stat: boom"
        );
        let hung = expect_ok(
            Duration::from_millis(20),
            "wait",
            futures::future::pending::<Result<()>>(),
        )
        .await
        .unwrap_err()
        .message;
        assert_eq!(hung, "wait: no answer within 20 ms");
    }
}
