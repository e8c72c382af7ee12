//! Runs the selected cases one after another, each bounded in time, isolated
//! in its own directory, with everything it started stopped afterwards.

use std::panic::AssertUnwindSafe;
use std::time::{Duration, Instant};

use futures::FutureExt;

use crate::check::Failure;
use crate::context::Cx;
use crate::options::{KitOptions, World};
use crate::registry::{CaseInfo, Need, cases};
use crate::report::{CaseReport, Outcome, Report};
use crate::scratch::Scratch;

/// Runs every case the options select (the filter) and that applies to
/// the world's `fs` ([`CaseInfo::applies`]) against `world` and reports
/// each to `on_case` as soon as it ends, then returns the whole report.
///
/// Runs on the caller's tokio runtime (the time driver must be enabled);
/// cases run one at a time. The kit creates a unique scratch directory under
/// [`KitOptions::scratch_root`] in the world and removes it at the end; every
/// process or terminal a case started is terminated after that case, whether
/// it passed, failed, panicked or ran out of time. Dropping the returned
/// future stops the run where it is and skips that cleanup (the scratch
/// directory and the current case's processes are left behind).
pub async fn run(
    world: &World,
    options: &KitOptions,
    mut on_case: impl FnMut(&CaseReport),
) -> Report {
    let selected: Vec<&CaseInfo> = cases()
        .iter()
        .filter(|case| options.selects(case.name) && case.applies(options))
        .collect();
    let mut report = Report::default();
    let runnable = selected
        .iter()
        .any(|case| case.skip_reason(world, options).is_none());
    let limit = call_limit(options);
    let scratch = if runnable {
        Some(Scratch::create(world, options, limit).await)
    } else {
        None
    };
    if let Some(Ok(scratch)) = &scratch {
        report.scratch_dir = Some(scratch.path().to_owned());
    }
    for case in selected {
        let started = Instant::now();
        let outcome = match (case.skip_reason(world, options), &scratch) {
            (Some(reason), _) => Outcome::Skipped(reason.to_owned()),
            (None, Some(Ok(scratch))) => run_case(case, world, options, scratch).await,
            (None, Some(Err(setup))) => Outcome::Failed(format!("kit setup: {setup}")),
            (None, None) => unreachable!("a scratch area is prepared whenever a case can run"),
        };
        let case_report = CaseReport {
            name: case.name,
            seam: case.seam,
            outcome,
            duration: started.elapsed(),
        };
        on_case(&case_report);
        report.cases.push(case_report);
    }
    if let Some(Ok(scratch)) = scratch
        && let Err(error) = scratch.remove().await
    {
        report.cleanup_errors.push(error);
    }
    report
}

/// Single provider calls get half the case budget, so a hung call fails
/// with a message naming it while the case still has time to report.
fn call_limit(options: &KitOptions) -> Duration {
    options.case_timeout() / 2
}

async fn run_case(
    case: &CaseInfo,
    world: &World,
    options: &KitOptions,
    scratch: &Scratch,
) -> Outcome {
    let limit = call_limit(options);
    let dir = match scratch.case_dir(case.name, needs_dir(case)).await {
        Ok(dir) => dir,
        Err(error) => return Outcome::Failed(format!("case setup: {error}")),
    };
    let cx = Cx::new(
        world.fs.clone(),
        world.subprocess.clone(),
        scratch.fs_writable(),
        dir,
        limit,
    )
    .with_confinement(options.fs_confined_to.clone());
    let budget = options.case_timeout();
    let body = AssertUnwindSafe((case.run)(&cx)).catch_unwind();
    let mut outcome = match tokio::time::timeout(budget, body).await {
        Err(_) => Outcome::Failed(format!(
            "the case did not finish within {} ms (a provider call hung?)",
            budget.as_millis()
        )),
        Ok(Err(panic)) => Outcome::Failed(format!("the case panicked: {}", panic_text(&*panic))),
        Ok(Ok(Err(Failure {
            message,
            unsupported: false,
        }))) => Outcome::Failed(message),
        Ok(Ok(Err(Failure {
            message,
            unsupported: true,
        }))) => Outcome::Skipped(message),
        Ok(Ok(Ok(()))) => Outcome::Passed,
    };
    if let Err(error) = cx.release().await {
        outcome = match outcome {
            Outcome::Failed(message) => Outcome::Failed(format!("{message}; cleanup: {error}")),
            _ => Outcome::Failed(format!("cleanup after the case: {error}")),
        };
    }
    outcome
}

/// Whether the case works on files or processes in its directory (pure
/// path-computation cases do not need it to exist).
fn needs_dir(case: &CaseInfo) -> bool {
    case.needs.iter().any(|need| {
        matches!(
            need,
            Need::FsWrite | Need::Fixtures | Need::Shell | Need::Subprocess | Need::Terminal
        )
    })
}

fn panic_text(panic: &(dyn std::any::Any + Send)) -> String {
    if let Some(text) = panic.downcast_ref::<&str>() {
        (*text).to_owned()
    } else if let Some(text) = panic.downcast_ref::<String>() {
        text.clone()
    } else {
        "a non-string panic payload".to_owned()
    }
}
