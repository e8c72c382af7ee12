//! Moving bytes between our standard streams and the world's.

use dsh_plugin_api::stream::ByteStream;
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

/// Our stdin as chunks, as they arrive, until EOF or a read error.
pub fn stdin_chunks() -> impl Stream<Item = Vec<u8>> + Send + Unpin {
    Box::pin(futures::stream::unfold(
        (tokio::io::stdin(), vec![0u8; 16 * 1024]),
        |(mut stdin, mut buffer)| async move {
            match stdin.read(&mut buffer).await {
                Ok(0) | Err(_) => None,
                Ok(read) => {
                    let chunk = buffer[..read].to_vec();
                    Some((chunk, (stdin, buffer)))
                }
            }
        },
    ))
}
