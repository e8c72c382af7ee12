//! How the `dsh-process-group` ladders wait in this provider: on the tokio
//! timer of the runtime that polls them.

use std::future::Future;
use std::time::Instant;

use dsh_process_group::Pause;

/// A [`Pause`] on tokio's timer. Must be awaited inside a tokio runtime with
/// time enabled; dropping the wait cancels the timer.
#[derive(Debug, Default, Clone, Copy)]
pub struct TokioPause;

impl Pause for TokioPause {
    fn until(&mut self, deadline: Instant) -> impl Future<Output = ()> + Send {
        tokio::time::sleep_until(tokio::time::Instant::from_std(deadline))
    }
}
