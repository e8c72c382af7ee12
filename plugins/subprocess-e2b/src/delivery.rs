//! Handing a started handle to the caller with no window in which a
//! caller that gave up leaks it.
//!
//! A start task answers through a oneshot channel; the caller's future may
//! be dropped before the answer is sent, between sending and reading it,
//! or never read it at all. A [`Delivery`] runs its undo (kill what was
//! started) when it is dropped unclaimed — in the task when nobody
//! listens, or in the channel when nobody reads — and the caller claims it
//! in the same poll in which it arrives, so no cancellation point lies
//! between arrival and ownership.

use std::future::Future;

use tokio_util::task::TaskTracker;

/// An undo that runs `work` as a task of `tracker` on the current runtime
/// (captured now, so the undo may run on any thread).
pub fn deferred<F>(tracker: &TaskTracker, work: F) -> impl FnOnce() + Send + 'static
where
    F: Future<Output = ()> + Send + 'static,
{
    let runtime = tokio::runtime::Handle::current();
    let tracker = tracker.clone();
    move || {
        runtime.spawn(tracker.track_future(work));
    }
}

/// A handle on its way to the caller.
pub struct Delivery<H> {
    handle: Option<H>,
    undo: Option<Box<dyn FnOnce() + Send>>,
}

impl<H> Delivery<H> {
    /// `handle`, with `undo` to run if it is never claimed. `undo` must not
    /// block (it spawns the rollback).
    pub fn new(handle: H, undo: impl FnOnce() + Send + 'static) -> Delivery<H> {
        Delivery {
            handle: Some(handle),
            undo: Some(Box::new(undo)),
        }
    }

    /// The handle; the undo will not run.
    pub fn claim(mut self) -> H {
        self.undo = None;
        self.handle.take().expect("a delivery is claimed once")
    }
}

impl<H> Drop for Delivery<H> {
    fn drop(&mut self) {
        if let Some(undo) = self.undo.take() {
            undo();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};

    #[test]
    fn unclaimed_deliveries_undo_claimed_ones_do_not() {
        let undone = Arc::new(AtomicBool::new(false));
        let flag = Arc::clone(&undone);
        let claimed = Delivery::new(7, move || flag.store(true, Ordering::SeqCst)).claim();
        assert_eq!(claimed, 7);
        assert!(!undone.load(Ordering::SeqCst));
        let flag = Arc::clone(&undone);
        drop(Delivery::new(7, move || flag.store(true, Ordering::SeqCst)));
        assert!(undone.load(Ordering::SeqCst));
        // Dropped inside a channel nobody reads.
        let undone = Arc::new(AtomicBool::new(false));
        let flag = Arc::clone(&undone);
        let (tx, rx) = tokio::sync::oneshot::channel();
        tx.send(Delivery::new(1, move || flag.store(true, Ordering::SeqCst)))
            .ok()
            .expect("sent");
        drop(rx);
        assert!(undone.load(Ordering::SeqCst));
    }
}
