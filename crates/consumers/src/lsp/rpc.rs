//! JSON-RPC 2.0 as the language server protocol uses it, over one framed byte stream each way
//! (a server's stdout and stdin, through the `subprocess` seam): requests matched to their
//! responses by id, notifications handed to the owner in order, and the server's own requests
//! answered at once by a fixed policy ([`answer_server_request`]) and then handed to the owner
//! in the same order (it follows some: a progress token created is work begun).
//!
//! **Runtime.** [`RpcClient::start`] spawns a reader and a writer task on the caller's tokio
//! runtime. **Cancellation.** Dropping a [`RpcClient::request`] future before its response
//! forgets the request and tells the server (`$/cancelRequest`). **End.** When the server's
//! stream ends or breaks, every pending and later request fails with [`RpcError::Closed`] and
//! the notification channel ends; dropping the client ends the writer (the server sees its
//! stdin close).

use std::collections::HashMap;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Mutex};

use dsh_plugin_api::stream::ByteWriter;
use lsp_types::notification::Notification as LspNotification;
use lsp_types::request::Request as LspRequest;
use serde_json::{Value, json};
use tokio::io::AsyncBufRead;
use tokio::sync::{mpsc, oneshot};

use super::framing::{frame, read_message};

/// JSON-RPC's "method not found".
const METHOD_NOT_FOUND: i64 = -32601;

/// Why a request got no result.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RpcError {
    /// The server answered with an error.
    #[error("{method}: the language server answered error {code}: {message}")]
    Server {
        method: String,
        code: i64,
        message: String,
    },
    /// The connection ended (the server exited, or sent what is not the protocol).
    #[error("{method}: the language server's connection ended: {reason}")]
    Closed { method: String, reason: String },
    /// The result did not have the shape the protocol gives it.
    #[error("{method}: the language server's answer does not parse: {message}")]
    Malformed { method: String, message: String },
}

/// A notification from the server, or one of its requests once answered.
#[derive(Debug, Clone, PartialEq)]
pub struct Notification {
    pub method: String,
    pub params: Value,
}

type Outcome = Result<Value, (i64, String)>;

#[derive(Default)]
struct Pending {
    waiting: HashMap<i64, oneshot::Sender<Outcome>>,
    /// Set once the connection ended: why.
    closed: Option<String>,
}

/// The client end of one connection.
pub struct RpcClient {
    outgoing: mpsc::UnboundedSender<Vec<u8>>,
    pending: Arc<Mutex<Pending>>,
    next_id: AtomicI64,
}

impl std::fmt::Debug for RpcClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RpcClient")
            .field("next_id", &self.next_id)
            .finish_non_exhaustive()
    }
}

impl RpcClient {
    /// Starts a connection reading the server's messages from `from_server` and writing to
    /// `to_server` (closed when the client is dropped); returns the client and the server's
    /// notifications, in the order sent.
    pub fn start<R>(
        from_server: R,
        mut to_server: Box<dyn ByteWriter>,
    ) -> (RpcClient, mpsc::UnboundedReceiver<Notification>)
    where
        R: AsyncBufRead + Unpin + Send + 'static,
    {
        let (outgoing, mut to_write) = mpsc::unbounded_channel::<Vec<u8>>();
        let (notify, notifications) = mpsc::unbounded_channel();
        let pending = Arc::new(Mutex::new(Pending::default()));
        tokio::spawn({
            let pending = pending.clone();
            async move {
                while let Some(message) = to_write.recv().await {
                    if let Err(err) = to_server.write(frame(&message)).await {
                        close(&pending, format!("writing to the server: {err}"));
                        return;
                    }
                }
                let _ = to_server.close().await;
            }
        });
        tokio::spawn({
            let pending = pending.clone();
            // Weak: the writer (and with it the server's stdin) ends once the client is
            // dropped, not when the server stops talking.
            let outgoing = outgoing.downgrade();
            async move {
                let mut from_server = from_server;
                let reason = loop {
                    match read_message(&mut from_server).await {
                        Ok(Some(body)) => dispatch(&body, &pending, &outgoing, &notify),
                        Ok(None) => break "the server closed its output".to_owned(),
                        Err(err) => break err.to_string(),
                    }
                };
                close(&pending, reason);
            }
        });
        let client = RpcClient {
            outgoing,
            pending,
            next_id: AtomicI64::new(1),
        };
        (client, notifications)
    }

    /// Why the connection ended (the server closed its output, a write failed), once it has.
    pub fn closed(&self) -> Option<String> {
        self.pending.lock().expect("pending lock").closed.clone()
    }

    /// Sends request `R` and waits for its result. Dropping the future cancels the request.
    pub async fn request<R: LspRequest>(&self, params: R::Params) -> Result<R::Result, RpcError> {
        let malformed = |e: serde_json::Error| RpcError::Malformed {
            method: R::METHOD.to_owned(),
            message: e.to_string(),
        };
        let params = serde_json::to_value(params).map_err(malformed)?;
        let value = self.request_value(R::METHOD, params).await?;
        serde_json::from_value(value).map_err(malformed)
    }

    /// [`Self::request`] by method name, with JSON params and result.
    pub async fn request_value(&self, method: &str, params: Value) -> Result<Value, RpcError> {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let (tx, rx) = oneshot::channel();
        {
            let mut pending = self.pending.lock().expect("pending lock");
            if let Some(reason) = &pending.closed {
                return Err(RpcError::Closed {
                    method: method.to_owned(),
                    reason: reason.clone(),
                });
            }
            pending.waiting.insert(id, tx);
        }
        let mut guard = CancelOnDrop {
            client: self,
            id,
            armed: true,
        };
        let message = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        let _ = self.outgoing.send(message.to_string().into_bytes());
        let outcome = rx.await;
        guard.armed = false;
        match outcome {
            Ok(Ok(result)) => Ok(result),
            Ok(Err((code, message))) => Err(RpcError::Server {
                method: method.to_owned(),
                code,
                message,
            }),
            Err(_) => Err(RpcError::Closed {
                method: method.to_owned(),
                reason: self
                    .pending
                    .lock()
                    .expect("pending lock")
                    .closed
                    .clone()
                    .unwrap_or_else(|| "the connection ended".to_owned()),
            }),
        }
    }

    /// Sends notification `N`. Fails only once the connection has ended.
    pub fn notify<N: LspNotification>(&self, params: N::Params) -> Result<(), RpcError> {
        let closed = |reason: String| RpcError::Closed {
            method: N::METHOD.to_owned(),
            reason,
        };
        if let Some(reason) = self.pending.lock().expect("pending lock").closed.clone() {
            return Err(closed(reason));
        }
        let message = json!({"jsonrpc": "2.0", "method": N::METHOD, "params": params});
        self.outgoing
            .send(message.to_string().into_bytes())
            .map_err(|_| closed("the connection ended".to_owned()))
    }
}

/// Forgets a request whose future was dropped before its response, and tells the server.
struct CancelOnDrop<'a> {
    client: &'a RpcClient,
    id: i64,
    armed: bool,
}

impl Drop for CancelOnDrop<'_> {
    fn drop(&mut self) {
        if !self.armed {
            return;
        }
        let removed = self
            .client
            .pending
            .lock()
            .expect("pending lock")
            .waiting
            .remove(&self.id);
        if removed.is_some() {
            let cancel =
                json!({"jsonrpc": "2.0", "method": "$/cancelRequest", "params": {"id": self.id}});
            let _ = self.client.outgoing.send(cancel.to_string().into_bytes());
        }
    }
}

fn close(pending: &Mutex<Pending>, reason: String) {
    let mut pending = pending.lock().expect("pending lock");
    if pending.closed.is_none() {
        pending.closed = Some(reason);
    }
    // Dropping the senders fails every waiting request with the reason above.
    pending.waiting.clear();
}

/// Routes one message from the server.
fn dispatch(
    body: &[u8],
    pending: &Mutex<Pending>,
    outgoing: &mpsc::WeakUnboundedSender<Vec<u8>>,
    notify: &mpsc::UnboundedSender<Notification>,
) {
    let Ok(message) = serde_json::from_slice::<Value>(body) else {
        tracing::warn!("language server sent a message that is not JSON; ignored");
        return;
    };
    let method = message.get("method").and_then(Value::as_str);
    let id = message.get("id").filter(|id| !id.is_null());
    match (method, id) {
        (Some(method), Some(id)) => {
            let params = message.get("params").cloned().unwrap_or(Value::Null);
            let reply = match answer_server_request(method, &params) {
                Ok(result) => json!({"jsonrpc": "2.0", "id": id, "result": result}),
                Err((code, text)) => {
                    json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": text}})
                }
            };
            if let Some(outgoing) = outgoing.upgrade() {
                let _ = outgoing.send(reply.to_string().into_bytes());
            }
            let _ = notify.send(Notification {
                method: method.to_owned(),
                params,
            });
        }
        (Some(method), None) => {
            let _ = notify.send(Notification {
                method: method.to_owned(),
                params: message.get("params").cloned().unwrap_or(Value::Null),
            });
        }
        (None, Some(id)) => {
            let Some(id) = id.as_i64() else {
                tracing::warn!(%id, "language server answered an id this client never sends");
                return;
            };
            let outcome = match message.get("error") {
                Some(error) => Err((
                    error.get("code").and_then(Value::as_i64).unwrap_or(0),
                    error
                        .get("message")
                        .and_then(Value::as_str)
                        .unwrap_or("(no message)")
                        .to_owned(),
                )),
                None => Ok(message.get("result").cloned().unwrap_or(Value::Null)),
            };
            let waiting = pending.lock().expect("pending lock").waiting.remove(&id);
            if let Some(waiting) = waiting {
                let _ = waiting.send(outcome);
            }
        }
        (None, None) => tracing::warn!("language server sent a message with neither method nor id"),
    }
}

/// How the client answers the server's requests: configuration sections are unset (`null`
/// each: the server's defaults), progress tokens and capability registrations are accepted,
/// edits the server wants applied are declined (edits go through the `fs` seam, by the
/// caller), anything else is "method not found".
pub fn answer_server_request(method: &str, params: &Value) -> Result<Value, (i64, String)> {
    match method {
        "workspace/configuration" => {
            let items = params
                .get("items")
                .and_then(Value::as_array)
                .map_or(0, Vec::len);
            Ok(Value::Array(vec![Value::Null; items]))
        }
        "window/workDoneProgress/create"
        | "client/registerCapability"
        | "client/unregisterCapability"
        | "window/showMessageRequest"
        | "workspace/diagnostic/refresh"
        | "workspace/semanticTokens/refresh"
        | "workspace/inlayHint/refresh"
        | "workspace/codeLens/refresh"
        | "workspace/workspaceFolders" => Ok(Value::Null),
        "workspace/applyEdit" => Ok(json!({
            "applied": false,
            "failureReason": "dsh applies edits itself, through its fs seam"
        })),
        _ => Err((METHOD_NOT_FOUND, format!("{method} is not handled by dsh"))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;
    use lsp_types::request::{Initialize, Shutdown};
    use tokio::io::{AsyncWriteExt, BufReader, DuplexStream, ReadHalf, WriteHalf};

    /// The client's side of an in-memory pipe, as a seam's stdin writer.
    struct PipeWriter(WriteHalf<DuplexStream>);

    #[async_trait::async_trait]
    impl ByteWriter for PipeWriter {
        async fn write(&mut self, chunk: Bytes) -> dsh_plugin_api::Result<()> {
            self.0
                .write_all(&chunk)
                .await
                .map_err(|e| dsh_plugin_api::Error::closed(e.to_string()))
        }

        async fn close(&mut self) -> dsh_plugin_api::Result<()> {
            let _ = self.0.shutdown().await;
            Ok(())
        }
    }

    /// A scripted server: reads the client's messages and writes raw ones.
    struct Peer {
        reader: BufReader<ReadHalf<DuplexStream>>,
        writer: WriteHalf<DuplexStream>,
    }

    impl Peer {
        async fn next(&mut self) -> Value {
            let body = read_message(&mut self.reader).await.unwrap().unwrap();
            serde_json::from_slice(&body).unwrap()
        }

        async fn send(&mut self, message: Value) {
            self.writer
                .write_all(&frame(message.to_string().as_bytes()))
                .await
                .unwrap();
        }
    }

    fn connect() -> (RpcClient, mpsc::UnboundedReceiver<Notification>, Peer) {
        let (client_side, server_side) = tokio::io::duplex(1 << 16);
        let (client_read, client_write) = tokio::io::split(client_side);
        let (server_read, server_write) = tokio::io::split(server_side);
        let (client, notifications) = RpcClient::start(
            BufReader::new(client_read),
            Box::new(PipeWriter(client_write)),
        );
        let peer = Peer {
            reader: BufReader::new(server_read),
            writer: server_write,
        };
        (client, notifications, peer)
    }

    #[tokio::test]
    async fn requests_get_their_own_responses_in_any_order() {
        let (client, _notifications, mut peer) = connect();
        let first = client.request_value("a/first", json!({"n": 1}));
        let second = client.request_value("a/second", json!({"n": 2}));
        let server = async {
            let (one, two) = (peer.next().await, peer.next().await);
            assert_eq!(one["method"], "a/first");
            // Answered in the other order, the second with an error.
            peer.send(json!({"jsonrpc": "2.0", "id": two["id"], "error": {"code": -32800, "message": "nope"}}))
                .await;
            peer.send(json!({"jsonrpc": "2.0", "id": one["id"], "result": {"ok": true}}))
                .await;
        };
        let (first, second, ()) = tokio::join!(first, second, server);
        assert_eq!(first.unwrap(), json!({"ok": true}));
        assert_eq!(
            second.unwrap_err(),
            RpcError::Server {
                method: "a/second".into(),
                code: -32800,
                message: "nope".into()
            }
        );
    }

    #[tokio::test]
    async fn typed_requests_parse_results_or_say_why_not() {
        let (client, _notifications, mut peer) = connect();
        let shutdown = client.request::<Shutdown>(());
        let server = async {
            let request = peer.next().await;
            peer.send(json!({"jsonrpc": "2.0", "id": request["id"], "result": null}))
                .await;
            let request = peer.next().await;
            assert_eq!(request["method"], "initialize");
            peer.send(
                json!({"jsonrpc": "2.0", "id": request["id"], "result": {"capabilities": 7}}),
            )
            .await;
        };
        let initialize = async {
            shutdown.await.unwrap();
            client
                .request::<Initialize>(lsp_types::InitializeParams::default())
                .await
        };
        let (initialized, ()) = tokio::join!(initialize, server);
        assert!(
            matches!(initialized, Err(RpcError::Malformed { .. })),
            "{initialized:?}"
        );
    }

    #[tokio::test]
    async fn server_requests_are_answered_and_everything_the_server_says_is_handed_on_in_order() {
        let (_client, mut notifications, mut peer) = connect();
        peer.send(json!({"jsonrpc": "2.0", "method": "window/logMessage", "params": {"type": 3, "message": "one"}}))
            .await;
        peer.send(json!({"jsonrpc": "2.0", "id": "cfg", "method": "workspace/configuration", "params": {"items": [{}, {}]}}))
            .await;
        peer.send(json!({"jsonrpc": "2.0", "id": 9, "method": "made/up"}))
            .await;
        peer.send(json!({"jsonrpc": "2.0", "method": "$/progress", "params": {"token": 1}}))
            .await;
        let configuration = peer.next().await;
        assert_eq!(
            configuration,
            json!({"jsonrpc": "2.0", "id": "cfg", "result": [null, null]})
        );
        let unknown = peer.next().await;
        assert_eq!(unknown["error"]["code"], METHOD_NOT_FOUND);
        let mut followed = Vec::new();
        for _ in 0..4 {
            followed.push(notifications.recv().await.unwrap().method);
        }
        assert_eq!(
            followed,
            [
                "window/logMessage",
                "workspace/configuration",
                "made/up",
                "$/progress"
            ]
        );
    }

    #[tokio::test]
    async fn a_dropped_request_is_cancelled_and_a_closed_server_fails_the_rest() {
        let (client, mut notifications, mut peer) = connect();
        {
            let abandoned = client.request_value("slow/thing", Value::Null);
            let _ = tokio::time::timeout(std::time::Duration::from_millis(20), abandoned).await;
        }
        let sent = peer.next().await;
        let cancel = peer.next().await;
        assert_eq!(cancel["method"], "$/cancelRequest");
        assert_eq!(cancel["params"]["id"], sent["id"]);
        // A late answer to the cancelled request is ignored.
        peer.send(json!({"jsonrpc": "2.0", "id": sent["id"], "result": 1}))
            .await;

        let waiting = client.request_value("never/answered", Value::Null);
        let server = async {
            peer.next().await;
            drop(peer);
        };
        let (waiting, ()) = tokio::join!(waiting, server);
        assert!(
            matches!(waiting, Err(RpcError::Closed { .. })),
            "{waiting:?}"
        );
        let later = client.request_value("after/close", Value::Null).await;
        assert!(
            matches!(&later, Err(RpcError::Closed { reason, .. }) if reason.contains("closed its output")),
            "{later:?}"
        );
        assert!(client.notify::<lsp_types::notification::Exit>(()).is_err());
        assert!(
            notifications.recv().await.is_none(),
            "the notifications end"
        );
    }
}
