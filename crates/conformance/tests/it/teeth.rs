//! The kit has teeth: each deliberately broken provider (see
//! `support/broken.rs`) fails exactly the cases that check the contract it
//! breaks, with a message that says what went wrong, while a control case
//! in the same run still passes.

use std::sync::Arc;
use std::time::Duration;

use dsh_conformance::{KitOptions, Outcome, Report, World, run};

use crate::support::broken::{BrokenFs, BrokenSubprocess, FsFlaw, SubprocessFlaw};
use crate::support::{self, Local, failure_of};

async fn run_with(
    world: World,
    local: &Local,
    filter: &str,
    case_timeout: Option<Duration>,
) -> Report {
    let options = KitOptions {
        filter: Some(filter.to_owned()),
        case_timeout,
        ..KitOptions::default()
    };
    let report = run(&world, &options, support::print_case).await;
    local.dispose().await;
    report
}

async fn with_broken_fs(flaw: FsFlaw, filter: &str) -> Report {
    let local = Local::new();
    let world = World {
        fs: Some(Arc::new(BrokenFs {
            inner: local.fs.clone(),
            flaw,
        })),
        subprocess: Some(local.subprocess.clone()),
    };
    run_with(world, &local, filter, None).await
}

async fn with_broken_subprocess(
    flaw: SubprocessFlaw,
    filter: &str,
    case_timeout: Option<Duration>,
) -> Report {
    let local = Local::new();
    let world = World {
        fs: Some(local.fs.clone()),
        subprocess: Some(Arc::new(BrokenSubprocess {
            inner: local.subprocess.clone(),
            flaw,
        })),
    };
    run_with(world, &local, filter, case_timeout).await
}

fn assert_passed(report: &Report, name: &str) {
    let case = report
        .case(name)
        .unwrap_or_else(|| panic!("control case {name} was not run"));
    assert_eq!(case.outcome, Outcome::Passed, "control case {name}");
}

fn assert_failure_mentions(report: &Report, name: &str, needle: &str) {
    let message = failure_of(report, name);
    assert!(
        message.contains(needle),
        "{name} failed, but its message does not mention {needle:?}: {message}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_non_atomic_write_is_caught() {
    let report = with_broken_fs(
        FsFlaw::NonAtomicWrite,
        "fs.write.atomic_for_readers,fs.write.cancel_keeps_old,fs.write.creates_parents",
    )
    .await;
    assert_failure_mentions(&report, "fs.write.atomic_for_readers", "torn file");
    assert_failure_mentions(
        &report,
        "fs.write.cancel_keeps_old",
        "partial write was published",
    );
    assert_passed(&report, "fs.write.creates_parents");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_non_atomic_streamed_write_is_caught() {
    let report = with_broken_fs(
        FsFlaw::NonAtomicWrite,
        "fs.write_stream.source_error_keeps_old,fs.write_stream.cancel_keeps_old,fs.write_stream.stores_chunks",
    )
    .await;
    assert_failure_mentions(
        &report,
        "fs.write_stream.source_error_keeps_old",
        "after a failed write_stream",
    );
    assert_failure_mentions(
        &report,
        "fs.write_stream.cancel_keeps_old",
        "after a dropped write_stream",
    );
    assert_passed(&report, "fs.write_stream.stores_chunks");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lossy_utf8_decoding_is_caught() {
    let report = with_broken_fs(
        FsFlaw::LossyUtf8,
        "fs.read_text.invalid_utf8,fs.stream_text.across_chunks,fs.stream_text.invalid_utf8_ends_stream,fs.read_text.round_trip",
    )
    .await;
    assert_failure_mentions(
        &report,
        "fs.read_text.invalid_utf8",
        "expected a invalid UTF-8 error",
    );
    assert_failure_mentions(&report, "fs.stream_text.across_chunks", "U+FFFD");
    assert_failure_mentions(&report, "fs.stream_text.invalid_utf8_ends_stream", "U+FFFD");
    assert_passed(&report, "fs.read_text.round_trip");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_version_that_does_not_change_is_caught() {
    let report = with_broken_fs(
        FsFlaw::SizeVersion,
        "fs.version.changes_on_every_write,fs.write.guard_if_version,fs.version.stable_when_unchanged",
    )
    .await;
    assert_failure_mentions(
        &report,
        "fs.version.changes_on_every_write",
        "both returned version size-4",
    );
    assert_failure_mentions(
        &report,
        "fs.write.guard_if_version",
        "returned the version it was guarded by",
    );
    assert_passed(&report, "fs.version.stable_when_unchanged");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unserialised_edits_are_caught() {
    let report = with_broken_fs(
        FsFlaw::UnserialisedEdit,
        "fs.edit.serialised,fs.edit.replace_all",
    )
    .await;
    assert_failure_mentions(&report, "fs.edit.serialised", "concurrent edits were lost");
    assert_passed(&report, "fs.edit.replace_all");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn naive_containment_is_caught() {
    let report = with_broken_fs(
        FsFlaw::NaiveContains,
        "fs.contains.lexical,fs.contains.symlink_escape,fs.resolve.through_symlinks",
    )
    .await;
    assert_failure_mentions(&report, "fs.contains.lexical", "rootx");
    assert_failure_mentions(&report, "fs.contains.symlink_escape", "root/escape");
    assert_passed(&report, "fs.resolve.through_symlinks");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_leaking_process_group_is_caught() {
    let report = with_broken_subprocess(
        SubprocessFlaw::LeaderOnlyTerminate,
        "subprocess.terminate.group,subprocess.terminate.ignores_term,subprocess.wait.exit_code",
        None,
    )
    .await;
    assert_failure_mentions(&report, "subprocess.terminate.group", "ps still finds");
    assert_failure_mentions(
        &report,
        "subprocess.terminate.ignores_term",
        "ps still finds",
    );
    assert_passed(&report, "subprocess.wait.exit_code");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_leaky_environment_is_caught_without_printing_values() {
    let report = with_broken_subprocess(
        SubprocessFlaw::LeakyEnvironment,
        "subprocess.spawn.env_boundary,subprocess.spawn.cwd",
        None,
    )
    .await;
    let message = failure_of(&report, "subprocess.spawn.env_boundary");
    for (name, value) in support::PLANTED {
        assert!(message.contains(name), "{message}");
        assert!(!message.contains(value), "a value was printed: {message}");
    }
    assert_passed(&report, "subprocess.spawn.cwd");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_program_that_is_not_its_group_leader_is_caught() {
    let report = with_broken_subprocess(
        SubprocessFlaw::WrappedChild,
        "subprocess.spawn.group_leader,subprocess.spawn.cwd",
        None,
    )
    .await;
    assert_failure_mentions(
        &report,
        "subprocess.spawn.group_leader",
        "the command's own pid ($$)",
    );
    assert_passed(&report, "subprocess.spawn.cwd");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_ignored_timeout_is_caught_without_hanging() {
    let started = std::time::Instant::now();
    let report = with_broken_subprocess(
        SubprocessFlaw::IgnoredTimeout,
        "subprocess.timeout.partial_output,subprocess.wait.signal",
        Some(Duration::from_secs(4)),
    )
    .await;
    assert_failure_mentions(
        &report,
        "subprocess.timeout.partial_output",
        "no answer within 2000 ms",
    );
    assert_passed(&report, "subprocess.wait.signal");
    assert!(
        started.elapsed() < Duration::from_secs(20),
        "took {:?}",
        started.elapsed()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hidden_truncation_is_caught() {
    let report = with_broken_subprocess(
        SubprocessFlaw::TruncationHidden,
        "subprocess.output.collect_tail_and_offsets,subprocess.output.collect_untruncated",
        None,
    )
    .await;
    assert_failure_mentions(
        &report,
        "subprocess.output.collect_tail_and_offsets",
        "truncated",
    );
    assert_passed(&report, "subprocess.output.collect_untruncated");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_program_reported_as_exit_127_is_caught() {
    let report = with_broken_subprocess(
        SubprocessFlaw::MissingProgramExits127,
        "subprocess.spawn.missing_program,subprocess.spawn.missing_cwd",
        None,
    )
    .await;
    assert_failure_mentions(
        &report,
        "subprocess.spawn.missing_program",
        "but the call succeeded",
    );
    assert_passed(&report, "subprocess.spawn.missing_cwd");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn terminal_bootstrap_noise_is_caught() {
    let report = with_broken_subprocess(
        SubprocessFlaw::TerminalPromptNoise,
        "terminal.output_exact,terminal.exit_status,terminal.bad_input",
        None,
    )
    .await;
    assert_failure_mentions(&report, "terminal.output_exact", "user@sandbox");
    assert_failure_mentions(&report, "terminal.exit_status", "user@sandbox");
    assert_passed(&report, "terminal.bad_input");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_walk_that_forgets_gitignore_is_caught() {
    let report = with_broken_fs(
        FsFlaw::WalkIgnoresGitignore,
        "fs.walk.same_as_composed,fs.read_many.same_as_read_text",
    )
    .await;
    assert_failure_mentions(
        &report,
        "fs.walk.same_as_composed",
        "against the composition",
    );
    assert_passed(&report, "fs.read_many.same_as_read_text");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_search_that_drops_context_is_caught() {
    let report = with_broken_fs(
        FsFlaw::SearchDropsContext,
        "fs.search.same_as_composed,fs.walk.bounds",
    )
    .await;
    assert_failure_mentions(
        &report,
        "fs.search.same_as_composed",
        "against the composition",
    );
    assert_passed(&report, "fs.walk.bounds");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unconfined_read_many_is_caught() {
    let report = with_broken_fs(
        FsFlaw::ReadManyUnconfined,
        "fs.beneath.symlink_races,fs.search.bounds",
    )
    .await;
    assert_failure_mentions(&report, "fs.beneath.symlink_races", "out of the root");
    assert_passed(&report, "fs.search.bounds");
}
