//! The fs half of the conformance kit on the E2B composition on e2b-local:
//! every `fs` case the local composition runs, none skipped, all passing —
//! through an in-process `e2b` owner (dsh's path) and directly on the
//! sandbox's transport. Fixtures the `fs` seam cannot make (symlinks, modes,
//! FIFOs) are made by a minimal test command provider in the same sandbox.
//!
//! Needs root and the built server (`cargo build -p e2b-local`).

mod support;

use std::sync::Arc;

use dsh_conformance::{KitOptions, Outcome, Seam, World, cases, run};
use dsh_plugin_api::fs::FsProvider;
use support::Env;

async fn run_fs_half(env: &Env, fs: Arc<dyn FsProvider>) {
    let world = World {
        fs: Some(fs),
        subprocess: Some(Arc::new(env.commands())),
    };
    let options = KitOptions {
        filter: Some("fs.".to_owned()),
        ..KitOptions::default()
    };
    let report = run(&world, &options, |case| eprintln!("{case}")).await;
    let expected: Vec<&str> = cases()
        .iter()
        .filter(|case| case.seam == Seam::Fs)
        .map(|case| case.name)
        .collect();
    let ran: Vec<&str> = report.cases.iter().map(|case| case.name).collect();
    assert_eq!(ran, expected, "exactly the kit's fs cases run");
    let not_passed: Vec<String> = report
        .cases
        .iter()
        .filter(|case| !matches!(case.outcome, Outcome::Passed))
        .map(ToString::to_string)
        .collect();
    assert!(
        not_passed.is_empty(),
        "{} of {} fs cases did not pass:\n{}",
        not_passed.len(),
        report.cases.len(),
        not_passed.join("\n")
    );
    assert!(report.cleanup_errors.is_empty(), "{report}");
}

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
