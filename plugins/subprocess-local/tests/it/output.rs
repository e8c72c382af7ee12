//! Output modes: collect tails with offset reads, null counting, spill
//! files, drain grace, timeouts with partial output.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::time::{Duration, Instant};

use crate::support::{alive, provider, retained, sh, sh_collect, stdout_of};
use dsh_plugin_api::subprocess::{
    OutputMode, OutputStream, Signal, SpawnSpec, SpillSpec, SubprocessProvider,
};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn collect_keeps_a_bounded_tail_with_offset_reads() {
    let p = provider();
    let mut spec = sh("printf 0123456789abcdef; printf oops >&2");
    spec.stdout = OutputMode::Collect { limit: 8 };
    spec.stderr = OutputMode::Collect { limit: 100 };
    let process = p.spawn(spec).await.expect("spawn");
    assert!(
        process.take_stdout().is_none(),
        "collect mode has no stream"
    );
    assert!(process.wait().await.expect("wait").success());

    let all = process
        .read_output(OutputStream::Stdout, 0, 100)
        .await
        .expect("read");
    assert_eq!((all.total, all.offset, all.truncated), (16, 8, true));
    assert_eq!(all.bytes, &b"89abcdef"[..]);
    assert_eq!(all.spill, None);
    let window = process
        .read_output(OutputStream::Stdout, 10, 3)
        .await
        .expect("read");
    assert_eq!((window.offset, &window.bytes[..]), (10, &b"abc"[..]));
    let past = process
        .read_output(OutputStream::Stdout, 99, 3)
        .await
        .expect("read");
    assert_eq!((past.offset, past.bytes.len()), (16, 0));

    let err = process
        .read_output(OutputStream::Stderr, 0, 100)
        .await
        .expect("read");
    assert_eq!((err.total, err.offset, err.truncated), (4, 0, false));
    assert_eq!(err.bytes, &b"oops"[..]);
    p.dispose().await.expect("dispose");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn null_output_is_counted_not_kept() {
    let p = provider();
    let mut spec = sh("head -c 100000 /dev/zero");
    spec.stdout = OutputMode::Null;
    let process = p.spawn(spec).await.expect("spawn");
    assert!(process.wait().await.expect("wait").success());
    let snapshot = process
        .read_output(OutputStream::Stdout, 0, 10)
        .await
        .expect("read");
    assert_eq!(
        (snapshot.total, snapshot.offset, snapshot.truncated),
        (100_000, 100_000, true)
    );
    assert!(snapshot.bytes.is_empty());
    p.dispose().await.expect("dispose");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn spill_copies_raw_bytes_privately_cut_at_the_limit_and_disposal_removes_it() {
    let p = provider();
    let mut spec = sh(
        "head -c 3000 /dev/urandom > /tmp/dsh-spill-src.$$; cat /tmp/dsh-spill-src.$$; cat /tmp/dsh-spill-src.$$ >&2; rm /tmp/dsh-spill-src.$$",
    );
    spec.stdout = OutputMode::Collect { limit: 16 };
    spec.stderr = OutputMode::Pipe;
    spec.spill = Some(SpillSpec { limit: 1000 });
    let process = p.spawn(spec).await.expect("spawn");
    let stderr = dsh_plugin_api::stream::collect_bytes(process.take_stderr().expect("stderr"))
        .await
        .expect("stderr");
    assert!(process.wait().await.expect("wait").success());

    let out = process
        .read_output(OutputStream::Stdout, 0, 16)
        .await
        .expect("read");
    let out_spill = out.spill.expect("stdout spill");
    assert_eq!(
        (out.total, out_spill.len, out_spill.complete),
        (3000, 1000, false)
    );
    let spilled = std::fs::read(&out_spill.path).expect("spill file");
    assert_eq!(spilled, stderr[..1000], "spill holds the raw prefix");
    assert_eq!(out.bytes, stderr[3000 - 16..], "the tail is the raw suffix");
    let mode = std::fs::metadata(&out_spill.path)
        .expect("meta")
        .permissions()
        .mode()
        & 0o777;
    assert_eq!(mode, 0o600);
    let dir = Path::new(&out_spill.path)
        .parent()
        .expect("dir")
        .to_path_buf();
    assert_eq!(
        std::fs::metadata(&dir).expect("dir").permissions().mode() & 0o777,
        0o700
    );
    assert_eq!(p.spill_dir().as_deref(), Some(dir.as_path()));

    // Pipe mode spills too, on the caller's reads.
    let err = process
        .read_output(OutputStream::Stderr, 0, 16)
        .await
        .expect("read");
    let err_spill = err.spill.expect("stderr spill");
    assert_eq!(
        (err.total, err_spill.len, err_spill.complete),
        (3000, 1000, false)
    );
    assert_eq!(
        std::fs::read(&err_spill.path).expect("spill"),
        stderr[..1000]
    );

    let small = {
        let mut spec = sh_collect("printf small");
        spec.spill = Some(SpillSpec { limit: 5 });
        let process = p.spawn(spec).await.expect("spawn");
        process.wait().await.expect("wait");
        process
            .read_output(OutputStream::Stdout, 0, 0)
            .await
            .expect("read")
            .spill
            .expect("spill")
    };
    assert_eq!(
        (small.len, small.complete),
        (5, true),
        "exactly at the limit is complete"
    );

    p.dispose().await.expect("dispose");
    assert!(!dir.exists(), "disposal removes the private directory");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn drain_grace_returns_the_status_while_descendants_hold_the_output() {
    let p = provider();
    let mut spec = sh_collect("sleep 30 & echo $!; echo hi");
    spec.drain_grace = Duration::from_millis(200);
    let started = Instant::now();
    let process = p.spawn(spec).await.expect("spawn");
    let status = process.wait().await.expect("wait");
    let waited = started.elapsed();
    assert!(status.success(), "{status:?}");
    assert!(
        waited >= Duration::from_millis(200),
        "waited for the grace: {waited:?}"
    );
    assert!(
        waited < Duration::from_secs(5),
        "but not for the sleeper: {waited:?}"
    );
    let out =
        String::from_utf8(retained(process.as_ref(), OutputStream::Stdout).await).expect("utf-8");
    let sleeper: i32 = out.lines().next().expect("pid line").parse().expect("pid");
    assert!(out.ends_with("hi\n"), "{out}");
    assert!(alive(sleeper), "the descendant keeps running");
    assert_eq!(p.owned(), 1, "the group is still owned");

    process
        .terminate(Duration::from_millis(500))
        .await
        .expect("terminate");
    assert!(!alive(sleeper), "terminate ended the descendant");
    assert_eq!(p.owned(), 0);
    process
        .terminate(Duration::from_millis(500))
        .await
        .expect("no-op once quiescent");
    p.dispose().await.expect("dispose");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_command_that_closes_stdout_but_keeps_running_is_still_waited_for() {
    let p = provider();
    let process = p
        .spawn(sh_collect("echo before; exec >&-; sleep 30"))
        .await
        .expect("spawn");
    let deadline = Instant::now() + Duration::from_secs(5);
    while retained(process.as_ref(), OutputStream::Stdout).await != b"before\n" {
        assert!(Instant::now() < deadline, "output arrives");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let pending = tokio::time::timeout(Duration::from_millis(300), process.wait()).await;
    assert!(
        pending.is_err(),
        "end of output is not the end of the process"
    );
    process
        .terminate(Duration::from_millis(500))
        .await
        .expect("terminate");
    let status = process.wait().await.expect("wait");
    assert_eq!(
        status.signal,
        Some(Signal::TERM),
        "our own TERM is reported as a signal"
    );
    p.dispose().await.expect("dispose");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn timeout_terminates_and_keeps_partial_output() {
    let p = provider();
    let mut spec = sh_collect("echo partial; sleep 30");
    spec.timeout = Some(Duration::from_millis(300));
    let started = Instant::now();
    let process = p.spawn(spec).await.expect("spawn");
    let status = process.wait().await.expect("wait");
    assert!(status.timed_out, "{status:?}");
    assert!(!status.success());
    assert_eq!(status.signal, Some(Signal::TERM));
    assert!(started.elapsed() < Duration::from_secs(5));
    assert_eq!(
        retained(process.as_ref(), OutputStream::Stdout).await,
        b"partial\n"
    );
    assert!(
        crate::support::eventually(Duration::from_secs(3), || p.owned() == 0).await,
        "the group was proven empty"
    );

    let mut spec = sh("echo fast");
    spec.timeout = Some(Duration::from_secs(30));
    let process = p.spawn(spec).await.expect("spawn");
    assert_eq!(stdout_of(process.as_ref()).await, b"fast\n");
    let status = process.wait().await.expect("wait");
    assert!(status.success() && !status.timed_out);
    p.dispose().await.expect("dispose");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dropping_the_handle_does_not_stop_the_process_and_disposal_does() {
    let p = provider();
    let process = p
        .spawn(sh_collect("echo $$; sleep 30"))
        .await
        .expect("spawn");
    let pid = process.pid() as i32;
    drop(process);
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(alive(pid), "dropping a handle stops nothing");
    assert_eq!(p.owned(), 1);
    p.dispose().await.expect("dispose");
    assert!(!alive(pid), "disposal terminated the group");
    let err = p
        .spawn(SpawnSpec::new(["true"]))
        .await
        .err()
        .expect("refused");
    assert_eq!(err.kind(), dsh_plugin_api::ErrorKind::Closed);
    assert!(err.message().starts_with("spawn"), "{err}");
    p.dispose().await.expect("dispose twice");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn output_buffered_at_exit_survives_a_zero_drain_grace() {
    let p = provider();
    for _ in 0..20 {
        // Whatever the child wrote before exiting sits in the pipe; a zero
        // grace must still collect it (it only cuts off later writers).
        let mut spec = sh_collect("head -c 50000 /dev/zero; printf end");
        spec.drain_grace = Duration::ZERO;
        let process = p.spawn(spec).await.expect("spawn");
        assert!(process.wait().await.expect("wait").success());
        let out = process
            .read_output(OutputStream::Stdout, 0, 0)
            .await
            .expect("read");
        assert_eq!(out.total, 50_003);
    }
    // A descendant still writing when the grace runs out is cut off, and
    // the status comes back anyway.
    let mut spec = sh_collect("(while :; do echo tick; sleep 0.01; done) & echo started");
    spec.drain_grace = Duration::from_millis(100);
    let process = p.spawn(spec).await.expect("spawn");
    let started = Instant::now();
    assert!(process.wait().await.expect("wait").success());
    assert!(started.elapsed() < Duration::from_secs(5));
    let before = process
        .read_output(OutputStream::Stdout, 0, 0)
        .await
        .expect("read")
        .total;
    tokio::time::sleep(Duration::from_millis(100)).await;
    let after = process
        .read_output(OutputStream::Stdout, 0, 0)
        .await
        .expect("read")
        .total;
    assert_eq!(before, after, "the output was disconnected");
    process
        .terminate(Duration::from_millis(500))
        .await
        .expect("terminate");
    p.dispose().await.expect("dispose");
}
