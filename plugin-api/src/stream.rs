//! Byte and text streams shared by the seams.
//!
//! Reading is pull-based: a consumer polls the next chunk when it is ready
//! for it, so a slow consumer slows the producer (backpressure end to end)
//! and nothing is buffered beyond what the producer documents. Dropping a
//! stream cancels whatever produces it. Writing goes through [`ByteWriter`],
//! whose `write` completes when the chunk has been accepted downstream.

use std::pin::Pin;

use async_trait::async_trait;
use futures::Stream;

use crate::error::Result;
use crate::text::Text;
use bytes::Bytes;

/// A stream of raw byte chunks. Chunks are never empty; the stream ends
/// after the last chunk or after the first error. Chunks cross the plugin
/// boundary without being copied.
pub type ByteStream = Pin<Box<dyn Stream<Item = Result<Bytes>> + Send + 'static>>;

/// A stream of UTF-8 text chunks, decoded correctly across the underlying
/// byte chunks' boundaries. Chunks are never empty; the stream ends after
/// the last chunk or after the first error. Chunks cross the plugin
/// boundary without being copied.
pub type TextStream = Pin<Box<dyn Stream<Item = Result<Text>> + Send + 'static>>;

/// The writing end of a byte pipe (e.g. a process's stdin).
///
/// `write` resolves once the chunk has been handed to the world (so an
/// unread pipe eventually blocks the writer: backpressure). Dropping a
/// pending `write` future may or may not have delivered the chunk.
/// Dropping the writer closes it, like [`ByteWriter::close`] without waiting.
#[async_trait]
pub trait ByteWriter: Send + 'static {
    /// Writes the whole chunk. It crosses the plugin boundary without
    /// being copied.
    async fn write(&mut self, chunk: Bytes) -> Result<()>;

    /// Signals end of input; the reader sees EOF. Later writes fail with
    /// [`crate::ErrorKind::Closed`]. Closing twice is a no-op.
    async fn close(&mut self) -> Result<()>;
}

/// A byte stream that yields `bytes` as one chunk (or nothing if empty).
pub fn byte_stream_once(bytes: impl Into<Bytes>) -> ByteStream {
    let bytes = bytes.into();
    if bytes.is_empty() {
        Box::pin(futures::stream::empty())
    } else {
        Box::pin(futures::stream::once(async move { Ok(bytes) }))
    }
}

/// Reads a byte stream to its end, failing on its first error. The chunks
/// are concatenated into one `Vec` (one copy, inherent to concatenating).
pub async fn collect_bytes(mut stream: ByteStream) -> Result<Vec<u8>> {
    use futures::StreamExt;
    let mut out = Vec::new();
    while let Some(chunk) = stream.next().await {
        out.extend_from_slice(&chunk?);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn once_stream_round_trips_and_empty_yields_nothing() {
        let bytes = futures::executor::block_on(collect_bytes(byte_stream_once(b"abc".to_vec())))
            .expect("collect");
        assert_eq!(bytes, b"abc");
        let mut empty = byte_stream_once(Vec::new());
        let next = futures::executor::block_on(futures::StreamExt::next(&mut empty));
        assert!(next.is_none());
    }
}
