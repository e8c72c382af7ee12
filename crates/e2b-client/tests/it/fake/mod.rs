//! A scripted `ClientTransport` for unit-testing `Envd` without a server:
//! every request is recorded (head and collected body) and answered by a
//! handler with a canned response whose body may break off.

use std::collections::VecDeque;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use bytes::{BufMut, Bytes, BytesMut};
use connectrpc::ConnectError;
use connectrpc::client::{BoxFuture, ClientBody, ClientTransport};
use http::{HeaderMap, Request, Response, StatusCode};
use http_body::{Body, Frame};
use http_body_util::BodyExt;

/// One frame of a canned body: data, or a read failure.
#[derive(Debug, Clone)]
pub enum Chunk {
    Data(Bytes),
    Fail(&'static str),
    /// Never completes: the body hangs here.
    Hang,
}

/// A canned response.
#[derive(Debug, Clone)]
pub struct Canned {
    pub status: StatusCode,
    pub headers: HeaderMap,
    pub chunks: Vec<Chunk>,
}

impl Canned {
    pub fn new(status: u16, content_type: &str, body: impl Into<Bytes>) -> Self {
        let mut headers = HeaderMap::new();
        if !content_type.is_empty() {
            headers.insert(http::header::CONTENT_TYPE, content_type.parse().unwrap());
        }
        Canned {
            status: StatusCode::from_u16(status).unwrap(),
            headers,
            chunks: vec![Chunk::Data(body.into())],
        }
    }

    pub fn header(mut self, name: &'static str, value: &str) -> Self {
        self.headers.insert(name, value.parse().unwrap());
        self
    }

    pub fn chunks(mut self, chunks: Vec<Chunk>) -> Self {
        self.chunks = chunks;
        self
    }

    /// A unary protobuf success.
    pub fn proto(message: &impl buffa::Message) -> Self {
        Canned::new(
            200,
            "application/proto",
            buffa::Message::encode_to_vec(message),
        )
    }

    /// A Connect unary error.
    pub fn connect_error(status: u16, code: &str, message: &str) -> Self {
        Canned::new(
            status,
            "application/json",
            format!(r#"{{"code":"{code}","message":"{message}"}}"#),
        )
    }

    /// The edge proxy's answer for a sandbox that is not running.
    pub fn edge_502(sandbox_id: &str) -> Self {
        Canned::new(
            502,
            "application/json",
            format!(
                r#"{{"sandboxId":"{sandbox_id}","message":"The sandbox was not found","code":502}}"#
            ),
        )
    }

    /// A protobuf server stream: the messages, then an end-stream frame with
    /// `end_json` (`{}` for success).
    pub fn proto_stream(messages: &[Bytes], end_json: &str) -> Self {
        let mut body = BytesMut::new();
        for message in messages {
            body.put_slice(&envelope(0, message));
        }
        body.put_slice(&envelope(2, end_json.as_bytes()));
        Canned::new(200, "application/connect+proto", body.freeze())
    }
}

/// `[flags][u32 BE length][payload]`.
pub fn envelope(flags: u8, payload: &[u8]) -> Bytes {
    let mut out = BytesMut::with_capacity(5 + payload.len());
    out.put_u8(flags);
    out.put_u32(payload.len() as u32);
    out.put_slice(payload);
    out.freeze()
}

/// A request as the transport saw it.
#[derive(Debug, Clone)]
pub struct Seen {
    pub method: http::Method,
    pub uri: http::Uri,
    pub headers: HeaderMap,
    pub body: Result<Bytes, String>,
}

type Handler = dyn Fn(&Seen) -> Canned + Send + Sync;

/// The scripted transport.
#[derive(Clone)]
pub struct Fake {
    handler: Arc<Handler>,
    pub seen: Arc<Mutex<Vec<Seen>>>,
    /// Set when a response body handed out by this transport was dropped.
    pub body_dropped: Arc<AtomicBool>,
}

impl Fake {
    pub fn new(handler: impl Fn(&Seen) -> Canned + Send + Sync + 'static) -> Self {
        Fake {
            handler: Arc::new(handler),
            seen: Arc::default(),
            body_dropped: Arc::default(),
        }
    }

    /// Answers every request with `canned`.
    pub fn always(canned: Canned) -> Self {
        Fake::new(move |_| canned.clone())
    }

    pub fn requests(&self) -> Vec<Seen> {
        self.seen.lock().unwrap().clone()
    }

    pub fn last(&self) -> Seen {
        self.seen
            .lock()
            .unwrap()
            .last()
            .cloned()
            .expect("a request was sent")
    }
}

impl ClientTransport for Fake {
    type ResponseBody = CannedBody;
    type Error = ConnectError;

    fn send(
        &self,
        request: Request<ClientBody>,
    ) -> BoxFuture<'static, Result<Response<CannedBody>, ConnectError>> {
        let this = self.clone();
        Box::pin(async move {
            let (parts, body) = request.into_parts();
            let body = body
                .collect()
                .await
                .map(|c| c.to_bytes())
                .map_err(|e| e.to_string());
            // A real transport fails the send when the request body fails.
            if let Err(why) = &body {
                let failure = ConnectError::unavailable_from_transport(
                    "request body failed",
                    std::io::Error::other(why.clone()),
                );
                this.seen.lock().unwrap().push(Seen {
                    method: parts.method,
                    uri: parts.uri,
                    headers: parts.headers,
                    body: body.clone(),
                });
                return Err(failure);
            }
            let seen = Seen {
                method: parts.method,
                uri: parts.uri,
                headers: parts.headers,
                body,
            };
            let canned = (this.handler)(&seen);
            this.seen.lock().unwrap().push(seen);
            let mut response = Response::new(CannedBody {
                chunks: canned.chunks.into(),
                dropped: this.body_dropped.clone(),
            });
            *response.status_mut() = canned.status;
            *response.headers_mut() = canned.headers;
            Ok(response)
        })
    }
}

/// A response body that plays its chunks, and records being dropped.
pub struct CannedBody {
    chunks: VecDeque<Chunk>,
    dropped: Arc<AtomicBool>,
}

impl Drop for CannedBody {
    fn drop(&mut self) {
        self.dropped.store(true, Ordering::SeqCst);
    }
}

#[derive(Debug)]
pub struct BodyFailure(pub &'static str);

impl std::fmt::Display for BodyFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.0)
    }
}

impl std::error::Error for BodyFailure {}

impl Body for CannedBody {
    type Data = Bytes;
    type Error = BodyFailure;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BodyFailure>>> {
        match self.chunks.front() {
            None => Poll::Ready(None),
            Some(Chunk::Hang) => Poll::Pending,
            Some(_) => match self.chunks.pop_front() {
                Some(Chunk::Data(data)) => Poll::Ready(Some(Ok(Frame::data(data)))),
                Some(Chunk::Fail(why)) => Poll::Ready(Some(Err(BodyFailure(why)))),
                _ => unreachable!("checked above"),
            },
        }
    }
}
