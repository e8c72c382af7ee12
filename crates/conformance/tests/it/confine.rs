//! An `fs` confined to a directory (`KitOptions::fs_confined_to`): told
//! so, the kit checks the confinement instead of reaching `/`, and a
//! confining fs passes; not told, it fails exactly the cases that reach
//! `/`; an fs that does not confine, or shows what lies outside in a
//! listing, fails the confinement cases.

use std::sync::Arc;

use dsh_conformance::{FsReach, KitOptions, Outcome, Report, SCRATCH_PREFIX, World, cases, run};
use dsh_fs_local::FsLocal;
use dsh_plugin_api::decorate::DecoratedFs;
use dsh_plugin_api::fs::FsProvider;
use dsh_subprocess_local::{Config, LocalSubprocess};

use crate::support::fakes::Confine;
use crate::support::{self, failure_of};

/// A directory of its own for one test, removed on drop.
struct Root(String);

impl Root {
    fn new(test: &str) -> Root {
        let path = std::env::temp_dir().join(format!("dsh-confine-{test}-{}", std::process::id()));
        std::fs::create_dir_all(&path).expect("create the confining root");
        let path = path.canonicalize().expect("canonical root");
        Root(path.to_str().expect("UTF-8 temp dir").to_owned())
    }
}

impl Drop for Root {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Runs the kit (`filter`, confined to `root` if `told`) on the local
/// providers, both with their cwd at `root`, the fs confined by
/// [`Confine`] hooks (leaky or not) or, `None`, not at all.
async fn run_on(root: &Root, confined: Option<bool>, told: bool, filter: Option<&str>) -> Report {
    let local: Arc<dyn FsProvider> = Arc::new(FsLocal::new(root.0.clone()).expect("fs-local"));
    let fs: Arc<dyn FsProvider> = match confined {
        Some(leaky) => Arc::new(DecoratedFs::new(
            local.clone(),
            Confine {
                inner: local,
                root: root.0.clone(),
                leaky,
            },
        )),
        None => local,
    };
    // Spill files too live inside: the kit reads them through `fs`.
    let config = Config {
        cwd: Some(root.0.clone()),
        spill_dir: Some(root.0.clone()),
        ..Config::default()
    };
    let subprocess = Arc::new(LocalSubprocess::new(&config).expect("subprocess-local"));
    let world = World {
        fs: Some(fs),
        subprocess: Some(subprocess.clone()),
    };
    let options = KitOptions {
        scratch_root: root.0.clone(),
        filter: filter.map(str::to_owned),
        fs_confined_to: told.then(|| root.0.clone()),
        ..KitOptions::default()
    };
    let report = run(&world, &options, support::print_case).await;
    subprocess
        .dispose()
        .await
        .expect("dispose subprocess-local");
    report
}

fn names(report: &Report) -> Vec<&'static str> {
    report.cases.iter().map(|case| case.name).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_confining_fs_passes_the_whole_kit_when_told() {
    let root = Root::new("passes");
    let report = run_on(&root, Some(false), true, None).await;
    let expected: Vec<&str> = cases()
        .iter()
        .filter(|case| case.reach != FsReach::Everywhere)
        .map(|case| case.name)
        .collect();
    assert_eq!(names(&report), expected, "the cases for a confined fs");
    assert!(expected.contains(&"fs.confine.outside_refused"));
    assert!(!expected.contains(&"fs.resolve.root"));
    // The confining decorator serves the world-side operations by dsh-provider-kit's
    // composition of path-based calls, which cannot confine race-free: `beneath` is refused
    // (Unsupported) and its race case skipped with that reason — the only case not passed.
    let beneath = report
        .case("fs.beneath.symlink_races")
        .expect("the beneath race case runs");
    assert!(matches!(beneath.outcome, Outcome::Skipped(_)), "{beneath}");
    let not_passed: Vec<String> = support::not_passed(&report)
        .into_iter()
        .filter(|case| !case.contains("fs.beneath.symlink_races"))
        .collect();
    assert!(not_passed.is_empty(), "{}", not_passed.join("\n"));
    assert!(report.cleanup_errors.is_empty(), "{report}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn untold_a_confining_fs_fails_only_the_cases_that_reach_the_root() {
    let root = Root::new("untold");
    let report = run_on(
        &root,
        Some(false),
        false,
        Some("fs.resolve,fs.contains,fs.confine"),
    )
    .await;
    let failed: Vec<&str> = report
        .cases
        .iter()
        .filter(|case| matches!(case.outcome, Outcome::Failed(_)))
        .map(|case| case.name)
        .collect();
    assert_eq!(failed, ["fs.resolve.root", "fs.contains.root"], "{report}");
    assert!(
        failure_of(&report, "fs.resolve.root").contains("outside"),
        "{report}"
    );
    assert!(
        !names(&report)
            .iter()
            .any(|name| name.starts_with("fs.confine.")),
        "the confinement cases do not apply to an fs the kit is not told is confined"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_fs_that_does_not_confine_fails_the_confinement_cases() {
    let root = Root::new("open");
    let report = run_on(&root, None, true, Some("fs.confine")).await;
    assert_eq!(
        names(&report),
        ["fs.confine.outside_refused", "fs.confine.symlink_escape"]
    );
    for name in names(&report) {
        let message = failure_of(&report, name);
        assert!(message.contains("the call succeeded"), "{name}: {message}");
    }
    let parent = std::path::Path::new(&root.0).parent().expect("parent");
    let strays: Vec<_> = std::fs::read_dir(parent)
        .expect("read the parent")
        .filter_map(|entry| entry.ok())
        .filter(|entry| {
            let name = entry.file_name().to_string_lossy().into_owned();
            name.starts_with(SCRATCH_PREFIX) && name.ends_with("-outside")
        })
        .collect();
    assert!(strays.is_empty(), "nothing was left outside: {strays:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_listing_that_shows_the_target_of_an_escaping_link_is_caught() {
    let root = Root::new("leaky");
    let report = run_on(&root, Some(true), true, Some("fs.confine")).await;
    assert_eq!(
        report
            .case("fs.confine.outside_refused")
            .map(|case| &case.outcome),
        Some(&Outcome::Passed),
        "{report}"
    );
    let message = failure_of(&report, "fs.confine.symlink_escape");
    assert!(message.contains("shows its target's metadata"), "{message}");
}
