//! What a kit run reports: one [`CaseReport`] per selected case, gathered in
//! a [`Report`] that serialises to JSON for `dsh conformance --json`.

use std::collections::BTreeMap;
use std::fmt;
use std::time::Duration;

use serde::Serialize;
use serde::ser::{SerializeStruct, Serializer};

/// Which seam (or which combination of seams) a case checks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Seam {
    /// The `fs` seam (docs/design.md §5.1).
    Fs,
    /// One-shot commands of the `subprocess` seam (docs/design.md §5.2).
    Subprocess,
    /// Terminals of the `subprocess` seam (`spawn_terminal`,
    /// docs/design.md §5.2).
    Terminal,
    /// Both seams together: they must address one world.
    Coherence,
}

impl Seam {
    /// `fs`, `subprocess`, `terminal` or `coherence`.
    pub fn as_str(self) -> &'static str {
        match self {
            Seam::Fs => "fs",
            Seam::Subprocess => "subprocess",
            Seam::Terminal => "terminal",
            Seam::Coherence => "coherence",
        }
    }
}

impl fmt::Display for Seam {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// How one case ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// Every check of the case held.
    Passed,
    /// A check failed; the message says what was expected and what came back.
    Failed(String),
    /// The case did not run; the message says why (a missing seam, a
    /// capability switched off in [`crate::KitOptions`], or a program the
    /// case needs that the world lacks). Never a pass.
    Skipped(String),
}

impl Outcome {
    /// `passed`, `failed` or `skipped`.
    pub fn status(&self) -> &'static str {
        match self {
            Outcome::Passed => "passed",
            Outcome::Failed(_) => "failed",
            Outcome::Skipped(_) => "skipped",
        }
    }

    /// The failure or skip message, if any.
    pub fn message(&self) -> Option<&str> {
        match self {
            Outcome::Passed => None,
            Outcome::Failed(message) | Outcome::Skipped(message) => Some(message),
        }
    }
}

/// The result of one case.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CaseReport {
    /// The case's stable name (`fs.write.guard_if_version`).
    pub name: &'static str,
    pub seam: Seam,
    pub outcome: Outcome,
    /// Wall time of the case, its setup and cleanup included.
    pub duration: Duration,
}

impl fmt::Display for CaseReport {
    /// One line for humans: `PASS fs.stat.file (3 ms)`, or `FAIL …: message`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let label = match self.outcome {
            Outcome::Passed => "PASS",
            Outcome::Failed(_) => "FAIL",
            Outcome::Skipped(_) => "SKIP",
        };
        write!(
            f,
            "{label} {} ({} ms)",
            self.name,
            self.duration.as_millis()
        )?;
        if let Some(message) = self.outcome.message() {
            write!(f, ": {message}")?;
        }
        Ok(())
    }
}

impl Serialize for CaseReport {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut state = serializer.serialize_struct("CaseReport", 5)?;
        state.serialize_field("name", self.name)?;
        state.serialize_field("seam", &self.seam)?;
        state.serialize_field("outcome", self.outcome.status())?;
        state.serialize_field("message", &self.outcome.message())?;
        state.serialize_field("duration_ms", &(self.duration.as_secs_f64() * 1000.0))?;
        state.end()
    }
}

/// The result of a kit run.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Report {
    /// Every selected case, in the order of [`crate::cases`].
    pub cases: Vec<CaseReport>,
    /// The scratch directory the run used (in the world), once created.
    pub scratch_dir: Option<String>,
    /// Failures of the run's own cleanup (terminating what a case left
    /// running is charged to that case; this holds what is left, e.g. the
    /// scratch directory that could not be removed).
    pub cleanup_errors: Vec<String>,
    /// Which provider served each seam (`fs` → the manifest entry id), as
    /// the caller that composed the [`crate::World`] knows it — `dsh
    /// conformance` fills it from the composition; the kit itself sees
    /// only the plain traits and leaves it empty.
    pub served: BTreeMap<String, String>,
}

impl Report {
    /// How many cases passed.
    pub fn passed(&self) -> usize {
        self.count(|outcome| matches!(outcome, Outcome::Passed))
    }

    /// How many cases failed.
    pub fn failed(&self) -> usize {
        self.count(|outcome| matches!(outcome, Outcome::Failed(_)))
    }

    /// How many cases were skipped.
    pub fn skipped(&self) -> usize {
        self.count(|outcome| matches!(outcome, Outcome::Skipped(_)))
    }

    /// No case failed and the run cleaned up after itself. Skipped cases do
    /// not make a run unsuccessful, but they are never counted as passed.
    pub fn is_success(&self) -> bool {
        self.failed() == 0 && self.cleanup_errors.is_empty()
    }

    /// The report of the case named `name`, if it was selected.
    pub fn case(&self, name: &str) -> Option<&CaseReport> {
        self.cases.iter().find(|case| case.name == name)
    }

    fn count(&self, predicate: impl Fn(&Outcome) -> bool) -> usize {
        self.cases
            .iter()
            .filter(|case| predicate(&case.outcome))
            .count()
    }
}

impl fmt::Display for Report {
    /// The summary line: `72 passed, 0 failed, 3 skipped`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} passed, {} failed, {} skipped",
            self.passed(),
            self.failed(),
            self.skipped()
        )?;
        for error in &self.cleanup_errors {
            write!(f, "; cleanup: {error}")?;
        }
        Ok(())
    }
}

impl Serialize for Report {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut state = serializer.serialize_struct("Report", 7)?;
        state.serialize_field("served", &self.served)?;
        state.serialize_field("passed", &self.passed())?;
        state.serialize_field("failed", &self.failed())?;
        state.serialize_field("skipped", &self.skipped())?;
        state.serialize_field("scratch_dir", &self.scratch_dir)?;
        state.serialize_field("cleanup_errors", &self.cleanup_errors)?;
        state.serialize_field("cases", &self.cases)?;
        state.end()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn case(name: &'static str, outcome: Outcome) -> CaseReport {
        CaseReport {
            name,
            seam: Seam::Fs,
            outcome,
            duration: Duration::from_millis(12),
        }
    }

    #[test]
    fn lines_and_counts() {
        let report = Report {
            cases: vec![
                case("fs.a.b", Outcome::Passed),
                case(
                    "fs.c.d",
                    Outcome::Failed("stat x: expected 1, got 2".into()),
                ),
                case(
                    "fs.e.f",
                    Outcome::Skipped("no fs provider in this world".into()),
                ),
            ],
            ..Report::default()
        };
        assert_eq!(report.cases[0].to_string(), "PASS fs.a.b (12 ms)");
        assert_eq!(
            report.cases[1].to_string(),
            "FAIL fs.c.d (12 ms): stat x: expected 1, got 2"
        );
        assert_eq!(
            report.cases[2].to_string(),
            "SKIP fs.e.f (12 ms): no fs provider in this world"
        );
        assert_eq!(
            (report.passed(), report.failed(), report.skipped()),
            (1, 1, 1)
        );
        assert!(!report.is_success());
        assert_eq!(
            report.case("fs.e.f").map(|c| c.outcome.status()),
            Some("skipped")
        );
    }

    #[test]
    fn cleanup_errors_make_a_run_unsuccessful() {
        let mut report = Report {
            cases: vec![case("fs.a.b", Outcome::Passed)],
            ..Report::default()
        };
        assert!(report.is_success());
        report.cleanup_errors.push("remove /tmp/x: busy".into());
        assert!(!report.is_success());
        assert_eq!(
            report.to_string(),
            "1 passed, 0 failed, 0 skipped; cleanup: remove /tmp/x: busy"
        );
    }
}
