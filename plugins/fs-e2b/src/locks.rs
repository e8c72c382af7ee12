//! Per-target serialisation of mutations: one process-wide
//! [`TargetLocks`] table keyed by (sandbox, canonical path), so every
//! mutation of one file through any provider of that sandbox in this
//! process (write, edit, remove, rename) runs alone. Processes in the
//! sandbox, and other hosts, are not covered: guards check their effects.

use std::sync::Arc;

use dsh_provider_kit::locks::TargetLocks;

type Key = (Arc<str>, String);

static LOCKS: TargetLocks<Key> = TargetLocks::new();

/// Exclusive access to one target; released on drop.
pub(crate) type TargetLock = dsh_provider_kit::locks::TargetLock<Key>;

/// Waits until no other mutation holds `path` in `sandbox`, then holds it
/// (see [`TargetLocks::lock`]).
pub(crate) async fn lock(sandbox: &Arc<str>, path: &str) -> TargetLock {
    LOCKS.lock((Arc::clone(sandbox), path.to_owned())).await
}

/// Holds both targets of `sandbox` (see [`TargetLocks::lock_pair`]).
pub(crate) async fn lock_pair(
    sandbox: &Arc<str>,
    a: &str,
    b: &str,
) -> (TargetLock, Option<TargetLock>) {
    LOCKS
        .lock_pair(
            (Arc::clone(sandbox), a.to_owned()),
            (Arc::clone(sandbox), b.to_owned()),
        )
        .await
}
