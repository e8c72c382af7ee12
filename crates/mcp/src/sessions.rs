//! The HTTP sessions: rmcp's in-memory sessions, bounded in number and
//! expiring when idle, and a call whose client went away cancelled.
//!
//! A session is *idle* while none of its HTTP streams is open: no call's
//! response stream, no standalone (`GET`) stream. A connected client keeps
//! its `GET` stream open, and a call in progress its response stream, so
//! neither is ever idle however long it waits; a client that initialized
//! and left is. At most [`SessionLimits::max`] sessions exist: a new one
//! evicts the least recently used idle session, and when every session is
//! busy it is refused (503). An idle session expires after
//! [`SessionLimits::idle`].
//!
//! When a call's response stream is dropped before its answer (the client
//! disconnected), the call is cancelled as a `notifications/cancelled`
//! would — the same path a stdio client's cancellation takes — so what it
//! started in the world stops.

use std::collections::HashMap;
use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use futures::Stream;
use rmcp::model::{
    CancelledNotification, CancelledNotificationParam, ClientJsonRpcMessage, ClientNotification,
    JsonRpcMessage, RequestId, ServerJsonRpcMessage,
};
use rmcp::transport::WorkerTransport;
use rmcp::transport::streamable_http_server::SessionManager;
use rmcp::transport::streamable_http_server::session::local::{
    LocalSessionManager, LocalSessionManagerError, LocalSessionWorker,
};
use rmcp::transport::streamable_http_server::session::{ServerSseMessage, SessionId};

/// How many sessions may exist, and how long an idle one lives.
#[derive(Debug, Clone, Copy)]
pub struct SessionLimits {
    /// The most sessions at once.
    pub max: usize,
    /// How long a session with no open stream lives after its last use.
    pub idle: Duration,
}

impl Default for SessionLimits {
    /// 64 sessions (an agent uses one; a few clients at once are many), idle
    /// ones kept 10 minutes.
    fn default() -> Self {
        SessionLimits {
            max: 64,
            idle: Duration::from_secs(600),
        }
    }
}

/// What is known of a session's use.
#[derive(Debug)]
struct Usage {
    /// Its HTTP streams open now.
    streams: usize,
    /// When a stream last opened or closed, or a message came.
    last: Instant,
}

type Usages = Arc<Mutex<HashMap<SessionId, Usage>>>;

/// rmcp's [`LocalSessionManager`] with [`SessionLimits`] (see the module
/// docs).
pub(crate) struct Sessions {
    inner: Arc<LocalSessionManager>,
    usages: Usages,
    limits: SessionLimits,
}

/// Why a session could not be served.
#[derive(Debug, thiserror::Error)]
pub(crate) enum SessionsError {
    #[error("dsh mcp: {0} sessions are open and none is idle")]
    Full(usize),
    #[error(transparent)]
    Local(#[from] LocalSessionManagerError),
}

impl Sessions {
    pub(crate) fn new(limits: SessionLimits) -> Sessions {
        let mut inner = LocalSessionManager::default();
        // Idleness is ours to judge (open streams, not worker events): rmcp's
        // keep-alive would end a session whose one call runs silently for
        // longer than it (a `run` may take 10 minutes).
        inner.session_config.keep_alive = None;
        Sessions {
            inner: Arc::new(inner),
            usages: Arc::default(),
            limits,
        }
    }

    fn usages(&self) -> std::sync::MutexGuard<'_, HashMap<SessionId, Usage>> {
        lock(&self.usages)
    }

    /// Whether a new session can be admitted: fewer than the limit exist, or
    /// one of them is idle (to be evicted).
    pub(crate) fn has_room(&self) -> bool {
        let usages = self.usages();
        usages.len() < self.limits.max || usages.values().any(|usage| usage.streams == 0)
    }

    /// Ends the sessions idle for longer than the limit; returns how many.
    pub(crate) async fn expire(&self) -> usize {
        let expired: Vec<SessionId> = self
            .usages()
            .iter()
            .filter(|(_, usage)| usage.streams == 0 && usage.last.elapsed() >= self.limits.idle)
            .map(|(id, _)| id.clone())
            .collect();
        for id in &expired {
            tracing::debug!("dsh mcp: session {id} expired (idle)");
            let _ = self.close_session(id).await;
        }
        expired.len()
    }

    /// Notes a use of session `id` (when it exists).
    fn touch(&self, id: &SessionId) {
        if let Some(usage) = self.usages().get_mut(id) {
            usage.last = Instant::now();
        }
    }

    /// `stream` of session `id`, counted open until dropped; `call` is the
    /// request it answers, cancelled if the stream is dropped first.
    fn track<S>(&self, id: &SessionId, stream: S, call: Option<RequestId>) -> Tracked<S> {
        if let Some(usage) = self.usages().get_mut(id) {
            usage.streams += 1;
            usage.last = Instant::now();
        }
        Tracked {
            stream,
            session: id.clone(),
            usages: Arc::clone(&self.usages),
            inner: Arc::clone(&self.inner),
            call,
        }
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    // The map stays consistent at every step: a panic elsewhere leaves it usable.
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

impl SessionManager for Sessions {
    type Error = SessionsError;
    type Transport = WorkerTransport<LocalSessionWorker>;

    /// A new session; at the limit, the least recently used idle session is
    /// evicted for it (chosen and replaced in one step, so concurrent
    /// creations never overshoot), and with none idle it is refused.
    async fn create_session(&self) -> Result<(SessionId, Self::Transport), Self::Error> {
        let (id, transport) = self.inner.create_session().await?;
        let admitted = {
            let mut usages = self.usages();
            let victim = if usages.len() < self.limits.max {
                Ok(None)
            } else {
                usages
                    .iter()
                    .filter(|(_, usage)| usage.streams == 0)
                    .min_by_key(|(_, usage)| usage.last)
                    .map(|(victim, _)| Some(victim.clone()))
                    .ok_or(())
            };
            if let Ok(victim) = &victim {
                if let Some(victim) = victim {
                    usages.remove(victim);
                }
                let usage = Usage {
                    streams: 0,
                    last: Instant::now(),
                };
                usages.insert(id.clone(), usage);
            }
            victim
        };
        match admitted {
            Ok(victim) => {
                if let Some(victim) = victim {
                    tracing::debug!("dsh mcp: session {victim} evicted (the oldest idle one)");
                    self.inner.close_session(&victim).await?;
                }
                Ok((id, transport))
            }
            Err(()) => {
                drop(transport);
                self.inner.close_session(&id).await?;
                Err(SessionsError::Full(self.limits.max))
            }
        }
    }

    async fn initialize_session(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> Result<ServerJsonRpcMessage, Self::Error> {
        self.touch(id);
        Ok(self.inner.initialize_session(id, message).await?)
    }

    async fn has_session(&self, id: &SessionId) -> Result<bool, Self::Error> {
        Ok(self.inner.has_session(id).await?)
    }

    async fn close_session(&self, id: &SessionId) -> Result<(), Self::Error> {
        self.usages().remove(id);
        Ok(self.inner.close_session(id).await?)
    }

    async fn create_stream(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, Self::Error> {
        let call = match &message {
            JsonRpcMessage::Request(request) => Some(request.id.clone()),
            _ => None,
        };
        let stream = self.inner.create_stream(id, message).await?;
        Ok(self.track(id, stream, call))
    }

    async fn accept_message(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> Result<(), Self::Error> {
        self.touch(id);
        Ok(self.inner.accept_message(id, message).await?)
    }

    async fn create_standalone_stream(
        &self,
        id: &SessionId,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, Self::Error> {
        let stream = self.inner.create_standalone_stream(id).await?;
        Ok(self.track(id, stream, None))
    }

    async fn resume(
        &self,
        id: &SessionId,
        last_event_id: String,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, Self::Error> {
        let stream = self.inner.resume(id, last_event_id).await?;
        Ok(self.track(id, stream, None))
    }
}

/// A session's HTTP stream, counted open until dropped (see
/// [`Sessions::track`]).
struct Tracked<S> {
    stream: S,
    session: SessionId,
    usages: Usages,
    inner: Arc<LocalSessionManager>,
    /// The request this stream answers, until its answer has passed.
    call: Option<RequestId>,
}

impl<S: Stream<Item = ServerSseMessage> + Unpin> Stream for Tracked<S> {
    type Item = ServerSseMessage;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let polled = Pin::new(&mut self.stream).poll_next(cx);
        match &polled {
            Poll::Ready(None) => self.call = None,
            Poll::Ready(Some(event)) => {
                let answered = event
                    .message
                    .as_deref()
                    .is_some_and(|message| match message {
                        JsonRpcMessage::Response(response) => {
                            Some(&response.id) == self.call.as_ref()
                        }
                        JsonRpcMessage::Error(error) => error.id.is_some() && error.id == self.call,
                        _ => false,
                    });
                if answered {
                    self.call = None;
                }
            }
            Poll::Pending => {}
        }
        polled
    }
}

impl<S> Drop for Tracked<S> {
    fn drop(&mut self) {
        if let Some(usage) = lock(&self.usages).get_mut(&self.session) {
            usage.streams = usage.streams.saturating_sub(1);
            usage.last = Instant::now();
        }
        let Some(call) = self.call.take() else {
            return;
        };
        // Dropped outside a runtime only when the server is going away, and
        // with it every call.
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let inner = Arc::clone(&self.inner);
        let session = self.session.clone();
        runtime.spawn(async move {
            tracing::debug!(
                "dsh mcp: session {session}: the client left call {call}; cancelling it"
            );
            let cancelled =
                ClientJsonRpcMessage::notification(ClientNotification::CancelledNotification(
                    CancelledNotification::new(CancelledNotificationParam::new(
                        Some(call),
                        Some("the HTTP client disconnected".to_owned()),
                    )),
                ));
            // A session already gone has cancelled its calls itself.
            let _ = inner.accept_message(&session, cancelled).await;
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Session `id`'s presence, as rmcp sees it.
    async fn exists(sessions: &Sessions, id: &SessionId) -> bool {
        sessions.has_session(id).await.unwrap()
    }

    #[tokio::test]
    async fn the_oldest_idle_session_makes_room_busy_ones_never_and_idle_ones_expire() {
        let sessions = Sessions::new(SessionLimits {
            max: 2,
            idle: Duration::from_millis(200),
        });
        let (first, _first_transport) = sessions.create_session().await.unwrap();
        let (second, _second_transport) = sessions.create_session().await.unwrap();
        // The first is the least recently used until it is used again.
        sessions.touch(&first);
        let (third, _third_transport) = sessions.create_session().await.unwrap();
        assert!(exists(&sessions, &first).await && exists(&sessions, &third).await);
        assert!(
            !exists(&sessions, &second).await,
            "the oldest idle one was evicted"
        );

        // With every session busy (a stream open each), a new one is refused.
        let first_stream =
            sessions.track(&first, futures::stream::empty::<ServerSseMessage>(), None);
        let third_stream =
            sessions.track(&third, futures::stream::empty::<ServerSseMessage>(), None);
        assert!(!sessions.has_room());
        assert!(matches!(
            sessions.create_session().await,
            Err(SessionsError::Full(2))
        ));
        assert_eq!(
            sessions.usages().len(),
            2,
            "the refused session is not kept"
        );

        // A busy session does not expire however long it waits; once idle, it does.
        tokio::time::sleep(Duration::from_millis(250)).await;
        assert_eq!(sessions.expire().await, 0);
        drop(first_stream);
        assert!(sessions.has_room());
        tokio::time::sleep(Duration::from_millis(250)).await;
        assert_eq!(sessions.expire().await, 1);
        assert!(!exists(&sessions, &first).await);
        assert!(exists(&sessions, &third).await);
        drop(third_stream);
    }
}
