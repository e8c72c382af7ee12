//! Request and response bodies: streaming uploads from a caller's stream,
//! bounded collection of small responses, and response bodies as byte
//! streams. Nothing here keeps bytes it has passed on.

use std::pin::Pin;
use std::sync::{Arc, Mutex, OnceLock};
use std::task::{Context as TaskContext, Poll};

use bytes::{Bytes, BytesMut};
use connectrpc::ConnectError;
use connectrpc::client::ClientBody;
use futures::Stream;
use http_body::{Body, Frame, SizeHint};
use http_body_util::BodyExt;

/// The error a caller's upload stream may yield.
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// Where an upload body records why the caller's stream failed, so the
/// upload can report that cause instead of the transport's view of it
/// ("request body error").
#[derive(Clone, Default, Debug)]
pub(crate) struct SourceFailure(Arc<OnceLock<String>>);

impl SourceFailure {
    pub(crate) fn get(&self) -> Option<&str> {
        self.0.get().map(String::as_str)
    }

    fn set(&self, message: String) {
        // Only the first failure matters; the body ends right after it.
        let _ = self.0.set(message);
    }
}

/// A request body fed by a caller's byte stream, polled as the transport
/// sends, so memory stays at one chunk in flight.
///
/// The stream sits in a `Mutex` only to make the body `Sync` (which
/// `ClientBody` demands) without demanding it of the caller's stream; the
/// mutex is only ever reached through `&mut` (`get_mut`), never locked.
pub(crate) struct StreamBody<S> {
    stream: Mutex<Pin<Box<S>>>,
    failure: SourceFailure,
    exact_len: Option<u64>,
    done: bool,
}

impl<S, E> StreamBody<S>
where
    S: Stream<Item = Result<Bytes, E>> + Send + 'static,
    E: Into<BoxError>,
{
    /// Wraps `stream`; a failure of the stream is recorded in `failure`.
    /// `exact_len` is the total length when the caller knows it (only used
    /// as the size hint).
    pub(crate) fn new(stream: S, failure: SourceFailure, exact_len: Option<u64>) -> Self {
        StreamBody {
            stream: Mutex::new(Box::pin(stream)),
            failure,
            exact_len,
            done: false,
        }
    }

    /// Erases the type into connectrpc's request body.
    pub(crate) fn boxed(self) -> ClientBody {
        BodyExt::boxed(self)
    }
}

impl<S, E> Body for StreamBody<S>
where
    S: Stream<Item = Result<Bytes, E>> + Send + 'static,
    E: Into<BoxError>,
{
    type Data = Bytes;
    type Error = ConnectError;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut TaskContext<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, ConnectError>>> {
        let this = self.get_mut();
        if this.done {
            return Poll::Ready(None);
        }
        let stream = match this.stream.get_mut() {
            Ok(stream) => stream,
            Err(poisoned) => poisoned.into_inner(),
        };
        loop {
            return match stream.as_mut().poll_next(cx) {
                Poll::Pending => Poll::Pending,
                // Empty chunks are legal for the caller but would end a
                // chunked HTTP/1.1 body early on some stacks; skip them.
                Poll::Ready(Some(Ok(chunk))) if chunk.is_empty() => continue,
                Poll::Ready(Some(Ok(chunk))) => Poll::Ready(Some(Ok(Frame::data(chunk)))),
                Poll::Ready(Some(Err(e))) => {
                    this.done = true;
                    let e: BoxError = e.into();
                    let message = e.to_string();
                    this.failure.set(message.clone());
                    Poll::Ready(Some(Err(ConnectError::internal(format!(
                        "upload source failed: {message}"
                    )))))
                }
                Poll::Ready(None) => {
                    this.done = true;
                    Poll::Ready(None)
                }
            };
        }
    }

    fn is_end_stream(&self) -> bool {
        self.done
    }

    fn size_hint(&self) -> SizeHint {
        match self.exact_len {
            Some(len) => SizeHint::with_exact(len),
            None => SizeHint::default(),
        }
    }
}

/// Why [`collect_limited`] stopped.
#[derive(Debug)]
pub(crate) enum CollectError {
    /// The body is larger than the limit.
    TooLarge(usize),
    /// Reading the body failed.
    Read(String),
}

/// Reads a whole (small) body, failing once it exceeds `limit` bytes.
pub(crate) async fn collect_limited<B>(body: B, limit: usize) -> Result<Bytes, CollectError>
where
    B: Body<Data = Bytes>,
    B::Error: std::fmt::Display,
{
    let mut body = std::pin::pin!(body);
    let mut buf = BytesMut::new();
    while let Some(frame) = body.frame().await {
        let frame = frame.map_err(|e| CollectError::Read(e.to_string()))?;
        if let Ok(data) = frame.into_data() {
            if buf.len().saturating_add(data.len()) > limit {
                return Err(CollectError::TooLarge(limit));
            }
            buf.extend_from_slice(&data);
        }
    }
    Ok(buf.freeze())
}

/// Reads up to `limit` bytes of a body for an error message, ignoring read
/// failures (the status already says what went wrong).
pub(crate) async fn error_body_prefix<B>(body: B, limit: usize) -> Bytes
where
    B: Body<Data = Bytes>,
    B::Error: std::fmt::Display,
{
    let mut body = std::pin::pin!(body);
    let mut buf = BytesMut::new();
    while let Some(Ok(frame)) = body.frame().await {
        if let Ok(data) = frame.into_data() {
            let room = limit.saturating_sub(buf.len());
            buf.extend_from_slice(&data[..data.len().min(room)]);
            if buf.len() >= limit {
                break;
            }
        }
    }
    buf.freeze()
}

/// A response body as a stream of its data chunks; trailers are skipped and
/// read failures are reported with their text.
pub(crate) struct BodyChunks<B> {
    body: B,
}

impl<B> BodyChunks<B> {
    pub(crate) fn new(body: B) -> Self {
        BodyChunks { body }
    }
}

impl<B> Stream for BodyChunks<B>
where
    B: Body<Data = Bytes> + Unpin,
    B::Error: std::fmt::Display,
{
    type Item = Result<Bytes, String>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut TaskContext<'_>) -> Poll<Option<Self::Item>> {
        let this = self.get_mut();
        loop {
            return match Pin::new(&mut this.body).poll_frame(cx) {
                Poll::Pending => Poll::Pending,
                Poll::Ready(None) => Poll::Ready(None),
                Poll::Ready(Some(Err(e))) => Poll::Ready(Some(Err(e.to_string()))),
                Poll::Ready(Some(Ok(frame))) => match frame.into_data() {
                    Ok(data) if data.is_empty() => continue,
                    Ok(data) => Poll::Ready(Some(Ok(data))),
                    Err(_trailers) => continue,
                },
            };
        }
    }
}

#[cfg(test)]
mod tests {
    use futures::StreamExt;
    use http_body_util::Full;

    use super::*;

    #[tokio::test]
    async fn stream_body_passes_chunks_and_skips_empty_ones() {
        let chunks: Vec<Result<Bytes, std::io::Error>> = vec![
            Ok(Bytes::from_static(b"ab")),
            Ok(Bytes::new()),
            Ok(Bytes::from_static(b"cd")),
        ];
        let body = StreamBody::new(
            futures::stream::iter(chunks),
            SourceFailure::default(),
            None,
        );
        let collected = body.collect().await.unwrap().to_bytes();
        assert_eq!(&collected[..], b"abcd");
    }

    #[tokio::test]
    async fn stream_body_records_the_source_failure() {
        let chunks: Vec<Result<Bytes, std::io::Error>> = vec![
            Ok(Bytes::from_static(b"ab")),
            Err(std::io::Error::other("disk on fire")),
            Ok(Bytes::from_static(b"never")),
        ];
        let failure = SourceFailure::default();
        let body = StreamBody::new(futures::stream::iter(chunks), failure.clone(), Some(7));
        assert_eq!(body.size_hint().exact(), Some(7));
        let err = body.collect().await.unwrap_err();
        assert!(err.to_string().contains("disk on fire"), "{err}");
        assert_eq!(failure.get(), Some("disk on fire"));
    }

    #[tokio::test]
    async fn collect_limited_enforces_the_limit() {
        let ok = collect_limited(Full::new(Bytes::from_static(b"12345")), 5)
            .await
            .unwrap();
        assert_eq!(&ok[..], b"12345");
        let err = collect_limited(Full::new(Bytes::from_static(b"123456")), 5)
            .await
            .unwrap_err();
        assert!(matches!(err, CollectError::TooLarge(5)));
    }

    #[tokio::test]
    async fn error_body_prefix_truncates() {
        let prefix = error_body_prefix(Full::new(Bytes::from_static(b"abcdef")), 3).await;
        assert_eq!(&prefix[..], b"abc");
    }

    #[tokio::test]
    async fn body_chunks_yields_data() {
        let mut chunks = BodyChunks::new(Full::new(Bytes::from_static(b"xyz")));
        assert_eq!(
            chunks.next().await.unwrap().unwrap(),
            Bytes::from_static(b"xyz")
        );
        assert!(chunks.next().await.is_none());
    }
}
