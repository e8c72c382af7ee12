//! Per-target serialisation of mutations.
//!
//! One process-wide table maps a (sandbox, canonical path) pair to an async
//! mutex, so every mutation of one file through any provider of that
//! sandbox in this process (write, edit, remove, rename) runs alone.
//! Entries live only while someone holds or awaits them. Processes in the
//! sandbox, and other hosts, are not covered: guards check their effects.

use std::collections::HashMap;
use std::sync::{Arc, LazyLock, Mutex, PoisonError};

use tokio::sync::{Mutex as AsyncMutex, OwnedMutexGuard};

/// Above this many entries, acquiring a lock first sweeps entries nobody
/// holds (left behind by lock futures dropped while waiting).
const SWEEP_ABOVE: usize = 256;

type Key = (Arc<str>, String);
type Slot = Arc<AsyncMutex<()>>;

static TABLE: LazyLock<Mutex<HashMap<Key, Slot>>> = LazyLock::new(Default::default);

/// Exclusive access to one target; released on drop (from any thread, no
/// runtime needed).
#[derive(Debug)]
pub(crate) struct TargetLock {
    guard: Option<OwnedMutexGuard<()>>,
    key: Key,
}

/// Waits until no other mutation holds `path` in `sandbox`, then holds it.
/// Dropping the future while it waits gives up the place in line and holds
/// nothing.
pub(crate) async fn lock(sandbox: &Arc<str>, path: &str) -> TargetLock {
    let key: Key = (Arc::clone(sandbox), path.to_owned());
    let slot = {
        let mut table = TABLE.lock().unwrap_or_else(PoisonError::into_inner);
        if table.len() > SWEEP_ABOVE {
            table.retain(|_, slot| Arc::strong_count(slot) > 1);
        }
        table.entry(key.clone()).or_default().clone()
    };
    TargetLock {
        guard: Some(slot.lock_owned().await),
        key,
    }
}

/// Holds both targets, always acquired in path order so two renames of the
/// same pair in opposite directions cannot deadlock; one lock when equal.
pub(crate) async fn lock_pair(
    sandbox: &Arc<str>,
    a: &str,
    b: &str,
) -> (TargetLock, Option<TargetLock>) {
    if a == b {
        return (lock(sandbox, a).await, None);
    }
    let (first, second) = if a < b { (a, b) } else { (b, a) };
    let first = lock(sandbox, first).await;
    let second = lock(sandbox, second).await;
    (first, Some(second))
}

impl Drop for TargetLock {
    fn drop(&mut self) {
        // Release first, so the count below sees only the table's own
        // reference when nobody else holds or awaits this target.
        drop(self.guard.take());
        let mut table = TABLE.lock().unwrap_or_else(PoisonError::into_inner);
        if table
            .get(&self.key)
            .is_some_and(|slot| Arc::strong_count(slot) == 1)
        {
            table.remove(&self.key);
        }
    }
}

#[cfg(test)]
fn is_tracked(sandbox: &Arc<str>, path: &str) -> bool {
    TABLE
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .contains_key(&(Arc::clone(sandbox), path.to_owned()))
}

#[cfg(test)]
mod tests {
    use std::pin::pin;
    use std::task::Poll;

    use super::*;

    fn sandbox(name: &str) -> Arc<str> {
        Arc::from(name)
    }

    #[tokio::test]
    async fn a_held_target_blocks_a_second_locker_until_released() {
        let sbx = sandbox("locks-a");
        let held = lock(&sbx, "/f").await;
        let mut waiter = pin!(lock(&sbx, "/f"));
        assert!(matches!(futures::poll!(waiter.as_mut()), Poll::Pending));
        drop(held);
        let second = waiter.await;
        assert!(is_tracked(&sbx, "/f"));
        drop(second);
        assert!(!is_tracked(&sbx, "/f"), "released entries are removed");
    }

    #[tokio::test]
    async fn other_targets_and_other_sandboxes_do_not_block() {
        let (b, c) = (sandbox("locks-b"), sandbox("locks-c"));
        let _held = lock(&b, "/f").await;
        let mut other_path = pin!(lock(&b, "/g"));
        assert!(matches!(
            futures::poll!(other_path.as_mut()),
            Poll::Ready(_)
        ));
        let mut other_sandbox = pin!(lock(&c, "/f"));
        assert!(matches!(
            futures::poll!(other_sandbox.as_mut()),
            Poll::Ready(_)
        ));
    }

    #[tokio::test]
    async fn pairs_lock_in_order_and_once_when_equal() {
        let sbx = sandbox("locks-d");
        let (_first, second) = lock_pair(&sbx, "/b", "/a").await;
        assert!(second.is_some());
        let (_only, none) = lock_pair(&sbx, "/same", "/same").await;
        assert!(none.is_none());
    }

    #[tokio::test]
    async fn a_waiter_dropped_in_line_leaves_nothing_held() {
        let sbx = sandbox("locks-e");
        let held = lock(&sbx, "/f").await;
        {
            let mut waiter = pin!(lock(&sbx, "/f"));
            assert!(matches!(futures::poll!(waiter.as_mut()), Poll::Pending));
        }
        drop(held);
        let mut again = pin!(lock(&sbx, "/f"));
        assert!(matches!(futures::poll!(again.as_mut()), Poll::Ready(_)));
    }
}
