//! The exit status of a fake process or terminal: settled once, awaited by
//! any number of `wait` calls.

use dsh_plugin_api::subprocess::ExitStatus;
use dsh_plugin_api::{Error, Result};
use tokio::sync::watch;

/// Where a fake program's exit status is published (clones share it).
#[derive(Debug, Clone)]
pub struct Exit(watch::Sender<Option<ExitStatus>>);

impl Default for Exit {
    fn default() -> Exit {
        Exit(watch::channel(None).0)
    }
}

impl Exit {
    /// Publishes `status` unless a status was published already (the first
    /// of exit, signal or timeout wins). Returns whether it was published.
    pub fn settle(&self, status: ExitStatus) -> bool {
        self.0.send_if_modified(|current| {
            if current.is_none() {
                *current = Some(status);
                true
            } else {
                false
            }
        })
    }

    /// Waits for the status; every call returns the same one.
    pub async fn wait(&self) -> Result<ExitStatus> {
        let mut status = self.0.subscribe();
        let settled = *status
            .wait_for(Option::is_some)
            .await
            .map_err(|_| Error::closed("wait: the handle was dropped"))?;
        settled.ok_or_else(|| Error::closed("wait: the handle was dropped"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_status_wins_and_every_wait_sees_it() {
        let exit = Exit::default();
        let first = ExitStatus {
            code: Some(0),
            signal: None,
            timed_out: false,
        };
        assert!(exit.settle(first));
        assert!(!exit.settle(ExitStatus {
            code: Some(1),
            signal: None,
            timed_out: false
        }));
        let runtime = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        assert_eq!(runtime.block_on(exit.wait()).unwrap(), first);
        assert_eq!(runtime.block_on(exit.wait()).unwrap(), first);
    }
}
