//! A process's final status: how the end a provider observed becomes the
//! seam's [`ExitStatus`], and how it is published once by whatever observes
//! it (a supervisor task, a terminal's pump) and awaited by any number of
//! `wait` calls — the contract of `Process::wait` and `Terminal::wait`:
//! idempotent, the same status for every caller, and dropping a wait stops
//! only that wait.

use dsh_plugin_api::subprocess::{ExitStatus, Signal};
use dsh_plugin_api::{Error, Result};
use tokio::sync::watch;

/// How a process ended, as the kernel (or a daemon relaying it) reported
/// it: an exit code, or the signal that killed it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ended {
    Code(i32),
    Signal(Signal),
}

impl Ended {
    /// The end a raw `waitpid` status of an ended process (exited or killed
    /// by a signal, not stopped) describes; the core-dump bit is ignored.
    pub fn from_wait_status(raw: i32) -> Ended {
        match raw & 0x7f {
            0 => Ended::Code((raw >> 8) & 0xff),
            signal => Ended::Signal(Signal(signal)),
        }
    }

    /// The seam's status for this end; `timed_out` says whether the spec's
    /// timeout expired (the provider's own kill is still reported as the
    /// signal it sent).
    pub fn status(self, timed_out: bool) -> ExitStatus {
        match self {
            Ended::Code(code) => ExitStatus {
                code: Some(code),
                signal: None,
                timed_out,
            },
            Ended::Signal(signal) => ExitStatus {
                code: None,
                signal: Some(signal),
                timed_out,
            },
        }
    }
}

/// What the observer publishes: `None` until the end is known, then the
/// status (or why it cannot be known).
pub type Published = Option<Result<ExitStatus>>;

/// Waits until a status is published on `status` and returns it. When the
/// publisher (named `publisher`, of `subject`) is dropped without
/// publishing, fails with `Io`: `"wait: <subject>: its <publisher> stopped
/// without a status"`. Cancel-safe: dropping the future stops waiting
/// only.
pub async fn wait_published(
    status: &watch::Receiver<Published>,
    subject: &str,
    publisher: &str,
) -> Result<ExitStatus> {
    let mut status = status.clone();
    let published = status.wait_for(Option::is_some).await.map_err(|_| {
        Error::io(format!(
            "wait: {subject}: its {publisher} stopped without a status"
        ))
    })?;
    published.clone().expect("waited for a published status")
}

#[cfg(test)]
mod tests {
    use dsh_plugin_api::ErrorKind;

    use super::*;

    fn exited(code: i32) -> ExitStatus {
        ExitStatus {
            code: Some(code),
            signal: None,
            timed_out: false,
        }
    }

    #[test]
    fn ends_become_statuses() {
        assert_eq!(Ended::from_wait_status(3 << 8), Ended::Code(3));
        assert_eq!(Ended::from_wait_status(9), Ended::Signal(Signal::KILL));
        assert_eq!(
            Ended::from_wait_status(11 | 0x80),
            Ended::Signal(Signal(11))
        );
        assert_eq!(Ended::Code(3).status(false), exited(3));
        assert_eq!(
            Ended::Signal(Signal::TERM).status(true),
            ExitStatus {
                code: None,
                signal: Some(Signal::TERM),
                timed_out: true
            }
        );
    }

    #[tokio::test]
    async fn every_waiter_gets_the_published_status() {
        let (publish, status) = watch::channel(None);
        let first = tokio::spawn({
            let status = status.clone();
            async move { wait_published(&status, "process 7", "supervisor").await }
        });
        tokio::task::yield_now().await;
        publish.send_replace(Some(Ok(exited(3))));
        assert_eq!(first.await.unwrap().unwrap(), exited(3));
        drop(publish);
        // Published before the publisher went away: still the status.
        assert_eq!(
            wait_published(&status, "process 7", "supervisor")
                .await
                .unwrap(),
            exited(3)
        );
    }

    #[tokio::test]
    async fn a_publisher_gone_without_a_status_is_an_io_error() {
        let (publish, status) = watch::channel::<Published>(None);
        drop(publish);
        let err = wait_published(&status, "terminal 4", "pump")
            .await
            .unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Io);
        assert_eq!(
            err.message(),
            "wait: terminal 4: its pump stopped without a status"
        );
    }
}
