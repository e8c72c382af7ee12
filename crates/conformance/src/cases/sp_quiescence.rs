//! When a process group counts as gone (docs/design.md §5.2 "terminate"):
//! only once no thread of it can run. A process whose main thread ended
//! with `pthread_exit` while another thread runs shows its leader as a
//! zombie, yet it still runs code and holds pipes; a provider that took the
//! zombie leader for the end of the group would report quiescence while
//! the group still runs.

use std::sync::Arc;
use std::time::{Duration, Instant};

use dsh_plugin_api::ErrorKind;
use dsh_plugin_api::subprocess::{ExitStatus, OutputMode, Process, Signal, SpawnSpec};
use futures::StreamExt;

use crate::check::{CaseResult, Failure, ensure, ensure_eq, show};
use crate::context::Cx;
use crate::registry::{CaseInfo, case};

pub(crate) const CASES: &[CaseInfo] = &[case!(
    "subprocess.terminate.zombie_leader_threads",
    Subprocess,
    [Subprocess, Shell],
    "a group whose leader thread exited while another thread runs is not quiescent: wait stays pending, terminate succeeds only once every thread is gone",
    zombie_leader_threads
)];

/// Ignores SIGTERM (for every thread: dispositions are per process), starts
/// a thread that keeps running, says `ready`, and ends the main thread with
/// `pthread_exit` — Python's `ctypes` reaches the C library without a
/// compiler in the world.
const PROGRAM: &str = r#"
import ctypes, signal, sys, threading, time
signal.signal(signal.SIGTERM, signal.SIG_IGN)
def spin():
    while True:
        time.sleep(0.05)
threading.Thread(target=spin).start()
sys.stdout.write("ready\n")
sys.stdout.flush()
ctypes.CDLL(None).pthread_exit(None)
"#;

/// The interpreter the case needs in the world.
const PYTHON: &str = "python3";

/// One thread of a process, as `ps -L` shows it inside the world.
#[derive(Debug)]
struct ThreadRow {
    tid: u32,
    stat: String,
}

impl ThreadRow {
    fn is_live(&self) -> bool {
        !self.stat.starts_with('Z') && !self.stat.starts_with('X')
    }
}

/// The threads of process `pid` (none once it is reaped), from inside the
/// world.
async fn threads_of(cx: &Cx, pid: u32) -> Result<Vec<ThreadRow>, Failure> {
    let pid = pid.to_string();
    // ps exits 1 when no process matches: that answer is "no threads".
    let out = cx
        .sh_ok(
            "probe: ps -L",
            r#"ps -L -o lwp= -o stat= -p "$1" || true"#,
            &[&pid],
        )
        .await?;
    String::from_utf8_lossy(&out)
        .lines()
        .filter(|line| !line.trim().is_empty())
        .map(|line| {
            let mut fields = line.split_whitespace();
            match (fields.next().map(str::parse), fields.next()) {
                (Some(Ok(tid)), Some(stat)) => Ok(ThreadRow {
                    tid,
                    stat: stat.to_owned(),
                }),
                _ => Err(Failure::new(format!(
                    "probe: ps -L: unparsable line {line:?}"
                ))),
            }
        })
        .collect()
}

fn show_threads(rows: &[ThreadRow]) -> String {
    rows.iter()
        .map(|row| format!("{} ({})", row.tid, row.stat))
        .collect::<Vec<_>>()
        .join(", ")
}

async fn zombie_leader_threads(cx: &Cx) -> CaseResult {
    match cx.sp().resolve_executable(PYTHON, &[]).await {
        Ok(_) => {}
        Err(err) if err.kind() == ErrorKind::NotFound => {
            return Err(Failure::unsupported(format!(
                "this world has no {PYTHON} on its PATH ({err}); the case needs it to end a main thread with pthread_exit while another thread runs"
            )));
        }
        Err(err) => {
            return Err(Failure::new(format!(
                "resolve_executable {PYTHON}: {}: {err}",
                err.kind()
            )));
        }
    }
    let mut spec = SpawnSpec::new(vec![PYTHON.to_owned(), "-c".to_owned(), PROGRAM.to_owned()]);
    spec.cwd = Some(cx.dir.clone());
    spec.stdout = OutputMode::Pipe;
    spec.stderr = OutputMode::Collect { limit: 4096 };
    let process = cx.spawn("spawn python3 (zombie leader)", spec).await?;
    let pid = process.pid();
    await_ready(cx, &process).await?;

    // The premise, seen from inside the world: the leader is a zombie and
    // another thread of it runs.
    let deadline = Instant::now() + Duration::from_secs(5);
    let rows = loop {
        let rows = threads_of(cx, pid).await?;
        let leader_zombie = rows
            .iter()
            .any(|row| row.tid == pid && row.stat.starts_with('Z'));
        if leader_zombie && rows.iter().any(ThreadRow::is_live) {
            break rows;
        }
        ensure!(
            Instant::now() < deadline,
            "process {pid}: expected a zombie leader thread and a running thread within 5 s, ps -L shows: {}",
            show_threads(&rows)
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };

    // While the thread runs, the command has not ended.
    if let Ok(status) = tokio::time::timeout(Duration::from_millis(500), process.wait()).await {
        return Err(Failure::new(format!(
            "wait resolved ({status:?}) while process {pid} still runs a thread (ps -L: {})",
            show_threads(&rows)
        )));
    }

    // SIGTERM is ignored, so only SIGKILL after the whole grace ends the
    // group: a terminate that succeeds sooner took the zombie leader for
    // the end of the group.
    let grace = Duration::from_millis(600);
    let started = Instant::now();
    cx.ok(
        &format!("terminate group {pid} (zombie leader, running thread)"),
        process.terminate(grace),
    )
    .await?;
    let took = started.elapsed();
    let left = threads_of(cx, pid).await?;
    let running: Vec<ThreadRow> = left.into_iter().filter(ThreadRow::is_live).collect();
    ensure!(
        running.is_empty(),
        "terminate of group {pid} succeeded after {} ms, but threads of it still run: {}",
        took.as_millis(),
        show_threads(&running)
    );
    ensure!(
        took >= grace - Duration::from_millis(50),
        "terminate of group {pid} succeeded after {} ms, before its {} ms grace ran out, though the group ignores SIGTERM",
        took.as_millis(),
        grace.as_millis()
    );
    let status = cx.ok("wait after terminate", process.wait()).await?;
    ensure_eq(
        "wait after terminate of the zombie leader's group",
        &status,
        &ExitStatus {
            code: None,
            signal: Some(Signal::KILL),
            timed_out: false,
        },
    )
}

/// Reads the pipe until the program's `ready` line (its thread runs by
/// then); on a premature end, the failure shows what python3 printed.
async fn await_ready(cx: &Cx, process: &Arc<dyn Process>) -> CaseResult {
    let Some(mut stdout) = process.take_stdout() else {
        return Err(Failure::new(
            "spawn with OutputMode::Pipe: take_stdout returned None",
        ));
    };
    let mut seen = Vec::new();
    cx.within("waiting for python3's ready line", async {
        while !seen.ends_with(b"ready\n") {
            match stdout.next().await {
                Some(Ok(bytes)) => seen.extend(bytes),
                _ => break,
            }
        }
    })
    .await?;
    if seen.ends_with(b"ready\n") {
        return Ok(());
    }
    let stderr = process
        .read_output(dsh_plugin_api::subprocess::OutputStream::Stderr, 0, 4096)
        .await
        .map(|snap| show(&snap.bytes))
        .unwrap_or_else(|err| format!("(unreadable: {err})"));
    Err(Failure::new(format!(
        "python3's output ended before its ready line: stdout {}, stderr {stderr}",
        show(&seen)
    )))
}
