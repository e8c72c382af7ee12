//! The handles the tools remember — commands and terminals — by id,
//! within a bound.
//!
//! Ids are `<prefix>-<n>` with `n` counting up from 1 and never reused.
//! The registry keeps at most its bound of *live* handles: a start beyond
//! it is refused with `Busy`. Finished handles stay (readable) until a
//! newer insertion pushes the oldest finished one out — beyond the bound
//! of handles, or while what the finished ones keep in the world (spill
//! files) exceeds its byte budget — which is then retired (what is left of
//! it ended, its files removed) on a task of its own, so a dropped call
//! cannot cut that short. [`Registry::shutdown`]
//! retires everything, joins those tasks, and accepts nothing new.

use std::collections::BTreeMap;
use std::future::Future;
use std::sync::{Arc, Mutex, MutexGuard};

use dsh_plugin_api::{Error, ErrorKind, Result};
use tokio::task::JoinHandle;

use super::errors::unknown_id;

/// What the registry needs of a handle.
pub(crate) trait Tracked: Send + Sync + 'static {
    /// The number the handle was reserved under.
    fn seq(&self) -> u64;
    /// Whether its program has ended (finished handles may be pushed out).
    fn is_finished(&self) -> bool;
    /// Bytes a finished handle keeps in the world until it is retired.
    fn kept_bytes(&self) -> u64;
    /// Lets the handle go — ends what is left of it in the world and
    /// releases what it holds there, or, for what is meant to outlive the
    /// tools (a durable command at [`Retire::Shutdown`]), only detaches
    /// from it; returns what could not be done.
    fn retire(self: Arc<Self>, why: Retire) -> impl Future<Output = Vec<Error>> + Send + 'static;
}

/// Why the registry lets a handle go.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Retire {
    /// Newer handles pushed it out (it had finished).
    PushedOut,
    /// The tools shut down.
    Shutdown,
}

/// How a registry names and bounds its handles.
pub(crate) struct Kind {
    /// The id prefix (`cmd`, `term`).
    pub prefix: &'static str,
    /// What a handle is called in messages (`command`, `terminal`).
    pub noun: &'static str,
    /// The tool that lists the handles, for hints.
    pub list_tool: &'static str,
    /// The tool that ends one, for hints.
    pub end_tool: &'static str,
    /// The most handles kept.
    pub max: usize,
    /// The most bytes finished handles keep in the world, together (the
    /// newest finished one stays whatever it keeps).
    pub max_kept_bytes: u64,
}

pub(crate) struct Registry<T> {
    kind: Kind,
    state: Mutex<State<T>>,
}

struct State<T> {
    handles: BTreeMap<u64, Arc<T>>,
    next_seq: u64,
    closed: bool,
    /// Retirements of pushed-out handles still under way.
    retiring: Vec<JoinHandle<Vec<Error>>>,
}

impl<T: Tracked> Registry<T> {
    pub(crate) fn new(kind: Kind) -> Registry<T> {
        Registry {
            kind,
            state: Mutex::new(State {
                handles: BTreeMap::new(),
                next_seq: 1,
                closed: false,
                retiring: Vec::new(),
            }),
        }
    }

    fn state(&self) -> MutexGuard<'_, State<T>> {
        // Every update is a single map or field operation, so a panic
        // elsewhere cannot leave the state half-updated: poisoning is
        // ignored.
        self.state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// The id of the handle reserved under `seq`.
    pub(crate) fn id(&self, seq: u64) -> String {
        format!("{}-{seq}", self.kind.prefix)
    }

    fn closed(&self, tool: &str) -> Error {
        Error::closed(format!("{tool}: the tools are shut down"))
    }

    /// A number for a handle about to start, unless the tools are shut down
    /// or the bound of live handles is reached.
    pub(crate) fn reserve(&self, tool: &str) -> Result<u64> {
        let mut state = self.state();
        if state.closed {
            return Err(self.closed(tool));
        }
        let live = state
            .handles
            .values()
            .filter(|handle| !handle.is_finished())
            .count();
        if live >= self.kind.max {
            let Kind {
                noun,
                list_tool,
                end_tool,
                ..
            } = self.kind;
            return Err(Error::new(
                ErrorKind::Busy,
                format!(
                    "{tool}: {live} {noun}s are running, the most the tools keep; end some with {end_tool} ({list_tool} shows them)"
                ),
            ));
        }
        let seq = state.next_seq;
        state.next_seq += 1;
        Ok(seq)
    }

    /// Remembers `handle`, pushing out (and retiring) the oldest finished
    /// handles beyond the bound. After shutdown, retires `handle` at once
    /// and fails with `Closed`.
    pub(crate) fn insert(&self, tool: &str, handle: Arc<T>) -> Result<()> {
        let mut state = self.state();
        if state.closed {
            drop(tokio::spawn(handle.retire(Retire::Shutdown)));
            return Err(self.closed(tool));
        }
        state.handles.insert(handle.seq(), handle);
        state.retiring.retain(|task| !task.is_finished());
        loop {
            let finished: Vec<(u64, u64)> = state
                .handles
                .iter()
                .filter(|(_, handle)| handle.is_finished())
                .map(|(seq, handle)| (*seq, handle.kept_bytes()))
                .collect();
            let kept: u64 = finished.iter().map(|(_, bytes)| bytes).sum();
            let over = state.handles.len() > self.kind.max
                || (kept > self.kind.max_kept_bytes && finished.len() > 1);
            let oldest = finished.first().map(|(seq, _)| *seq);
            let Some(handle) = oldest
                .filter(|_| over)
                .and_then(|seq| state.handles.remove(&seq))
            else {
                break;
            };
            state
                .retiring
                .push(tokio::spawn(handle.retire(Retire::PushedOut)));
        }
        Ok(())
    }

    /// The handle with `id`, or `NotFound` naming it.
    pub(crate) fn get(&self, tool: &str, id: &str) -> Result<Arc<T>> {
        id.strip_prefix(self.kind.prefix)
            .and_then(|rest| rest.strip_prefix('-'))
            .and_then(|seq| seq.parse::<u64>().ok())
            .and_then(|seq| self.state().handles.get(&seq).cloned())
            .ok_or_else(|| {
                let hint = format!(
                    "never started, or forgotten after newer {}s; {} shows the known ids",
                    self.kind.noun, self.kind.list_tool
                );
                unknown_id(tool, self.kind.noun, id, &hint)
            })
    }

    /// The first remembered handle `matches` accepts.
    pub(crate) fn find(&self, matches: impl Fn(&T) -> bool) -> Option<Arc<T>> {
        self.state()
            .handles
            .values()
            .find(|handle| matches(handle))
            .cloned()
    }

    /// Forgets the handle reserved under `seq`, if it is still there.
    pub(crate) fn remove(&self, seq: u64) -> Option<Arc<T>> {
        self.state().handles.remove(&seq)
    }

    /// Every remembered handle, oldest first.
    pub(crate) fn all(&self) -> Vec<Arc<T>> {
        self.state().handles.values().cloned().collect()
    }

    /// Refuses new handles from now on, retires every remembered one and
    /// joins the retirements under way. Returns what could not be done;
    /// a second call has nothing left to do.
    pub(crate) async fn shutdown(&self) -> Vec<Error> {
        let (handles, retiring) = {
            let mut state = self.state();
            state.closed = true;
            (
                std::mem::take(&mut state.handles),
                std::mem::take(&mut state.retiring),
            )
        };
        let retired = futures::future::join_all(
            handles
                .into_values()
                .map(|handle| handle.retire(Retire::Shutdown)),
        )
        .await;
        let mut failures: Vec<Error> = retired.into_iter().flatten().collect();
        for task in retiring {
            match task.await {
                Ok(more) => failures.extend(more),
                Err(err) => failures.push(Error::io(format!(
                    "shutdown: retiring a forgotten {} failed: {err}",
                    self.kind.noun
                ))),
            }
        }
        failures
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicBool, Ordering};

    use super::*;

    struct Fake {
        seq: u64,
        finished: AtomicBool,
        kept: u64,
        retired: Arc<Mutex<Vec<u64>>>,
    }

    impl Tracked for Fake {
        fn seq(&self) -> u64 {
            self.seq
        }
        fn is_finished(&self) -> bool {
            self.finished.load(Ordering::Relaxed)
        }
        fn kept_bytes(&self) -> u64 {
            self.kept
        }
        async fn retire(self: Arc<Self>, _why: Retire) -> Vec<Error> {
            self.retired.lock().unwrap().push(self.seq);
            vec![Error::io(format!("retired {}", self.seq))]
        }
    }

    fn registry(max: usize) -> Registry<Fake> {
        Registry::new(Kind {
            prefix: "x",
            noun: "thing",
            list_tool: "list_things",
            end_tool: "end_thing",
            max,
            max_kept_bytes: 100,
        })
    }

    fn start(registry: &Registry<Fake>, retired: &Arc<Mutex<Vec<u64>>>) -> Result<Arc<Fake>> {
        start_keeping(registry, retired, 0)
    }

    fn start_keeping(
        registry: &Registry<Fake>,
        retired: &Arc<Mutex<Vec<u64>>>,
        kept: u64,
    ) -> Result<Arc<Fake>> {
        let seq = registry.reserve("start")?;
        let fake = Arc::new(Fake {
            seq,
            finished: AtomicBool::new(false),
            kept,
            retired: Arc::clone(retired),
        });
        registry.insert("start", Arc::clone(&fake))?;
        Ok(fake)
    }

    #[tokio::test]
    async fn the_bound_refuses_live_handles_and_pushes_out_the_oldest_finished() {
        let retired = Arc::default();
        let registry = registry(2);
        let first = start(&registry, &retired).unwrap();
        let second = start(&registry, &retired).unwrap();
        let err = start(&registry, &retired).err().unwrap();
        assert_eq!(err.kind(), ErrorKind::Busy);
        assert!(err.message().contains("end_thing"), "{}", err.message());

        second.finished.store(true, Ordering::Relaxed);
        first.finished.store(true, Ordering::Relaxed);
        start(&registry, &retired).unwrap();
        assert!(registry.get("read", "x-1").is_err());
        assert_eq!(registry.get("read", "x-2").unwrap().seq, 2);
        assert_eq!(registry.all().len(), 2);

        // Shutdown retires the rest and reports the pushed-out one's
        // failures too.
        let mut failures: Vec<String> = registry
            .shutdown()
            .await
            .iter()
            .map(|err| err.message().to_owned())
            .collect();
        failures.sort();
        assert_eq!(failures, ["retired 1", "retired 2", "retired 3"]);
        let mut retired = retired.lock().unwrap().clone();
        retired.sort();
        assert_eq!(retired, [1, 2, 3]);
    }

    /// Finished handles keeping more than the budget together are pushed
    /// out oldest first when the next handle arrives, but the newest
    /// finished one stays.
    #[tokio::test]
    async fn what_finished_handles_keep_is_bounded_in_bytes() {
        let retired = Arc::default();
        let registry = registry(8);
        let finish = |kept| {
            let fake = start_keeping(&registry, &retired, kept).unwrap();
            fake.finished.store(true, Ordering::Relaxed);
        };
        let seqs = || -> Vec<u64> { registry.all().iter().map(|fake| fake.seq).collect() };
        finish(60);
        finish(30);
        finish(50);
        assert_eq!(seqs(), [1, 2, 3], "pushed out only when the next arrives");
        finish(500);
        // At its arrival 140 were kept: the oldest (60) went; 80 fit.
        assert_eq!(seqs(), [2, 3, 4]);
        start(&registry, &retired).unwrap();
        // 580 kept: 2 and 3 go; 4 stays, the newest finished, alone over.
        assert_eq!(seqs(), [4, 5]);
        registry.shutdown().await;
        let mut retired = retired.lock().unwrap().clone();
        retired.sort();
        assert_eq!(retired, [1, 2, 3, 4, 5]);
    }

    #[tokio::test]
    async fn unknown_ids_are_not_found_and_shutdown_refuses_new_handles() {
        let retired = Arc::default();
        let registry = registry(4);
        start(&registry, &retired).unwrap();
        for id in ["x-9", "x1", "y-1", "x-", "x--1", ""] {
            let err = registry.get("read", id).err().unwrap();
            assert_eq!(err.kind(), ErrorKind::NotFound, "{id}");
            assert_eq!(err.subject(), Some(id));
        }
        assert_eq!(registry.id(7), "x-7");
        assert_eq!(registry.shutdown().await.len(), 1);
        assert_eq!(
            start(&registry, &retired).err().unwrap().kind(),
            ErrorKind::Closed
        );
        assert!(registry.shutdown().await.is_empty());
    }
}
