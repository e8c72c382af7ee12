//! The code under test of the example suite — what a user's crate would
//! hold: a tool that works only through the `fs` and `subprocess` seams, so
//! the same tests run on any world (`tests/it`).

#![forbid(unsafe_code)]

use dsh_plugin_api::fs::{FsProvider, WriteGuard};
use dsh_plugin_api::subprocess::{OutputMode, OutputStream, SpawnSpec, SubprocessProvider};
use dsh_plugin_api::{Bytes, Error, ErrorKind, Result};

/// Writes `text` to `path` (which must not exist yet) and counts its lines
/// with the world's `wc -l`: the answer comes from a process of the same
/// world the file was written to.
pub async fn write_and_count_lines(
    fs: &dyn FsProvider,
    subprocess: &dyn SubprocessProvider,
    path: &str,
    text: &str,
) -> Result<u64> {
    fs.write(path, Bytes::from(text.to_owned()), WriteGuard::CreateNew)
        .await?;
    let mut spec = SpawnSpec::new(["wc", "-l", path]);
    spec.stdout = OutputMode::Collect { limit: 4096 };
    let process = subprocess.spawn(spec).await?;
    let status = process.wait().await?;
    let output = process.read_output(OutputStream::Stdout, 0, 4096).await?;
    let stdout = String::from_utf8_lossy(&output.bytes);
    let count = stdout
        .split_whitespace()
        .next()
        .and_then(|n| n.parse().ok());
    match (status.code, count) {
        (Some(0), Some(count)) => Ok(count),
        _ => Err(Error::new(
            ErrorKind::Io,
            format!("count lines of {path}: wc -l said {stdout:?} ({status:?})"),
        )),
    }
}
