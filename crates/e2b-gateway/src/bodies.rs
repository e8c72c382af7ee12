//! Bridging bodies between the plugin API's pull streams
//! ([`ByteStream`]) and `http_body` bodies, in both directions, without
//! buffering: each conversion holds at most the one chunk in flight.

use std::pin::Pin;
use std::sync::{Arc, Mutex, OnceLock};
use std::task::{Context, Poll};

use bytes::Bytes;
use connectrpc::ConnectError;
use connectrpc::client::ClientBody;
use dsh_plugin_api::Error;
use dsh_plugin_api::stream::ByteStream;
use futures::StreamExt;
use http_body::{Body, Frame, SizeHint};
use http_body_util::BodyExt;

/// Where a request body records the error its source stream yielded, so the
/// owner can report that cause (with its kind) instead of the HTTP stack's
/// view of it ("error from user's Body stream").
#[derive(Clone, Default, Debug)]
pub(crate) struct SourceFailure(Arc<OnceLock<Error>>);

impl SourceFailure {
    pub(crate) fn get(&self) -> Option<&Error> {
        self.0.get()
    }

    fn set(&self, err: Error) {
        // Only the first failure matters; the body ends right after it.
        let _ = self.0.set(err);
    }
}

/// A request body fed by a [`ByteStream`] (owner side: the adapter's request
/// body, pulled as hyper sends).
///
/// The stream sits in a `Mutex` only because `ClientBody` must be `Sync`
/// while a `ByteStream` need not be; it is only reached through `&mut`
/// (`get_mut`), never locked.
pub(crate) struct StreamRequestBody {
    stream: Mutex<ByteStream>,
    failure: SourceFailure,
    exact_len: Option<u64>,
    done: bool,
}

impl StreamRequestBody {
    /// Wraps `stream`; its failure is recorded in `failure`. `exact_len` is
    /// the declared `Content-Length`, if any.
    pub(crate) fn boxed(
        stream: ByteStream,
        failure: SourceFailure,
        exact_len: Option<u64>,
    ) -> ClientBody {
        StreamRequestBody {
            stream: Mutex::new(stream),
            failure,
            exact_len,
            done: false,
        }
        .boxed()
    }
}

impl Body for StreamRequestBody {
    type Data = Bytes;
    type Error = ConnectError;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
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
            return match stream.poll_next_unpin(cx) {
                Poll::Pending => Poll::Pending,
                // Empty chunks would end a chunked HTTP/1.1 body early.
                Poll::Ready(Some(Ok(chunk))) if chunk.is_empty() => continue,
                Poll::Ready(Some(Ok(chunk))) => Poll::Ready(Some(Ok(Frame::data(chunk)))),
                Poll::Ready(Some(Err(err))) => {
                    this.done = true;
                    let message = err.to_string();
                    this.failure.set(err);
                    Poll::Ready(Some(Err(ConnectError::internal(format!(
                        "request body failed: {message}"
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

/// A `connectrpc` request body as a [`ByteStream`] (adapter side: what
/// crosses to the owner). Trailers are dropped (envd requests have none);
/// a body failure ends the stream with an `Io` error.
pub(crate) fn client_body_stream(body: ClientBody) -> ByteStream {
    futures::stream::unfold(Some(body), |state| async move {
        let mut body = state?;
        loop {
            match body.frame().await {
                None => return None,
                Some(Ok(frame)) => match frame.into_data() {
                    Ok(data) if data.is_empty() => continue,
                    Ok(data) => return Some((Ok(data), Some(body))),
                    Err(_trailers) => continue,
                },
                Some(Err(err)) => {
                    return Some((Err(Error::io(format!("envd request body: {err}"))), None));
                }
            }
        }
    })
    .boxed()
}

/// An error of a body relayed through the owner, with the owner's error
/// inside (its kind and message).
#[derive(Debug, Clone)]
pub struct RelayedBodyError(pub Error);

impl std::fmt::Display for RelayedBodyError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Display::fmt(&self.0, f)
    }
}

impl std::error::Error for RelayedBodyError {}

/// A response body relayed from the owner (adapter side): the owner's
/// [`ByteStream`] as an `http_body` body. Dropping it drops the stream,
/// which aborts the request in the owner.
pub struct RelayedBody {
    stream: Option<ByteStream>,
    exact_len: Option<u64>,
}

impl RelayedBody {
    pub(crate) fn new(stream: ByteStream, exact_len: Option<u64>) -> Self {
        RelayedBody {
            stream: Some(stream),
            exact_len,
        }
    }

    /// A body of `bytes` (the synthetic edge answer).
    pub(crate) fn full(bytes: impl Into<Bytes>) -> Self {
        let bytes = bytes.into();
        let len = bytes.len() as u64;
        RelayedBody::new(dsh_plugin_api::stream::byte_stream_once(bytes), Some(len))
    }
}

impl std::fmt::Debug for RelayedBody {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RelayedBody")
            .field("ended", &self.stream.is_none())
            .field("exact_len", &self.exact_len)
            .finish()
    }
}

impl Body for RelayedBody {
    type Data = Bytes;
    type Error = RelayedBodyError;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, RelayedBodyError>>> {
        let this = self.get_mut();
        let Some(stream) = this.stream.as_mut() else {
            return Poll::Ready(None);
        };
        loop {
            return match stream.as_mut().poll_next(cx) {
                Poll::Pending => Poll::Pending,
                Poll::Ready(Some(Ok(chunk))) if chunk.is_empty() => continue,
                Poll::Ready(Some(Ok(chunk))) => Poll::Ready(Some(Ok(Frame::data(chunk)))),
                Poll::Ready(Some(Err(err))) => {
                    this.stream = None;
                    Poll::Ready(Some(Err(RelayedBodyError(err))))
                }
                Poll::Ready(None) => {
                    this.stream = None;
                    Poll::Ready(None)
                }
            };
        }
    }

    fn is_end_stream(&self) -> bool {
        self.stream.is_none()
    }

    fn size_hint(&self) -> SizeHint {
        match self.exact_len {
            Some(len) => SizeHint::with_exact(len),
            None => SizeHint::default(),
        }
    }
}

#[cfg(test)]
mod tests {
    use dsh_plugin_api::ErrorKind;
    use dsh_plugin_api::stream::collect_bytes;

    use super::*;

    fn stream(chunks: Vec<Result<Vec<u8>, Error>>) -> ByteStream {
        futures::stream::iter(chunks.into_iter().map(|chunk| chunk.map(Bytes::from))).boxed()
    }

    #[tokio::test]
    async fn request_body_passes_chunks_skips_empty_ones_and_reports_its_length() {
        let body = StreamRequestBody::boxed(
            stream(vec![Ok(b"ab".to_vec()), Ok(Vec::new()), Ok(b"cd".to_vec())]),
            SourceFailure::default(),
            Some(4),
        );
        assert_eq!(body.size_hint().exact(), Some(4));
        let bytes = body.collect().await.unwrap().to_bytes();
        assert_eq!(&bytes[..], b"abcd");
    }

    #[tokio::test]
    async fn request_body_records_the_source_failure_with_its_kind() {
        let failure = SourceFailure::default();
        let body = StreamRequestBody::boxed(
            stream(vec![
                Ok(b"ab".to_vec()),
                Err(Error::new(ErrorKind::Cancelled, "producer cancelled")),
                Ok(b"never".to_vec()),
            ]),
            failure.clone(),
            None,
        );
        let err = body.collect().await.unwrap_err();
        assert!(err.to_string().contains("producer cancelled"), "{err}");
        let recorded = failure.get().expect("recorded");
        assert_eq!(recorded.kind(), ErrorKind::Cancelled);
    }

    #[tokio::test]
    async fn client_bodies_become_byte_streams() {
        let body = connectrpc::client::full_body(Bytes::from_static(b"hello"));
        let bytes = collect_bytes(client_body_stream(body)).await.unwrap();
        assert_eq!(bytes, b"hello");
        let empty = connectrpc::client::full_body(Bytes::new());
        assert!(
            collect_bytes(client_body_stream(empty))
                .await
                .unwrap()
                .is_empty()
        );
    }

    #[tokio::test]
    async fn a_failing_client_body_ends_the_stream_with_io() {
        let failing = StreamRequestBody::boxed(
            stream(vec![Ok(b"x".to_vec()), Err(Error::io("disk on fire"))]),
            SourceFailure::default(),
            None,
        );
        let mut relayed = client_body_stream(failing);
        assert_eq!(relayed.next().await.unwrap().unwrap(), &b"x"[..]);
        let err = relayed.next().await.unwrap().unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Io);
        assert!(err.message().contains("disk on fire"), "{err}");
        assert!(relayed.next().await.is_none());
    }

    #[tokio::test]
    async fn relayed_bodies_end_after_their_first_error() {
        let mut body = RelayedBody::new(
            stream(vec![
                Ok(b"a".to_vec()),
                Err(Error::unavailable("gone")),
                Ok(b"b".to_vec()),
            ]),
            None,
        );
        let first = body.frame().await.unwrap().unwrap().into_data().unwrap();
        assert_eq!(&first[..], b"a");
        let err = body.frame().await.unwrap().unwrap_err();
        assert_eq!(err.0.kind(), ErrorKind::Unavailable);
        assert!(body.is_end_stream());
        assert!(body.frame().await.is_none());
    }

    #[tokio::test]
    async fn full_relayed_bodies_know_their_length() {
        let body = RelayedBody::full(b"{}".to_vec());
        assert_eq!(body.size_hint().exact(), Some(2));
        assert_eq!(&body.collect().await.unwrap().to_bytes()[..], b"{}");
    }
}
