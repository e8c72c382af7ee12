//! Background copying of one output pipe for collect, inherit and null
//! modes: every byte is accounted (total, tail, spill) and, for inherit,
//! copied to the host's own stdout or stderr.

use std::sync::Arc;

use dsh_plugin_api::subprocess::OutputStream;

use crate::fdio::{self, CHUNK, NonBlocking, write_all_blocking};
use crate::output::OutputState;

/// Where a pump forwards bytes besides the accounting.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Forward {
    Nowhere,
    /// The host's own stdout or stderr.
    Host(OutputStream),
}

/// Reads `pipe` to end of file, recording every chunk in `out` and copying
/// them as `forward` says. Runs as long as any process holds the pipe's write
/// end; dropping the future disconnects the pipe (later writers get
/// EPIPE). One 64 KiB buffer is reused for the whole stream.
pub async fn pump(pipe: NonBlocking, out: Arc<OutputState>, forward: Forward, pid: u32) {
    let mut buf = vec![0u8; CHUNK];
    let mut host_failed = false;
    let mut grown = false;
    loop {
        let n = match pipe.read(&mut buf).await {
            Ok(0) => return,
            Ok(n) => n,
            Err(err) => {
                tracing::warn!(pid, %err, "reading command output failed; output disconnected");
                return;
            }
        };
        if n == CHUNK && !grown {
            fdio::grow_pipe(pipe.as_fd());
            grown = true;
        }
        out.record(&buf[..n]);
        if let Forward::Host(stream) = forward
            && !host_failed
        {
            // The host's descriptors are blocking (they are shared with
            // whatever started the host), so write on a blocking thread,
            // handing the buffer over and back instead of copying it.
            let chunk = std::mem::take(&mut buf);
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
            buf = chunk;
            if let Err(err) = result {
                tracing::warn!(pid, stream = stream.as_str(), %err, "copying output to the host failed; still accounting it");
                host_failed = true;
            }
        }
    }
}
