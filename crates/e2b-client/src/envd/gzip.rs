//! Streaming gzip for `/files` bodies: compress an upload and decompress a
//! download chunk by chunk, holding only one chunk's worth of output.

use std::io::Write;

use bytes::Bytes;
use flate2::Compression;
use flate2::write::{GzDecoder, GzEncoder};
use futures::stream::{self, BoxStream};
use futures::{Stream, StreamExt};

use crate::body::BoxError;

/// Compresses `input` into one gzip member, emitting output as the
/// encoder produces it.
pub(crate) fn compress<S, E>(input: S) -> BoxStream<'static, Result<Bytes, BoxError>>
where
    S: Stream<Item = Result<Bytes, E>> + Send + 'static,
    E: Into<BoxError> + 'static,
{
    let state = Some((
        input.boxed(),
        GzEncoder::new(Vec::new(), Compression::fast()),
    ));
    stream::unfold(state, |state| async move {
        let (mut input, mut encoder) = state?;
        loop {
            match input.next().await {
                Some(Ok(chunk)) => {
                    if let Err(e) = encoder.write_all(&chunk) {
                        return Some((Err(BoxError::from(e)), None));
                    }
                    let out = std::mem::take(encoder.get_mut());
                    if !out.is_empty() {
                        return Some((Ok(Bytes::from(out)), Some((input, encoder))));
                    }
                }
                Some(Err(e)) => return Some((Err(e.into()), None)),
                None => {
                    return match encoder.finish() {
                        Ok(rest) => Some((Ok(Bytes::from(rest)), None)),
                        Err(e) => Some((Err(BoxError::from(e)), None)),
                    };
                }
            }
        }
    })
    .boxed()
}

/// Why decompression stopped.
#[derive(Debug)]
pub(crate) enum InflateError<E> {
    /// The input stream failed.
    Input(E),
    /// The data is not valid gzip, or ends early.
    Corrupt(std::io::Error),
}

/// Decompresses a gzip stream, emitting output per input chunk; a
/// truncated or corrupt stream ends with [`InflateError::Corrupt`].
pub(crate) fn decompress<S, E>(input: S) -> BoxStream<'static, Result<Bytes, InflateError<E>>>
where
    S: Stream<Item = Result<Bytes, E>> + Send + 'static,
    E: Send + 'static,
{
    let state = Some((input.boxed(), GzDecoder::new(Vec::new())));
    stream::unfold(state, |state| async move {
        let (mut input, mut decoder) = state?;
        loop {
            match input.next().await {
                Some(Ok(chunk)) => {
                    if let Err(e) = decoder.write_all(&chunk) {
                        return Some((Err(InflateError::Corrupt(e)), None));
                    }
                    let out = std::mem::take(decoder.get_mut());
                    if !out.is_empty() {
                        return Some((Ok(Bytes::from(out)), Some((input, decoder))));
                    }
                }
                Some(Err(e)) => return Some((Err(InflateError::Input(e)), None)),
                None => {
                    return match decoder.try_finish() {
                        Ok(()) => {
                            let rest = std::mem::take(decoder.get_mut());
                            (!rest.is_empty()).then(|| (Ok(Bytes::from(rest)), None))
                        }
                        Err(e) => Some((Err(InflateError::Corrupt(e)), None)),
                    };
                }
            }
        }
    })
    .boxed()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chunks(parts: Vec<Bytes>) -> impl Stream<Item = Result<Bytes, BoxError>> + Send + 'static {
        stream::iter(parts.into_iter().map(Ok))
    }

    async fn join<E: std::fmt::Debug>(s: BoxStream<'static, Result<Bytes, E>>) -> Vec<u8> {
        s.map(|c| c.unwrap()).collect::<Vec<_>>().await.concat()
    }

    #[tokio::test]
    async fn round_trips_across_chunk_boundaries() {
        let data: Vec<u8> = (0..200_000u32)
            .flat_map(|i| (i % 251).to_le_bytes())
            .collect();
        let parts: Vec<Bytes> = data.chunks(7_777).map(Bytes::copy_from_slice).collect();
        let compressed = join(compress(chunks(parts))).await;
        assert!(compressed.len() < data.len());
        // Feed the compressed bytes back in awkward pieces.
        let pieces: Vec<Bytes> = compressed.chunks(13).map(Bytes::copy_from_slice).collect();
        let restored = join(decompress(chunks(pieces))).await;
        assert_eq!(restored, data);
    }

    #[tokio::test]
    async fn empty_input_is_a_valid_empty_member() {
        let compressed = join(compress(chunks(Vec::new()))).await;
        let restored = join(decompress(chunks(vec![Bytes::from(compressed)]))).await;
        assert!(restored.is_empty());
    }

    #[tokio::test]
    async fn truncated_and_garbage_input_is_corrupt() {
        let compressed = join(compress(chunks(vec![Bytes::from_static(b"hello world")]))).await;
        let cut = Bytes::copy_from_slice(&compressed[..compressed.len() - 4]);
        let result: Vec<_> = decompress(chunks(vec![cut])).collect().await;
        assert!(matches!(result.last(), Some(Err(InflateError::Corrupt(_)))));
        let result: Vec<_> = decompress(chunks(vec![Bytes::from_static(b"not gzip at all")]))
            .collect()
            .await;
        assert!(matches!(result.last(), Some(Err(InflateError::Corrupt(_)))));
    }
}
