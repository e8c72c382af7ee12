//! Against an envd that acts as root (E2B's own; e2b-local's
//! `--envd-file-access as-root`), a sandbox user who races the provider
//! must never get root's rights through it (docs/design.md §6.1): a loop
//! in the sandbox, as the user, keeps changing the paths the provider works
//! on while it reads or writes them a thousand times.
//!
//! Needs root and the built server (`cargo build -p e2b-local`).

use std::time::{Duration, Instant};

use dsh_plugin_api::Bytes;
use dsh_plugin_api::fs::{FsProvider, WriteGuard};
use e2b_client::{Command, Signal, StreamOptions};
use futures::{StreamExt, TryStreamExt};

use crate::support::{CWD, Env};

/// How many reads or writes race the loop.
const ITERATIONS: usize = 1000;

/// How many operations are in flight at once.
const IN_FLIGHT: usize = 4;

/// Starts `script` (Python, run by `python3 -c`) in the background as the
/// sandbox user, in the world's cwd, and returns its pid once it runs.
async fn start_loop(env: &Env, script: &str) -> u32 {
    let command = Command::new("/usr/bin/python3")
        .args(["-c", script])
        .cwd(CWD)
        .stdin(false);
    let stream = env
        .sandbox
        .envd()
        .start(&command, &StreamOptions::default().user("user"))
        .await
        .expect("start the racing loop");
    let pid = stream.pid();
    // envd does not kill a process whose stream is dropped.
    drop(stream);
    pid
}

async fn stop_loop(env: &Env, pid: u32) {
    env.sandbox
        .envd()
        .send_signal(pid, Signal::Kill, &Default::default())
        .await
        .expect("stop the racing loop");
}

/// A root-only secret, and a loop that keeps flipping `x` between a file of
/// the user's and a symlink to it: every read of `x` returns the user's
/// file or an error, never the secret.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reads_never_follow_a_flipped_symlink_as_root() {
    let env = Env::start_with(&["--envd-file-access", "as-root"]).await;
    let secret = "/etc/dsh-race-secret";
    let made = env
        .run_as(
            "root",
            r#"printf 'SECRET-7f3a\n' > "$1" && chmod 600 -- "$1""#,
            &[secret],
        )
        .await;
    assert_eq!(made.code, 0, "{}", made.stderr_text());
    env.sh(r#"printf 'public\n' > "$1/x""#, &[CWD]).await;
    let flipper = start_loop(
        &env,
        &format!(
            r#"
import os
while True:
    with open("x.file", "w") as f:
        f.write("public\n")
    os.rename("x.file", "x")
    try:
        os.symlink("{secret}", "x.link")
    except FileExistsError:
        pass
    os.rename("x.link", "x")
"#
        ),
    )
    .await;
    let fs = env.through_owner();
    let path = format!("{CWD}/x");
    let started = Instant::now();
    let outcomes: Vec<Result<Vec<u8>, String>> = futures::stream::iter(0..ITERATIONS)
        .map(|i| {
            let (fs, path) = (fs.clone(), path.clone());
            async move {
                // Every way of reading: whole text, and streamed bytes.
                if i % 2 == 0 {
                    fs.read_text(&path)
                        .await
                        .map(|file| file.text.as_str().as_bytes().to_vec())
                        .map_err(|err| err.to_string())
                } else {
                    match fs.read_bytes(&path).await {
                        Ok(read) => read
                            .chunks
                            .try_fold(Vec::new(), |mut all, chunk| async move {
                                all.extend_from_slice(&chunk);
                                Ok(all)
                            })
                            .await
                            .map_err(|err| err.to_string()),
                        Err(err) => Err(err.to_string()),
                    }
                }
            }
        })
        .buffer_unordered(IN_FLIGHT)
        .collect()
        .await;
    let elapsed = started.elapsed();
    stop_loop(&env, flipper).await;
    let escapes = outcomes
        .iter()
        .filter(
            |outcome| matches!(outcome, Ok(content) if content.windows(6).any(|w| w == b"SECRET")),
        )
        .count();
    let read = outcomes
        .iter()
        .filter(|outcome| matches!(outcome, Ok(content) if content == b"public\n"))
        .count();
    let refused: Vec<&String> = outcomes.iter().filter_map(|o| o.as_ref().err()).collect();
    eprintln!(
        "{ITERATIONS} reads racing the flip in {elapsed:?}: {escapes} returned the secret, {read} the user's file, {} refused (e.g. {:?})",
        refused.len(),
        refused.first()
    );
    assert_eq!(escapes, 0, "reads returned root's secret");
    assert!(read > 0, "no read returned the user's own file");
    assert!(!refused.is_empty(), "no read met the flipped symlink");
    assert_eq!(
        read + refused.len(),
        ITERATIONS,
        "every read returned the file or an error"
    );
}

/// A root-owned `/etc/victim`, and a loop that swaps every other staging
/// directory it sees in the world's cwd for a symlink to `/etc`: writing
/// `victim` there a thousand times, as whole content and as streams, never
/// touches `/etc` (checked as root).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn writes_never_follow_a_swapped_staging_directory_as_root() {
    let env = Env::start_with(&["--envd-file-access", "as-root"]).await;
    let before = etc_state(&env).await;
    let swapper = start_loop(
        &env,
        r#"
import os, time
n = 0
while True:
    # A staging directory lives for several milliseconds (a command, then
    # its content): polling each millisecond finds it and leaves the CPU
    # to the writes.
    time.sleep(0.001)
    for name in os.listdir("."):
        # Half of them (by their random suffix), so that writes also get
        # through; never the links made here.
        if name.startswith(".dsh-stage-") and name[-1] in "02468ace" and not os.path.islink(name):
            n += 1
            try:
                os.rename(name, "swapped-%d" % n)
                os.symlink("/etc", name)
            except OSError:
                pass
"#,
    )
    .await;
    let fs = env.through_owner();
    let path = format!("{CWD}/victim");
    let started = Instant::now();
    let outcomes: Vec<Result<(), String>> = futures::stream::iter(0..ITERATIONS)
        .map(|i| {
            let (fs, path) = (fs.clone(), path.clone());
            async move {
                let content = Bytes::from(format!("PWNED {i}\n"));
                let written = if i % 2 == 0 {
                    fs.write(&path, content, WriteGuard::Overwrite).await
                } else {
                    let chunks = futures::stream::iter([Ok(content)]).boxed();
                    fs.write_stream(&path, chunks, WriteGuard::Overwrite).await
                };
                written.map(drop).map_err(|err| err.to_string())
            }
        })
        .buffer_unordered(IN_FLIGHT)
        .collect()
        .await;
    let elapsed = started.elapsed();
    stop_loop(&env, swapper).await;
    assert!(fs.quiesce(Duration::from_secs(30)).await);
    let written = outcomes.iter().filter(|outcome| outcome.is_ok()).count();
    let refused: Vec<&String> = outcomes.iter().filter_map(|o| o.as_ref().err()).collect();
    let swaps = env
        .sh(r#"ls -A "$1" | grep -c '^swapped-' || true"#, &[CWD])
        .await;
    eprintln!(
        "{ITERATIONS} writes racing the swap in {elapsed:?}: {written} written, {} refused (e.g. {:?}), {} staging directories swapped",
        refused.len(),
        refused.first(),
        swaps.trim()
    );
    assert_eq!(etc_state(&env).await, before, "/etc changed");
    assert!(
        swaps.trim().parse::<usize>().unwrap() > 0,
        "the loop swapped no staging directory"
    );
    assert!(written > 0, "no write succeeded");
}

/// `/etc` as root sees it — every entry's name, owner, mode, size and
/// modification time, and `victim`'s content — after making `victim`
/// (root's, 0644) if it is not there yet.
async fn etc_state(env: &Env) -> String {
    let ran = env
        .run_as(
            "root",
            r#"[ -e /etc/victim ] || { printf 'original\n' > /etc/victim && chmod 644 /etc/victim; } || exit 1
find /etc -mindepth 1 -maxdepth 1 -printf '%f %u:%g %m %s %T@\n' | sort && cat /etc/victim"#,
            &[],
        )
        .await;
    assert_eq!(ran.code, 0, "{}", ran.stderr_text());
    let state = String::from_utf8(ran.stdout).expect("UTF-8 listing");
    assert!(state.contains("\nvictim root:root 644 9 "), "{state}");
    assert!(state.ends_with("\noriginal\n"), "{state}");
    state
}
