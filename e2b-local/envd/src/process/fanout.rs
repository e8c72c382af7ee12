//! Fan-out of one process's output to every attached stream (docs/e2b-protocol.md §5.4): output
//! read while nobody is attached is discarded, attached streams receive every chunk in order with
//! backpressure (a slow reader slows the process, as in envd), and the end event reaches every
//! stream exactly once — including streams that attach after the process ended.

use std::sync::Mutex;

use envd_proto::process::process_event::{DataEvent, EndEvent};
use tokio::sync::mpsc;

/// How many events may wait in one attached stream before the process's readers block.
const STREAM_BUFFER: usize = 64;

/// What an attached stream receives.
#[derive(Debug, Clone)]
pub(crate) enum Output {
    Data(DataEvent),
    End(EndEvent),
}

/// The result of attaching to a process.
pub(crate) enum Subscription {
    /// Live output follows, then exactly one [`Output::End`].
    Live(mpsc::Receiver<Output>),
    /// The process already ended.
    Ended(EndEvent),
}

#[derive(Default)]
struct State {
    subscribers: Vec<mpsc::Sender<Output>>,
    end: Option<EndEvent>,
}

/// The subscriber list of one process.
#[derive(Default)]
pub(crate) struct Fanout {
    state: Mutex<State>,
}

impl Fanout {
    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Attaches a new stream. Dropping the receiver detaches it.
    pub(crate) fn subscribe(&self) -> Subscription {
        let mut state = self.lock();
        if let Some(end) = &state.end {
            return Subscription::Ended(end.clone());
        }
        let (sender, receiver) = mpsc::channel(STREAM_BUFFER);
        state.subscribers.push(sender);
        Subscription::Live(receiver)
    }

    /// Delivers `data` to every attached stream, waiting while one is full; discarded when none
    /// is attached. Streams that went away are dropped from the list.
    pub(crate) async fn publish(&self, data: DataEvent) {
        let subscribers = self.lock().subscribers.clone();
        if subscribers.is_empty() {
            return;
        }
        let mut any_gone = false;
        for subscriber in &subscribers {
            if subscriber.send(Output::Data(data.clone())).await.is_err() {
                any_gone = true;
            }
        }
        if any_gone {
            self.lock().subscribers.retain(|s| !s.is_closed());
        }
    }

    /// Records the end and delivers it to every attached stream (concurrently, so one stalled
    /// client does not hold the others back). Later subscribers get [`Subscription::Ended`].
    pub(crate) async fn finish(&self, end: EndEvent) {
        let subscribers = {
            let mut state = self.lock();
            state.end = Some(end.clone());
            std::mem::take(&mut state.subscribers)
        };
        futures::future::join_all(
            subscribers
                .iter()
                .map(|subscriber| subscriber.send(Output::End(end.clone()))),
        )
        .await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use envd_proto::process::process_event::data_event::Output as DataOutput;

    fn chunk(text: &str) -> DataEvent {
        DataEvent {
            output: Some(DataOutput::Stdout(text.as_bytes().to_vec())),
            ..Default::default()
        }
    }

    #[tokio::test]
    async fn unattached_output_is_discarded_and_late_subscribers_see_the_end() {
        let fanout = Fanout::default();
        fanout.publish(chunk("lost")).await;
        let Subscription::Live(mut first) = fanout.subscribe() else {
            panic!("process still running");
        };
        fanout.publish(chunk("seen")).await;
        fanout
            .finish(EndEvent {
                exited: true,
                ..Default::default()
            })
            .await;
        assert!(matches!(first.recv().await, Some(Output::Data(d)) if d == chunk("seen")));
        assert!(matches!(first.recv().await, Some(Output::End(e)) if e.exited));
        assert!(first.recv().await.is_none());
        assert!(matches!(fanout.subscribe(), Subscription::Ended(e) if e.exited));
    }

    #[tokio::test]
    async fn dropped_subscribers_are_forgotten() {
        let fanout = Fanout::default();
        let Subscription::Live(gone) = fanout.subscribe() else {
            panic!("running");
        };
        drop(gone);
        fanout.publish(chunk("x")).await;
        assert!(fanout.lock().subscribers.is_empty());
    }
}
