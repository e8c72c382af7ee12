//! Pipe mode: the caller's stream of a command's output.
//!
//! The supervisor hands over chunks through a small bounded channel
//! ([`PIPE_CHUNKS`] pieces of at most 32 KiB — about what a kernel pipe
//! holds); when it is full the supervisor stops reading envd, envd stops
//! reading the helper, the helper stops reading the command, and the
//! command blocks: backpressure end to end, and host memory holds at most
//! the channel. Dropping the stream makes the supervisor detach the
//! command's end (later writes fail with EPIPE, as with a closed pipe).

use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use dsh_plugin_api::Result;
use futures::Stream;
use tokio::sync::mpsc;

/// Capacity of a pipe's channel, in chunks.
pub const PIPE_CHUNKS: usize = 32;

/// What the supervisor sends: a chunk, or the error that ends the stream.
pub type Piece = Result<Bytes>;

/// A bounded channel for one piped stream.
pub fn channel() -> (mpsc::Sender<Piece>, PipeStream) {
    let (tx, rx) = mpsc::channel(PIPE_CHUNKS);
    (tx, PipeStream { rx, done: false })
}

pub struct PipeStream {
    rx: mpsc::Receiver<Piece>,
    done: bool,
}

impl Stream for PipeStream {
    type Item = Result<Bytes>;

    /// The next chunk (never empty); ends at the command's end of file, or
    /// after yielding the error that broke the stream.
    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        if self.done {
            return Poll::Ready(None);
        }
        let next = self.rx.poll_recv(cx);
        if let Poll::Ready(Some(Err(_)) | None) = &next {
            self.done = true;
        }
        // No copy: the receive buffer's `Bytes` is the seam's chunk.
        next
    }
}
