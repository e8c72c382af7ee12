//! Durable commands (docs/design.md §5.2.1): output retained in the world
//! and re-read from any offset by new attachments, the true exit status
//! whoever waits, bounded retention that says what it dropped, ids that
//! cannot be forged, terminate that leaves nothing of the group, and
//! forget that removes the command. A provider without durable commands
//! gets these cases skipped.

use dsh_plugin_api::ErrorKind;
use dsh_plugin_api::durable::{AttachSpec, Attached, DurableCommand, DurableSpec, DurableState};
use dsh_plugin_api::subprocess::{OutputMode, Signal, SpawnSpec, StdinMode};
use std::time::Duration;

use crate::check::{CaseResult, Failure, ensure, ensure_bytes, ensure_eq, fail};
use crate::commands::{drain, sh_spec};
use crate::context::Cx;
use crate::process_table::show_rows;
use crate::registry::{CaseInfo, case};

pub(crate) const CASES: &[CaseInfo] = &[
    case!(
        "subprocess.durable.attach_from_offsets",
        Subprocess,
        [Subprocess],
        "attachments from 0 (while it runs), the middle and the end see exactly the command's output from there, and wait its true status",
        attach_from_offsets
    ),
    case!(
        "subprocess.durable.retention_reports_drops",
        Subprocess,
        [Subprocess],
        "output beyond the retention is dropped from the front: an attach from 0 resumes where retention starts, and the bytes from there are exact",
        retention_reports_drops
    ),
    case!(
        "subprocess.durable.piped_attachment_is_lossless",
        Subprocess,
        [Subprocess],
        "a piped attachment read slowly gets every byte though the output is 20 times the retention: the command waits for it, as for a pipe",
        piped_attachment_is_lossless
    ),
    case!(
        "subprocess.durable.ids",
        Subprocess,
        [Subprocess],
        "malformed ids are refused as invalid input, unknown ones as not found; stdin pipes are refused",
        ids
    ),
    case!(
        "subprocess.durable.terminate_and_forget",
        Subprocess,
        [Subprocess, Shell],
        "forget refuses a running command; terminate from a new attachment leaves no process of the group; forget then removes it",
        terminate_and_forget
    ),
    case!(
        "subprocess.durable.timeout",
        Subprocess,
        [Subprocess],
        "a durable command's timeout is enforced in the world: wait reports timed_out and the signal",
        timeout
    ),
];

/// Prints `line 1` … `line 60`, one every 10 ms, `done` on stderr, exits 5.
const NUMBERED: &str = r#"i=1
while [ "$i" -le 60 ]; do echo "line $i"; i=$((i + 1)); sleep 0.01; done
echo done >&2
exit 5"#;

fn numbered_output() -> Vec<u8> {
    (1..=60)
        .map(|i| format!("line {i}\n"))
        .collect::<String>()
        .into_bytes()
}

fn quiet(spec: &mut SpawnSpec) {
    spec.stdout = OutputMode::Null;
    spec.stderr = OutputMode::Null;
}

/// Attaches to `id` from `from` and reads both streams to their end.
async fn read_from(cx: &Cx, id: &str, from: u64) -> Result<(Attached, Vec<u8>, Vec<u8>), Failure> {
    let attached = cx
        .ok(
            &format!("attach from {from}"),
            cx.sp().attach(AttachSpec::new(id, from)),
        )
        .await?;
    let (Some(out), Some(err)) = (
        attached.process.take_stdout(),
        attached.process.take_stderr(),
    ) else {
        fail!("attach from {from}: piped streams missing");
    };
    let (out, err) = cx
        .within(
            "read the attachment",
            futures::future::join(drain(out), drain(err)),
        )
        .await?;
    let out = out.map_err(|err| Failure::new(format!("read stdout from {from}: {err}")))?;
    let err = err.map_err(|err| Failure::new(format!("read stderr from {from}: {err}")))?;
    Ok((attached, out, err))
}

async fn listed(cx: &Cx, id: &str) -> Result<Option<DurableCommand>, Failure> {
    let commands = cx.ok("list_durable", cx.sp().list_durable()).await?;
    Ok(commands.into_iter().find(|command| command.id == id))
}

async fn attach_from_offsets(cx: &Cx) -> CaseResult {
    let mut spec = sh_spec(NUMBERED, &[], None);
    quiet(&mut spec);
    let started = cx
        .spawn_durable("spawn_durable", spec, DurableSpec::default())
        .await?;
    let id = started.id.clone();
    ensure!(
        dsh_plugin_api::durable::validate_id("spawn_durable", &id).is_ok(),
        "the id {id:?} is not 32 lowercase hex digits"
    );
    ensure_eq("spawn_durable resumes at", &started.from, &[0, 0])?;
    let expected = numbered_output();

    // From 0 while it still runs.
    let (running, out, err) = read_from(cx, &id, 0).await?;
    ensure_eq(
        "pid of the attachment",
        &running.process.pid(),
        &started.process.pid(),
    )?;
    ensure_bytes("stdout attached from 0", &out, &expected)?;
    ensure_bytes("stderr attached from 0", &err, b"done\n")?;
    let status = cx.ok("wait (attachment)", running.process.wait()).await?;
    ensure_eq("exit code (attachment)", &status.code, &Some(5))?;
    let status = cx.ok("wait (spawn handle)", started.process.wait()).await?;
    ensure_eq("exit code (spawn handle)", &status.code, &Some(5))?;

    // It ended: the middle and the end.
    let middle = expected.len() as u64 / 2;
    let (mid, out, err) = read_from(cx, &id, middle).await?;
    ensure_eq("resume offsets from the middle", &mid.from, &[middle, 5])?;
    ensure_bytes("stdout from the middle", &out, &expected[middle as usize..])?;
    ensure_bytes("stderr from past its end", &err, b"")?;
    let end = expected.len() as u64;
    let (last, out, _) = read_from(cx, &id, end).await?;
    ensure_bytes("stdout from the end", &out, b"")?;
    let status = cx
        .ok("wait (attached after the end)", last.process.wait())
        .await?;
    ensure_eq("exit code after the end", &status.code, &Some(5))?;

    let snapshot = cx
        .ok(
            "read_output",
            mid.process
                .read_output(dsh_plugin_api::subprocess::OutputStream::Stdout, 0, 1 << 20),
        )
        .await?;
    ensure_eq("read_output total (command offsets)", &snapshot.total, &end)?;

    let Some(command) = listed(cx, &id).await? else {
        fail!("list_durable does not list {id}");
    };
    ensure_eq("listed pid", &command.pid, &started.process.pid())?;
    ensure_eq("listed totals", &command.totals, &[end, 5])?;
    ensure!(
        matches!(command.state, DurableState::Ended(status) if status.code == Some(5)),
        "listed state {:?}, expected ended with code 5",
        command.state
    );
    ensure_eq("listed argv[0]", &command.argv[0], &"sh".to_owned())?;
    Ok(())
}

async fn retention_reports_drops(cx: &Cx) -> CaseResult {
    const LINES: u32 = 100_000;
    const RETAIN: u64 = 64 << 10;
    let mut spec = sh_spec("seq 1 \"$1\"", &[&LINES.to_string()], None);
    quiet(&mut spec);
    let started = cx
        .spawn_durable("spawn_durable", spec, DurableSpec { retain: RETAIN })
        .await?;
    cx.ok("wait", started.process.wait()).await?;
    let expected: Vec<u8> = (1..=LINES)
        .map(|i| format!("{i}\n"))
        .collect::<String>()
        .into_bytes();
    let Some(command) = listed(cx, &started.id).await? else {
        fail!("list_durable does not list {}", started.id);
    };
    ensure_eq("total", &command.totals[0], &(expected.len() as u64))?;
    let kept = command.totals[0] - command.retained_from[0];
    ensure!(
        command.retained_from[0] > 0 && kept >= RETAIN,
        "retained from {} of {} bytes with retain {RETAIN}: expected some dropped and at least {RETAIN} kept",
        command.retained_from[0],
        command.totals[0]
    );
    let (attached, out, _) = read_from(cx, &started.id, 0).await?;
    ensure_eq(
        "resume offset reported (the dropped byte count)",
        &attached.from[0],
        &command.retained_from[0],
    )?;
    ensure_bytes(
        "stdout from the first retained byte",
        &out,
        &expected[command.retained_from[0] as usize..],
    )
}

async fn piped_attachment_is_lossless(cx: &Cx) -> CaseResult {
    const LINES: u32 = 200_000;
    const RETAIN: u64 = 64 << 10;
    let mut spec = sh_spec("seq 1 \"$1\"", &[&LINES.to_string()], None);
    spec.stderr = OutputMode::Null;
    let started = cx
        .spawn_durable("spawn_durable", spec, DurableSpec { retain: RETAIN })
        .await?;
    let Some(mut out) = started.process.take_stdout() else {
        fail!("spawn_durable: stdout pipe missing");
    };
    let expected: Vec<u8> = (1..=LINES)
        .map(|i| format!("{i}\n"))
        .collect::<String>()
        .into_bytes();
    let mut got = Vec::with_capacity(expected.len());
    let read = async {
        while let Some(chunk) = futures::StreamExt::next(&mut out).await {
            got.extend_from_slice(&chunk?);
            // A slow reader: the writer is far faster.
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        Ok::<_, dsh_plugin_api::Error>(())
    };
    cx.within("read slowly to the end", read)
        .await?
        .map_err(|err| Failure::new(format!("read stdout: {err}")))?;
    ensure_eq("bytes read", &got.len(), &expected.len())?;
    ensure_bytes("stdout through a slow piped attachment", &got, &expected)?;
    let status = cx.ok("wait", started.process.wait()).await?;
    ensure!(status.success(), "{status:?}");
    Ok(())
}

async fn ids(cx: &Cx) -> CaseResult {
    let mut spec = SpawnSpec::new(["true"]);
    spec.stdin = StdinMode::Pipe;
    match cx
        .within(
            "spawn_durable with a stdin pipe",
            cx.sp().spawn_durable(spec, DurableSpec::default()),
        )
        .await?
    {
        Err(err) if err.kind() == ErrorKind::Unsupported => {
            return Err(Failure::unsupported(format!(
                "the subprocess provider has no durable commands ({err})"
            )));
        }
        Err(err) if err.kind() == ErrorKind::InvalidInput => {}
        Err(err) => fail!("spawn_durable with a stdin pipe: expected invalid input, got {err}"),
        Ok(attached) => fail!("spawn_durable with a stdin pipe started {}", attached.id),
    }
    for forged in [
        "../../etc",
        "0123456789ABCDEF0123456789ABCDEF",
        "0123456789abcdef",
        "0123456789abcdef0123456789abcdef/..",
    ] {
        cx.err(
            &format!("attach {forged:?}"),
            ErrorKind::InvalidInput,
            cx.sp().attach(AttachSpec::new(forged, 0)),
        )
        .await?;
        cx.err(
            &format!("forget {forged:?}"),
            ErrorKind::InvalidInput,
            cx.sp().forget(forged),
        )
        .await?;
    }
    // Ids are 128 random bits: this one is never issued.
    let unknown = "0".repeat(32);
    cx.err(
        "attach an unknown id",
        ErrorKind::NotFound,
        cx.sp().attach(AttachSpec::new(&unknown, 0)),
    )
    .await?;
    cx.err(
        "forget an unknown id",
        ErrorKind::NotFound,
        cx.sp().forget(&unknown),
    )
    .await?;
    Ok(())
}

async fn terminate_and_forget(cx: &Cx) -> CaseResult {
    let mut spec = sh_spec("sleep 300 & sleep 300 & echo up; wait", &[], None);
    spec.stdout = OutputMode::Pipe;
    spec.stderr = OutputMode::Null;
    let started = cx
        .spawn_durable("spawn_durable", spec, DurableSpec::default())
        .await?;
    let Some(mut out) = started.process.take_stdout() else {
        fail!("spawn_durable: stdout pipe missing");
    };
    let first = cx
        .within("read `up`", futures::StreamExt::next(&mut out))
        .await?;
    ensure!(
        matches!(&first, Some(Ok(bytes)) if bytes.starts_with(b"up")),
        "expected `up` first, got {first:?}"
    );
    let pgid = started.process.pid();
    ensure_eq(
        "live members before terminate",
        &cx.group_members(pgid).await?.len(),
        &3,
    )?;
    cx.err(
        "forget while it runs",
        ErrorKind::Busy,
        cx.sp().forget(&started.id),
    )
    .await?;
    let mut spec = AttachSpec::new(&started.id, 0);
    spec.stdout = OutputMode::Null;
    spec.stderr = OutputMode::Null;
    let again = cx.ok("attach", cx.sp().attach(spec)).await?;
    cx.ok(
        "terminate from the new attachment",
        again.process.terminate(Duration::from_millis(200)),
    )
    .await?;
    let left = cx.group_members(pgid).await?;
    ensure!(left.is_empty(), "left in the group: {}", show_rows(&left));
    let status = cx.ok("wait", again.process.wait()).await?;
    ensure_eq("signal", &status.signal, &Some(Signal::TERM))?;
    let status = cx.ok("wait (spawn handle)", started.process.wait()).await?;
    ensure_eq("signal (spawn handle)", &status.signal, &Some(Signal::TERM))?;
    cx.ok("forget", cx.sp().forget(&started.id)).await?;
    ensure!(
        listed(cx, &started.id).await?.is_none(),
        "still listed after forget"
    );
    cx.err(
        "attach after forget",
        ErrorKind::NotFound,
        cx.sp().attach(AttachSpec::new(&started.id, 0)),
    )
    .await?;
    Ok(())
}

async fn timeout(cx: &Cx) -> CaseResult {
    let mut spec = SpawnSpec::new(["sleep", "30"]);
    quiet(&mut spec);
    spec.timeout = Some(Duration::from_millis(300));
    let started = cx
        .spawn_durable("spawn_durable", spec, DurableSpec::default())
        .await?;
    let status = cx.ok("wait", started.process.wait()).await?;
    ensure!(
        status.timed_out && status.signal == Some(Signal::TERM),
        "expected timed out by SIGTERM, got {status:?}"
    );
    Ok(())
}
