//! Magic inputs: paths (and program names) that make a fake service fail,
//! panic, hang or report its internal state, so every error kind, panic and
//! cancellation can be driven across the ABI deterministically.
//!
//! | input | effect |
//! |---|---|
//! | `/.probe/error/<code>` | the call fails with `ErrorKind::from_code(code)`, subject = the input |
//! | `/.probe/panic` | the call panics |
//! | `/.probe/hang` | the call never completes; dropping it counts a cancellation |
//! | `/.probe/state` | (`read_text`) the counters as JSON |
//! | `/.probe/log/<level>` | (`stat`) emits one `tracing` event at `level` (`error` … `trace`) |
//! | `/.probe/stream/<n>` | (`read_bytes`) `n` chunks of 1024 bytes, produced lazily |
//! | `/.probe/panic-stream` | (`read_bytes`) one chunk, then the stream panics |

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use dsh_plugin_api::{Error, ErrorKind};
use serde_json::json;

/// A magic input, parsed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Magic {
    Error(u32),
    Panic,
    Hang,
    State,
    Log(tracing::Level),
    Stream(u32),
    PanicStream,
}

/// Parses `/.probe/…` (for any other input: `None`).
pub fn parse(input: &str) -> Option<Magic> {
    let rest = input.strip_prefix("/.probe/")?;
    let (head, arg) = rest.split_once('/').unwrap_or((rest, ""));
    match (head, arg) {
        ("error", code) => code.parse().ok().map(Magic::Error),
        ("panic", "") => Some(Magic::Panic),
        ("hang", "") => Some(Magic::Hang),
        ("state", "") => Some(Magic::State),
        ("log", level) => level.parse().ok().map(Magic::Log),
        ("stream", count) => count.parse().ok().map(Magic::Stream),
        ("panic-stream", "") => Some(Magic::PanicStream),
        _ => None,
    }
}

/// The error `/.probe/error/<code>` produces for `operation`.
pub fn injected_error(code: u32, operation: &str, subject: &str) -> Error {
    let kind = ErrorKind::from_code(code);
    Error::new(kind, format!("{operation}: injected {kind} (code {code})")).with_subject(subject)
}

/// What a probe instance counts, observable through `/.probe/state`.
#[derive(Debug, Default)]
pub struct Counters {
    pub calls: AtomicU64,
    pub hangs_started: AtomicU64,
    pub hangs_cancelled: AtomicU64,
    pub chunks_produced: AtomicU64,
}

impl Counters {
    pub fn snapshot(&self) -> serde_json::Value {
        json!({
            "calls": self.calls.load(Ordering::SeqCst),
            "hangsStarted": self.hangs_started.load(Ordering::SeqCst),
            "hangsCancelled": self.hangs_cancelled.load(Ordering::SeqCst),
            "chunksProduced": self.chunks_produced.load(Ordering::SeqCst),
        })
    }
}

/// Never completes; counts the start now and the cancellation when the
/// future is dropped.
pub async fn hang(counters: &Arc<Counters>) -> ! {
    struct Cancelled(Arc<Counters>);
    impl Drop for Cancelled {
        fn drop(&mut self) {
            self.0.hangs_cancelled.fetch_add(1, Ordering::SeqCst);
        }
    }
    counters.hangs_started.fetch_add(1, Ordering::SeqCst);
    let _cancelled = Cancelled(counters.clone());
    loop {
        std::future::pending::<()>().await;
    }
}

/// Emits the `/.probe/log/<level>` event.
pub fn log(level: tracing::Level, operation: &str, input: &str) {
    match level {
        tracing::Level::ERROR => tracing::error!(operation, input, "probe log event"),
        tracing::Level::WARN => tracing::warn!(operation, input, "probe log event"),
        tracing::Level::INFO => tracing::info!(operation, input, "probe log event"),
        tracing::Level::DEBUG => tracing::debug!(operation, input, "probe log event"),
        tracing::Level::TRACE => tracing::trace!(operation, input, "probe log event"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_every_magic_input_and_nothing_else() {
        assert_eq!(parse("/.probe/error/4"), Some(Magic::Error(4)));
        assert_eq!(parse("/.probe/panic"), Some(Magic::Panic));
        assert_eq!(parse("/.probe/hang"), Some(Magic::Hang));
        assert_eq!(parse("/.probe/state"), Some(Magic::State));
        assert_eq!(
            parse("/.probe/log/debug"),
            Some(Magic::Log(tracing::Level::DEBUG))
        );
        assert_eq!(parse("/.probe/stream/3"), Some(Magic::Stream(3)));
        assert_eq!(parse("/.probe/panic-stream"), Some(Magic::PanicStream));
        for plain in [
            "/a",
            "/.probe",
            "/.probe/error/x",
            "/.probe/panic/1",
            "/.probe/nope",
        ] {
            assert_eq!(parse(plain), None, "{plain}");
        }
    }

    #[test]
    fn injected_errors_carry_kind_and_subject() {
        let err = injected_error(4, "stat", "/.probe/error/4");
        assert_eq!(err.kind(), ErrorKind::Conflict);
        assert_eq!(err.subject(), Some("/.probe/error/4"));
        assert_eq!(
            injected_error(4242, "x", "y").kind(),
            ErrorKind::Other(4242)
        );
    }
}
