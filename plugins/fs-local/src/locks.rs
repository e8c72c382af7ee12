//! Per-target serialisation of mutations: one process-wide
//! [`TargetLocks`] table keyed by canonical target path, so every mutation
//! of one file through any `FsLocal` instance in this process (write, edit,
//! remove, rename) runs alone.

use std::path::{Path, PathBuf};

use dsh_provider_kit::locks::TargetLocks;

static LOCKS: TargetLocks<PathBuf> = TargetLocks::new();

/// Exclusive access to one canonical target; released on drop.
pub(crate) type TargetLock = dsh_provider_kit::locks::TargetLock<PathBuf>;

/// Waits until no other mutation holds `target`, then holds it (see
/// [`TargetLocks::lock`]).
pub(crate) async fn lock(target: &Path) -> TargetLock {
    LOCKS.lock(target.to_path_buf()).await
}

/// Holds both targets (see [`TargetLocks::lock_pair`]).
pub(crate) async fn lock_pair(a: &Path, b: &Path) -> (TargetLock, Option<TargetLock>) {
    LOCKS.lock_pair(a.to_path_buf(), b.to_path_buf()).await
}

#[cfg(test)]
pub(crate) fn is_tracked(target: &Path) -> bool {
    LOCKS.is_tracked(&target.to_path_buf())
}
