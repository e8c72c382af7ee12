//! stdio: the transport MCP clients use when they start `dsh mcp` themselves
//! — newline-delimited JSON-RPC on stdin and stdout.
//!
//! Our own line transport rather than rmcp's, which drops a line that is not
//! JSON or is too long without a word (its client then waits forever): here
//! every such line is answered with a JSON-RPC error ([`crate::wire`]) and
//! the server reads on. A line over [`MAX_MESSAGE_BYTES`] is discarded as it
//! streams, never held whole.

use std::future::Future;
use std::sync::Arc;

use rmcp::model::{ClientJsonRpcMessage, ServerJsonRpcMessage};
use rmcp::transport::Transport;
use rmcp::{RoleServer, ServiceExt};
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::sync::Mutex;
use tokio::task::JoinHandle;

use crate::server::DshMcp;
use crate::wire::{IdScanner, MAX_MESSAGE_BYTES, Rejected, decode};

/// Why the stdio server stopped with an error.
#[derive(Debug, thiserror::Error)]
#[error("dsh mcp (stdio): {0}")]
pub struct StdioError(String);

/// Serves `server` on this process's stdin and stdout until the client
/// closes stdin (EOF) or `shutdown` resolves, whichever comes first —
/// including before the client ever initialized.
pub async fn serve_stdio(
    server: DshMcp,
    shutdown: impl Future<Output = ()>,
) -> Result<(), StdioError> {
    let transport = LineTransport::new(tokio::io::stdin(), tokio::io::stdout());
    let serving = async {
        let running = server
            .serve(transport)
            .await
            .map_err(|err| StdioError(format!("initialization failed: {err}")))?;
        running
            .waiting()
            .await
            .map(drop)
            .map_err(|err| StdioError(err.to_string()))
    };
    tokio::select! {
        served = serving => served,
        () = shutdown => Ok(()),
    }
}

/// How much of the input is read at a time.
const READ_BUFFER: usize = 64 * 1024;

/// A line's buffer keeps at most this much capacity between lines: one huge
/// message does not pin its memory for the rest of the session.
const KEPT_CAPACITY: usize = 1024 * 1024;

/// Newline-delimited JSON-RPC over a reader and a writer.
pub(crate) struct LineTransport<R, W> {
    reader: BufReader<R>,
    /// The line read so far (without its end).
    line: Vec<u8>,
    /// While an oversized line is being discarded: the scan for its id.
    oversized: Option<IdScanner>,
    writer: Arc<Mutex<W>>,
    /// The error answer being written, awaited before the next read so a
    /// client sending nothing but bad lines cannot queue answers without end.
    answering: Option<JoinHandle<()>>,
}

impl<R, W> LineTransport<R, W>
where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin + Send + 'static,
{
    pub(crate) fn new(reader: R, writer: W) -> Self {
        LineTransport {
            reader: BufReader::with_capacity(READ_BUFFER, reader),
            line: Vec::new(),
            oversized: None,
            writer: Arc::new(Mutex::new(writer)),
            answering: None,
        }
    }

    /// Writes `rejected`'s error answer (unless it was a notification's,
    /// which JSON-RPC answers with nothing) on a task of its own: `receive`
    /// is polled in a `select!` and may be dropped at any await.
    fn answer(&mut self, rejected: &Rejected) {
        tracing::debug!("dsh mcp (stdio): refused a line: {}", rejected.message);
        if rejected.notification {
            return;
        }
        let mut bytes = rejected.body();
        bytes.push(b'\n');
        let writer = Arc::clone(&self.writer);
        self.answering = Some(tokio::spawn(async move {
            let mut writer = writer.lock().await;
            // A client gone is noticed by the next read.
            let _ = writer.write_all(&bytes).await;
            let _ = writer.flush().await;
        }));
    }

    /// The next whole line, or `None` at the end of the input. An oversized
    /// line is answered here and skipped.
    ///
    /// Cancel-safe: `fill_buf` consumes nothing when dropped, and everything
    /// after it up to `consume` is synchronous, so a partial line stays in
    /// `self.line` (or the discard in `self.oversized`) for the next call.
    async fn next_line(&mut self) -> Option<Vec<u8>> {
        loop {
            if let Some(answering) = self.answering.as_mut() {
                let _ = answering.await;
                self.answering = None;
            }
            let available = match self.reader.fill_buf().await {
                Ok(available) => available,
                Err(err) => {
                    tracing::warn!("dsh mcp (stdio): read: {err}");
                    return None;
                }
            };
            if available.is_empty() {
                return None;
            }
            let newline = available.iter().position(|&byte| byte == b'\n');
            let content = &available[..newline.unwrap_or(available.len())];
            let taken = newline.map_or(available.len(), |at| at + 1);
            let mut line = None;
            let mut refused = None;
            if let Some(scanner) = self.oversized.as_mut() {
                scanner.feed(content);
                if newline.is_some() {
                    refused = Some(Rejected::oversized(scanner.id()));
                    self.oversized = None;
                }
            } else if self.line.len() + content.len() > MAX_MESSAGE_BYTES {
                let mut scanner = IdScanner::default();
                scanner.feed(&self.line);
                scanner.feed(content);
                self.line = Vec::new();
                if newline.is_some() {
                    refused = Some(Rejected::oversized(scanner.id()));
                } else {
                    self.oversized = Some(scanner);
                }
            } else {
                self.line.extend_from_slice(content);
                if newline.is_some() {
                    line = Some(std::mem::take(&mut self.line));
                }
            }
            self.reader.consume(taken);
            if let Some(refused) = refused {
                self.answer(&refused);
            }
            if let Some(line) = line {
                return Some(line);
            }
        }
    }
}

impl<R, W> Transport<RoleServer> for LineTransport<R, W>
where
    R: AsyncRead + Unpin + Send + 'static,
    W: AsyncWrite + Unpin + Send + 'static,
{
    type Error = std::io::Error;

    fn send(
        &mut self,
        item: ServerJsonRpcMessage,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        let writer = Arc::clone(&self.writer);
        async move {
            let mut bytes = serde_json::to_vec(&item).map_err(std::io::Error::other)?;
            bytes.push(b'\n');
            let mut writer = writer.lock().await;
            writer.write_all(&bytes).await?;
            writer.flush().await
        }
    }

    async fn receive(&mut self) -> Option<ClientJsonRpcMessage> {
        loop {
            let mut line = self.next_line().await?;
            let content = line.strip_suffix(b"\r").unwrap_or(&line);
            let decoded = (!content.is_empty()).then(|| decode(content));
            if line.capacity() <= KEPT_CAPACITY {
                line.clear();
                self.line = line;
            }
            match decoded {
                None => {}
                Some(Ok(message)) => return Some(message),
                Some(Err(rejected)) => self.answer(&rejected),
            }
        }
    }

    async fn close(&mut self) -> Result<(), Self::Error> {
        let mut writer = self.writer.lock().await;
        writer.flush().await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::Value;
    use tokio::io::{AsyncBufReadExt, AsyncWriteExt};

    /// A transport over in-memory pipes: what the test writes, the
    /// transport reads; what it answers, the test reads.
    fn pipes() -> (
        LineTransport<tokio::io::DuplexStream, tokio::io::DuplexStream>,
        tokio::io::DuplexStream,
        tokio::io::Lines<BufReader<tokio::io::DuplexStream>>,
    ) {
        let (client_in, server_in) = tokio::io::duplex(1 << 20);
        let (server_out, client_out) = tokio::io::duplex(1 << 20);
        (
            LineTransport::new(server_in, server_out),
            client_in,
            BufReader::new(client_out).lines(),
        )
    }

    async fn answer(lines: &mut tokio::io::Lines<BufReader<tokio::io::DuplexStream>>) -> Value {
        let line = lines.next_line().await.unwrap().expect("an answer");
        serde_json::from_str(&line).unwrap()
    }

    #[tokio::test]
    async fn bad_lines_are_answered_and_the_next_message_still_arrives() {
        let (mut transport, mut input, mut output) = pipes();
        let ping = r#"{"jsonrpc":"2.0","id":2,"method":"ping"}"#;
        let writing = tokio::spawn(async move {
            input.write_all(b"not json at all\n\r\n\n").await.unwrap();
            input
                .write_all(br#"{"jsonrpc":"2.0","id":"x","method":"tools/call","params":1}"#)
                .await
                .unwrap();
            input.write_all(b"\n").await.unwrap();
            // A notification nobody understands gets no answer.
            input
                .write_all(
                    b"{\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\"params\":1}\n",
                )
                .await
                .unwrap();
            input
                .write_all(format!("{ping}\r\n").as_bytes())
                .await
                .unwrap();
            input
        });
        let message = transport.receive().await.expect("the ping");
        assert_eq!(serde_json::to_value(&message).unwrap()["method"], "ping");
        let parse = answer(&mut output).await;
        assert_eq!(parse["error"]["code"], -32700, "{parse}");
        assert_eq!(parse["id"], Value::Null, "{parse}");
        let invalid = answer(&mut output).await;
        assert_eq!(invalid["error"]["code"], -32600, "{invalid}");
        assert_eq!(invalid["id"], "x", "{invalid}");
        drop(writing.await.unwrap());
        assert!(transport.receive().await.is_none(), "EOF ends the stream");
    }

    #[tokio::test]
    async fn an_oversized_line_is_answered_to_its_id_and_skipped() {
        let (mut transport, mut input, mut output) = pipes();
        let writing = tokio::spawn(async move {
            input
                .write_all(br#"{"jsonrpc":"2.0","method":"tools/call","params":{"content":""#)
                .await
                .unwrap();
            let chunk = vec![b'a'; 1 << 20];
            for _ in 0..17 {
                input.write_all(&chunk).await.unwrap();
            }
            input.write_all(br#""},"id":41}"#).await.unwrap();
            input.write_all(b"\n").await.unwrap();
            input
                .write_all(b"{\"jsonrpc\":\"2.0\",\"id\":42,\"method\":\"ping\"}\n")
                .await
                .unwrap();
            input
        });
        let message = transport.receive().await.expect("the ping");
        assert_eq!(serde_json::to_value(&message).unwrap()["id"], 42);
        let refused = answer(&mut output).await;
        assert_eq!(refused["id"], 41, "{refused}");
        assert_eq!(refused["error"]["code"], -32600, "{refused}");
        drop(writing.await.unwrap());
    }
}
