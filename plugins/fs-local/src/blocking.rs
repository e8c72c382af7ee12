//! When work leaves the runtime's scheduling.
//!
//! Metadata calls, opens, renames and small reads and writes run inline on
//! the calling task: they take microseconds, and any hand-off would cost
//! more than the call. Work whose duration grows with the data — reading or
//! writing more than [`INLINE_LIMIT`] bytes, listing or removing a
//! directory tree — runs through [`run`], which keeps the runtime's other
//! tasks moving while it blocks.

use std::panic;

use dsh_plugin_api::{ErrorKind, Result};
use tokio::runtime::{Handle, RuntimeFlavor};

use crate::errors::Op;

/// Largest payload read or written inline on the runtime thread (page-cache
/// copies of this size take tens of microseconds).
pub(crate) const INLINE_LIMIT: u64 = 256 * 1024;

/// Runs blocking `work` without stalling the runtime.
///
/// On a multi-thread runtime (a plugin's own) or outside any runtime, the
/// work runs right here through `tokio::task::block_in_place`: the worker
/// hands its other tasks to another thread and the data stays on this core.
/// (Measured: a 64 MiB read on the blocking pool instead costs 20–30% more,
/// from faulting the buffer in on one core and using it on another.) It is
/// then part of this poll, so dropping the future cannot interrupt it.
///
/// On a current-thread runtime, where `block_in_place` is not allowed, the
/// work runs on the blocking pool. Dropping the future there does not stop
/// `work`: it runs to completion and its result is dropped, so `work` must
/// own whatever it touches and leave no effect the caller's cleanup does
/// not undo. A panic in `work` resumes on the caller (the ABI layer turns
/// it into a `Panicked` error); a runtime shutting down first is
/// `Cancelled`.
pub(crate) async fn run<T, F>(op: Op<'_>, work: F) -> Result<T>
where
    T: Send + 'static,
    F: FnOnce() -> T + Send + 'static,
{
    let current_thread = Handle::try_current()
        .is_ok_and(|handle| handle.runtime_flavor() == RuntimeFlavor::CurrentThread);
    if !current_thread {
        return Ok(tokio::task::block_in_place(work));
    }
    match tokio::task::spawn_blocking(work).await {
        Ok(value) => Ok(value),
        Err(err) if err.is_panic() => panic::resume_unwind(err.into_panic()),
        Err(_) => Err(op.error(
            ErrorKind::Cancelled,
            "the runtime shut down before the operation finished",
        )),
    }
}
