//! The whole kit against the local composition (`dsh-fs-local` +
//! `dsh-subprocess-local`, in-process): every case must pass.

use dsh_conformance::{KitOptions, cases, run};

use crate::support;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_case_passes_on_the_local_composition() {
    let local = support::Local::new();
    let report = run(&local.world(), &KitOptions::default(), support::print_case).await;
    // The kit stopped everything it started; disposal finds nothing owned.
    let left_running = local.subprocess.owned();
    local.dispose().await;
    assert_eq!(
        left_running, 0,
        "process groups or terminals the kit left running"
    );
    let options = KitOptions::default();
    let applying = cases().iter().filter(|case| case.applies(&options));
    assert_eq!(
        report.cases.len(),
        applying.count(),
        "every case for an unconfined fs runs"
    );
    let not_passed = support::not_passed(&report);
    assert!(
        not_passed.is_empty(),
        "{} of {} cases did not pass:\n{}",
        not_passed.len(),
        report.cases.len(),
        not_passed.join("\n")
    );
    assert!(report.cleanup_errors.is_empty(), "{report}");
}
