//! Background copying of one output pipe for collect, inherit and null
//! modes: every byte is accounted (total, tail, spill) and, for inherit,
//! forwarded to the host's own stdout or stderr.

use std::sync::Arc;

use dsh_plugin_api::subprocess::OutputStream;
use tokio_util::sync::CancellationToken;

use crate::fdio::{BULK_PIPE_CAPACITY, CHUNK, Growth, NonBlocking, write_all_blocking};
use crate::output::OutputState;

/// Where a pump forwards bytes besides the accounting.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Forward {
    Nowhere,
    /// The host's own stdout or stderr.
    Host(OutputStream),
}

/// Reads `pipe` until end of file or until `stop` is cancelled, recording
/// every chunk in `out` and forwarding it as `forward` says. On `stop`, what
/// is already buffered in the pipe (up to a full pipe's worth) is still
/// read, then the pipe is closed: output written before the drain grace ran
/// out is never lost, and later writers get EPIPE. One 64 KiB buffer is
/// reused for the whole stream.
pub async fn pump(
    pipe: NonBlocking,
    out: Arc<OutputState>,
    forward: Forward,
    pid: u32,
    stop: CancellationToken,
) {
    let mut sink = Sink {
        out,
        forward,
        pid,
        buf: vec![0u8; CHUNK],
        host_failed: false,
        growth: Growth::default(),
    };
    loop {
        // Stop first: after it, the bounded drain decides what is still
        // read, so a writer that never pauses cannot keep the pump alive.
        let read = tokio::select! {
            biased;
            () = stop.cancelled() => None,
            read = pipe.read(&mut sink.buf) => Some(read),
        };
        match read {
            Some(Ok(0)) => return,
            Some(Ok(n)) => sink.deliver(&pipe, n).await,
            Some(Err(err)) => {
                tracing::warn!(pid, %err, "reading command output failed; output disconnected");
                return;
            }
            None => {
                sink.drain_buffered(&pipe).await;
                return;
            }
        }
    }
}

struct Sink {
    out: Arc<OutputState>,
    forward: Forward,
    pid: u32,
    buf: Vec<u8>,
    host_failed: bool,
    growth: Growth,
}

impl Sink {
    /// Accounts and forwards `buf[..n]`.
    async fn deliver(&mut self, pipe: &NonBlocking, n: usize) {
        self.growth.note(pipe.as_fd(), n);
        self.out.record(&self.buf[..n]);
        let Forward::Host(stream) = self.forward else {
            return;
        };
        if self.host_failed {
            return;
        }
        // The host's descriptors are blocking (they are shared with whatever
        // started the host), so write on a blocking thread, handing the
        // buffer over and back instead of copying it.
        let chunk = std::mem::take(&mut self.buf);
        let (chunk, result) = tokio::task::spawn_blocking(move || {
            let fd = match stream {
                OutputStream::Stdout => rustix::stdio::stdout(),
                OutputStream::Stderr => rustix::stdio::stderr(),
            };
            let result = write_all_blocking(fd, &chunk[..n]);
            (chunk, result)
        })
        .await
        .unwrap_or_else(|join| {
            (
                vec![0u8; CHUNK],
                Err(std::io::Error::other(join.to_string())),
            )
        });
        self.buf = chunk;
        if let Err(err) = result {
            tracing::warn!(pid = self.pid, stream = stream.as_str(), %err, "copying output to the host failed; still accounting it");
            self.host_failed = true;
        }
    }

    /// Reads what the pipe holds right now, without waiting for more, up to
    /// what a full pipe can hold (a writer that keeps going is cut off).
    async fn drain_buffered(&mut self, pipe: &NonBlocking) {
        let mut drained = 0;
        while drained < BULK_PIPE_CAPACITY {
            match pipe.try_read(&mut self.buf) {
                Ok(0) => return,
                Ok(n) => {
                    drained += n;
                    self.deliver(pipe, n).await;
                }
                Err(err) if err.kind() == std::io::ErrorKind::Interrupted => {}
                // WouldBlock: nothing more buffered; anything else: done too.
                Err(_) => return,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use dsh_plugin_api::subprocess::OutputMode;
    use tokio::io::Interest;

    fn collecting() -> Arc<OutputState> {
        Arc::new(OutputState::new(OutputMode::Collect { limit: 16 }, None))
    }

    #[tokio::test]
    async fn a_stopped_pump_reads_what_is_buffered_without_waiting_for_eof() {
        let (read, write) = crate::fdio::pipe().expect("pipe");
        let written = rustix::io::write(&write, &[7u8; 50_000]).expect("write");
        assert_eq!(written, 50_000);
        let out = collecting();
        let stop = CancellationToken::new();
        stop.cancel();
        let pipe = NonBlocking::new(read, Interest::READABLE).expect("register");
        pump(pipe, out.clone(), Forward::Nowhere, 1, stop).await;
        assert_eq!(
            out.snapshot(0, 0).total,
            50_000,
            "nothing buffered was lost"
        );
        drop(write);
    }

    #[tokio::test]
    async fn a_writer_that_never_pauses_is_cut_off_after_a_full_pipe() {
        let (read, write) = crate::fdio::pipe().expect("pipe");
        let writer = std::thread::spawn(move || {
            let chunk = [1u8; 4096];
            // Until the pump closes the pipe (EPIPE; SIGPIPE is ignored in
            // Rust programs).
            while rustix::io::write(&write, &chunk).is_ok() {}
        });
        let out = collecting();
        let stop = CancellationToken::new();
        stop.cancel();
        let pipe = NonBlocking::new(read, Interest::READABLE).expect("register");
        pump(pipe, out.clone(), Forward::Nowhere, 1, stop).await;
        let total = out.snapshot(0, 0).total;
        assert!(
            total <= (BULK_PIPE_CAPACITY + CHUNK) as u64,
            "bounded drain: {total}"
        );
        writer.join().expect("the writer saw the pipe close");
    }
}
