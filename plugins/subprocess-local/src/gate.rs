//! The operation gate of a terminal: operations run inside it until
//! `terminate` closes it; closing rejects new operations, cancels the ones
//! in flight (a write blocked on a full terminal would otherwise never
//! finish) and waits until they have all returned.

use std::future::Future;
use std::sync::atomic::{AtomicBool, Ordering};

use dsh_plugin_api::{Error, Result};
use tokio::sync::{RwLock, RwLockWriteGuard};
use tokio_util::sync::CancellationToken;

#[derive(Debug)]
pub struct Gate {
    label: String,
    closed: AtomicBool,
    cancel: CancellationToken,
    in_flight: RwLock<()>,
}

impl Gate {
    /// `label` names the guarded thing in errors (`terminal 1234`).
    pub fn new(label: String) -> Gate {
        Gate {
            label,
            closed: AtomicBool::new(false),
            cancel: CancellationToken::new(),
            in_flight: RwLock::new(()),
        }
    }

    /// Runs `op` unless the gate is closed; if it closes meanwhile, `op` is
    /// dropped and the call fails with `Closed`.
    pub async fn run<T>(&self, operation: &str, op: impl Future<Output = Result<T>>) -> Result<T> {
        self.check(operation)?;
        let _in_flight = self.in_flight.read().await;
        self.check(operation)?;
        tokio::select! {
            biased;
            () = self.cancel.cancelled() => Err(self.closed_error(operation)),
            result = op => result,
        }
    }

    /// Closes the gate and waits for every operation in flight to return.
    /// Holding the returned guard excludes every other `close` too.
    pub async fn close(&self) -> RwLockWriteGuard<'_, ()> {
        self.closed.store(true, Ordering::Release);
        self.cancel.cancel();
        self.in_flight.write().await
    }

    fn check(&self, operation: &str) -> Result<()> {
        if self.closed.load(Ordering::Acquire) {
            Err(self.closed_error(operation))
        } else {
            Ok(())
        }
    }

    fn closed_error(&self, operation: &str) -> Error {
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
    async fn close_cancels_and_joins_in_flight_then_rejects() {
        let gate = Arc::new(Gate::new("terminal 7".into()));
        let blocked = tokio::spawn({
            let gate = gate.clone();
            async move {
                gate.run("write", futures::future::pending::<Result<()>>())
                    .await
            }
        });
        // Let the operation enter the gate.
        tokio::time::sleep(Duration::from_millis(20)).await;
        let guard = gate.close().await;
        let err = blocked.await.expect("joined").expect_err("cancelled");
        assert_eq!(err.kind(), ErrorKind::Closed);
        assert_eq!(err.message(), "write: terminal 7 is terminated");
        drop(guard);
        let err = gate
            .run("resize", async { Ok(()) })
            .await
            .expect_err("closed");
        assert_eq!(err.kind(), ErrorKind::Closed);
    }
}
