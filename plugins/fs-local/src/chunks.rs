//! Streamed reads: bounded chunks produced from an open file.
//!
//! A producer reads [`CHUNK_LEN`]-byte chunks with one `read(2)` each into
//! fresh, uninitialised buffers that are handed to the consumer without a
//! copy. Small files are read inline before the stream is returned; larger
//! ones are read on tokio's blocking pool into a channel of
//! [`READ_AHEAD`] chunks, so memory stays bounded however large the file and
//! a slow consumer slows the reader. Polling the stream needs no runtime
//! context; dropping it stops the reader at its next chunk and closes the
//! file.

use std::fs::File;
use std::panic::{self, AssertUnwindSafe};
use std::pin::Pin;

use dsh_plugin_api::fs::BINARY_SAMPLE_LEN;
use dsh_plugin_api::{Error, ErrorKind, Result};
use futures::{Stream, StreamExt};
use rustix::io::Errno;

use crate::blocking::INLINE_LIMIT;
use crate::errors::OwnedOp;
use crate::utf8::{check_not_binary, incomplete_suffix_len, invalid};

/// Largest chunk a stream yields, in bytes.
pub const CHUNK_LEN: usize = 64 * 1024;

/// Chunks the blocking reader may have ready before the consumer takes
/// them (the reader holds one more while filling it).
pub const READ_AHEAD: usize = 2;

/// Most chunks produced inline for a file that looked small at open.
const MAX_INLINE_CHUNKS: usize = INLINE_LIMIT as usize / CHUNK_LEN + 1;

/// A boxed stream of produced items.
pub(crate) type Boxed<T> = Pin<Box<dyn Stream<Item = Result<T>> + Send + 'static>>;

/// Something that yields the items of a stream one at a time, blocking.
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

    /// One `read(2)` of up to `max` bytes appended to `buf`'s spare
    /// capacity (reserved here, never zero-filled). `Ok(0)` is end of file.
    fn read_some(&mut self, buf: &mut Vec<u8>, max: usize) -> Result<usize> {
        buf.reserve_exact(max);
        let start = buf.len();
        let spare = &mut buf.spare_capacity_mut()[..max];
        let read = loop {
            match rustix::io::read(&self.file, &mut *spare) {
                Ok((filled, _)) => break filled.len(),
                Err(Errno::INTR) => continue,
                Err(errno) => return Err(self.op.op().io(&errno.into())),
            }
        };
        // SAFETY: `read(2)` initialised the first `read` bytes of the spare
        // capacity, which starts at `start`.
        unsafe { buf.set_len(start + read) };
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
pub(crate) struct Bytes {
    source: Source,
    done: bool,
}

impl Bytes {
    pub(crate) fn new(source: Source) -> Bytes {
        Bytes {
            source,
            done: false,
        }
    }
}

impl Produce for Bytes {
    type Item = Vec<u8>;

    fn next_item(&mut self) -> Option<Result<Vec<u8>>> {
        if self.done {
            return None;
        }
        let mut chunk = Vec::new();
        match self.source.read_some(&mut chunk, CHUNK_LEN) {
            Ok(0) => {
                self.done = true;
                None
            }
            Ok(_) => Some(Ok(chunk)),
            Err(err) => {
                self.done = true;
                Some(Err(err))
            }
        }
    }
}

/// UTF-8 text chunks, decoded across the byte chunks' boundaries: a
/// sequence split by a chunk boundary is carried (at most 3 bytes) into the
/// next buffer, ahead of the bytes that complete it.
pub(crate) struct Text {
    source: Source,
    /// The first chunk, read at open for the binary check.
    first: Option<Vec<u8>>,
    /// The start of a multi-byte sequence cut by the last chunk boundary.
    carry: Vec<u8>,
    /// An error to yield after the valid text before it.
    queued: Option<Error>,
    done: bool,
}

impl Text {
    /// Reads the first chunk (at least [`BINARY_SAMPLE_LEN`] bytes unless
    /// the file is shorter) and fails with `Binary` if it is binary.
    pub(crate) fn open(mut source: Source) -> Result<Text> {
        let mut first = Vec::new();
        source.read_at_least(&mut first, BINARY_SAMPLE_LEN, CHUNK_LEN)?;
        check_not_binary(source.op.op(), &first)?;
        Ok(Text {
            source,
            first: Some(first),
            carry: Vec::with_capacity(3),
            queued: None,
            done: false,
        })
    }

    /// The next buffer: the carried bytes followed by one read.
    fn next_buffer(&mut self) -> Result<(Vec<u8>, usize)> {
        if let Some(first) = self.first.take() {
            let read = first.len();
            return Ok((first, read));
        }
        let mut buf = Vec::with_capacity(self.carry.len() + CHUNK_LEN);
        buf.append(&mut self.carry);
        let read = self.source.read_some(&mut buf, CHUNK_LEN)?;
        Ok((buf, read))
    }

    fn fail(&mut self, err: Error) -> Option<Result<String>> {
        self.done = true;
        Some(Err(err))
    }
}

impl Produce for Text {
    type Item = String;

    fn next_item(&mut self) -> Option<Result<String>> {
        if let Some(err) = self.queued.take() {
            return self.fail(err);
        }
        if self.done {
            return None;
        }
        loop {
            let (mut buf, read) = match self.next_buffer() {
                Ok(next) => next,
                Err(err) => return self.fail(err),
            };
            // File offset of `buf[0]`.
            let start = self.source.offset - buf.len() as u64;
            if read == 0 {
                self.done = true;
                return if buf.is_empty() {
                    None
                } else {
                    // A sequence was cut by the end of the file.
                    Some(Err(invalid(self.source.op.op(), start)))
                };
            }
            let keep = incomplete_suffix_len(&buf);
            let split = buf.len() - keep;
            self.carry.extend_from_slice(&buf[split..]);
            buf.truncate(split);
            if buf.is_empty() {
                continue;
            }
            return match String::from_utf8(buf) {
                Ok(text) => Some(Ok(text)),
                Err(err) => {
                    let valid = err.utf8_error().valid_up_to();
                    let error = invalid(self.source.op.op(), start + valid as u64);
                    let mut prefix = err.into_bytes();
                    prefix.truncate(valid);
                    match String::from_utf8(prefix) {
                        Ok(prefix) if !prefix.is_empty() => {
                            self.queued = Some(error);
                            Some(Ok(prefix))
                        }
                        _ => self.fail(error),
                    }
                }
            };
        }
    }
}

/// Turns a producer into a stream. When the file looked small at open
/// (`size_hint` ≤ [`INLINE_LIMIT`]) its chunks are produced right here;
/// otherwise — or if it grew meanwhile — the rest is produced on the
/// blocking pool with [`READ_AHEAD`] chunks of backpressured buffering.
///
/// Must be called inside a tokio runtime (the provider's).
pub(crate) fn into_stream<P: Produce>(mut producer: P, size_hint: u64) -> Boxed<P::Item> {
    let mut ready = Vec::new();
    if size_hint <= INLINE_LIMIT {
        while ready.len() < MAX_INLINE_CHUNKS {
            match producer.next_item() {
                Some(Ok(item)) => ready.push(Ok(item)),
                Some(Err(err)) => {
                    ready.push(Err(err));
                    return Box::pin(futures::stream::iter(ready));
                }
                None => return Box::pin(futures::stream::iter(ready)),
            }
        }
    }
    let (tx, mut rx) = tokio::sync::mpsc::channel(READ_AHEAD);
    tokio::task::spawn_blocking(move || {
        let outcome = panic::catch_unwind(AssertUnwindSafe(|| {
            while let Some(item) = producer.next_item() {
                if tx.blocking_send(item).is_err() {
                    // The consumer dropped the stream.
                    return;
                }
            }
        }));
        if outcome.is_err() {
            // Never let a stream end silently short: say it broke.
            let _ = tx.blocking_send(Err(Error::new(
                ErrorKind::Panicked,
                "read: the stream producer panicked",
            )));
        }
    });
    let rest = futures::stream::poll_fn(move |cx| rx.poll_recv(cx));
    Box::pin(futures::stream::iter(ready).chain(rest))
}
