//! Inherit mode: a command's output copied to the host's own stdout or
//! stderr.

use dsh_plugin_api::subprocess::OutputStream;
use tokio::sync::mpsc;

use crate::pipe;

/// Copies inherited output to the host's own stdout or stderr.
pub async fn forward_to_host(mut rx: mpsc::Receiver<pipe::Piece>, stream: OutputStream, pid: u32) {
    use tokio::io::AsyncWriteExt;
    let mut failed = false;
    while let Some(piece) = rx.recv().await {
        let Ok(bytes) = piece else { continue };
        if failed {
            continue;
        }
        let result = match stream {
            OutputStream::Stdout => {
                let mut out = tokio::io::stdout();
                match out.write_all(&bytes).await {
                    Ok(()) => out.flush().await,
                    Err(err) => Err(err),
                }
            }
            OutputStream::Stderr => {
                let mut out = tokio::io::stderr();
                match out.write_all(&bytes).await {
                    Ok(()) => out.flush().await,
                    Err(err) => Err(err),
                }
            }
        };
        if let Err(err) = result {
            tracing::warn!(pid, stream = stream.as_str(), %err, "copying output to the host failed; still accounting it");
            failed = true;
        }
    }
}
