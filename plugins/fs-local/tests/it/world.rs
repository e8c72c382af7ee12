//! The world-side operations natively: confinement under a racing symlink
//! swap (the kit's `fs.world.*` cases check results against the
//! composition; this checks the race many times over).

use std::os::unix::fs::symlink;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use dsh_plugin_api::fs::{
    FsProvider, ReadManyLimits, SearchEvent, SearchLimits, SearchMode, SearchSpec, WalkEvent,
    WalkSpec,
};
use futures::StreamExt;

use crate::common::World;

const ITERATIONS: usize = 10_000;

/// `root/d` flips between a directory inside the root and a symlink to one
/// outside, as fast as a thread can rename, while confined reads, walks
/// and searches run: none may ever see the outside file. (Unconfined, the
/// same read does reach it — the fixture can leak.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_racing_symlink_never_leads_a_confined_operation_out() {
    let world = World::new();
    std::fs::create_dir_all(world.path("outside")).expect("mkdir");
    std::fs::write(world.path("outside/secret.txt"), "OUTSIDE\n").expect("write");
    std::fs::create_dir_all(world.path("root/inside")).expect("mkdir");
    std::fs::write(world.path("root/inside/secret.txt"), "inside\n").expect("write");
    symlink(world.path("outside"), world.path("root/link")).expect("symlink");
    let root = world.abs("root");

    let unconfined = world
        .fs
        .read_many(vec![world.abs("root/link/secret.txt")], limits(None))
        .await
        .expect("read_many");
    assert_eq!(
        unconfined[0].result.as_ref().expect("read").text.as_str(),
        "OUTSIDE\n",
        "unconfined, the link leads out"
    );

    let stop = Arc::new(AtomicBool::new(false));
    let swapper = {
        let (stop, d) = (stop.clone(), world.path("root/d"));
        let (inside, link) = (world.path("root/inside"), world.path("root/link"));
        std::thread::spawn(move || {
            let mut swaps = 0_u64;
            while !stop.load(Ordering::Relaxed) {
                for (from, to) in [(&inside, &d), (&d, &inside), (&link, &d), (&d, &link)] {
                    std::fs::rename(from, to).expect("rename");
                }
                swaps += 1;
            }
            swaps
        })
    };
    let (mut read_inside, mut refused) = (0, 0);
    for _ in 0..ITERATIONS {
        let items = world
            .fs
            .read_many(vec!["d/secret.txt".into()], limits(Some(root.clone())))
            .await
            .expect("read_many");
        match &items[0].result {
            Ok(file) => {
                assert_eq!(file.text.as_str(), "inside\n", "read_many left the root");
                read_inside += 1;
            }
            Err(_) => refused += 1,
        }
        let spec = WalkSpec {
            max_depth: 4,
            max_entries: 100,
            globs: Vec::new(),
            gitignore: false,
            beneath: true,
        };
        let mut walk = world.fs.walk(&root, spec).await.expect("walk");
        while let Some(event) = walk.next().await {
            if let WalkEvent::Entry(entry) = event.expect("walk event") {
                assert!(
                    !(entry.relative == "d/secret.txt" && entry.metadata.size == 8),
                    "walk listed the outside directory"
                );
            }
        }
        let mut search = world.fs.search(&root, search_spec()).await.expect("search");
        while let Some(event) = search.next().await {
            assert!(
                !matches!(event.expect("search event"), SearchEvent::Line(_)),
                "search read the outside file"
            );
        }
    }
    stop.store(true, Ordering::Relaxed);
    let swaps = swapper.join().expect("swapper");
    assert!(swaps > 0, "the symlink was never swapped");
    assert!(
        read_inside > 0 && refused > 0,
        "the race was not met both ways: {read_inside} reads inside, {refused} refused"
    );
}

fn limits(beneath: Option<String>) -> ReadManyLimits {
    ReadManyLimits {
        max_file_bytes: 1024,
        max_total_bytes: 1024,
        beneath,
    }
}

fn search_spec() -> SearchSpec {
    SearchSpec {
        pattern: "OUTSIDE".into(),
        case_insensitive: false,
        mode: SearchMode::Lines { context: 0 },
        globs: Vec::new(),
        types: Vec::new(),
        gitignore: false,
        max_depth: 4,
        beneath: true,
        limits: SearchLimits {
            max_matches: 10,
            max_bytes_scanned: 1 << 20,
            max_files: 100,
            max_output_bytes: 1 << 16,
            max_entries: 100,
            max_line_chars: 200,
        },
    }
}
