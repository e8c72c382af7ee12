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
//!
//! A durable command (see [`super::durable`]) has no spill file: the world
//! itself retains its output, so an offset older than the tail is read
//! through a new attachment of the seam from that offset — a piped
//! `durable-follow` of the command — kept open where the last read stopped
//! in the same way.

use std::sync::Arc;

use std::time::Duration;

use dsh_plugin_api::durable::{AttachSpec, Attached};
use dsh_plugin_api::fs::FsProvider;
use dsh_plugin_api::stream::ByteStream;
use dsh_plugin_api::subprocess::{OutputMode, OutputSnapshot, OutputStream, Process};
use dsh_plugin_api::{Bytes, Error, Result};
use futures::StreamExt;

use super::durable::DurableLink;

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

/// A read of retained output that skips further than this ahead of the
/// open attachment attaches anew instead of reading its way there.
const RETAINED_SKIP_LIMIT: u64 = 4 << 20;

/// How long a read of retained output waits for bytes the world reported
/// (a stuck attachment gives a short piece, never a hang).
const RETAINED_READ_WAIT: Duration = Duration::from_secs(10);

/// Where output older than the memory tail comes from.
enum Older {
    /// The spill file, through the `fs` seam.
    Spill(Arc<dyn FsProvider>),
    /// The world's retention of a durable command, through `attach`.
    Retained(DurableLink),
}

/// Reads one command's output (its stdout, into which the spawn merged
/// stderr).
pub(crate) struct CommandOutput {
    process: Arc<dyn Process>,
    older: Older,
    /// The spill stream left open by the last read from the file.
    spill: tokio::sync::Mutex<Option<SpillCursor>>,
    /// The attachment left open by the last read of retained output.
    retained: tokio::sync::Mutex<Option<RetainedCursor>>,
}

impl CommandOutput {
    /// The output of a command with a spill file that `fs` reads.
    pub(crate) fn new(process: Arc<dyn Process>, fs: Arc<dyn FsProvider>) -> CommandOutput {
        CommandOutput::with(process, Older::Spill(fs))
    }

    /// The output of durable command `link`, `process` being its
    /// collecting attachment.
    pub(crate) fn durable(process: Arc<dyn Process>, link: DurableLink) -> CommandOutput {
        CommandOutput::with(process, Older::Retained(link))
    }

    fn with(process: Arc<dyn Process>, older: Older) -> CommandOutput {
        CommandOutput {
            process,
            older,
            spill: tokio::sync::Mutex::new(None),
            retained: tokio::sync::Mutex::new(None),
        }
    }

    /// Closes the attachment a read of retained output left open (its
    /// follower ends at its next write, or with the command, or when the
    /// provider is disposed).
    pub(crate) async fn close_reader(&self) {
        self.retained.lock().await.take();
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
        let Older::Spill(fs) = &self.older else {
            return Vec::new();
        };
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
                && let Err(err) = fs.remove(&spill.path).await
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
        // `from` is older than the tail.
        if let Older::Retained(link) = &self.older {
            return self.read_retained(link, snapshot, from, max).await;
        }
        // Read from the spill only what memory no longer holds, so the
        // open stream never runs into the end of a file that is still
        // growing.
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
        self.continue_from_memory(&mut bytes, from, wanted, max)
            .await?;
        Ok(Piece {
            start: from,
            bytes,
            dropped: 0,
            total,
        })
    }

    /// After `wanted` bytes from `from` were read from the world into
    /// `bytes`, adds what memory holds right after them, up to `max` in
    /// all, if the tail still starts there.
    async fn continue_from_memory(
        &self,
        bytes: &mut Vec<u8>,
        from: u64,
        wanted: usize,
        max: usize,
    ) -> Result<()> {
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
        Ok(())
    }

    /// The read of [`CommandOutput::read`] for an offset older than the
    /// tail of a durable command: from the world's retention, up to where
    /// the tail starts (bytes known to exist), then on from memory. Bytes
    /// the world no longer retains are reported as `dropped`.
    async fn read_retained(
        &self,
        link: &DurableLink,
        snapshot: OutputSnapshot,
        from: u64,
        max: usize,
    ) -> Result<Piece> {
        let total = snapshot.total;
        let mut open = self.retained.lock().await;
        let reusable = open.as_ref().is_some_and(|cursor| {
            cursor.offset <= from && from - cursor.offset <= RETAINED_SKIP_LIMIT
        });
        if !reusable {
            *open = None;
            let mut spec = AttachSpec::new(link.id.clone(), from);
            spec.stderr = OutputMode::Null;
            let attached = link.subprocess.attach(spec).await?;
            let Some(stream) = attached.process.take_stdout() else {
                return Err(Error::io(format!(
                    "attach {}: the attachment has no piped stdout",
                    link.id
                )));
            };
            let offset = attached.from[0];
            *open = Some(RetainedCursor {
                _attached: attached,
                stream,
                offset,
                pending: Bytes::new(),
            });
        }
        let cursor = open.as_mut().expect("opened above");
        let start = from.max(cursor.offset);
        if start >= snapshot.offset {
            // Everything before the tail is gone from the world.
            return Ok(Piece {
                start: snapshot.offset,
                bytes: snapshot.bytes.to_vec(),
                dropped: snapshot.offset - from,
                total,
            });
        }
        let wanted = (snapshot.offset - start).min(max as u64) as usize;
        let read = tokio::time::timeout(RETAINED_READ_WAIT, cursor.read(start, wanted)).await;
        let bytes = match read {
            Ok(Ok(bytes)) if bytes.len() == wanted => bytes,
            // Short, failed or stuck: this attachment is done with; what
            // was read is still exact.
            Ok(Ok(bytes)) => {
                *open = None;
                bytes
            }
            Ok(Err(err)) => {
                *open = None;
                return Err(err);
            }
            Err(_) => {
                *open = None;
                Vec::new()
            }
        };
        drop(open);
        let mut bytes = bytes;
        self.continue_from_memory(&mut bytes, start, wanted, max)
            .await?;
        Ok(Piece {
            start,
            bytes,
            dropped: start - from,
            total,
        })
    }

    /// `len` bytes of the spill file at `path` from offset `from` (fewer if
    /// the file ends first), reusing the open stream when it is at or
    /// before `from`.
    async fn read_spill(&self, path: &str, from: u64, len: usize) -> Result<Vec<u8>> {
        let Older::Spill(fs) = &self.older else {
            return Err(Error::io("read_output: this command has no spill file"));
        };
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
                chunks: fs.read_bytes(path).await?.chunks,
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

/// An open attachment of a durable command reading its retained stdout,
/// positioned at `offset` (the command's own offsets).
struct RetainedCursor {
    /// Held for as long as the stream is read.
    _attached: Attached,
    stream: ByteStream,
    /// The command offset of `pending[0]`.
    offset: u64,
    /// The unread rest of the last chunk.
    pending: Bytes,
}

impl RetainedCursor {
    /// Skips to `from` (not before `offset`) and reads `len` bytes, fewer
    /// only if the stream ends first.
    async fn read(&mut self, from: u64, len: usize) -> Result<Vec<u8>> {
        while self.offset + self.pending.len() as u64 <= from {
            self.offset += self.pending.len() as u64;
            match self.stream.next().await {
                Some(chunk) => self.pending = chunk?,
                None => {
                    self.pending = Bytes::new();
                    return Ok(Vec::new());
                }
            }
        }
        let mut out = Vec::with_capacity(len);
        let skip = (from - self.offset) as usize;
        self.pending = self.pending.slice(skip..);
        self.offset = from;
        loop {
            let take = (len - out.len()).min(self.pending.len());
            out.extend_from_slice(&self.pending[..take]);
            self.pending = self.pending.slice(take..);
            self.offset += take as u64;
            if out.len() == len {
                return Ok(out);
            }
            match self.stream.next().await {
                Some(chunk) => self.pending = chunk?,
                None => return Ok(out),
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
