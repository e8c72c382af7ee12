//! Retention of one output stream: append-only segment files named by the
//! absolute offset of their first byte (`stdout.00000000000000000000`),
//! each filled to exactly the segment size before the next is created.
//! The oldest segment is dropped only while the bytes left would still be
//! at least `retain`, so the last `retain` bytes are always kept (and the
//! newest segment never goes).
//!
//! Readers need no lock: a segment only grows until its successor exists,
//! and one that is dropped stays readable through a descriptor opened
//! before. A segment a live hold still needs is never dropped
//! ([`super::hold`]); once keeping them costs [`HOLD_SLACK`] segments
//! beyond `retain`, the stream is blocked: the supervisor stops reading
//! the command's pipe until the holder catches up.

use std::collections::VecDeque;
use std::fs::File;
use std::io::{self, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use super::hold;
use super::store::segment_name;

/// The smallest segment.
const MIN_SEGMENT: u64 = 64 * 1024;
/// Segments kept beyond `retain` for a holder before the stream blocks.
const HOLD_SLACK: u64 = 4;
/// How long a look at the holds stands before the next write looks again
/// (a look is a directory listing; a stream behind a holder would look at
/// every chunk).
const HOLDS_FRESH: Duration = Duration::from_millis(2);

/// The segment size for `retain`: a quarter of it, at least 64 KiB.
pub fn segment_size(retain: u64) -> u64 {
    (retain / 4).max(MIN_SEGMENT)
}

/// The writer of one stream's segments.
pub struct Retention {
    dir: PathBuf,
    stream: usize,
    segment_size: u64,
    retain: u64,
    /// Retained segments, oldest first: (start, length).
    segments: VecDeque<(u64, u64)>,
    /// The newest segment, open for appending.
    file: File,
    /// Bytes retained so far (the stream's total).
    total: u64,
    /// The first write error; bytes after it are read but not retained.
    failed: Option<io::Error>,
    /// A holder needs segments beyond the slack: read no more for now.
    blocked: bool,
    /// The last look at the holds: when, and the lowest offset held.
    holds_seen: Option<(Instant, Option<u64>)>,
}

fn create(dir: &Path, stream: usize, start: u64) -> io::Result<File> {
    std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(dir.join(segment_name(stream, start)))
}

impl Retention {
    /// Creates the first segment (offset 0) of `stream` in `dir`.
    pub fn create(dir: &Path, stream: usize, retain: u64) -> io::Result<Retention> {
        Ok(Retention {
            dir: dir.to_owned(),
            stream,
            segment_size: segment_size(retain),
            retain,
            segments: VecDeque::from([(0, 0)]),
            file: create(dir, stream, 0)?,
            total: 0,
            failed: None,
            blocked: false,
            holds_seen: None,
        })
    }

    /// Looks at the holds again when blocked; returns whether it still is.
    pub fn recheck(&mut self) -> bool {
        if self.blocked {
            self.drop_old();
        }
        self.blocked
    }

    /// Bytes retained so far.
    pub fn total(&self) -> u64 {
        self.total
    }

    /// Appends `data`, starting new segments and dropping old ones as
    /// needed. After a write error nothing more is retained (the total
    /// stays what the segments hold).
    pub fn write(&mut self, mut data: &[u8]) {
        while !data.is_empty() && self.failed.is_none() {
            if let Err(err) = self.write_some(&mut data) {
                self.failed = Some(err);
            }
        }
    }

    fn write_some(&mut self, data: &mut &[u8]) -> io::Result<()> {
        let (_, len) = *self.segments.back().expect("never empty");
        if len >= self.segment_size {
            self.file = create(&self.dir, self.stream, self.total)?;
            self.segments.push_back((self.total, 0));
            self.drop_old();
        }
        let back = self.segments.back_mut().expect("never empty");
        let room = (self.segment_size - back.1) as usize;
        let take = room.min(data.len());
        self.file.write_all(&data[..take])?;
        back.1 += take as u64;
        self.total += take as u64;
        *data = &data[take..];
        self.drop_old();
        Ok(())
    }

    /// The lowest offset a live hold needs, looked at again once the last
    /// look is older than [`HOLDS_FRESH`].
    fn lowest_hold(&mut self) -> Option<u64> {
        let now = Instant::now();
        match self.holds_seen {
            Some((at, lowest)) if now < at + HOLDS_FRESH => lowest,
            _ => {
                let lowest = hold::lowest(&self.dir, self.stream);
                self.holds_seen = Some((now, lowest));
                lowest
            }
        }
    }

    fn drop_old(&mut self) {
        let mut retained: u64 = self.segments.iter().map(|(_, len)| len).sum();
        // Looked at only when a segment is due to go.
        let mut held: Option<Option<u64>> = None;
        self.blocked = false;
        while self.segments.len() > 1 {
            let (start, len) = self.segments[0];
            if retained - len < self.retain {
                break;
            }
            let lowest = match held {
                Some(lowest) => lowest,
                None => *held.insert(self.lowest_hold()),
            };
            if lowest.is_some_and(|low| low < start + len) {
                self.blocked = retained >= self.retain + HOLD_SLACK * self.segment_size;
                break;
            }
            // A failed unlink leaves a segment readers still find: harmless.
            let _ = std::fs::remove_file(self.dir.join(segment_name(self.stream, start)));
            self.segments.pop_front();
            retained -= len;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::durable::store;

    #[test]
    fn the_last_retain_bytes_are_always_kept() {
        let dir = tempfile::tempdir().unwrap();
        let retain = 100_000;
        let size = segment_size(retain);
        assert_eq!(size, MIN_SEGMENT);
        let mut r = Retention::create(dir.path(), 0, retain).unwrap();
        let chunk: Vec<u8> = (0..7000u32).map(|i| (i % 251) as u8).collect();
        let mut all = Vec::new();
        for _ in 0..100 {
            r.write(&chunk);
            all.extend_from_slice(&chunk);
            let (from, total) = store::extent(dir.path(), 0);
            assert_eq!(total, all.len() as u64);
            assert!(total - from >= retain.min(total), "{from} {total}");
            // Never more than one segment beyond what retain needs.
            assert!(total - from < retain + 2 * size, "{from} {total}");
            // The retained bytes are the stream's.
            let mut kept = Vec::new();
            for start in store::segments(dir.path(), 0).unwrap() {
                kept.extend(std::fs::read(dir.path().join(segment_name(0, start))).unwrap());
            }
            assert_eq!(kept, all[from as usize..]);
        }
        assert!(store::extent(dir.path(), 0).0 > 0);
        assert_eq!(r.total(), all.len() as u64);
    }

    #[test]
    fn a_live_hold_keeps_what_it_needs_and_blocks_past_the_slack() {
        let dir = tempfile::tempdir().unwrap();
        let retain = MIN_SEGMENT * 4;
        let mut r = Retention::create(dir.path(), 0, retain).unwrap();
        let hold = hold::Hold::publish(dir.path(), [0, 0]).expect("hold");
        let chunk = vec![7u8; 4096];
        let mut written = 0;
        while !r.blocked {
            r.write(&chunk);
            written += chunk.len() as u64;
            assert!(written < 100 * retain, "never blocked");
        }
        assert_eq!(
            store::extent(dir.path(), 0).0,
            0,
            "nothing the holder needs was dropped"
        );
        assert!(written >= retain + HOLD_SLACK * MIN_SEGMENT);
        assert!(r.recheck(), "still blocked while the holder stays at 0");
        drop(hold);
        std::thread::sleep(HOLDS_FRESH);
        assert!(!r.recheck(), "a gone holder no longer blocks");
        assert!(store::extent(dir.path(), 0).0 > 0, "and old segments go");
    }
}
