//! The terminate ladder: TERM, grace, KILL, proof of an empty group.

use std::time::{Duration, Instant};

use crate::support::{alive, group_members, provider, retained, sh_collect};
use dsh_plugin_api::subprocess::{OutputStream, Signal, SubprocessProvider};

/// Reads the first `n` lines the command printed (pids it reports).
async fn first_lines(process: &dyn dsh_plugin_api::subprocess::Process, n: usize) -> Vec<i32> {
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let out = String::from_utf8(retained(process, OutputStream::Stdout).await).expect("utf-8");
        let lines: Vec<i32> = out.lines().filter_map(|l| l.trim().parse().ok()).collect();
        if lines.len() >= n {
            return lines;
        }
        assert!(
            Instant::now() < deadline,
            "the command printed {n} pids: {out:?}"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_polite_process_ends_on_term_within_the_grace() {
    let p = provider();
    let process = p
        .spawn(sh_collect("sleep 30 & echo $!; wait"))
        .await
        .expect("spawn");
    let pgid = process.pid() as i32;
    let child = first_lines(process.as_ref(), 1).await[0];
    let started = Instant::now();
    process
        .terminate(Duration::from_secs(10))
        .await
        .expect("terminate");
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "did not sit out the grace"
    );
    assert!(!alive(child));
    assert!(group_members(pgid).is_empty(), "the group is empty");
    assert_eq!(
        process.wait().await.expect("wait").signal,
        Some(Signal::TERM)
    );
    p.dispose().await.expect("dispose");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_process_ignoring_term_is_killed_after_the_grace() {
    let p = provider();
    // The trap makes sh and the sleep it starts ignore SIGTERM.
    let process = p
        .spawn(sh_collect("trap '' TERM; sleep 30 & echo $!; wait"))
        .await
        .expect("spawn");
    let pgid = process.pid() as i32;
    let child = first_lines(process.as_ref(), 1).await[0];
    let started = Instant::now();
    process
        .terminate(Duration::from_millis(300))
        .await
        .expect("terminate");
    let took = started.elapsed();
    assert!(
        took >= Duration::from_millis(300),
        "waited the grace: {took:?}"
    );
    assert!(!alive(child));
    assert!(group_members(pgid).is_empty());
    assert_eq!(
        process.wait().await.expect("wait").signal,
        Some(Signal::KILL)
    );
    // Idempotent once proven.
    let started = Instant::now();
    process
        .terminate(Duration::from_secs(10))
        .await
        .expect("again");
    assert!(
        started.elapsed() < Duration::from_secs(1),
        "a no-op, not another ladder"
    );
    p.dispose().await.expect("dispose");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stopped_group_is_still_terminated() {
    let p = provider();
    let process = p
        .spawn(sh_collect("sleep 30 & echo $!; wait"))
        .await
        .expect("spawn");
    let child = first_lines(process.as_ref(), 1).await[0];
    crate::support::stop_group(process.pid() as i32);
    process
        .terminate(Duration::from_secs(5))
        .await
        .expect("terminate");
    assert!(!alive(child));
    p.dispose().await.expect("dispose");
}

/// "Owned" means "in the command's process group". A descendant that calls
/// `setsid` itself leaves the group (and the session): terminate neither
/// reaches nor waits for it, and that is the documented boundary.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_double_forked_setsid_descendant_leaves_the_group() {
    let p = provider();
    let process = p
        .spawn(sh_collect(
            "setsid sh -c 'echo $$; exec sleep 30' & sleep 30 & echo $!; wait",
        ))
        .await
        .expect("spawn");
    let pgid = process.pid() as i32;
    let pids = first_lines(process.as_ref(), 2).await;
    let escaped = pids
        .iter()
        .copied()
        .find(|pid| !group_members(pgid).contains(pid))
        .expect("one pid escaped the group");
    let member = pids
        .iter()
        .copied()
        .find(|pid| *pid != escaped)
        .expect("one pid stayed");
    assert!(group_members(pgid).contains(&member));

    process
        .terminate(Duration::from_millis(500))
        .await
        .expect("terminate proves the group empty");
    assert!(!alive(member), "the group member was terminated");
    assert!(alive(escaped), "the setsid escapee is outside the group");
    crate::support::kill(escaped);
    p.dispose().await.expect("dispose");
}

/// A group whose only member left is a zombie (its parent lives outside
/// the group and never reaps it) counts as empty.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_zombie_only_group_counts_as_empty() {
    let p = provider();
    // perl (Essential on Debian) moves itself to a group of its own in the
    // same session, forks a child that joins the command's group and exits
    // unreaped, and prints both pids.
    let script = r#"perl -e '$g = shift; setpgrp(0, 0); $| = 1;
        $pid = fork(); if ($pid == 0) { setpgrp(0, $g) or die "setpgrp: $!"; exit 0 }
        print "zombie $pid
keeper $$
"; sleep 30' $$ &
        sleep 0.5"#;
    let process = p.spawn(sh_collect(script)).await.expect("spawn");
    let pgid = process.pid() as i32;
    assert!(process.wait().await.expect("wait").success());
    let out =
        String::from_utf8(retained(process.as_ref(), OutputStream::Stdout).await).expect("utf-8");
    let pid_of = |label: &str| -> i32 {
        out.lines()
            .find_map(|line| line.strip_prefix(label))
            .unwrap_or_else(|| panic!("no {label:?} in {out:?}"))
            .trim()
            .parse()
            .expect("pid")
    };
    let (zombie, keeper) = (pid_of("zombie "), pid_of("keeper "));
    let stat = std::fs::read_to_string(format!("/proc/{zombie}/stat")).expect("zombie stat");
    let fields: Vec<&str> = stat
        .rsplit_once(')')
        .expect("stat")
        .1
        .split_whitespace()
        .collect();
    assert_eq!(
        (fields[0], fields[2]),
        ("Z", pgid.to_string().as_str()),
        "a zombie in the group"
    );
    assert_eq!(p.owned(), 1, "a zombie member keeps the group id in use");

    let started = Instant::now();
    process
        .terminate(Duration::from_secs(5))
        .await
        .expect("zombie-only is empty");
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "proven at once, not after the grace"
    );
    assert_eq!(p.owned(), 0);
    assert!(alive(keeper), "the keeper is in another group");
    crate::support::kill(keeper);
    p.dispose().await.expect("dispose");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn terminate_after_a_natural_exit_is_a_no_op() {
    let p = provider();
    let process = p.spawn(sh_collect("exit 3")).await.expect("spawn");
    assert_eq!(process.wait().await.expect("wait").code, Some(3));
    process
        .terminate(Duration::from_secs(1))
        .await
        .expect("nothing left");
    assert_eq!(
        process.wait().await.expect("wait").code,
        Some(3),
        "the status is unchanged"
    );
    p.dispose().await.expect("dispose");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_terminates_agree() {
    let p = provider();
    let process = p
        .spawn(sh_collect("trap '' TERM; sleep 30"))
        .await
        .expect("spawn");
    let (a, b) = tokio::join!(
        process.terminate(Duration::from_millis(200)),
        process.terminate(Duration::from_millis(200))
    );
    a.expect("first");
    b.expect("second");
    assert!(group_members(process.pid() as i32).is_empty());
    p.dispose().await.expect("dispose");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn disposal_terminates_every_group_it_still_owns() {
    let p = provider();
    let mut pids = Vec::new();
    for _ in 0..3 {
        let process = p
            .spawn(sh_collect("trap '' TERM; sleep 30 & echo $!; wait"))
            .await
            .expect("spawn");
        pids.push(process.pid() as i32);
        pids.push(first_lines(process.as_ref(), 1).await[0]);
    }
    assert_eq!(p.owned(), 3);
    p.dispose().await.expect("dispose");
    for pid in pids {
        assert!(!alive(pid), "{pid} survived disposal");
    }
    assert_eq!(p.owned(), 0);
}

/// A process whose main thread called `pthread_exit` shows state `Z` while
/// its other threads keep running: it must not count as a zombie.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_process_whose_main_thread_exited_is_still_live() {
    let dir = tempfile::tempdir().expect("tempdir");
    let source = dir.path().join("headless.c");
    std::fs::write(
        &source,
        r#"#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <unistd.h>
static void *run(void *arg) { (void)arg; for (;;) pause(); return 0; }
int main(void) {
    signal(SIGTERM, SIG_IGN);
    pthread_t thread;
    pthread_create(&thread, 0, run, 0);
    printf("ready\n");
    fflush(stdout);
    pthread_exit(0);
}
"#,
    )
    .expect("write source");
    let program = dir.path().join("headless");
    // `cc` is the linker every Rust build on Linux uses, so it is here.
    let built = std::process::Command::new("cc")
        .arg("-pthread")
        .arg("-o")
        .arg(&program)
        .arg(&source)
        .status()
        .expect("run cc");
    assert!(built.success(), "cc failed");

    let p = provider();
    let process = p
        .spawn(sh_collect(&format!("exec {}", program.display())))
        .await
        .expect("spawn");
    let pid = process.pid() as i32;
    // Wait until the main thread is gone and the other thread runs on.
    let headless = |pid: i32| {
        std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .ok()
            .and_then(|stat| {
                let fields: Vec<String> = stat
                    .rsplit_once(')')?
                    .1
                    .split_whitespace()
                    .map(str::to_owned)
                    .collect();
                Some((fields[0].clone(), fields[17].parse::<u32>().ok()?))
            })
    };
    let deadline = Instant::now() + Duration::from_secs(10);
    while headless(pid) != Some(("Z".to_owned(), 2)) {
        assert!(
            Instant::now() < deadline,
            "never headless: {:?}",
            headless(pid)
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }

    process
        .terminate(Duration::from_millis(200))
        .await
        .expect("terminate");
    let gone = headless(pid).is_none_or(|(_, threads)| threads <= 1);
    assert!(
        gone,
        "terminate returned while a thread still ran: {:?}",
        headless(pid)
    );
    assert_eq!(
        process.wait().await.expect("wait").signal,
        Some(Signal::KILL)
    );
    p.dispose().await.expect("dispose");
}
