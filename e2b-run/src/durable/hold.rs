//! Holds: a follower whose reader must not miss a byte (a piped
//! attachment, lossless like a pipe) publishes how far it has copied in
//! `hold.<pid>` (`<starttime> <stdout offset> <stderr offset>`, replaced
//! atomically). Retention keeps every segment a live hold still needs, and
//! once that costs more than [`super::retain`]'s slack the supervisor stops
//! reading the command's pipe, so a slow reader slows the writer as a pipe
//! would. A hold whose process is gone (its pid's start time differs) no
//! longer counts, and is removed by the next reader of holds.

use std::path::Path;

use super::store;

const PREFIX: &str = "hold.";

/// This follower's hold in `cmd_dir`, removed when dropped.
pub struct Hold<'a> {
    cmd_dir: &'a Path,
    name: String,
    starttime: u64,
    published: [u64; 2],
}

impl<'a> Hold<'a> {
    /// Publishes the hold at `pos`; `None` if this process's start time
    /// cannot be read or the file cannot be written (the follower then
    /// follows without holding).
    pub fn publish(cmd_dir: &'a Path, pos: [u64; 2]) -> Option<Hold<'a>> {
        let pid = std::process::id();
        let hold = Hold {
            cmd_dir,
            name: format!("{PREFIX}{pid}"),
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
        let [out, err] = self.published;
        store::write_atomic(
            self.cmd_dir,
            &self.name,
            &format!("{} {out} {err}\n", self.starttime),
        )
    }
}

impl Drop for Hold<'_> {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(self.cmd_dir.join(&self.name));
    }
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
        let text = std::fs::read_to_string(entry.path()).unwrap_or_default();
        let numbers: Vec<u64> = text
            .split_whitespace()
            .filter_map(|word| word.parse().ok())
            .collect();
        match numbers[..] {
            [starttime, out, err] if store::alive(pid, starttime) => {
                let offset = [out, err][stream];
                lowest = Some(lowest.map_or(offset, |low| low.min(offset)));
            }
            _ => {
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
        // A hold of a process that is not (or no longer) what it says.
        // A hold of a process that cannot exist (beyond the largest pid).
        let stale = dir.path().join("hold.4194305");
        std::fs::write(&stale, "1 0 0\n").unwrap();
        assert_eq!(lowest(dir.path(), 0), Some(15));
        assert!(!stale.exists(), "the stale hold is removed");
        drop(hold);
        assert_eq!(lowest(dir.path(), 0), None);
    }
}
