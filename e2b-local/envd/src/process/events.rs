//! The event stream of `Start` and `Connect` (docs/e2b-protocol.md §5.3–5.4): `start{pid}` first,
//! then data and keepalives, then exactly one `end`, then the end of the stream. A request deadline
//! ends the stream with `deadline_exceeded` instead.
//!
//! The stream owns its subscription: dropping it (the client went away) detaches from the
//! process without affecting it.

use std::time::Duration;

use connectrpc::ConnectError;
use envd_proto::process::ProcessEvent;
use envd_proto::process::process_event::{Event, KeepAlive, StartEvent};
use futures::Stream;
use tokio::sync::mpsc;
use tokio::time::Instant;

use super::fanout::{Output, Subscription};

enum State {
    Start {
        pid: u32,
        subscription: Subscription,
    },
    Live {
        receiver: mpsc::Receiver<Output>,
        next_keepalive: Instant,
    },
    End(envd_proto::process::process_event::EndEvent),
    Done,
}

fn event(event: Event) -> ProcessEvent {
    ProcessEvent {
        event: Some(event),
        ..Default::default()
    }
}

/// The events of process `pid` as seen through `subscription`, each wrapped by `wrap` into the
/// RPC's response message. Keepalives are sent after `keepalive` without data; `deadline` (the
/// request's `Connect-Timeout-Ms`) ends the stream with `deadline_exceeded`.
pub(crate) fn process_events<R: Send + 'static>(
    pid: u32,
    subscription: Subscription,
    keepalive: Duration,
    deadline: Option<Instant>,
    wrap: fn(ProcessEvent) -> R,
) -> impl Stream<Item = Result<R, ConnectError>> + Send + 'static {
    futures::stream::unfold(
        State::Start { pid, subscription },
        move |state| async move {
            match state {
                State::Start { pid, subscription } => {
                    let start = wrap(event(Event::Start(Box::new(StartEvent {
                        pid,
                        ..Default::default()
                    }))));
                    let next = match subscription {
                        Subscription::Ended(end) => State::End(end),
                        Subscription::Live(receiver) => State::Live {
                            receiver,
                            next_keepalive: Instant::now() + keepalive,
                        },
                    };
                    Some((Ok(start), next))
                }
                State::Live {
                    mut receiver,
                    mut next_keepalive,
                } => {
                    tokio::select! {
                        biased;
                        () = crate::stream_timing::expired(deadline) => Some((
                            Err(ConnectError::deadline_exceeded("context deadline exceeded")),
                            State::Done,
                        )),
                        output = receiver.recv() => match output {
                            Some(Output::Data(data)) => {
                                next_keepalive = Instant::now() + keepalive;
                                Some((
                                    Ok(wrap(event(Event::Data(Box::new(data))))),
                                    State::Live { receiver, next_keepalive },
                                ))
                            }
                            Some(Output::End(end)) => {
                                Some((Ok(wrap(event(Event::End(Box::new(end))))), State::Done))
                            }
                            None => Some((
                                Err(ConnectError::unknown(
                                    "end event channel closed before sending end event",
                                )),
                                State::Done,
                            )),
                        },
                        () = tokio::time::sleep_until(next_keepalive) => {
                            next_keepalive = Instant::now() + keepalive;
                            Some((
                                Ok(wrap(event(Event::Keepalive(Box::<KeepAlive>::default())))),
                                State::Live { receiver, next_keepalive },
                            ))
                        }
                    }
                }
                State::End(end) => Some((Ok(wrap(event(Event::End(Box::new(end))))), State::Done)),
                State::Done => None,
            }
        },
    )
}
