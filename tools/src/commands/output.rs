//! One command's merged output, addressed by absolute byte offset.
//!
//! The provider keeps the last [`TAIL_LIMIT`] bytes in memory
//! (`OutputMode::Collect`) and a lossless copy of up to [`SPILL_LIMIT`]
//! bytes in a spill file on the world's disk. A read at an offset still in
//! the tail is served from memory; an older one from the spill file through
//! the `fs` seam. That seam has no ranged read, so the file is streamed and
//! the bytes before the offset skipped; to keep sequential reading linear,
//! the stream is kept open where the last read stopped, holding at most one
//! chunk of the file in memory.

use std::sync::Arc;

use dsh_plugin_api::fs::FsProvider;
use dsh_plugin_api::stream::ByteStream;
use dsh_plugin_api::subprocess::{OutputSnapshot, OutputStream, Process};
use dsh_plugin_api::{Bytes, Error, Result};
use futures::StreamExt;

/// Bytes of each command's output kept in host memory (the provider's
/// collect tail). The foreground result's tail and most reads by cursor
/// come from here.
pub(crate) const TAIL_LIMIT: usize = 128 * 1024;

/// Bytes of each command's output copied to its spill file on the world's
/// disk; output beyond it is readable only while it is in the tail.
pub(crate) const SPILL_LIMIT: u64 = 1 << 30;

/// A piece of output read from one offset.
#[derive(Debug)]
pub(crate) struct Piece {
    /// Where the bytes start: the offset asked for, or later when the
    /// bytes at that offset are gone (see `dropped`).
    pub start: u64,
    pub bytes: Vec<u8>,
    /// Bytes between the offset asked for and `start` that are no longer
    /// kept anywhere.
    pub dropped: u64,
    /// Bytes the command has written so far.
    pub total: u64,
}

/// Reads one command's output (its stdout, into which the wrapper merged
/// stderr).
pub(crate) struct CommandOutput {
    process: Arc<dyn Process>,
    fs: Arc<dyn FsProvider>,
    /// The spill stream left open by the last read from the file.
    spill: tokio::sync::Mutex<Option<SpillCursor>>,
}

impl CommandOutput {
    pub(crate) fn new(process: Arc<dyn Process>, fs: Arc<dyn FsProvider>) -> CommandOutput {
        CommandOutput {
            process,
            fs,
            spill: tokio::sync::Mutex::new(None),
        }
    }

    /// The output's current accounting, without bytes.
    pub(crate) async fn snapshot(&self) -> Result<OutputSnapshot> {
        self.process
            .read_output(OutputStream::Stdout, u64::MAX, 0)
            .await
    }

    /// Removes the spill files of both streams (stderr's stays empty: the
    /// wrapper merged it) through the `fs` seam; returns the failures.
    pub(crate) async fn remove_spill_files(&self) -> Vec<Error> {
        let mut failures = Vec::new();
        for stream in [OutputStream::Stdout, OutputStream::Stderr] {
            let spill = match self.process.read_output(stream, u64::MAX, 0).await {
                Ok(snapshot) => snapshot.spill,
                Err(err) => {
                    failures.push(err);
                    continue;
                }
            };
            if let Some(spill) = spill
                && let Err(err) = self.fs.remove(&spill.path).await
            {
                failures.push(err.with_subject(spill.path));
            }
        }
        failures
    }

    /// Up to `max` bytes from offset `from`. An offset at or past the end
    /// reads nothing at the end. Bytes older than the memory tail come from
    /// the spill file; if they are not there either (the copy was cut at
    /// its limit) the read starts at the oldest byte still kept and reports
    /// the gap as `dropped`. A spill file that is still behind what the
    /// provider reported (a remote world flushing its copy) gives a short
    /// or empty piece at `from`, never a gap.
    pub(crate) async fn read(&self, from: u64, max: usize) -> Result<Piece> {
        let snapshot = self
            .process
            .read_output(OutputStream::Stdout, from, max)
            .await?;
        let total = snapshot.total;
        if from >= total {
            return Ok(Piece {
                start: total,
                bytes: Vec::new(),
                dropped: 0,
                total,
            });
        }
        if snapshot.offset <= from {
            return Ok(Piece {
                start: from,
                bytes: snapshot.bytes.to_vec(),
                dropped: 0,
                total,
            });
        }
        // `from` is older than the tail. Read from the spill only what
        // memory no longer holds, so the open stream never runs into the
        // end of a file that is still growing.
        let in_spill = snapshot.spill.as_ref().filter(|spill| from < spill.len);
        let Some(spill) = in_spill else {
            return Ok(Piece {
                start: snapshot.offset,
                bytes: snapshot.bytes.to_vec(),
                dropped: snapshot.offset - from,
                total,
            });
        };
        let wanted = (snapshot.offset.min(spill.len) - from).min(max as u64) as usize;
        let mut bytes = self.read_spill(&spill.path, from, wanted).await?;
        if bytes.len() == wanted && wanted < max {
            // Continue from memory if the tail still starts there.
            let next = from + wanted as u64;
            let rest = self
                .process
                .read_output(OutputStream::Stdout, next, max - wanted)
                .await?;
            if rest.offset == next {
                bytes.extend_from_slice(&rest.bytes);
            }
        }
        Ok(Piece {
            start: from,
            bytes,
            dropped: 0,
            total,
        })
    }

    /// `len` bytes of the spill file at `path` from offset `from` (fewer if
    /// the file ends first), reusing the open stream when it is at or
    /// before `from`.
    async fn read_spill(&self, path: &str, from: u64, len: usize) -> Result<Vec<u8>> {
        let mut open = self.spill.lock().await;
        if open
            .as_ref()
            .is_some_and(|cursor| cursor.path != path || cursor.offset > from)
        {
            *open = None;
        }
        let cursor = match open.as_mut() {
            Some(cursor) => cursor,
            None => open.insert(SpillCursor {
                path: path.to_owned(),
                chunks: self.fs.read_bytes(path).await?.chunks,
                offset: 0,
                pending: Bytes::new(),
            }),
        };
        match cursor.read(from, len).await {
            Ok((bytes, ended)) => {
                if ended {
                    *open = None;
                }
                Ok(bytes)
            }
            Err(err) => {
                *open = None;
                Err(err)
            }
        }
    }
}

/// An open read of a spill file, positioned at `offset`.
struct SpillCursor {
    path: String,
    chunks: ByteStream,
    /// The file offset of `pending[0]`.
    offset: u64,
    /// The unread rest of the last chunk.
    pending: Bytes,
}

impl SpillCursor {
    /// Skips to `from` (which must not be before `offset`) and reads up to
    /// `len` bytes; also says whether the file ended.
    async fn read(&mut self, from: u64, len: usize) -> Result<(Vec<u8>, bool)> {
        while self.offset + self.pending.len() as u64 <= from {
            self.offset += self.pending.len() as u64;
            match self.chunks.next().await {
                Some(chunk) => self.pending = chunk?,
                None => {
                    self.pending = Bytes::new();
                    return Ok((Vec::new(), true));
                }
            }
        }
        let skip = (from - self.offset) as usize;
        self.pending = self.pending.slice(skip..);
        self.offset = from;
        let mut out = Vec::with_capacity(len);
        loop {
            let take = (len - out.len()).min(self.pending.len());
            out.extend_from_slice(&self.pending[..take]);
            self.pending = self.pending.slice(take..);
            self.offset += take as u64;
            if out.len() == len {
                return Ok((out, false));
            }
            match self.chunks.next().await {
                Some(chunk) => self.pending = chunk?,
                None => return Ok((out, true)),
            }
        }
    }
}
