//! The accounting of one output stream: total bytes, the collect-mode tail
//! and the spill copy. Written by whoever reads the child's pipe (a pump
//! task or the caller's pipe stream), read by `read_output`.

use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use dsh_plugin_api::subprocess::{OutputMode, OutputSnapshot};

use crate::spill::SpillFile;
use dsh_plugin_api::Bytes;
use dsh_provider_kit::tail::Tail;

#[derive(Debug)]
pub struct OutputState {
    total: AtomicU64,
    /// Collect mode only; its own total is authoritative there.
    tail: Option<Mutex<Tail>>,
    spill: Option<Mutex<SpillFile>>,
}

impl OutputState {
    pub fn new(mode: OutputMode, spill: Option<SpillFile>) -> OutputState {
        OutputState {
            total: AtomicU64::new(0),
            tail: match mode {
                OutputMode::Collect { limit } => Some(Mutex::new(Tail::new(limit))),
                _ => None,
            },
            spill: spill.map(Mutex::new),
        }
    }

    /// Accounts for `bytes` just read from the child.
    pub fn record(&self, bytes: &[u8]) {
        match &self.tail {
            Some(tail) => tail.lock().expect("tail lock").push(bytes),
            None => {
                self.total.fetch_add(bytes.len() as u64, Ordering::Relaxed);
            }
        }
        if let Some(spill) = &self.spill {
            spill.lock().expect("spill lock").write(bytes);
        }
    }

    /// Up to `max_len` retained bytes from `offset` (clamped into the
    /// retained range), with totals and spill info. Outside collect mode
    /// nothing is retained: the view is empty at `offset == total`, and
    /// `truncated` says whether any byte was produced (and so not kept).
    pub fn snapshot(&self, offset: u64, max_len: usize) -> OutputSnapshot {
        let (total, offset, bytes, start) = match &self.tail {
            Some(tail) => {
                let tail = tail.lock().expect("tail lock");
                let (offset, bytes) = tail.read(offset, max_len);
                (tail.total(), offset, bytes, tail.start())
            }
            None => {
                let total = self.total.load(Ordering::Relaxed);
                (total, total, Vec::new(), total)
            }
        };
        OutputSnapshot {
            total,
            offset,
            bytes: Bytes::from(bytes),
            truncated: start > 0,
            spill: self
                .spill
                .as_ref()
                .map(|spill| spill.lock().expect("spill lock").info()),
        }
    }
}
