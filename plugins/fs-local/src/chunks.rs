//! Streamed reads: bounded chunks produced from an open file.
//!
//! A producer reads [`CHUNK_LEN`]-byte chunks with one `read(2)` each into
//! fresh, uninitialised buffers that are handed to the consumer without a
//! copy (as [`Bytes`], or as [`Text`] over the same buffer). Each chunk is read when the consumer polls for it, on the polling
//! thread: a page-cache read of one chunk takes a few microseconds, while a
//! hand-off through the blocking pool costs about as much again per chunk
//! (measured: 2x slower for a 64 MiB stream). So the stream holds at most
//! the chunk being read, a slow consumer reads slowly, polling needs no
//! runtime context, and dropping the stream closes the file at once.
//! (On a slow device, one poll blocks for one chunk's read.)

use std::fs::File;
use std::pin::Pin;

use dsh_plugin_api::fs::BINARY_SAMPLE_LEN;
use dsh_plugin_api::{Bytes, Error, Result, Text};
use futures::Stream;

use crate::errors::OwnedOp;
use crate::read::read_into_spare;
use dsh_provider_kit::utf8::{Decoded, Decoder, check_not_binary, invalid};

/// Largest chunk a stream yields, in bytes.
pub const CHUNK_LEN: usize = 64 * 1024;

/// A boxed stream of produced items.
pub(crate) type Boxed<T> = Pin<Box<dyn Stream<Item = Result<T>> + Send + 'static>>;

/// Something that yields the items of a stream one at a time.
pub(crate) trait Produce: Send + 'static {
    type Item: Send + 'static;

    /// The next item; `None` after the last item or after an error.
    fn next_item(&mut self) -> Option<Result<Self::Item>>;
}

/// An open file read front to back.
pub(crate) struct Source {
    file: File,
    /// Bytes read so far (the file offset of the next read).
    offset: u64,
    op: OwnedOp,
}

impl Source {
    pub(crate) fn new(file: File, op: OwnedOp) -> Source {
        Source {
            file,
            offset: 0,
            op,
        }
    }

    /// One `read(2)` of up to `max` bytes appended to `buf`. `Ok(0)` is end
    /// of file.
    fn read_some(&mut self, buf: &mut Vec<u8>, max: usize) -> Result<usize> {
        let read = read_into_spare(self.op.op(), &self.file, buf, max)?;
        self.offset += read as u64;
        Ok(read)
    }

    /// Reads until `buf` holds at least `min` new bytes or the file ends,
    /// at most `max` new bytes.
    fn read_at_least(&mut self, buf: &mut Vec<u8>, min: usize, max: usize) -> Result<usize> {
        let mut total = 0;
        while total < min {
            let read = self.read_some(buf, max - total)?;
            if read == 0 {
                break;
            }
            total += read;
        }
        Ok(total)
    }
}

/// Raw byte chunks.
pub(crate) struct ByteChunks {
    source: Source,
    done: bool,
}

impl ByteChunks {
    pub(crate) fn new(source: Source) -> ByteChunks {
        ByteChunks {
            source,
            done: false,
        }
    }
}

impl Produce for ByteChunks {
    type Item = Bytes;

    fn next_item(&mut self) -> Option<Result<Bytes>> {
        if self.done {
            return None;
        }
        let mut chunk = Vec::new();
        match self.source.read_some(&mut chunk, CHUNK_LEN) {
            Ok(0) => {
                self.done = true;
                None
            }
            // No copy: the buffer becomes the chunk.
            Ok(_) => Some(Ok(Bytes::from(chunk))),
            Err(err) => {
                self.done = true;
                Some(Err(err))
            }
        }
    }
}

/// UTF-8 text chunks, decoded across the byte chunks' boundaries by the
/// kit's [`Decoder`]: a sequence split by a chunk boundary is carried (at
/// most 3 bytes) into the next buffer, ahead of the bytes that complete it.
pub(crate) struct TextChunks {
    source: Source,
    /// The first chunk, read at open for the binary check.
    first: Option<Vec<u8>>,
    decoder: Decoder,
    /// An error to yield after the valid text before it.
    queued: Option<Error>,
    done: bool,
}

impl TextChunks {
    /// Reads the first chunk (at least [`BINARY_SAMPLE_LEN`] bytes unless
    /// the file is shorter) and fails with `Binary` if it is binary.
    pub(crate) fn open(mut source: Source) -> Result<TextChunks> {
        let mut first = Vec::new();
        source.read_at_least(&mut first, BINARY_SAMPLE_LEN, CHUNK_LEN)?;
        check_not_binary(&source.op.op(), &first)?;
        Ok(TextChunks {
            source,
            first: Some(first),
            decoder: Decoder::default(),
            queued: None,
            done: false,
        })
    }

    /// The next buffer (the carried bytes followed by one read), and how
    /// many bytes the read added (0: end of file).
    fn next_buffer(&mut self) -> Result<(Vec<u8>, usize)> {
        if let Some(first) = self.first.take() {
            let read = first.len();
            return Ok((first, read));
        }
        let mut buf = self.decoder.next_buffer(CHUNK_LEN);
        let read = self.source.read_some(&mut buf, CHUNK_LEN)?;
        Ok((buf, read))
    }

    fn fail(&mut self, err: Error) -> Option<Result<Text>> {
        self.done = true;
        Some(Err(err))
    }
}

impl Produce for TextChunks {
    type Item = Text;

    fn next_item(&mut self) -> Option<Result<Text>> {
        if let Some(err) = self.queued.take() {
            return self.fail(err);
        }
        if self.done {
            return None;
        }
        loop {
            let (buf, read) = match self.next_buffer() {
                Ok(next) => next,
                Err(err) => return self.fail(err),
            };
            if read == 0 {
                self.done = true;
                // A sequence cut short by the end of the file.
                return self
                    .decoder
                    .finish()
                    .map(|offset| Err(invalid(&self.source.op.op(), offset)));
            }
            match self.decoder.push(buf) {
                Decoded::Text(text) => return Some(Ok(text)),
                Decoded::Pending => continue,
                Decoded::Invalid { text, offset } => {
                    let err = invalid(&self.source.op.op(), offset);
                    if text.is_empty() {
                        return self.fail(err);
                    }
                    self.queued = Some(err);
                    return Some(Ok(text));
                }
            }
        }
    }
}

/// Turns a producer into a stream that produces each item when polled.
pub(crate) fn into_stream<P: Produce>(mut producer: P) -> Boxed<P::Item> {
    Box::pin(futures::stream::iter(std::iter::from_fn(move || {
        producer.next_item()
    })))
}
