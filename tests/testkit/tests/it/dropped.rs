//! A world a failing test drops without `dispose` ends its processes: each
//! test here runs itself again as a child process (the variable
//! [`MARKER`] set) in which it starts a `sleep` through a local world and
//! panics holding both, as a failing test does; the child's runtime and
//! process then end. The parent checks the child failed with that panic
//! after the `sleep` had started, and that no process of it is left.

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant, SystemTime};

use dsh_plugin_api::subprocess::SpawnSpec;
use dsh_testkit::World;

/// Set in the child: the `sleep` argument that marks its command.
const MARKER: &str = "DSH_TESTKIT_DROP_MARKER";
/// The child's line once its command runs.
const STARTED: &str = "marker started, pid ";
/// The child's panic.
const PANIC: &str = "a failing test drops its world";

/// The child's part: a command running in a world, then a panic.
async fn start_and_panic(marker: &str) {
    let world = World::local().await;
    let sleep = world
        .subprocess()
        .spawn(SpawnSpec::new(["sleep", marker]))
        .await
        .expect("spawn the marker");
    println!("{STARTED}{}", sleep.pid());
    panic!("{PANIC}");
}

/// The parent's part: runs `test` as a child and checks what is left.
fn run_child(test: &str) {
    let nanos = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .expect("clock after 1970")
        .subsec_nanos();
    // A number `sleep` accepts (about an hour) that no other process uses.
    let marker = format!("{}.{nanos:09}", 3000 + std::process::id() % 1000);
    let exe = std::env::current_exe().expect("the test executable");
    let output = Command::new(exe)
        .args([test, "--exact", "--nocapture", "--test-threads=1"])
        .env(MARKER, &marker)
        .output()
        .expect("run the child test");
    let (stdout, stderr) = (
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr),
    );
    let shown = format!("child stdout:\n{stdout}\nchild stderr:\n{stderr}");
    assert!(
        !output.status.success(),
        "the child test must fail\n{shown}"
    );
    assert!(
        stderr.contains(PANIC),
        "the child panicked as planned\n{shown}"
    );
    assert!(
        stdout.contains(STARTED),
        "the marker ran before the panic\n{shown}"
    );
    // Ended processes may take a moment to leave the table once their
    // parent (the child test) is gone; a leaked one never does.
    let deadline = Instant::now() + Duration::from_secs(2);
    let mut left = running(&marker);
    while !left.is_empty() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
        left = running(&marker);
    }
    for pid in &left {
        // Ours (started by the child): end them so a failure leaks nothing.
        let _ = Command::new("kill").args(["-KILL", pid]).status();
    }
    assert!(
        left.is_empty(),
        "the world's `sleep {marker}` outlived the failed test: pids {left:?}\n{shown}"
    );
}

/// Pids of live (not zombie) processes running `sleep <marker>`.
fn running(marker: &str) -> Vec<String> {
    let expected = format!("\0{marker}\0");
    std::fs::read_dir("/proc")
        .expect("read /proc")
        .filter_map(|entry| entry.ok())
        .filter_map(|entry| {
            let pid = entry.file_name().into_string().ok()?;
            pid.bytes().all(|b| b.is_ascii_digit()).then_some(pid)
        })
        .filter(|pid| {
            let dir = Path::new("/proc").join(pid);
            let cmdline = std::fs::read(dir.join("cmdline")).unwrap_or_default();
            let live = std::fs::read_to_string(dir.join("stat")).is_ok_and(|stat| {
                !stat
                    .rsplit_once(')')
                    .is_some_and(|(_, rest)| rest.trim_start().starts_with('Z'))
            });
            live && String::from_utf8_lossy(&cmdline).ends_with(&expected)
        })
        .collect()
}

#[tokio::test]
async fn a_world_dropped_by_a_failing_test_ends_its_processes() {
    match std::env::var(MARKER) {
        Ok(marker) => start_and_panic(&marker).await,
        Err(_) => run_child("dropped::a_world_dropped_by_a_failing_test_ends_its_processes"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_world_dropped_on_a_multi_thread_runtime_ends_its_processes() {
    match std::env::var(MARKER) {
        Ok(marker) => start_and_panic(&marker).await,
        Err(_) => {
            run_child("dropped::a_world_dropped_on_a_multi_thread_runtime_ends_its_processes")
        }
    }
}
