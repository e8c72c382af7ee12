//! Pipe mode: the caller reads the child's output directly.
//!
//! No task sits between the child and the caller: each poll of the stream
//! reads the pipe, so an unread stream leaves the bytes in the kernel pipe
//! and the child blocks once it is full (backpressure), and host memory
//! holds nothing the caller has not asked for. Bytes are still counted and
//! spilled on the way through.

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use dsh_plugin_api::subprocess::OutputStream;
use dsh_plugin_api::{Bytes, Error};
use futures::Stream;

use crate::fdio::{CHUNK, Growth, NonBlocking};
use crate::output::OutputState;

/// Chunks smaller than this are shrunk to their length before they are
/// handed over, so a caller that keeps many small chunks does not keep
/// 64 KiB for each. Shrinking is an in-place `realloc` (the tail of the
/// block is freed), never a copy, so no byte is copied on the way from the
/// kernel to the caller.
const SHRINK_BELOW: usize = CHUNK / 2;

pub struct PipeStream {
    pipe: Option<NonBlocking>,
    out: Arc<OutputState>,
    stream: OutputStream,
    pid: u32,
    buf: Vec<u8>,
    growth: Growth,
}

impl PipeStream {
    pub fn new(
        pipe: NonBlocking,
        out: Arc<OutputState>,
        stream: OutputStream,
        pid: u32,
    ) -> PipeStream {
        PipeStream {
            pipe: Some(pipe),
            out,
            stream,
            pid,
            buf: Vec::new(),
            growth: Growth::default(),
        }
    }
}

impl Stream for PipeStream {
    type Item = dsh_plugin_api::Result<Bytes>;

    /// Reads the next chunk (never empty). Ends at end of file; after an
    /// error the stream ends too. Dropping the stream closes the pipe, so a
    /// child still writing gets SIGPIPE/EPIPE.
    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = self.get_mut();
        let Some(pipe) = this.pipe.as_ref() else {
            return Poll::Ready(None);
        };
        if this.buf.capacity() < CHUNK {
            this.buf = Vec::with_capacity(CHUNK);
        }
        match pipe.poll_read_spare(cx, &mut this.buf) {
            Poll::Pending => Poll::Pending,
            Poll::Ready(Ok(0)) => {
                this.pipe = None;
                Poll::Ready(None)
            }
            Poll::Ready(Ok(n)) => {
                this.growth.note(pipe.as_fd(), n);
                this.out.record(&this.buf);
                let mut chunk = std::mem::take(&mut this.buf);
                if n < SHRINK_BELOW {
                    chunk.shrink_to_fit();
                }
                // No copy: the buffer becomes the chunk.
                Poll::Ready(Some(Ok(Bytes::from(chunk))))
            }
            Poll::Ready(Err(err)) => {
                this.pipe = None;
                Poll::Ready(Some(Err(Error::from_io(
                    &format!("read {} of process {}", this.stream.as_str(), this.pid),
                    &err,
                ))))
            }
        }
    }
}
