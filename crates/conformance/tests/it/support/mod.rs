//! The local world the kit's tests run against: `dsh-fs-local` and
//! `dsh-subprocess-local` in-process, rooted at this process's cwd, with an
//! ambient environment that plants credential-shaped and `DSH_*` names the
//! boundary must remove.

pub mod broken;
pub mod fakes;

use std::ffi::OsString;
use std::sync::Arc;

use dsh_conformance::{CaseReport, Outcome, Report, World};
use dsh_fs_local::FsLocal;
use dsh_subprocess_local::{Config, Environment, LocalSubprocess};

/// Ambient names a provider must scrub (values are dummies).
pub const PLANTED: &[(&str, &str)] = &[
    ("DSH_CONFORMANCE_AMBIENT", "must-not-leak"),
    ("CONFORMANCE_AMBIENT_API_KEY", "must-not-leak"),
    ("CONFORMANCE_AMBIENT_SECRET", "must-not-leak"),
    ("CONFORMANCE_AMBIENT_TOKEN", "must-not-leak"),
];

/// The host environment plus [`PLANTED`].
pub fn planted_environment() -> Environment {
    let planted = PLANTED
        .iter()
        .map(|(name, value)| (OsString::from(name), OsString::from(value)));
    Environment::scrubbed(std::env::vars_os().chain(planted))
}

/// The local providers, kept typed so tests can dispose the subprocess one.
pub struct Local {
    pub fs: Arc<FsLocal>,
    pub subprocess: Arc<LocalSubprocess>,
}

impl Local {
    pub fn new() -> Local {
        let fs = FsLocal::from_process_cwd().expect("fs-local rooted at the test's cwd");
        let subprocess =
            LocalSubprocess::with_environment(&Config::default(), planted_environment())
                .expect("subprocess-local with default config");
        Local {
            fs: Arc::new(fs),
            subprocess: Arc::new(subprocess),
        }
    }

    pub fn world(&self) -> World {
        World {
            fs: Some(self.fs.clone()),
            subprocess: Some(self.subprocess.clone()),
        }
    }

    /// Stops everything the run may have left (a broken provider's leaks
    /// included) and checks the provider owns nothing afterwards.
    pub async fn dispose(&self) {
        self.subprocess
            .dispose()
            .await
            .expect("dispose subprocess-local");
        assert_eq!(
            self.subprocess.owned(),
            0,
            "groups still owned after dispose"
        );
    }
}

/// Prints each case as it ends (shown by the test harness on failure).
pub fn print_case(case: &CaseReport) {
    eprintln!("{case}");
}

/// Every case that did not pass, one line each.
pub fn not_passed(report: &Report) -> Vec<String> {
    report
        .cases
        .iter()
        .filter(|case| !matches!(case.outcome, Outcome::Passed))
        .map(ToString::to_string)
        .collect()
}

/// The failure message of case `name`, or a panic saying what it was.
pub fn failure_of<'a>(report: &'a Report, name: &str) -> &'a str {
    let case = report
        .case(name)
        .unwrap_or_else(|| panic!("case {name} was not run; report: {report}"));
    match &case.outcome {
        Outcome::Failed(message) => message,
        other => panic!("case {name} was expected to fail, got {other:?}"),
    }
}
