//! The host's account of one output stream: the byte count, the collect
//! tail and what is known of the spill copy the helper writes.

use std::sync::Mutex;

use dsh_plugin_api::subprocess::{OutputMode, OutputSnapshot, SpillInfo};

use dsh_plugin_api::Bytes;
use dsh_provider_kit::tail::Tail;

#[derive(Debug)]
struct Account {
    total: u64,
    tail: Option<Tail>,
    /// The total when the helper reported a failed spill write: the copy
    /// ends there.
    spill_cut: Option<u64>,
}

/// One stream's account, shared by the supervisor (which records) and the
/// handle (which reads).
#[derive(Debug)]
pub struct OutputState {
    account: Mutex<Account>,
    /// The spill file's path in the sandbox and the limit of the copy.
    spill: Option<(String, u64)>,
}

impl OutputState {
    pub fn new(mode: OutputMode, spill: Option<(String, u64)>) -> OutputState {
        OutputState {
            account: Mutex::new(Account {
                total: 0,
                tail: match mode {
                    OutputMode::Collect { limit } => Some(Tail::new(limit)),
                    _ => None,
                },
                spill_cut: None,
            }),
            spill,
        }
    }

    fn account(&self) -> std::sync::MutexGuard<'_, Account> {
        self.account.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Accounts for bytes the command wrote (kept when collecting).
    pub fn record(&self, bytes: &[u8]) {
        let mut account = self.account();
        account.total += bytes.len() as u64;
        if let Some(tail) = account.tail.as_mut() {
            tail.push(bytes);
        }
    }

    /// Accounts for bytes that were counted but not relayed.
    pub fn count(&self, count: u64) {
        self.account().total += count;
    }

    /// The helper could not write the spill copy any further.
    pub fn spill_failed(&self) {
        let mut account = self.account();
        let total = account.total;
        account.spill_cut.get_or_insert(total);
    }

    /// Up to `max_len` kept bytes from `offset` (clamped into the kept
    /// range), with totals and spill info. Outside collect mode nothing is
    /// kept: the view is empty at `offset == total` and `truncated` says
    /// whether any byte was produced.
    pub fn snapshot(&self, offset: u64, max_len: usize) -> OutputSnapshot {
        let account = self.account();
        let (offset, bytes, start) = match &account.tail {
            Some(tail) => {
                let (offset, bytes) = tail.read(offset, max_len);
                (offset, bytes, tail.start())
            }
            None => (account.total, Vec::new(), account.total),
        };
        OutputSnapshot {
            total: account.total,
            offset,
            bytes: Bytes::from(bytes),
            truncated: start > 0,
            spill: self.spill.as_ref().map(|(path, limit)| {
                // The helper copies every byte it relays or counts, up to
                // the limit, unless a write failed.
                let copied = account.spill_cut.unwrap_or(account.total);
                SpillInfo {
                    path: path.clone(),
                    len: copied.min(*limit),
                    complete: account.spill_cut.is_none() && account.total <= *limit,
                }
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn collect_keeps_a_tail_others_only_count() {
        let collect = OutputState::new(OutputMode::Collect { limit: 4 }, None);
        collect.record(b"abcdef");
        let snap = collect.snapshot(0, 100);
        assert_eq!(
            (snap.total, snap.offset, &snap.bytes[..], snap.truncated),
            (6, 2, &b"cdef"[..], true)
        );
        let null = OutputState::new(OutputMode::Null, None);
        null.count(10);
        null.record(b"xy");
        let snap = null.snapshot(0, 100);
        assert_eq!((snap.total, snap.offset, snap.truncated), (12, 12, true));
        assert!(snap.bytes.is_empty());
        let silent = OutputState::new(OutputMode::Pipe, None).snapshot(0, 1);
        assert!(!silent.truncated && silent.total == 0);
    }

    #[test]
    fn spill_info_follows_the_total_and_the_limit() {
        let state = OutputState::new(OutputMode::Null, Some(("/tmp/s/1.stdout".into(), 10)));
        state.count(10);
        let spill = state.snapshot(0, 0).spill.unwrap();
        assert_eq!((spill.len, spill.complete), (10, true));
        state.count(1);
        let spill = state.snapshot(0, 0).spill.unwrap();
        assert_eq!((spill.len, spill.complete), (10, false));
        let failing = OutputState::new(OutputMode::Null, Some(("/x".into(), 10)));
        failing.count(3);
        failing.spill_failed();
        failing.count(4);
        let spill = failing.snapshot(0, 0).spill.unwrap();
        assert_eq!((spill.len, spill.complete), (3, false));
    }
}
