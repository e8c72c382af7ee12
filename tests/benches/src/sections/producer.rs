//! The bulk output of the subprocess figures, and how the raw peer reads
//! it.

use std::process::Stdio;

use anyhow::{Context, Result, ensure};
use tokio::io::AsyncReadExt;

/// The peer's read size: one reused 64 KiB buffer (the default pipe
/// capacity), the cheapest way to drain a pipe with tokio.
pub const PEER_READ: usize = 64 * 1024;

/// The producer: `dd` writing `mib` MiB of zeros in 1 MiB writes. Large
/// writes keep the producer's own cost low, so the consumer's cost (ours
/// or the peer's) dominates the figure — the strict setting for a ratio.
pub fn producer_argv(mib: u64) -> Vec<String> {
    vec![
        "dd".into(),
        "if=/dev/zero".into(),
        "bs=1M".into(),
        format!("count={mib}"),
        "status=none".into(),
    ]
}

/// The peer: runs the producer of `mib` MiB with `tokio::process` (stdin
/// null, stdout and stderr piped, stderr unread), reads stdout to its end
/// in [`PEER_READ`]-byte reads into one reused buffer, handing each read to
/// `sink`, and checks the exit status and the byte count.
pub async fn tokio_drain(mib: u64, mut sink: impl FnMut(&[u8])) -> Result<u64> {
    let argv = producer_argv(mib);
    let command = argv.join(" ");
    let mut child = tokio::process::Command::new(&argv[0])
        .args(&argv[1..])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .with_context(|| format!("tokio::process: spawn {command}"))?;
    let mut stdout = child
        .stdout
        .take()
        .context("tokio::process: piped stdout")?;
    let mut buf = vec![0u8; PEER_READ];
    let mut total = 0u64;
    loop {
        let read = stdout
            .read(&mut buf)
            .await
            .with_context(|| format!("tokio::process: read stdout of {command}"))?;
        if read == 0 {
            break;
        }
        sink(&buf[..read]);
        total += read as u64;
    }
    let status = child
        .wait()
        .await
        .with_context(|| format!("tokio::process: wait for {command}"))?;
    ensure!(
        status.success(),
        "{command} exited unsuccessfully: {status}"
    );
    ensure!(
        total == mib << 20,
        "{command}: read {total} bytes, expected {}",
        mib << 20
    );
    Ok(total)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_peer_reads_every_byte_of_the_producer() {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime");
        let mut seen = 0usize;
        let total = runtime
            .block_on(tokio_drain(2, |chunk| {
                assert!(chunk.iter().all(|byte| *byte == 0));
                seen += chunk.len();
            }))
            .expect("drain");
        assert_eq!(total, 2 << 20);
        assert_eq!(seen, 2 << 20);
    }
}
