//! Streamed reads: a download's chunks passed on as the seam's byte and
//! text streams, pull-driven, with bounded memory.
//!
//! The HTTP stack delivers a download in whatever pieces the socket reads
//! give (often a few KiB). Each chunk the seam yields crosses the plugin
//! boundary, so [`Coalesce`] joins pieces that are *already available* into
//! chunks of up to [`CHUNK_LEN`] bytes — it never waits for more data to
//! fill a chunk, so it adds no latency — and holds at most one such chunk.
//! A piece that is passed on alone is not copied (it is the HTTP stack's own
//! `Bytes`); joined pieces are copied once, into the chunk. Text chunks are
//! slices of the byte chunks (no copy).
//! Nothing is read before the consumer asks for it (backpressure reaches
//! the sandbox through the connection's flow control), and dropping a
//! stream aborts its download.

use std::borrow::Cow;
use std::collections::VecDeque;
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use dsh_plugin_api::fs::BINARY_SAMPLE_LEN;
use dsh_plugin_api::stream::{ByteStream, TextStream};
use dsh_plugin_api::{Error, Result, Text};
use futures::stream::BoxStream;
use futures::{Stream, StreamExt};

use crate::errors::OwnedOp;
use dsh_provider_kit::utf8::{Decoded, Decoder, check_not_binary, invalid};

/// Largest chunk a read stream yields, in bytes.
pub const CHUNK_LEN: usize = 256 * 1024;

/// A download's raw pieces, failures already in the fs vocabulary.
pub(crate) type Pieces = BoxStream<'static, Result<Bytes>>;

/// Joins available pieces into chunks of at most [`CHUNK_LEN`] bytes (a
/// single larger piece is passed on whole). Chunks are never empty; after
/// an error the stream ends.
pub(crate) struct Coalesce {
    pieces: Pieces,
    /// An error to yield after the chunk that preceded it.
    queued: Option<Error>,
    done: bool,
}

impl Coalesce {
    pub(crate) fn new(pieces: Pieces) -> Coalesce {
        Coalesce {
            pieces,
            queued: None,
            done: false,
        }
    }
}

impl Stream for Coalesce {
    type Item = Result<Bytes>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Bytes>>> {
        let this = self.get_mut();
        if let Some(err) = this.queued.take() {
            this.done = true;
            return Poll::Ready(Some(Err(err)));
        }
        if this.done {
            return Poll::Ready(None);
        }
        let mut chunk = Joining::default();
        loop {
            match this.pieces.poll_next_unpin(cx) {
                Poll::Ready(Some(Ok(piece))) => {
                    if piece.is_empty() {
                        continue;
                    }
                    chunk.push(piece);
                    if chunk.len() >= CHUNK_LEN {
                        return Poll::Ready(Some(Ok(chunk.take())));
                    }
                }
                Poll::Ready(Some(Err(err))) => {
                    if chunk.is_empty() {
                        this.done = true;
                        return Poll::Ready(Some(Err(err)));
                    }
                    this.queued = Some(err);
                    return Poll::Ready(Some(Ok(chunk.take())));
                }
                Poll::Ready(None) => {
                    this.done = true;
                    return Poll::Ready((!chunk.is_empty()).then(|| Ok(chunk.take())));
                }
                Poll::Pending if chunk.is_empty() => return Poll::Pending,
                Poll::Pending => return Poll::Ready(Some(Ok(chunk.take()))),
            }
        }
    }
}

/// A chunk being assembled: one piece as it came (no copy), or several
/// joined into one buffer.
#[derive(Default)]
struct Joining {
    one: Bytes,
    joined: Vec<u8>,
}

impl Joining {
    fn push(&mut self, piece: Bytes) {
        if self.joined.is_empty() && self.one.is_empty() {
            self.one = piece;
            return;
        }
        if self.joined.is_empty() {
            self.joined.reserve(self.one.len() + piece.len());
            self.joined
                .extend_from_slice(&std::mem::take(&mut self.one));
        }
        self.joined.extend_from_slice(&piece);
    }

    fn len(&self) -> usize {
        self.one.len() + self.joined.len()
    }

    fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn take(&mut self) -> Bytes {
        if self.joined.is_empty() {
            std::mem::take(&mut self.one)
        } else {
            Bytes::from(std::mem::take(&mut self.joined))
        }
    }
}

/// The seam's byte stream over a download.
pub(crate) fn byte_stream(pieces: Pieces) -> ByteStream {
    Box::pin(Coalesce::new(pieces))
}

/// The seam's text stream over a download: reads the first
/// [`BINARY_SAMPLE_LEN`] bytes (or the whole file, if shorter) and fails
/// with `Binary` if they hold a NUL — before any text is handed out — then
/// decodes across chunk boundaries; an invalid sequence ends the stream
/// with `InvalidUtf8` after the valid text before it.
pub(crate) async fn text_stream(op: OwnedOp, pieces: Pieces) -> Result<TextStream> {
    let mut chunks = Coalesce::new(pieces);
    let mut first = VecDeque::new();
    let mut read = 0;
    while read < BINARY_SAMPLE_LEN {
        match chunks.next().await {
            Some(chunk) => {
                let chunk = chunk?;
                read += chunk.len();
                first.push_back(chunk);
            }
            None => break,
        }
    }
    // The sample is copied only when it spans chunks.
    let sample: Cow<'_, [u8]> = match first.front() {
        Some(chunk) if chunk.len() >= BINARY_SAMPLE_LEN || first.len() == 1 => {
            Cow::Borrowed(&chunk[..])
        }
        _ => Cow::Owned(
            first
                .iter()
                .flat_map(|chunk| chunk.iter().copied())
                .take(BINARY_SAMPLE_LEN)
                .collect(),
        ),
    };
    check_not_binary(&op.op(), &sample)?;
    let state = TextState {
        op,
        chunks,
        first,
        decoder: Decoder::default(),
        queued: None,
        done: false,
    };
    Ok(Box::pin(futures::stream::unfold(
        state,
        |mut state| async move {
            let item = state.next_text().await?;
            Some((item, state))
        },
    )))
}

struct TextState {
    op: OwnedOp,
    chunks: Coalesce,
    /// The chunks read for the binary check, decoded first.
    first: VecDeque<Bytes>,
    decoder: Decoder,
    /// An error to yield after the valid text before it.
    queued: Option<Error>,
    done: bool,
}

impl TextState {
    async fn next_text(&mut self) -> Option<Result<Text>> {
        if let Some(err) = self.queued.take() {
            self.done = true;
            return Some(Err(err));
        }
        if self.done {
            return None;
        }
        loop {
            let bytes = match self.first.pop_front() {
                Some(first) => first,
                None => match self.chunks.next().await {
                    Some(Ok(chunk)) => chunk,
                    Some(Err(err)) => {
                        self.done = true;
                        return Some(Err(err));
                    }
                    None => {
                        self.done = true;
                        // A sequence cut short by the end of the file.
                        return self
                            .decoder
                            .finish()
                            .map(|offset| Err(invalid(&self.op.op(), offset)));
                    }
                },
            };
            match self.decoder.push(bytes) {
                Decoded::Text(text) => return Some(Ok(text)),
                Decoded::Pending => continue,
                Decoded::Invalid { text, offset } => {
                    let err = invalid(&self.op.op(), offset);
                    if text.is_empty() {
                        self.done = true;
                        return Some(Err(err));
                    }
                    self.queued = Some(err);
                    return Some(Ok(text));
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use dsh_plugin_api::ErrorKind;

    use super::*;
    use crate::errors::Op;

    fn pieces(parts: Vec<Result<&'static [u8]>>) -> Pieces {
        futures::stream::iter(parts.into_iter().map(|part| part.map(Bytes::from_static))).boxed()
    }

    fn op() -> OwnedOp {
        Op::new("stream_text", "/w/f").to_owned()
    }

    #[tokio::test]
    async fn available_pieces_are_joined_and_errors_follow_their_data() {
        let failure = Error::unavailable("gone");
        let chunks: Vec<Result<Bytes>> = Coalesce::new(pieces(vec![
            Ok(b"ab"),
            Ok(b""),
            Ok(b"cd"),
            Err(failure.clone()),
            Ok(b"never"),
        ]))
        .collect()
        .await;
        assert_eq!(chunks.len(), 2);
        assert_eq!(chunks[0].as_ref().unwrap(), &b"abcd"[..]);
        assert_eq!(chunks[1].as_ref().unwrap_err(), &failure);
    }

    #[tokio::test]
    async fn large_inputs_are_cut_near_the_chunk_length() {
        let piece: &'static [u8] = Box::leak(vec![7_u8; 100 * 1024].into_boxed_slice());
        let chunks: Vec<Bytes> = Coalesce::new(pieces(vec![Ok(piece); 6]))
            .map(|chunk| chunk.unwrap())
            .collect()
            .await;
        assert_eq!(chunks.iter().map(Bytes::len).sum::<usize>(), 600 * 1024);
        assert!(
            chunks
                .iter()
                .all(|chunk| chunk.len() <= CHUNK_LEN + piece.len())
        );
        assert!(chunks.len() >= 2, "{} chunks", chunks.len());
    }

    #[tokio::test]
    async fn text_is_checked_for_binary_before_the_stream_is_returned() {
        let mut sample = vec![b'a'; 5000];
        sample[4000] = 0;
        let sample: &'static [u8] = Box::leak(sample.into_boxed_slice());
        let err =
            match text_stream(op(), pieces(vec![Ok(&sample[..3000]), Ok(&sample[3000..])])).await {
                Err(err) => err,
                Ok(_) => panic!("a NUL in the sample must fail the call"),
            };
        assert_eq!(err.kind(), ErrorKind::Binary);
    }

    #[tokio::test]
    async fn text_decodes_across_pieces_and_ends_with_invalid_sequences() {
        let stream = text_stream(
            op(),
            pieces(vec![Ok(b"h\xc3"), Ok(b"\xa9llo \xe2\x82"), Ok(b"\xac!")]),
        )
        .await
        .unwrap();
        let text: Vec<Text> = stream.map(|chunk| chunk.unwrap()).collect().await;
        assert_eq!(text.concat(), "héllo €!");

        let stream = text_stream(op(), pieces(vec![Ok(b"fine "), Ok(b"then \xff more")]))
            .await
            .unwrap();
        let items: Vec<Result<Text>> = stream.collect().await;
        let text: String = items
            .iter()
            .filter_map(|item| item.as_ref().ok().map(Text::as_str))
            .collect();
        assert_eq!(text, "fine then ");
        let err = items.last().unwrap().as_ref().unwrap_err();
        assert_eq!(err.kind(), ErrorKind::InvalidUtf8);
        assert!(err.message().contains("offset 10"), "{err}");

        let stream = text_stream(op(), pieces(vec![Ok(b"cut \xe2\x82")]))
            .await
            .unwrap();
        let items: Vec<Result<Text>> = stream.collect().await;
        assert_eq!(items[0].as_ref().unwrap(), "cut ");
        assert_eq!(
            items[1].as_ref().unwrap_err().kind(),
            ErrorKind::InvalidUtf8
        );

        let empty = text_stream(op(), pieces(Vec::new())).await.unwrap();
        assert_eq!(empty.count().await, 0);
    }
}
