//! When work leaves the runtime thread.
//!
//! Metadata calls, opens, renames and small reads and writes run inline on
//! the calling task: they take microseconds, and a hop to the blocking pool
//! would cost more than the call. Work whose duration grows with the data —
//! reading or writing more than [`INLINE_LIMIT`] bytes, listing or removing
//! a directory tree — runs on tokio's blocking pool so the plugin runtime's
//! few workers stay responsive.

use std::panic;

use dsh_plugin_api::{ErrorKind, Result};

use crate::errors::Op;

/// Largest payload read or written inline on the runtime thread (page-cache
/// copies of this size take tens of microseconds).
pub(crate) const INLINE_LIMIT: u64 = 256 * 1024;

/// Runs `work` on the blocking pool of the current tokio runtime.
///
/// Dropping the returned future does not stop `work`: it runs to completion
/// and its result is dropped, so `work` must own whatever it touches and
/// must leave no visible effect that the caller's cleanup does not undo.
/// A panic in `work` resumes on the caller (the ABI layer turns it into a
/// `Panicked` error); a runtime shutting down first yields `Cancelled`.
pub(crate) async fn run<T, F>(op: Op<'_>, work: F) -> Result<T>
where
    T: Send + 'static,
    F: FnOnce() -> T + Send + 'static,
{
    match tokio::task::spawn_blocking(work).await {
        Ok(value) => Ok(value),
        Err(err) if err.is_panic() => panic::resume_unwind(err.into_panic()),
        Err(_) => Err(op.error(
            ErrorKind::Cancelled,
            "the runtime shut down before the operation finished",
        )),
    }
}
