//! How a ladder waits between probes.
//!
//! The ladders ([`crate::ladder`]) are `async fn`s whose only suspension
//! points are [`Pause::until`]: an async caller passes its runtime's timer
//! and awaits them; a synchronous caller passes [`Blocking`], whose pauses
//! sleep the thread and complete at once, so the whole ladder runs to its
//! end in one poll ([`run_blocking`]).

use std::future::Future;
use std::pin::pin;
use std::task::{Context, Poll, Waker};
use std::time::Instant;

/// A timer the ladders wait on.
pub trait Pause {
    /// Completes once `deadline` has passed (or at once if it has).
    /// Dropping the future abandons the wait and nothing else.
    fn until(&mut self, deadline: Instant) -> impl Future<Output = ()> + Send;
}

/// Blocks the calling thread: for synchronous callers, with
/// [`run_blocking`].
#[derive(Debug, Default, Clone, Copy)]
pub struct Blocking;

impl Pause for Blocking {
    /// Sleeps until `deadline`, then returns an already completed future.
    fn until(&mut self, deadline: Instant) -> impl Future<Output = ()> + Send {
        std::thread::sleep(deadline.saturating_duration_since(Instant::now()));
        std::future::ready(())
    }
}

/// Runs `ladder` — a future whose only waits are pauses of [`Blocking`] —
/// on the calling thread to its end.
///
/// # Panics
///
/// If the future is pending after one poll: it waited on something other
/// than a [`Blocking`] pause, which this function cannot drive.
pub fn run_blocking<T>(ladder: impl Future<Output = T>) -> T {
    match pin!(ladder).poll(&mut Context::from_waker(Waker::noop())) {
        Poll::Ready(value) => value,
        Poll::Pending => panic!("run_blocking: the future waited on something other than Blocking"),
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn blocking_pauses_sleep_and_complete_in_one_poll() {
        let started = Instant::now();
        let value = run_blocking(async {
            Blocking.until(started + Duration::from_millis(30)).await;
            Blocking.until(started).await;
            7
        });
        assert_eq!(value, 7);
        assert!(started.elapsed() >= Duration::from_millis(30));
    }

    #[test]
    #[should_panic(expected = "something other than Blocking")]
    fn a_future_that_stays_pending_is_refused() {
        run_blocking(std::future::pending::<()>());
    }
}
