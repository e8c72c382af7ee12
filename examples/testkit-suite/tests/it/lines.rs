//! `write_and_count_lines` on the local world and on an e2b-local sandbox.

use dsh_example_testkit_suite::write_and_count_lines;
use dsh_plugin_api::ErrorKind;
use dsh_testkit::World;

/// The same checks on any world; `dir` is a directory the world's user may
/// write to.
async fn counts_lines_and_refuses_to_overwrite(world: World, dir: &str) {
    let (fs, subprocess) = (world.fs(), world.subprocess());
    let path = format!("{dir}/dsh-testkit-suite-{}.txt", std::process::id());
    let count = write_and_count_lines(&*fs, &*subprocess, &path, "one\ntwo\nthree\n").await;
    assert_eq!(count.expect("count"), 3);
    let again = write_and_count_lines(&*fs, &*subprocess, &path, "x\n").await;
    assert_eq!(again.expect_err("exists").kind(), ErrorKind::AlreadyExists);
    fs.remove(&path).await.expect("clean up");
    world.dispose().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn local_world() {
    let dir = std::env::temp_dir();
    let dir = dir.to_str().expect("UTF-8 temp dir").to_owned();
    counts_lines_and_refuses_to_overwrite(World::local().await, &dir).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn e2b_local_world() {
    counts_lines_and_refuses_to_overwrite(World::e2b_local().await, "/home/user/workspace").await;
}
