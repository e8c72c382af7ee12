//! How the kit runs, independent of any one contract: partial worlds and
//! capability switches skip (never pass) what cannot run, the filter
//! selects, a hanging or panicking provider fails cases without stalling the
//! run, everything a case started is stopped, the scratch directory goes
//! away, and the report serialises for `--json`.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::{Duration, Instant};

use dsh_conformance::{KitOptions, Need, Outcome, Report, SCRATCH_PREFIX, Seam, World, cases, run};

use crate::support::fakes::{FsFault, HangingWait, faulty_fs};
use crate::support::{self, Local};

fn skipped_reason<'a>(report: &'a Report, name: &str) -> &'a str {
    match &report
        .case(name)
        .unwrap_or_else(|| panic!("{name} not run"))
        .outcome
    {
        Outcome::Skipped(reason) => reason,
        other => panic!("{name}: expected a skip, got {other:?}"),
    }
}

fn assert_none_failed(report: &Report) {
    let failed: Vec<String> = report
        .cases
        .iter()
        .filter(|case| matches!(case.outcome, Outcome::Failed(_)))
        .map(ToString::to_string)
        .collect();
    assert!(failed.is_empty(), "failed:\n{}", failed.join("\n"));
}

fn assert_scratch_removed(report: &Report) {
    let scratch = report
        .scratch_dir
        .as_deref()
        .expect("a scratch dir was used");
    assert!(scratch.contains(SCRATCH_PREFIX), "{scratch}");
    assert!(
        !std::path::Path::new(scratch).exists(),
        "scratch dir {scratch} left behind"
    );
    assert!(
        report.cleanup_errors.is_empty(),
        "{:?}",
        report.cleanup_errors
    );
}

#[test]
fn the_catalogue_is_well_formed() {
    let all = cases();
    let names: BTreeSet<&str> = all.iter().map(|case| case.name).collect();
    assert_eq!(names.len(), all.len(), "case names are unique");
    for case in all {
        let prefix = format!("{}.", case.seam.as_str());
        assert!(
            case.name.starts_with(&prefix),
            "{} is not under {prefix}",
            case.name
        );
        let segments: Vec<&str> = case.name.split('.').collect();
        assert!(
            segments.len() >= 2,
            "{}: <seam>.[<operation>.]<behaviour>",
            case.name
        );
        assert!(
            segments.iter().all(|s| !s.is_empty()
                && s.bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_')),
            "{}: segments are lower_snake_case",
            case.name
        );
        assert!(
            !case.description.is_empty(),
            "{} has no description",
            case.name
        );
        let declares = |need| case.needs.contains(&need);
        match case.seam {
            Seam::Fs => assert!(declares(Need::Fs), "{}", case.name),
            Seam::Subprocess => assert!(declares(Need::Subprocess), "{}", case.name),
            Seam::Terminal => assert!(declares(Need::Terminal), "{}", case.name),
            Seam::Coherence => {
                assert!(
                    declares(Need::Fs) && declares(Need::Subprocess),
                    "{}",
                    case.name
                );
            }
        }
    }
    for seam in [Seam::Fs, Seam::Subprocess, Seam::Terminal, Seam::Coherence] {
        assert!(all.iter().any(|case| case.seam == seam), "no {seam} case");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_fs_only_world_skips_what_needs_commands() {
    let local = Local::new();
    let world = World {
        fs: Some(local.fs.clone()),
        subprocess: None,
    };
    let report = run(&world, &KitOptions::default(), support::print_case).await;
    assert_none_failed(&report);
    for case in &report.cases {
        if matches!(
            case.seam,
            Seam::Subprocess | Seam::Terminal | Seam::Coherence
        ) {
            assert!(
                matches!(case.outcome, Outcome::Skipped(_)),
                "{case}: no subprocess provider"
            );
        }
    }
    assert!(skipped_reason(&report, "fs.stat.symlink").contains("subprocess provider"));
    assert_eq!(
        skipped_reason(&report, "subprocess.spawn.cwd"),
        "no subprocess provider in this world"
    );
    assert_eq!(
        report.case("fs.write.creates_parents").unwrap().outcome,
        Outcome::Passed
    );
    assert!(report.passed() >= 40, "{report}");
    assert_scratch_removed(&report);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_subprocess_only_world_makes_fixtures_with_commands() {
    let local = Local::new();
    let world = World {
        fs: None,
        subprocess: Some(local.subprocess.clone()),
    };
    let options = KitOptions {
        filter: Some("subprocess.,terminal.exit,fs.stat.file".into()),
        ..KitOptions::default()
    };
    let report = run(&world, &options, support::print_case).await;
    local.dispose().await;
    assert_none_failed(&report);
    assert_eq!(
        skipped_reason(&report, "fs.stat.file_and_directory"),
        "no fs provider in this world"
    );
    // Fixtures (scripts, spill reads) went through commands.
    for name in [
        "subprocess.resolve_executable.extra_path",
        "subprocess.output.spill",
        "terminal.exit_status",
    ] {
        assert_eq!(
            report.case(name).unwrap().outcome,
            Outcome::Passed,
            "{name}"
        );
    }
    assert_scratch_removed(&report);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_read_only_fs_runs_its_read_cases_on_fixtures_made_by_commands() {
    let local = Local::new();
    let world = World {
        fs: Some(faulty_fs(local.fs.clone(), FsFault::ReadOnly)),
        subprocess: Some(local.subprocess.clone()),
    };
    let options = KitOptions {
        read_only_fs: true,
        filter: Some("fs.,coherence.".into()),
        ..KitOptions::default()
    };
    let report = run(&world, &options, support::print_case).await;
    local.dispose().await;
    assert_none_failed(&report);
    let read_only = "the fs provider is read-only (KitOptions::read_only_fs)";
    for name in [
        "fs.write.guard_race",
        "fs.edit.crlf",
        "fs.mkdir.parents",
        "coherence.names_both_ways",
    ] {
        assert_eq!(skipped_reason(&report, name), read_only, "{name}");
    }
    for name in [
        "fs.read_text.binary",
        "fs.list.symlink_entries_resolved",
        "coherence.metadata_agrees",
    ] {
        assert_eq!(
            report.case(name).unwrap().outcome,
            Outcome::Passed,
            "{name}"
        );
    }
    assert_scratch_removed(&report);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn switched_off_terminals_are_skipped_not_passed() {
    let local = Local::new();
    let options = KitOptions {
        no_terminals: true,
        filter: Some("terminal.,subprocess.wait.exit_code".into()),
        ..KitOptions::default()
    };
    let report = run(&local.world(), &options, support::print_case).await;
    local.dispose().await;
    let terminal_cases = cases()
        .iter()
        .filter(|case| case.seam == Seam::Terminal)
        .count();
    assert_eq!(report.skipped(), terminal_cases, "{report}");
    assert_eq!(report.passed(), 1, "{report}");
    assert_eq!(
        skipped_reason(&report, "terminal.resize"),
        "terminals are disabled (KitOptions::no_terminals)"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_filter_selects_by_substring_and_reports_only_selected_cases() {
    let local = Local::new();
    let options = KitOptions {
        filter: Some("fs.stat., fs.list.errors".into()),
        ..KitOptions::default()
    };
    let mut seen = Vec::new();
    let report = run(&local.world(), &options, |case| seen.push(case.name)).await;
    local.dispose().await;
    let expected: Vec<&str> = cases()
        .iter()
        .map(|case| case.name)
        .filter(|name| name.contains("fs.stat.") || *name == "fs.list.errors")
        .collect();
    let got: Vec<&str> = report.cases.iter().map(|case| case.name).collect();
    assert_eq!(got, expected, "selected in catalogue order");
    assert_eq!(seen, expected, "on_case saw each case as it ended");
    assert_eq!(report.passed(), expected.len(), "{report}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hanging_call_fails_its_case_and_the_run_goes_on() {
    let local = Local::new();
    let world = World {
        fs: Some(faulty_fs(local.fs.clone(), FsFault::HangingStat)),
        subprocess: Some(local.subprocess.clone()),
    };
    let options = KitOptions {
        filter: Some("fs.stat.file_and_directory,fs.list.errors".into()),
        case_timeout: Some(Duration::from_secs(2)),
        ..KitOptions::default()
    };
    let started = Instant::now();
    let report = run(&world, &options, support::print_case).await;
    local.dispose().await;
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "{:?}",
        started.elapsed()
    );
    let Outcome::Failed(message) = &report.case("fs.stat.file_and_directory").unwrap().outcome
    else {
        panic!("{report}");
    };
    assert!(
        message.contains("stat ") && message.contains("no answer within 1000 ms"),
        "{message}"
    );
    assert_eq!(
        report.case("fs.list.errors").unwrap().outcome,
        Outcome::Passed
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_world_that_never_answers_fails_setup_promptly() {
    let local = Local::new();
    let world = World {
        fs: Some(faulty_fs(local.fs.clone(), FsFault::HangingEverything)),
        subprocess: None,
    };
    let options = KitOptions {
        filter: Some("fs.read_text".into()),
        case_timeout: Some(Duration::from_secs(1)),
        ..KitOptions::default()
    };
    let started = Instant::now();
    let report = run(&world, &options, support::print_case).await;
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
    assert!(
        report.failed() > 0 && report.failed() == report.cases.len(),
        "{report}"
    );
    for case in &report.cases {
        let Outcome::Failed(message) = &case.outcome else {
            unreachable!()
        };
        assert!(
            message.starts_with("kit setup: scratch: resolve /tmp (scratch_root)"),
            "{message}"
        );
        assert!(message.contains("no answer within 500 ms"), "{message}");
    }
    assert_eq!(report.scratch_dir, None);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_panicking_provider_fails_the_case() {
    let local = Local::new();
    let world = World {
        fs: Some(faulty_fs(local.fs.clone(), FsFault::PanickingStat)),
        subprocess: None,
    };
    let options = KitOptions {
        filter: Some("fs.stat.errors,fs.read_text.errors".into()),
        ..KitOptions::default()
    };
    let report = run(&world, &options, support::print_case).await;
    assert_eq!(
        report.case("fs.stat.errors").unwrap().outcome,
        Outcome::Failed("the case panicked: stat: deliberate panic".into())
    );
    assert_eq!(
        report.case("fs.read_text.errors").unwrap().outcome,
        Outcome::Passed
    );
    assert_scratch_removed(&report);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn processes_of_a_case_that_ran_out_of_time_are_stopped() {
    let local = Local::new();
    let world = World {
        fs: Some(local.fs.clone()),
        subprocess: Some(Arc::new(HangingWait {
            inner: local.subprocess.clone(),
        })),
    };
    let options = KitOptions {
        filter: Some("subprocess.terminate.group,subprocess.wait.exit_code".into()),
        case_timeout: Some(Duration::from_secs(2)),
        ..KitOptions::default()
    };
    let report = run(&world, &options, support::print_case).await;
    assert_eq!(report.failed(), 2, "{report}");
    // Everything those cases started was terminated by the runner, not
    // left for disposal.
    assert_eq!(
        local.subprocess.owned(),
        0,
        "groups left running by the kit"
    );
    local.dispose().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_report_serialises_for_json_output() {
    let local = Local::new();
    let options = KitOptions {
        filter: Some("fs.read_bytes.errors,terminal.bad_input".into()),
        no_terminals: true,
        ..KitOptions::default()
    };
    let report = run(&local.world(), &options, |_| {}).await;
    local.dispose().await;
    let json = serde_json::to_value(&report).expect("serialise");
    assert_eq!(json["passed"], 1);
    assert_eq!(json["failed"], 0);
    assert_eq!(json["skipped"], 1);
    assert_eq!(json["cleanup_errors"], serde_json::json!([]));
    let first = &json["cases"][0];
    assert_eq!(first["name"], "fs.read_bytes.errors");
    assert_eq!(first["seam"], "fs");
    assert_eq!(first["outcome"], "passed");
    assert_eq!(first["message"], serde_json::Value::Null);
    assert!(first["duration_ms"].as_f64().is_some());
    let second = &json["cases"][1];
    assert_eq!(second["seam"], "terminal");
    assert_eq!(second["outcome"], "skipped");
    assert_eq!(
        second["message"],
        "terminals are disabled (KitOptions::no_terminals)"
    );
    assert_eq!(report.to_string(), "1 passed, 0 failed, 1 skipped");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_scratch_root_is_not_created() {
    let local = Local::new();
    let root = "/tmp/dsh-conformance-test-missing-root/below";
    let options = KitOptions {
        scratch_root: root.into(),
        filter: Some("fs.stat.errors".into()),
        ..KitOptions::default()
    };
    let report = run(&local.world(), &options, |_| {}).await;
    local.dispose().await;
    let Outcome::Failed(message) = &report.case("fs.stat.errors").unwrap().outcome else {
        panic!("{report}");
    };
    assert!(
        message.starts_with(&format!(
            "kit setup: scratch: lstat {root} (scratch_root): expected success, got not found"
        )),
        "{message}"
    );
    assert!(!std::path::Path::new("/tmp/dsh-conformance-test-missing-root").exists());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bad_scratch_root_fails_every_runnable_case_with_the_reason() {
    let local = Local::new();
    let options = KitOptions {
        scratch_root: "relative/dir".into(),
        filter: Some("fs.stat.errors".into()),
        ..KitOptions::default()
    };
    let report = run(&local.world(), &options, |_| {}).await;
    local.dispose().await;
    assert_eq!(
        report.case("fs.stat.errors").unwrap().outcome,
        Outcome::Failed(
            "kit setup: scratch_root \"relative/dir\" must be an absolute path without NUL".into()
        )
    );
}
