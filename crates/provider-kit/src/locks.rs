//! Per-target serialisation of mutations.
//!
//! The seams promise that mutations of one target (write, edit, remove,
//! rename) through one provider process never interleave. A provider keeps
//! one process-wide [`TargetLocks`] table in a `static`, keyed by whatever
//! names a target uniquely in its world (a canonical path; a sandbox and a
//! canonical path), and takes the target's lock around its commit point.
//! Entries live only while someone holds or awaits them. Other processes
//! are not covered: guards check their effects.

use std::collections::HashMap;
use std::hash::Hash;
use std::sync::{Arc, LazyLock, Mutex, PoisonError};

use tokio::sync::{Mutex as AsyncMutex, OwnedMutexGuard};

/// Above this many entries, acquiring a lock first sweeps entries nobody
/// holds (left behind by lock futures dropped while waiting).
const SWEEP_ABOVE: usize = 256;

type Slot = Arc<AsyncMutex<()>>;
type Table<K> = Mutex<HashMap<K, Slot>>;

/// A table of per-target async locks; meant to live in a `static`:
///
/// ```
/// use dsh_provider_kit::locks::TargetLocks;
/// static LOCKS: TargetLocks<String> = TargetLocks::new();
/// # async fn f() { let _held = LOCKS.lock("/w/a".to_owned()).await; }
/// ```
pub struct TargetLocks<K> {
    table: LazyLock<Table<K>>,
}

impl<K> std::fmt::Debug for TargetLocks<K> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TargetLocks").finish_non_exhaustive()
    }
}

impl<K> TargetLocks<K> {
    /// An empty table (allocates on first use).
    pub const fn new() -> TargetLocks<K> {
        TargetLocks {
            table: LazyLock::new(|| Mutex::new(HashMap::new())),
        }
    }
}

impl<K> Default for TargetLocks<K> {
    fn default() -> Self {
        TargetLocks::new()
    }
}

/// Exclusive access to one target; released on drop (from any thread, no
/// runtime needed).
pub struct TargetLock<K: Hash + Eq + 'static> {
    guard: Option<OwnedMutexGuard<()>>,
    key: K,
    table: &'static TargetLocks<K>,
}

impl<K: Hash + Eq + 'static> std::fmt::Debug for TargetLock<K> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TargetLock").finish_non_exhaustive()
    }
}

impl<K: Hash + Eq + Clone + Ord + 'static> TargetLocks<K> {
    /// Waits until no other mutation holds `target`, then holds it.
    ///
    /// Dropping the returned future while it waits gives up the place in
    /// line and holds nothing.
    pub async fn lock(&'static self, target: K) -> TargetLock<K> {
        let slot = {
            let mut table = self.table.lock().unwrap_or_else(PoisonError::into_inner);
            if table.len() > SWEEP_ABOVE {
                table.retain(|_, slot| Arc::strong_count(slot) > 1);
            }
            table.entry(target.clone()).or_default().clone()
        };
        TargetLock {
            guard: Some(slot.lock_owned().await),
            key: target,
            table: self,
        }
    }

    /// Holds both targets, always acquired in key order so two renames of
    /// the same pair in opposite directions cannot deadlock; one lock when
    /// they are equal.
    pub async fn lock_pair(&'static self, a: K, b: K) -> (TargetLock<K>, Option<TargetLock<K>>) {
        if a == b {
            return (self.lock(a).await, None);
        }
        let (first, second) = if a < b { (a, b) } else { (b, a) };
        let first = self.lock(first).await;
        let second = self.lock(second).await;
        (first, Some(second))
    }

    /// Whether the table has an entry for `target` (someone holds or awaits
    /// it, or a dropped waiter left it for the next sweep). For tests of a
    /// provider's cancellation paths.
    pub fn is_tracked(&self, target: &K) -> bool {
        self.table
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .contains_key(target)
    }
}

impl<K: Hash + Eq + 'static> Drop for TargetLock<K> {
    fn drop(&mut self) {
        // Release first, so the count below sees only the table's own
        // reference when nobody else holds or awaits this target.
        drop(self.guard.take());
        let mut table = self
            .table
            .table
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if table
            .get(&self.key)
            .is_some_and(|slot| Arc::strong_count(slot) == 1)
        {
            table.remove(&self.key);
        }
    }
}

#[cfg(test)]
mod tests {
    use std::pin::pin;
    use std::task::Poll;

    use super::*;

    static LOCKS: TargetLocks<(&'static str, &'static str)> = TargetLocks::new();

    #[tokio::test]
    async fn a_held_target_blocks_a_second_locker_until_released() {
        let key = ("a", "/f");
        let held = LOCKS.lock(key).await;
        let mut waiter = pin!(LOCKS.lock(key));
        assert!(matches!(futures::poll!(waiter.as_mut()), Poll::Pending));
        drop(held);
        let second = waiter.await;
        assert!(LOCKS.is_tracked(&key));
        drop(second);
        assert!(!LOCKS.is_tracked(&key), "released entries are removed");
    }

    #[tokio::test]
    async fn other_targets_do_not_block() {
        let _held = LOCKS.lock(("b", "/f")).await;
        let mut other_path = pin!(LOCKS.lock(("b", "/g")));
        assert!(matches!(
            futures::poll!(other_path.as_mut()),
            Poll::Ready(_)
        ));
        let mut other_world = pin!(LOCKS.lock(("c", "/f")));
        assert!(matches!(
            futures::poll!(other_world.as_mut()),
            Poll::Ready(_)
        ));
    }

    #[tokio::test]
    async fn pairs_lock_in_order_and_once_when_equal() {
        let (_first, second) = LOCKS.lock_pair(("d", "/b"), ("d", "/a")).await;
        assert!(second.is_some());
        let (_only, none) = LOCKS.lock_pair(("d", "/same"), ("d", "/same")).await;
        assert!(none.is_none());
    }

    #[tokio::test]
    async fn a_waiter_dropped_in_line_leaves_nothing_held() {
        let key = ("e", "/f");
        let held = LOCKS.lock(key).await;
        {
            let mut waiter = pin!(LOCKS.lock(key));
            assert!(matches!(futures::poll!(waiter.as_mut()), Poll::Pending));
        }
        drop(held);
        let mut again = pin!(LOCKS.lock(key));
        assert!(matches!(futures::poll!(again.as_mut()), Poll::Ready(_)));
    }
}
