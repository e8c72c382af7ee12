//! The provider as a host loads it: by manifest over `dsh-subprocess-local`,
//! checked with the conformance kit. `cargo test` builds this crate's
//! library, which `dsh-testkit` finds next to the test executable.

use dsh_conformance::{KitOptions, World, run};

const MANIFEST: &str = "\
plugins:
  - { id: fs, name: dsh-fs-local }
  - { id: local, name: dsh-subprocess-local }
  - { id: mine, name: dsh-template-provider, config: { label: template } }
";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn loaded_by_manifest_it_passes_the_kit() {
    let world = dsh_testkit::World::from_yaml(MANIFEST, "template.yaml").await;
    let mine = world
        .host()
        .plugins()
        .iter()
        .find(|plugin| plugin.id == "mine");
    assert_eq!(
        mine.map(|plugin| plugin.serves.len()),
        Some(1),
        "it serves subprocess"
    );
    let kit = World {
        fs: Some(world.fs()),
        subprocess: Some(world.subprocess()),
    };
    let report = run(&kit, &KitOptions::default(), |case| println!("{case}")).await;
    println!("{report}");
    assert!(report.is_success(), "{report}");
    assert_eq!(report.skipped(), 0, "{report}");
    world.dispose().await;
}
