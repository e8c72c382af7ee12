//! Moving bytes between our standard streams and the world's.

use dsh_plugin_api::stream::ByteStream;
use futures::{Stream, StreamExt};
use tokio::io::{AsyncReadExt, AsyncWrite, AsyncWriteExt};

/// Copies a world stream to one of our outputs until it ends. A closed
/// output of ours (e.g. `| head`) stops the copy but keeps draining, so the
/// world's writer is never blocked by us.
pub async fn pump(
    stream: Option<ByteStream>,
    mut out: impl AsyncWrite + Unpin,
) -> Result<(), String> {
    let Some(mut stream) = stream else {
        return Ok(());
    };
    let mut out_open = true;
    while let Some(chunk) = stream.next().await {
        let chunk = chunk.map_err(|err| err.to_string())?;
        if out_open {
            let written = async {
                out.write_all(&chunk).await?;
                out.flush().await
            };
            if written.await.is_err() {
                out_open = false;
            }
        }
    }
    Ok(())
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
