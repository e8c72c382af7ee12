//! The daemon's process table: live processes by pid (what `List` shows) and the exits of the
//! last `retention` window, so a late `Connect` still learns how a process ended (envd keeps
//! them 30 s).

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use envd_proto::process::process_event::EndEvent;

use super::managed::ManagedProcess;

/// How a request names a process.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Selector {
    Pid(u32),
    Tag(String),
}

impl Selector {
    /// envd's `not_found` message for this selector.
    pub(crate) fn not_found_message(&self) -> String {
        match self {
            Selector::Pid(pid) => format!("process with pid {pid} not found"),
            Selector::Tag(tag) => format!("process with tag {tag} not found"),
        }
    }
}

/// A process that exited within the retention window.
#[derive(Debug, Clone)]
pub(crate) struct RetainedExit {
    pub pid: u32,
    pub tag: Option<String>,
    pub end: EndEvent,
    sequence: u64,
    expires: Instant,
}

#[derive(Default)]
struct State {
    live: BTreeMap<u32, Arc<ManagedProcess>>,
    retained: HashMap<u32, RetainedExit>,
    next_sequence: u64,
}

/// Live processes and recently retained exits.
pub(crate) struct ProcessTable {
    state: Mutex<State>,
    retention: Duration,
}

impl ProcessTable {
    pub(crate) fn new(retention: Duration) -> Self {
        Self {
            state: Mutex::new(State::default()),
            retention,
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// A fresh start-order number.
    pub(crate) fn next_sequence(&self) -> u64 {
        let mut state = self.lock();
        state.next_sequence += 1;
        state.next_sequence
    }

    /// Registers a started process, dropping retained exits that a `Connect` could otherwise
    /// confuse with it (same pid, or same tag).
    pub(crate) fn insert(&self, process: Arc<ManagedProcess>) {
        let mut state = self.lock();
        state.retained.remove(&process.pid);
        if let Some(tag) = &process.tag {
            state
                .retained
                .retain(|_, exit| exit.tag.as_deref() != Some(tag.as_str()));
        }
        state.live.insert(process.pid, process);
    }

    /// Moves an exited process from the live set to the retention cache (unless the pid was
    /// already taken over by a newer process).
    pub(crate) fn retire(&self, process: &Arc<ManagedProcess>, end: &EndEvent) {
        let now = Instant::now();
        let mut state = self.lock();
        let is_current = state
            .live
            .get(&process.pid)
            .is_some_and(|current| Arc::ptr_eq(current, process));
        if !is_current {
            return;
        }
        state.live.remove(&process.pid);
        state.retained.retain(|_, exit| exit.expires > now);
        if !self.retention.is_zero() {
            state.retained.insert(
                process.pid,
                RetainedExit {
                    pid: process.pid,
                    tag: process.tag.clone(),
                    end: end.clone(),
                    sequence: process.sequence,
                    // A retention too long to represent means "until the daemon stops".
                    expires: now
                        .checked_add(self.retention)
                        .unwrap_or_else(|| now + Duration::from_secs(100 * 365 * 24 * 3600)),
                },
            );
        }
    }

    /// The live process `selector` names; for a tag, the earliest started one.
    pub(crate) fn live(&self, selector: &Selector) -> Option<Arc<ManagedProcess>> {
        let state = self.lock();
        match selector {
            Selector::Pid(pid) => state.live.get(pid).cloned(),
            Selector::Tag(tag) => state
                .live
                .values()
                .filter(|process| process.tag.as_deref() == Some(tag.as_str()))
                .min_by_key(|process| process.sequence)
                .cloned(),
        }
    }

    /// The retained exit `selector` names, if it has not expired.
    pub(crate) fn retained(&self, selector: &Selector) -> Option<RetainedExit> {
        let now = Instant::now();
        let mut state = self.lock();
        state.retained.retain(|_, exit| exit.expires > now);
        match selector {
            Selector::Pid(pid) => state.retained.get(pid).cloned(),
            Selector::Tag(tag) => state
                .retained
                .values()
                .filter(|exit| exit.tag.as_deref() == Some(tag.as_str()))
                .min_by_key(|exit| exit.sequence)
                .cloned(),
        }
    }

    /// Every live process, by pid.
    pub(crate) fn list(&self) -> Vec<Arc<ManagedProcess>> {
        self.lock().live.values().cloned().collect()
    }
}
