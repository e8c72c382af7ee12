//! The provider against E2B's real service: the fs half of the conformance
//! kit through an in-process `e2b` owner, on a real `base` sandbox.
//! Ignored by default (nextest reports it skipped); run it with
//! credentials:
//!
//! ```sh
//! E2B_API_KEY=e2b_... cargo nextest run -p dsh-fs-e2b --test it --run-ignored only cloud::
//! ```
//!
//! It creates one sandbox (10 minutes' lifetime at most) and kills it.

use std::time::Duration;

use crate::support::{Env, run_fs_half};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs E2B_API_KEY and network"]
async fn every_fs_case_passes_on_a_real_e2b_sandbox() {
    std::env::var("E2B_API_KEY")
        .expect("E2B_API_KEY must be set to run this test (it is ignored otherwise)");
    let env = Env::cloud(Duration::from_secs(600)).await;
    let fs = env.through_owner();
    run_fs_half(&env, fs.clone()).await;
    assert!(fs.quiesce(Duration::from_secs(30)).await);
    env.kill().await;
}
