//! The fs half of the conformance kit on the E2B composition on e2b-local:
//! every `fs` case the local composition runs, none skipped, all passing —
//! through an in-process `e2b` owner (dsh's path) and directly on the
//! sandbox's transport, and against an envd that acts as root as E2B's
//! does. Fixtures the `fs` seam cannot make (symlinks, modes,
//! FIFOs) are made by a minimal test command provider in the same sandbox.
//!
//! Needs root and the built server (`cargo build -p e2b-local`).

use std::sync::Arc;

use crate::support::{Env, run_fs_half, run_fs_half_and};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_fs_case_passes_through_the_owner() {
    let env = Env::start().await;
    let fs = env.through_owner();
    run_fs_half(&env, fs.clone()).await;
    assert!(fs.quiesce(std::time::Duration::from_secs(10)).await);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_fs_case_passes_on_a_direct_transport() {
    let env = Env::start().await;
    let fs = Arc::new(env.direct());
    run_fs_half(&env, fs.clone()).await;
    assert!(fs.quiesce(std::time::Duration::from_secs(10)).await);
}

/// Against an envd that performs file operations as root whatever user a
/// request names — E2B's own, which e2b-local imitates with
/// `--envd-file-access as-root` — the provider keeps the world's user's
/// permissions itself: every fs case passes, and so does the identity case.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_fs_case_and_the_identity_pass_against_an_envd_acting_as_root() {
    let env = Env::start_with(&["--envd-file-access", "as-root"]).await;
    let fs = env.through_owner();
    run_fs_half_and(&env, fs.clone(), &["coherence.permissions_agree"]).await;
    assert!(fs.quiesce(std::time::Duration::from_secs(10)).await);
}
