//! The decorator as a host loads it: by manifest over
//! `dsh-subprocess-local` (bound without `inject`: the one other provider),
//! served to the user, checked with the conformance kit; its config
//! validated before anything is created.

use dsh_conformance::{KitOptions, World, run};
use dsh_host::{Composition, HostError, Manifest, ManifestFormat, SearchPath};
use dsh_plugin_api::ErrorKind;
use dsh_plugin_api::subprocess::SpawnSpec;

use crate::support::exit_of;

fn manifest(config: &str) -> String {
    format!(
        "plugins:\n  - {{id: fs, name: dsh-fs-local}}\n  - {{id: local, name: dsh-subprocess-local}}\n  \
         - {{id: audit, name: dsh-example-subprocess-audit, config: {config}}}\n"
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn loaded_by_manifest_it_is_served_passes_the_kit_and_denies() {
    let dir = tempfile::tempdir().expect("tempdir");
    let log = dir.path().join("audit.jsonl");
    let config = format!("{{deny: [curl], auditLog: {}}}", log.display());
    let world = dsh_testkit::World::from_yaml(&manifest(&config), "audit.yaml").await;
    let served: Vec<(&str, Vec<&str>)> = world
        .host()
        .plugins()
        .iter()
        .map(|plugin| {
            (
                plugin.id.as_str(),
                plugin.serves.iter().map(|kind| kind.name()).collect(),
            )
        })
        .collect();
    assert_eq!(
        served,
        [
            ("fs", vec!["fs"]),
            ("local", vec![]),
            ("audit", vec!["subprocess"])
        ]
    );

    let kit = World {
        fs: Some(world.fs()),
        subprocess: Some(world.subprocess()),
    };
    let report = run(&kit, &KitOptions::default(), |case| println!("{case}")).await;
    println!("{report}");
    assert!(report.is_success(), "{report}");
    assert_eq!(report.skipped(), 0, "{report}");

    let subprocess = world.subprocess();
    let err = subprocess
        .spawn(SpawnSpec::new(["curl", "http://example.com"]))
        .await
        .err()
        .expect("denied");
    assert_eq!(err.kind(), ErrorKind::PermissionDenied);
    subprocess
        .spawn(SpawnSpec::new(["true"]))
        .await
        .expect("spawn");
    assert_eq!(exit_of(&log, &["true"]).await["status"]["code"], 0);
    world.dispose().await;
}

fn invalid(config: &str) -> Vec<String> {
    let manifest = Manifest::parse(&manifest(config), ManifestFormat::Yaml, "audit.yaml", None)
        .expect("manifest");
    let Err(HostError::Invalid(invalid)) =
        Composition::from_manifest(&manifest, &SearchPath::new(dsh_testkit::plugin_dirs()))
    else {
        panic!("{config} must be refused");
    };
    invalid.to_string().lines().map(str::to_owned).collect()
}

#[test]
fn every_config_error_is_reported_before_anything_is_created() {
    let prefix = "audit.yaml: entry \"audit\" (line 4): plugin dsh-example-subprocess-audit: ";
    assert_eq!(
        invalid("{deny: rm, auditlog: /tmp/x}"),
        [
            format!("{prefix}config.auditlog: unknown field (expected auditLog, deny)"),
            format!("{prefix}config.deny: invalid type: string \"rm\", expected an array"),
        ]
    );
    // The plugin's own checks, reported the same way.
    assert_eq!(
        invalid("{deny: ['', /bin/rm], auditLog: audit.jsonl}"),
        [
            format!("{prefix}config.deny[0]: must be a program name (non-empty, no `/`)"),
            format!("{prefix}config.deny[1]: must be a program name (non-empty, no `/`)"),
            format!("{prefix}config.auditLog: must be an absolute path"),
        ]
    );
}
