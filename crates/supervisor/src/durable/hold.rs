//! Holds: a follower whose reader must not miss a byte (a piped
//! attachment, lossless like a pipe) publishes how far it has copied in
//! `hold.<pid>`. Retention keeps every segment a live hold still needs, and
//! once that costs more than its slack the supervisor stops reading the
//! command's pipe, so a slow reader slows the writer as a pipe would. A
//! hold whose process is gone (its pid's start time differs) no longer
//! counts, and is removed by the next reader of holds.
//!
//! The record is one fixed-width line rewritten in place
//! (`<starttime> <stdout offset> <stderr offset> <check>`, 20 digits
//! each): a rename per update cost milliseconds on this machine's
//! filesystems, and a follower updates after every megabyte. A reader that
//! catches a line half rewritten (the check does not match) reads again,
//! and after a few torn reads counts the hold as needing everything.

use std::fs::File;
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use super::store;

const PREFIX: &str = "hold.";
/// Length of the record: four 20-digit numbers, separated and ended.
const RECORD: usize = 4 * 21;
/// Reads of a torn record before it counts as holding everything.
const TORN_RETRIES: usize = 3;

/// This follower's hold, removed when dropped.
pub struct Hold {
    path: PathBuf,
    file: File,
    starttime: u64,
    published: [u64; 2],
}

fn check(starttime: u64, pos: [u64; 2]) -> u64 {
    starttime
        .wrapping_mul(0x9E37_79B9_7F4A_7C15)
        .wrapping_add(pos[0].rotate_left(21))
        .wrapping_add(pos[1].rotate_left(42))
        ^ 0x5bd1_e995
}

fn record(starttime: u64, pos: [u64; 2]) -> String {
    format!(
        "{starttime:020} {:020} {:020} {:020}\n",
        pos[0],
        pos[1],
        check(starttime, pos)
    )
}

impl Hold {
    /// Publishes the hold at `pos`; `None` if this process's start time
    /// cannot be read or the file cannot be written (the follower then
    /// follows without holding).
    pub fn publish(cmd_dir: &Path, pos: [u64; 2]) -> Option<Hold> {
        let pid = std::process::id();
        let path = cmd_dir.join(format!("{PREFIX}{pid}"));
        let file = std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o600)
            .custom_flags(libc::O_NOFOLLOW)
            .open(&path)
            .ok()?;
        let hold = Hold {
            path,
            file,
            starttime: store::starttime_of(pid).ok()?,
            published: pos,
        };
        hold.write().ok()?;
        Some(hold)
    }

    /// Removes process `pid`'s hold in `cmd_dir`, if it has one.
    pub fn release(cmd_dir: &Path, pid: u32) {
        let _ = std::fs::remove_file(cmd_dir.join(format!("{PREFIX}{pid}")));
    }

    /// Moves the hold to `pos` (a no-op when it is already there).
    pub fn advance(&mut self, pos: [u64; 2]) {
        if pos != self.published {
            self.published = pos;
            // A failed update keeps the older, smaller offsets: safe.
            let _ = self.write();
        }
    }

    fn write(&self) -> std::io::Result<()> {
        self.file
            .write_all_at(record(self.starttime, self.published).as_bytes(), 0)
    }
}

impl Drop for Hold {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

/// What one hold file says: `None` for a stale hold (to remove), else the
/// offsets it needs (0 for one that stays torn: it holds everything).
fn read(path: &Path, pid: u32) -> Option<[u64; 2]> {
    for _ in 0..TORN_RETRIES {
        let bytes = std::fs::read(path).ok()?;
        let numbers: Vec<u64> = std::str::from_utf8(&bytes)
            .unwrap_or_default()
            .split_whitespace()
            .filter_map(|word| word.parse().ok())
            .collect();
        if let [starttime, out, err, sum] = numbers[..]
            && bytes.len() == RECORD
            && sum == check(starttime, [out, err])
        {
            return store::alive(pid, starttime).then_some([out, err]);
        }
    }
    // Torn every time, or not written yet: hold everything while its
    // process lives.
    store::starttime_of(pid).ok().map(|_| [0, 0])
}

/// The lowest offset of `stream` a live hold in `cmd_dir` still needs
/// (`None`: no live hold). Stale holds are removed.
pub fn lowest(cmd_dir: &Path, stream: usize) -> Option<u64> {
    let entries = std::fs::read_dir(cmd_dir).ok()?;
    let mut lowest: Option<u64> = None;
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(pid) = name
            .to_str()
            .and_then(|name| name.strip_prefix(PREFIX))
            .and_then(|pid| pid.parse::<u32>().ok())
        else {
            continue;
        };
        match read(&entry.path(), pid) {
            Some(pos) => lowest = Some(lowest.map_or(pos[stream], |low| low.min(pos[stream]))),
            None => {
                let _ = std::fs::remove_file(entry.path());
            }
        }
    }
    lowest
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_live_hold_counts_until_dropped_and_a_stale_one_is_removed() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(lowest(dir.path(), 0), None);
        let mut hold = Hold::publish(dir.path(), [10, 20]).expect("published");
        assert_eq!(
            (lowest(dir.path(), 0), lowest(dir.path(), 1)),
            (Some(10), Some(20))
        );
        hold.advance([15, 20]);
        assert_eq!(lowest(dir.path(), 0), Some(15));
        // A hold of a process that cannot exist (beyond the largest pid).
        let stale = dir.path().join("hold.4194305");
        std::fs::write(&stale, record(1, [0, 0])).unwrap();
        assert_eq!(lowest(dir.path(), 0), Some(15));
        assert!(!stale.exists(), "the stale hold is removed");
        drop(hold);
        assert_eq!(lowest(dir.path(), 0), None);
    }

    #[test]
    fn a_torn_record_of_a_live_process_holds_everything() {
        let dir = tempfile::tempdir().unwrap();
        let pid = std::process::id();
        let path = dir.path().join(format!("{PREFIX}{pid}"));
        let starttime = store::starttime_of(pid).unwrap();
        let mut torn = record(starttime, [500, 600]).into_bytes();
        torn[30] = b'9';
        std::fs::write(&path, &torn).unwrap();
        assert_eq!(lowest(dir.path(), 0), Some(0));
        std::fs::write(&path, record(starttime, [500, 600])).unwrap();
        assert_eq!(lowest(dir.path(), 1), Some(600));
    }
}
