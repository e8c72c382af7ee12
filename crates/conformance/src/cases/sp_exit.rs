//! How commands end (docs/design.md §5.2 "Exit", "terminate"): exit codes and
//! signals, drain grace with descendants holding the output, timeouts with
//! partial output, and the terminate ladder proven from inside the world.

use std::sync::Arc;
use std::time::{Duration, Instant};

use dsh_plugin_api::subprocess::{ExitStatus, OutputMode, OutputStream, Process, Signal};
use futures::StreamExt;

use crate::check::{CaseResult, Failure, ensure, ensure_bytes, ensure_eq, fail, show};
use crate::commands::sh_spec;
use crate::context::Cx;
use crate::process_table::show_rows;
use crate::registry::{CaseInfo, case};

pub(crate) const CASES: &[CaseInfo] = &[
    case!(
        "subprocess.wait.exit_code",
        Subprocess,
        [Subprocess],
        "wait reports the exit code (0, 7, 138 — a code, not a signal), the same on every and concurrent calls",
        exit_code
    ),
    case!(
        "subprocess.wait.signal",
        Subprocess,
        [Subprocess],
        "a command killed by a signal reports that signal and no code",
        exit_signal
    ),
    case!(
        "subprocess.wait.drain_grace",
        Subprocess,
        [Subprocess, Shell],
        "collect/inherit: a descendant holding the output is cut off after the grace, the status returned, the group kept",
        drain_grace
    ),
    case!(
        "subprocess.wait.drain_within_grace",
        Subprocess,
        [Subprocess],
        "output a descendant writes within the grace is collected, and wait does not sit out the whole grace",
        drain_within_grace
    ),
    case!(
        "subprocess.wait.pipe_not_held",
        Subprocess,
        [Subprocess],
        "pipe mode: wait returns when the direct child exits; the pipe stays open until terminate, then ends",
        pipe_not_held
    ),
    case!(
        "subprocess.timeout.partial_output",
        Subprocess,
        [Subprocess, Shell],
        "on timeout the group is stopped, wait reports timed_out and a signal, and the output so far is kept",
        timeout_partial_output
    ),
    case!(
        "subprocess.terminate.group",
        Subprocess,
        [Subprocess, Shell],
        "terminate stops the whole group (leader and background children) with SIGTERM; ps finds none of it",
        terminate_group
    ),
    case!(
        "subprocess.terminate.ignores_term",
        Subprocess,
        [Subprocess, Shell],
        "a group ignoring SIGTERM is killed after the grace; wait reports SIGKILL; ps finds none; terminate again is a no-op",
        terminate_ignores_term
    ),
    case!(
        "subprocess.terminate.after_exit",
        Subprocess,
        [Subprocess],
        "terminate after a natural exit succeeds and leaves the reported status unchanged",
        terminate_after_exit
    ),
];

async fn wait_status(
    cx: &Cx,
    process: &Arc<dyn Process>,
    what: &str,
) -> Result<ExitStatus, Failure> {
    cx.ok(&format!("wait for {what}"), process.wait()).await
}

async fn exit_code(cx: &Cx) -> CaseResult {
    for code in [0, 7, 138] {
        let what = format!("sh -c 'exit {code}'");
        let process = cx
            .spawn(&what, sh_spec(&format!("exit {code}"), &[], Some(&cx.dir)))
            .await?;
        let (first, second) = futures::future::join(process.wait(), process.wait()).await;
        let expected = ExitStatus {
            code: Some(code),
            signal: None,
            timed_out: false,
        };
        let first = first.map_err(|e| Failure::new(format!("wait for {what}: {e}")))?;
        ensure_eq(&format!("wait for {what}"), &first, &expected)?;
        let second = second.map_err(|e| Failure::new(format!("wait for {what}: {e}")))?;
        ensure_eq(&format!("a concurrent wait for {what}"), &second, &expected)?;
        let third = wait_status(cx, &process, &what).await?;
        ensure_eq(&format!("a later wait for {what}"), &third, &expected)?;
        ensure_eq(
            &format!("success() of {what}"),
            &first.success(),
            &(code == 0),
        )?;
    }
    Ok(())
}

async fn exit_signal(cx: &Cx) -> CaseResult {
    for (name, signal) in [("USR1", Signal::USR1), ("KILL", Signal::KILL)] {
        let what = format!("sh -c 'kill -s {name} $$'");
        let process = cx
            .spawn(
                &what,
                sh_spec(&format!("kill -s {name} $$"), &[], Some(&cx.dir)),
            )
            .await?;
        let status = wait_status(cx, &process, &what).await?;
        ensure_eq(
            &format!("wait for {what}"),
            &status,
            &ExitStatus {
                code: None,
                signal: Some(signal),
                timed_out: false,
            },
        )?;
    }
    Ok(())
}

/// A shell that leaves a long sleeper holding its output, writes one line
/// to the stream named by `$1` (`1` or `2`), then exits 0.
const LINGERING: &str = "sleep 30 & echo 'dsh-conformance: drain-grace check line' >&$1";

/// What [`LINGERING`] writes.
const LINGERING_LINE: &[u8] = b"dsh-conformance: drain-grace check line\n";

async fn drain_grace(cx: &Cx) -> CaseResult {
    let grace = Duration::from_millis(300);
    // Inherit is checked on stderr so the host's stdout (e.g. the JSON of
    // `dsh conformance --json`) stays clean.
    for (label, stream, mode) in [
        (
            "collect",
            OutputStream::Stdout,
            OutputMode::Collect { limit: 4096 },
        ),
        ("inherit", OutputStream::Stderr, OutputMode::Inherit),
    ] {
        let fd = if stream == OutputStream::Stdout {
            "1"
        } else {
            "2"
        };
        let mut spec = sh_spec(LINGERING, &[fd], Some(&cx.dir));
        (spec.stdout, spec.stderr) = if stream == OutputStream::Stdout {
            (mode, OutputMode::Null)
        } else {
            (OutputMode::Null, mode)
        };
        spec.drain_grace = grace;
        let started = Instant::now();
        let process = cx
            .spawn(&format!("spawn lingering writer ({label})"), spec)
            .await?;
        let status = wait_status(cx, &process, &format!("the lingering writer ({label})")).await?;
        let waited = started.elapsed();
        ensure!(
            waited < Duration::from_secs(10),
            "wait ({label}) with a 300 ms drain grace took {} ms while a descendant held the output",
            waited.as_millis()
        );
        ensure!(
            status.success(),
            "lingering writer ({label}): expected exit 0, got {status:?}"
        );
        if label == "collect" {
            let snap = cx
                .ok(
                    "read_output stdout",
                    process.read_output(OutputStream::Stdout, 0, 4096),
                )
                .await?;
            ensure_bytes(
                "collected output before the disconnect",
                &snap.bytes,
                LINGERING_LINE,
            )?;
        }
        let pid = process.pid();
        let members = cx.group_members(pid).await?;
        ensure!(
            members.iter().any(|row| row.args.starts_with("sleep")),
            "after the drain grace ({label}) the descendant sleep of group {pid} is gone: the group must stay owned, not killed (ps: {})",
            show_rows(&members)
        );
        terminate_proven(cx, &process, Duration::from_millis(500)).await?;
    }
    Ok(())
}

async fn drain_within_grace(cx: &Cx) -> CaseResult {
    let mut spec = sh_spec("(sleep 0.3; echo late) & echo early", &[], Some(&cx.dir));
    spec.stdout = OutputMode::Collect { limit: 4096 };
    spec.drain_grace = Duration::from_secs(8);
    let started = Instant::now();
    let process = cx.spawn("spawn early/late writer", spec).await?;
    let status = wait_status(cx, &process, "the early/late writer").await?;
    let waited = started.elapsed();
    ensure!(
        status.success(),
        "early/late writer: expected exit 0, got {status:?}"
    );
    let snap = cx
        .ok(
            "read_output stdout",
            process.read_output(OutputStream::Stdout, 0, 4096),
        )
        .await?;
    ensure_bytes(
        "output written by a descendant within the grace",
        &snap.bytes,
        b"early\nlate\n",
    )?;
    ensure!(
        waited < Duration::from_secs(6),
        "wait took {} ms: it sat out the 8 s grace although the output closed after 0.3 s",
        waited.as_millis()
    );
    Ok(())
}

async fn pipe_not_held(cx: &Cx) -> CaseResult {
    let mut spec = sh_spec(LINGERING, &["1"], Some(&cx.dir));
    spec.stderr = OutputMode::Null;
    let started = Instant::now();
    let process = cx.spawn("spawn lingering writer (pipe)", spec).await?;
    let Some(mut stdout) = process.take_stdout() else {
        fail!("spawn with OutputMode::Pipe: take_stdout returned None");
    };
    let status = wait_status(cx, &process, "the lingering writer (pipe)").await?;
    ensure!(
        status.success(),
        "lingering writer (pipe): expected exit 0, got {status:?}"
    );
    ensure!(
        started.elapsed() < Duration::from_secs(10),
        "wait (pipe) took {} ms: it waited for the descendant holding the pipe",
        started.elapsed().as_millis()
    );
    let first = cx.within("read the pipe", stdout.next()).await?;
    match first {
        Some(Ok(bytes)) => ensure_bytes("first pipe chunk", &bytes, LINGERING_LINE)?,
        other => fail!("read the pipe: expected the first line, got {other:?}"),
    }
    let open = tokio::time::timeout(Duration::from_millis(300), stdout.next()).await;
    ensure!(
        open.is_err(),
        "the pipe ended while a descendant still held it: {:?}",
        open.ok()
    );
    cx.ok("terminate", process.terminate(Duration::from_millis(500)))
        .await?;
    let mut rest = Vec::new();
    cx.within("the pipe ending after terminate", async {
        while let Some(chunk) = stdout.next().await {
            match chunk {
                Ok(bytes) => rest.extend(bytes),
                Err(_) => break,
            }
        }
    })
    .await?;
    ensure!(
        rest.is_empty(),
        "the pipe delivered unexpected bytes after terminate: {}",
        show(&rest)
    );
    Ok(())
}

async fn timeout_partial_output(cx: &Cx) -> CaseResult {
    let mut spec = sh_spec("echo before; sleep 30; echo after", &[], Some(&cx.dir));
    spec.stdout = OutputMode::Collect { limit: 4096 };
    spec.timeout = Some(Duration::from_millis(500));
    let started = Instant::now();
    let process = cx
        .spawn("spawn slow command with a 500 ms timeout", spec)
        .await?;
    let status = wait_status(cx, &process, "the timed-out command").await?;
    let waited = started.elapsed();
    ensure!(
        status.timed_out,
        "wait after the timeout: timed_out is false in {status:?}"
    );
    ensure!(
        !status.success(),
        "wait after the timeout: success() is true for {status:?}"
    );
    ensure!(
        status.signal.is_some() && status.code.is_none(),
        "wait after the timeout: expected the provider's signal and no code, got {status:?}"
    );
    ensure!(
        waited >= Duration::from_millis(400) && waited < Duration::from_secs(12),
        "wait after a 500 ms timeout returned after {} ms",
        waited.as_millis()
    );
    let snap = cx
        .ok(
            "read_output stdout",
            process.read_output(OutputStream::Stdout, 0, 4096),
        )
        .await?;
    ensure_bytes(
        "output kept from before the timeout",
        &snap.bytes,
        b"before\n",
    )?;
    let pid = process.pid();
    let members = eventually_empty(cx, pid).await?;
    ensure!(
        members.is_empty(),
        "3 s after the timeout, group {pid} still runs: {}",
        show_rows(&members)
    );
    Ok(())
}

/// Terminates the group of `process` and proves from inside the world that
/// nothing of it runs any more (zombies aside).
async fn terminate_proven(cx: &Cx, process: &Arc<dyn Process>, grace: Duration) -> CaseResult {
    let pid = process.pid();
    cx.ok(&format!("terminate group {pid}"), process.terminate(grace))
        .await?;
    let left = cx.group_members(pid).await?;
    ensure!(
        left.is_empty(),
        "terminate of group {pid} succeeded but ps still finds: {}",
        show_rows(&left)
    );
    Ok(())
}

/// Polls the process table until group `pgid` is empty (3 s at most) and
/// returns what is left.
async fn eventually_empty(cx: &Cx, pgid: u32) -> Result<Vec<crate::process_table::PsRow>, Failure> {
    let mut members = Vec::new();
    for _ in 0..30 {
        members = cx.group_members(pgid).await?;
        if members.is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    Ok(members)
}

/// Reads the pipe until `marker` arrives (the script is set up by then).
async fn await_marker(cx: &Cx, process: &Arc<dyn Process>, marker: &[u8]) -> CaseResult {
    let Some(mut stdout) = process.take_stdout() else {
        fail!("spawn with OutputMode::Pipe: take_stdout returned None");
    };
    let mut seen = Vec::new();
    cx.within(&format!("waiting for {}", show(marker)), async {
        while !seen.windows(marker.len()).any(|w| w == marker) {
            match stdout.next().await {
                Some(Ok(bytes)) => seen.extend(bytes),
                _ => break,
            }
        }
    })
    .await?;
    ensure!(
        seen.windows(marker.len()).any(|w| w == marker),
        "the command's output ended before {}: got {}",
        show(marker),
        show(&seen)
    );
    // Keep draining in the background is not needed: the marker is the
    // last thing these scripts print.
    drop(stdout);
    Ok(())
}

async fn terminate_group(cx: &Cx) -> CaseResult {
    let mut spec = sh_spec("sleep 30 & sleep 31 & echo ready; wait", &[], Some(&cx.dir));
    spec.stderr = OutputMode::Null;
    let process = cx.spawn("spawn a group of three", spec).await?;
    await_marker(cx, &process, b"ready").await?;
    let pid = process.pid();
    let before = cx.group_members(pid).await?;
    ensure!(
        before.len() >= 3,
        "group {pid}: expected the shell and two sleeps, ps finds: {}",
        show_rows(&before)
    );
    terminate_proven(cx, &process, Duration::from_secs(3)).await?;
    let status = wait_status(cx, &process, "the terminated group").await?;
    ensure_eq(
        "wait after terminate",
        &status,
        &ExitStatus {
            code: None,
            signal: Some(Signal::TERM),
            timed_out: false,
        },
    )
}

async fn terminate_ignores_term(cx: &Cx) -> CaseResult {
    // SIG_IGN is inherited: the background sleep ignores TERM too.
    let script = "trap '' TERM; sleep 30 & echo ready; while :; do sleep 1; done";
    let mut spec = sh_spec(script, &[], Some(&cx.dir));
    spec.stderr = OutputMode::Null;
    let process = cx.spawn("spawn a TERM-ignoring group", spec).await?;
    await_marker(cx, &process, b"ready").await?;
    let started = Instant::now();
    terminate_proven(cx, &process, Duration::from_millis(300)).await?;
    ensure!(
        started.elapsed() < Duration::from_secs(10),
        "terminate of a TERM-ignoring group with a 300 ms grace took {} ms",
        started.elapsed().as_millis()
    );
    let status = wait_status(cx, &process, "the killed group").await?;
    ensure_eq(
        "wait after terminate of a TERM-ignoring group",
        &status,
        &ExitStatus {
            code: None,
            signal: Some(Signal::KILL),
            timed_out: false,
        },
    )?;
    let again = Instant::now();
    cx.ok(
        "terminate a second time",
        process.terminate(Duration::from_millis(300)),
    )
    .await?;
    ensure!(
        again.elapsed() < Duration::from_secs(5),
        "a second terminate after proven quiescence took {} ms (it should be a no-op)",
        again.elapsed().as_millis()
    );
    let status_again = wait_status(cx, &process, "the killed group").await?;
    ensure_eq("wait after a second terminate", &status_again, &status)
}

async fn terminate_after_exit(cx: &Cx) -> CaseResult {
    let process = cx
        .spawn("sh -c 'exit 3'", sh_spec("exit 3", &[], Some(&cx.dir)))
        .await?;
    let status = wait_status(cx, &process, "sh -c 'exit 3'").await?;
    cx.ok(
        "terminate after exit",
        process.terminate(Duration::from_millis(200)),
    )
    .await?;
    let after = wait_status(cx, &process, "sh -c 'exit 3' after terminate").await?;
    ensure_eq("wait after terminate of an exited command", &after, &status)?;
    ensure_eq("exit code", &status.code, &Some(3))
}
