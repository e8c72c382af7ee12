//! The operation gate of a terminal: operations pass through it until
//! `terminate` closes it. Closing rejects new operations at once, cancels
//! the ones in flight (a write blocked on a full terminal would never end
//! by itself), and waits until every one of them has returned.

use std::future::Future;
use std::sync::atomic::{AtomicBool, Ordering};

use dsh_plugin_api::{Error, Result};
use tokio::sync::{Semaphore, SemaphorePermit};
use tokio_util::sync::CancellationToken;

/// More operations than can ever be in flight at once.
const SLOTS: u32 = 1 << 20;

#[derive(Debug)]
pub struct Gate {
    label: String,
    closed: AtomicBool,
    cancel: CancellationToken,
    /// Each operation in flight holds one slot; closing takes them all.
    slots: Semaphore,
}

/// Held while the gate is closed by one `close`; excludes other closers.
pub type Closed<'a> = SemaphorePermit<'a>;

impl Gate {
    /// `label` names the guarded thing in errors (`terminal 1234`).
    pub fn new(label: String) -> Gate {
        Gate {
            label,
            closed: AtomicBool::new(false),
            cancel: CancellationToken::new(),
            slots: Semaphore::new(SLOTS as usize),
        }
    }

    /// Runs `op` unless the gate is closed; if it closes meanwhile, `op` is
    /// dropped and the call fails with `Closed`.
    pub async fn run<F, R>(&self, operation: &str, op: F) -> Result<R>
    where
        F: Future<Output = Result<R>>,
    {
        if self.closed.load(Ordering::Acquire) {
            return Err(self.refusal(operation));
        }
        let Ok(_slot) = self.slots.acquire().await else {
            return Err(self.refusal(operation));
        };
        if self.closed.load(Ordering::Acquire) {
            return Err(self.refusal(operation));
        }
        tokio::select! {
            biased;
            () = self.cancel.cancelled() => Err(self.refusal(operation)),
            result = op => result,
        }
    }

    /// Closes the gate and waits for every operation in flight to return;
    /// the returned guard keeps other closers out while held.
    pub async fn close(&self) -> Closed<'_> {
        self.closed.store(true, Ordering::Release);
        self.cancel.cancel();
        self.slots
            .acquire_many(SLOTS)
            .await
            .expect("the gate's semaphore is never closed")
    }

    fn refusal(&self, operation: &str) -> Error {
        Error::closed(format!("{operation}: {} is terminated", self.label))
            .with_subject(self.label.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use dsh_plugin_api::ErrorKind;
    use std::sync::Arc;
    use std::time::Duration;

    #[tokio::test]
    async fn closing_cancels_and_joins_what_is_in_flight_then_refuses() {
        let gate = Arc::new(Gate::new("terminal 9".into()));
        let stuck = tokio::spawn({
            let gate = Arc::clone(&gate);
            async move {
                gate.run("write", std::future::pending::<Result<()>>())
                    .await
            }
        });
        tokio::time::sleep(Duration::from_millis(20)).await;
        let closed = gate.close().await;
        let err = stuck.await.unwrap().unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Closed);
        assert_eq!(err.message(), "write: terminal 9 is terminated");
        drop(closed);
        let err = gate.run("resize", async { Ok(()) }).await.unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Closed);
        // Closing again (a retried terminate) works.
        drop(gate.close().await);
    }

    #[tokio::test]
    async fn an_open_gate_runs_operations() {
        let gate = Gate::new("terminal 1".into());
        assert_eq!(gate.run("x", async { Ok(7) }).await.unwrap(), 7);
    }
}
