//! Per-target serialisation of mutations.
//!
//! One process-wide table maps a canonical target path to an async mutex, so
//! every mutation of one file through any `FsLocal` instance in this process
//! (write, edit, remove, rename) runs alone. Entries live only while someone
//! holds or awaits them.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, LazyLock, Mutex, PoisonError};

use tokio::sync::{Mutex as AsyncMutex, OwnedMutexGuard};

/// Above this many entries, acquiring a lock first sweeps entries nobody
/// holds (left behind by lock futures dropped while waiting).
const SWEEP_ABOVE: usize = 256;

type Slot = Arc<AsyncMutex<()>>;

static TABLE: LazyLock<Mutex<HashMap<PathBuf, Slot>>> = LazyLock::new(Default::default);

/// Exclusive access to one canonical target; released on drop.
#[derive(Debug)]
pub(crate) struct TargetLock {
    guard: Option<OwnedMutexGuard<()>>,
    key: PathBuf,
}

/// Waits until no other mutation holds `target`, then holds it.
///
/// Dropping the returned future while it waits gives up the place in line
/// and holds nothing.
pub(crate) async fn lock(target: &Path) -> TargetLock {
    let slot = {
        let mut table = TABLE.lock().unwrap_or_else(PoisonError::into_inner);
        if table.len() > SWEEP_ABOVE {
            table.retain(|_, slot| Arc::strong_count(slot) > 1);
        }
        table.entry(target.to_path_buf()).or_default().clone()
    };
    TargetLock {
        guard: Some(slot.lock_owned().await),
        key: target.to_path_buf(),
    }
}

/// Holds both targets, always acquired in path order so two renames of the
/// same pair in opposite directions cannot deadlock. One lock when equal.
pub(crate) async fn lock_pair(a: &Path, b: &Path) -> (TargetLock, Option<TargetLock>) {
    if a == b {
        return (lock(a).await, None);
    }
    let (first, second) = if a < b { (a, b) } else { (b, a) };
    let first = lock(first).await;
    let second = lock(second).await;
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
pub(crate) fn is_tracked(target: &Path) -> bool {
    TABLE
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .contains_key(target)
}

#[cfg(test)]
mod tests {
    use std::pin::pin;
    use std::task::Poll;

    use super::*;

    #[tokio::test]
    async fn a_held_target_blocks_a_second_locker_until_released() {
        let key = Path::new("/dsh-locks-test/a");
        let held = lock(key).await;
        let mut waiter = pin!(lock(key));
        assert!(matches!(futures::poll!(waiter.as_mut()), Poll::Pending));
        drop(held);
        let second = waiter.await;
        assert!(is_tracked(key));
        drop(second);
        assert!(!is_tracked(key), "released entries are removed");
    }

    #[tokio::test]
    async fn other_targets_do_not_block() {
        let _a = lock(Path::new("/dsh-locks-test/b")).await;
        let mut other = pin!(lock(Path::new("/dsh-locks-test/c")));
        assert!(matches!(futures::poll!(other.as_mut()), Poll::Ready(_)));
    }

    #[tokio::test]
    async fn a_pair_locks_in_order_and_once_when_equal() {
        let a = Path::new("/dsh-locks-test/pair-a");
        let b = Path::new("/dsh-locks-test/pair-b");
        let (_first, second) = lock_pair(b, a).await;
        assert!(second.is_some());
        let (_only, none) = lock_pair(
            Path::new("/dsh-locks-test/same"),
            Path::new("/dsh-locks-test/same"),
        )
        .await;
        assert!(none.is_none());
    }

    #[tokio::test]
    async fn a_waiter_dropped_in_line_leaves_nothing_held() {
        let key = Path::new("/dsh-locks-test/d");
        let held = lock(key).await;
        {
            let mut waiter = pin!(lock(key));
            assert!(matches!(futures::poll!(waiter.as_mut()), Poll::Pending));
        }
        drop(held);
        let mut again = pin!(lock(key));
        assert!(matches!(futures::poll!(again.as_mut()), Poll::Ready(_)));
    }
}
