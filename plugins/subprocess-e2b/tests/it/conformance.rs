//! The conformance kit's subprocess half — commands and terminals — on the
//! E2B composition (this provider over the owner's sandbox on e2b-local):
//! it runs exactly the cases the local composition runs (none skipped), and
//! every one of them passes.

use std::sync::Arc;

use dsh_conformance::{KitOptions, Outcome, Report, Seam, World as KitWorld, run};
use dsh_plugin_api::subprocess::SubprocessProvider;

/// The subprocess half: `subprocess.*` and `terminal.*`.
fn options() -> KitOptions {
    KitOptions {
        filter: Some("subprocess.,terminal.".to_owned()),
        ..KitOptions::default()
    }
}

fn print_case(case: &dsh_conformance::CaseReport) {
    println!("{case}");
}

/// The cases that ran (passed or failed; not skipped).
fn ran(report: &Report) -> Vec<&'static str> {
    let mut names: Vec<&'static str> = report
        .cases
        .iter()
        .filter(|case| !matches!(case.outcome, Outcome::Skipped(_)))
        .map(|case| case.name)
        .collect();
    names.sort_unstable();
    names
}

fn not_passed(report: &Report) -> Vec<String> {
    report
        .cases
        .iter()
        .filter(|case| case.outcome != Outcome::Passed)
        .map(ToString::to_string)
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_subprocess_half_passes_with_the_cases_the_local_composition_runs() {
    // The local composition, as the kit's own test runs it.
    let local = dsh_subprocess_local::LocalSubprocess::new(&dsh_subprocess_local::Config {
        kill_grace_ms: Some(300),
        ..Default::default()
    })
    .expect("local provider");
    let local_report = run(
        &KitWorld {
            fs: None,
            subprocess: Some(Arc::new(local.clone()) as Arc<dyn SubprocessProvider>),
        },
        &options(),
        |_| {},
    )
    .await;
    local.dispose().await.expect("dispose the local provider");

    let world = crate::support::World::start().await;
    let provider = world.provider();
    let report = run(
        &KitWorld {
            fs: None,
            subprocess: Some(Arc::new(provider.clone()) as Arc<dyn SubprocessProvider>),
        },
        &options(),
        print_case,
    )
    .await;
    // The kit stopped everything it started: nothing is left owned.
    let left = provider.owned();
    provider.dispose().await.expect("dispose");

    let failures = not_passed(&report);
    assert!(
        failures.is_empty(),
        "{} of {} cases did not pass on E2B:\n{}",
        failures.len(),
        report.cases.len(),
        failures.join("\n")
    );
    assert!(report.cleanup_errors.is_empty(), "{report}");
    assert!(
        report
            .cases
            .iter()
            .all(|case| matches!(case.seam, Seam::Subprocess | Seam::Terminal)),
        "only the subprocess half ran"
    );
    // Whether the local provider passes them is its own kit test's business.
    assert_eq!(
        ran(&report),
        ran(&local_report),
        "the E2B composition runs exactly the cases the local one runs"
    );
    assert_eq!(left, 0, "process groups or terminals the kit left owned");
}
