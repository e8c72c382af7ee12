//! Moving bytes between our standard streams and the world's.

use dsh_plugin_api::stream::ByteStream;
use dsh_plugin_api::{Bytes, Error as PluginError};
use futures::{Stream, StreamExt};
use tokio::io::{AsyncReadExt, AsyncWrite, AsyncWriteExt};

/// How a [`pump`] ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pumped {
    /// The world's stream ended and everything reached our output.
    Drained,
    /// Our output's reader went away (`| head`): the copy stopped and the
    /// world's stream was dropped, closing the world's side of it, so its
    /// writer sees EPIPE/SIGPIPE as in a shell pipeline.
    OutputClosed,
}

/// Copies a world stream to one of our outputs until it ends or our output
/// closes (then the stream is dropped, not drained: a writer like `yes`
/// must be stopped, not fed forever).
pub async fn pump(
    stream: Option<ByteStream>,
    mut out: impl AsyncWrite + Unpin,
) -> Result<Pumped, String> {
    let Some(mut stream) = stream else {
        return Ok(Pumped::Drained);
    };
    while let Some(chunk) = stream.next().await {
        let chunk = chunk.map_err(|err| err.to_string())?;
        let written = async {
            out.write_all(&chunk).await?;
            out.flush().await
        };
        if written.await.is_err() {
            return Ok(Pumped::OutputClosed);
        }
    }
    Ok(Pumped::Drained)
}

/// Our stdin as chunks of at most `chunk_len` bytes, as they arrive, until
/// EOF; a read error is the stream's last item. Nothing is read ahead of
/// the consumer (each chunk is read when polled), so memory stays bounded
/// by one chunk whatever stdin holds. Runs on the caller's tokio runtime.
pub fn stdin_bytes(chunk_len: usize) -> ByteStream {
    Box::pin(futures::stream::unfold(
        Some((tokio::io::stdin(), vec![0u8; chunk_len])),
        |state| async move {
            let (mut stdin, mut buffer) = state?;
            match stdin.read(&mut buffer).await {
                Ok(0) => None,
                Ok(read) => {
                    let chunk = Bytes::copy_from_slice(&buffer[..read]);
                    Some((Ok(chunk), Some((stdin, buffer))))
                }
                Err(err) => Some((Err(PluginError::from_io("read stdin", &err)), None)),
            }
        },
    ))
}

/// Our stdin as chunks, as they arrive, until EOF or a read error (which,
/// for input forwarded to a command, is an end of input like any other).
pub fn stdin_chunks() -> impl Stream<Item = Bytes> + Send + Unpin {
    stdin_bytes(16 * 1024)
        .take_while(|chunk| futures::future::ready(chunk.is_ok()))
        .filter_map(|chunk| futures::future::ready(chunk.ok()))
}
