//! Output and input modes (docs/design.md §5.2 "Output"): pipe (lossless, with
//! backpressure), collect (bounded tail, totals, truncation, offset reads),
//! spill, null, inherit; stdin pipe and close.

use std::sync::Arc;
use std::time::Duration;

use dsh_plugin_api::subprocess::{
    OutputMode, OutputStream, Process, SpawnSpec, SpillSpec, StdinMode,
};
use dsh_plugin_api::{Bytes, ErrorKind};

use crate::check::{CaseResult, Failure, ensure, ensure_bytes, ensure_eq, fail, show};
use crate::commands::{drain, sh_spec};
use crate::context::Cx;
use crate::patterns::binary;
use crate::registry::{CaseInfo, case};

pub(crate) const CASES: &[CaseInfo] = &[
    case!(
        "subprocess.output.pipe_exact_bytes",
        Subprocess,
        [Subprocess],
        "stdin → cat → stdout pipe round-trips every byte value and UTF-8 split across writes; total counts them",
        pipe_exact_bytes
    ),
    case!(
        "subprocess.output.pipe_split_utf8_and_binary",
        Subprocess,
        [Subprocess],
        "a character written in two halves and raw binary come out of the pipe exactly, never decoded",
        pipe_split_utf8_and_binary
    ),
    case!(
        "subprocess.output.stdout_stderr_separate",
        Subprocess,
        [Subprocess],
        "stdout and stderr pipes carry their own bytes; each is taken once",
        stdout_stderr_separate
    ),
    case!(
        "subprocess.output.stderr_into_stdout",
        Subprocess,
        [Subprocess],
        "stderr into stdout shares stdout's pipe: one stream in write order (piped and collected), argv unchanged, stderr empty",
        stderr_into_stdout
    ),
    case!(
        "subprocess.output.pipe_backpressure",
        Subprocess,
        [Subprocess],
        "an unread pipe stops the writer (32 MiB stay unproduced); reading resumes it losslessly",
        pipe_backpressure
    ),
    case!(
        "subprocess.output.collect_tail_and_offsets",
        Subprocess,
        [Subprocess],
        "collect keeps exactly the last `limit` bytes with total and truncation, and serves offset reads",
        collect_tail_and_offsets
    ),
    case!(
        "subprocess.output.collect_untruncated",
        Subprocess,
        [Subprocess],
        "output under the limit is kept whole, not truncated, from offset 0 (stdout and stderr)",
        collect_untruncated
    ),
    case!(
        "subprocess.output.spill",
        Subprocess,
        [Subprocess],
        "spill keeps a lossless copy of each stream in a private world file (no group/other bits), cut at the limit",
        spill
    ),
    case!(
        "subprocess.output.null_and_inherit",
        Subprocess,
        [Subprocess],
        "null and inherit expose no stream and no retained bytes but still count the output",
        null_and_inherit
    ),
    case!(
        "subprocess.stdin.backpressure",
        Subprocess,
        [Subprocess],
        "writes to a stdin nobody reads stop completing before 64 MiB are accepted",
        stdin_backpressure
    ),
    case!(
        "subprocess.stdin.pipe_and_close",
        Subprocess,
        [Subprocess],
        "stdin pipe delivers writes, close gives EOF, later writes are Closed, close twice is a no-op; null stdin is EOF at once",
        stdin_pipe_and_close
    ),
];

/// `cat` with stdin piped and the given output modes.
fn cat_spec(cx: &Cx, stdout: OutputMode, stderr: OutputMode) -> SpawnSpec {
    let mut spec = SpawnSpec::new(["cat"]);
    spec.cwd = Some(cx.dir.clone());
    spec.stdin = StdinMode::Pipe;
    spec.stdout = stdout;
    spec.stderr = stderr;
    spec
}

/// Writes `chunks` to the process's stdin and closes it.
async fn feed(cx: &Cx, process: &Arc<dyn Process>, chunks: &[&[u8]]) -> CaseResult {
    let Some(mut stdin) = process.take_stdin() else {
        fail!("spawn with StdinMode::Pipe: take_stdin returned None");
    };
    for chunk in chunks {
        cx.ok("write to stdin", stdin.write(Bytes::copy_from_slice(chunk)))
            .await?;
    }
    cx.ok("close stdin", stdin.close()).await
}

async fn read_stream(
    cx: &Cx,
    process: &Arc<dyn Process>,
    which: OutputStream,
) -> Result<Vec<u8>, Failure> {
    let stream = match which {
        OutputStream::Stdout => process.take_stdout(),
        OutputStream::Stderr => process.take_stderr(),
    };
    let Some(stream) = stream else {
        fail!(
            "spawn with OutputMode::Pipe: take_{} returned None",
            which.as_str()
        );
    };
    cx.ok(&format!("read {}", which.as_str()), drain(stream))
        .await
}

async fn pipe_exact_bytes(cx: &Cx) -> CaseResult {
    let data = binary(256 * 1024, 17);
    let accent = "é".as_bytes();
    let chunks: Vec<&[u8]> = vec![
        &data[..1],
        &data[1..3],
        &data[3..4096],
        &accent[..1],
        &accent[1..],
        &data[4096..70_000],
        &data[70_000..],
    ];
    let mut expected = data[..4096].to_vec();
    expected.extend_from_slice(accent);
    expected.extend_from_slice(&data[4096..]);
    let process = cx
        .spawn(
            "spawn cat",
            cat_spec(cx, OutputMode::Pipe, OutputMode::Pipe),
        )
        .await?;
    let (fed, out) = futures::future::join(
        feed(cx, &process, &chunks),
        read_stream(cx, &process, OutputStream::Stdout),
    )
    .await;
    fed?;
    let out = out?;
    ensure_bytes("cat stdout (pipe)", &out, &expected)?;
    let status = cx.ok("wait for cat", process.wait()).await?;
    ensure!(status.success(), "cat: expected exit 0, got {status:?}");
    let snapshot = cx
        .ok(
            "read_output stdout (pipe)",
            process.read_output(OutputStream::Stdout, 0, 16),
        )
        .await?;
    ensure_eq(
        "read_output stdout (pipe): total",
        &snapshot.total,
        &(expected.len() as u64),
    )?;
    ensure!(
        snapshot.bytes.is_empty(),
        "read_output stdout (pipe): expected no retained bytes outside collect mode, got {}",
        show(&snapshot.bytes)
    );
    Ok(())
}

async fn pipe_split_utf8_and_binary(cx: &Cx) -> CaseResult {
    // printf with octal escapes is POSIX; the sleep makes two writes.
    let script = r"printf '\303'; sleep 0.1; printf '\251\n'; printf '\000\377\200\012' >&2";
    let ran = cx
        .run(
            "spawn split writer",
            sh_spec(script, &[], Some(&cx.dir)),
            None,
        )
        .await?;
    ensure_bytes(
        "stdout of a character written in two halves",
        &ran.stdout,
        b"\xc3\xa9\n",
    )?;
    ensure_bytes("stderr of raw binary", &ran.stderr, b"\0\xff\x80\n")
}

async fn stdout_stderr_separate(cx: &Cx) -> CaseResult {
    let process = cx
        .spawn(
            "spawn writer",
            sh_spec(
                "printf out; printf err >&2; printf more",
                &[],
                Some(&cx.dir),
            ),
        )
        .await?;
    let (out, err) = futures::future::join(
        read_stream(cx, &process, OutputStream::Stdout),
        read_stream(cx, &process, OutputStream::Stderr),
    )
    .await;
    ensure_bytes("stdout", &out?, b"outmore")?;
    ensure_bytes("stderr", &err?, b"err")?;
    ensure!(
        process.take_stdout().is_none(),
        "take_stdout: a second call returned a stream"
    );
    ensure!(
        process.take_stderr().is_none(),
        "take_stderr: a second call returned a stream"
    );
    ensure!(
        process.take_stdin().is_none(),
        "take_stdin: returned a writer for StdinMode::Null"
    );
    let status = cx.ok("wait", process.wait()).await?;
    ensure!(status.success(), "writer: expected exit 0, got {status:?}");
    Ok(())
}

async fn stderr_into_stdout(cx: &Cx) -> CaseResult {
    // `$0` shows the program got its argv as given: no wrapper shell.
    let script = "printf out; printf ' %s ' \"$0\" >&2; printf more";
    for stdout in [OutputMode::Pipe, OutputMode::Collect { limit: 1024 }] {
        let mut spec = sh_spec(script, &[], Some(&cx.dir));
        spec.stdout = stdout;
        spec.stderr = OutputMode::IntoStdout;
        let process = cx.spawn("spawn merged writer", spec).await?;
        ensure!(
            process.take_stderr().is_none(),
            "take_stderr: a merged stderr has no stream of its own"
        );
        let out = match process.take_stdout() {
            Some(stream) => cx.ok("drain stdout", drain(stream)).await?,
            None => Vec::new(),
        };
        let status = cx.ok("wait", process.wait()).await?;
        ensure!(status.success(), "writer: expected exit 0, got {status:?}");
        let out = if stdout == OutputMode::Pipe {
            out
        } else {
            let snapshot = cx
                .ok(
                    "read_output stdout",
                    process.read_output(OutputStream::Stdout, 0, 1024),
                )
                .await?;
            snapshot.bytes.to_vec()
        };
        ensure_bytes(&format!("stdout ({stdout:?})"), &out, b"out sh more")?;
        let err = cx
            .ok(
                "read_output stderr",
                process.read_output(OutputStream::Stderr, 0, 1024),
            )
            .await?;
        ensure_eq("stderr bytes of a merged stderr", &err.total, &0)?;
    }
    Ok(())
}

async fn pipe_backpressure(cx: &Cx) -> CaseResult {
    const SIZE: u64 = 32 << 20;
    let script = format!("head -c {SIZE} /dev/zero; echo done >&2");
    let mut spec = sh_spec(&script, &[], Some(&cx.dir));
    spec.stderr = OutputMode::Collect { limit: 64 };
    let process = cx.spawn("spawn 32 MiB writer", spec).await?;
    let Some(stdout) = process.take_stdout() else {
        fail!("spawn with OutputMode::Pipe: take_stdout returned None");
    };
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let finished = tokio::time::timeout(Duration::from_millis(200), process.wait()).await;
    ensure!(
        finished.is_err(),
        "32 MiB into an unread pipe: the writer finished without anyone reading ({:?}): no backpressure",
        finished.ok()
    );
    let snapshot = cx
        .ok(
            "read_output stdout while unread",
            process.read_output(OutputStream::Stdout, 0, 0),
        )
        .await?;
    ensure!(
        snapshot.total < SIZE,
        "32 MiB into an unread pipe: all {} bytes were produced without a reader (buffered without bound)",
        snapshot.total
    );
    let out = cx.ok("read the 32 MiB", drain(stdout)).await?;
    ensure!(
        out.len() as u64 == SIZE && out.iter().all(|&b| b == 0),
        "32 MiB through the pipe: got {} bytes (expected {SIZE} zero bytes)",
        out.len()
    );
    let status = cx.ok("wait", process.wait()).await?;
    ensure!(status.success(), "writer: expected exit 0, got {status:?}");
    let err = cx
        .ok(
            "read_output stderr",
            process.read_output(OutputStream::Stderr, 0, 64),
        )
        .await?;
    ensure_bytes("stderr after the writer resumed", &err.bytes, b"done\n")
}

async fn collect_tail_and_offsets(cx: &Cx) -> CaseResult {
    const LIMIT: usize = 1000;
    let data = binary(100_000, 23);
    let total = data.len() as u64;
    let process = cx
        .spawn(
            "spawn cat (collect)",
            cat_spec(cx, OutputMode::Collect { limit: LIMIT }, OutputMode::Null),
        )
        .await?;
    ensure!(
        process.take_stdout().is_none(),
        "take_stdout: returned a stream for OutputMode::Collect"
    );
    feed(cx, &process, &[&data[..50_000], &data[50_000..]]).await?;
    let status = cx.ok("wait for cat", process.wait()).await?;
    ensure!(status.success(), "cat: expected exit 0, got {status:?}");
    let tail_start = total - LIMIT as u64;
    let read = |offset: u64, max: usize| process.read_output(OutputStream::Stdout, offset, max);
    let what = "read_output stdout from 0 (collect, 100000 bytes, limit 1000)";
    let snap = cx.ok(what, read(0, usize::MAX)).await?;
    ensure_eq(&format!("{what}: total"), &snap.total, &total)?;
    ensure_eq(&format!("{what}: truncated"), &snap.truncated, &true)?;
    ensure_eq(
        &format!("{what}: offset (clamped to the tail's start)"),
        &snap.offset,
        &tail_start,
    )?;
    ensure_bytes(what, &snap.bytes, &data[tail_start as usize..])?;
    let what = "read_output stdout from 99500, 100 bytes";
    let snap = cx.ok(what, read(99_500, 100)).await?;
    ensure_eq(&format!("{what}: offset"), &snap.offset, &99_500)?;
    ensure_bytes(what, &snap.bytes, &data[99_500..99_600])?;
    let what = "read_output stdout from 99990, up to 100 bytes";
    let snap = cx.ok(what, read(99_990, 100)).await?;
    ensure_bytes(what, &snap.bytes, &data[99_990..])?;
    let what = "read_output stdout from the end";
    let snap = cx.ok(what, read(total, 100)).await?;
    ensure!(
        snap.bytes.is_empty(),
        "{what}: expected no bytes, got {}",
        show(&snap.bytes)
    );
    ensure_eq(&format!("{what}: total"), &snap.total, &total)?;
    let what = "read_output stderr (null)";
    let snap = cx
        .ok(what, process.read_output(OutputStream::Stderr, 0, 100))
        .await?;
    ensure!(
        snap.bytes.is_empty() && snap.total == 0,
        "{what}: expected nothing from a silent stream, got total {} and {}",
        snap.total,
        show(&snap.bytes)
    );
    Ok(())
}

async fn collect_untruncated(cx: &Cx) -> CaseResult {
    let script = "printf '%s' \"$1\"; printf '%s' \"$2\" >&2";
    let out_text = "x".repeat(500);
    let mut spec = sh_spec(script, &[&out_text, "to stderr"], Some(&cx.dir));
    spec.stdout = OutputMode::Collect { limit: 1000 };
    spec.stderr = OutputMode::Collect { limit: 9 };
    let process = cx.spawn("spawn writer (collect)", spec).await?;
    let status = cx.ok("wait", process.wait()).await?;
    ensure!(status.success(), "writer: expected exit 0, got {status:?}");
    for (stream, expected) in [
        (OutputStream::Stdout, out_text.as_bytes()),
        (OutputStream::Stderr, b"to stderr".as_slice()),
    ] {
        let what = format!("read_output {} (under the limit)", stream.as_str());
        let snap = cx
            .ok(&what, process.read_output(stream, 0, usize::MAX))
            .await?;
        ensure_eq(
            &format!("{what}: total"),
            &snap.total,
            &(expected.len() as u64),
        )?;
        ensure_eq(&format!("{what}: truncated"), &snap.truncated, &false)?;
        ensure_eq(&format!("{what}: offset"), &snap.offset, &0)?;
        ensure_bytes(&what, &snap.bytes, expected)?;
        ensure_eq(
            &format!("{what}: spill (none requested)"),
            &snap.spill,
            &None,
        )?;
    }
    Ok(())
}

async fn spill(cx: &Cx) -> CaseResult {
    let data = binary(300_000, 29);
    let mut spec = sh_spec("cat; printf E >&2", &[], Some(&cx.dir));
    spec.stdin = StdinMode::Pipe;
    spec.stdout = OutputMode::Collect { limit: 100 };
    spec.stderr = OutputMode::Collect { limit: 100 };
    spec.spill = Some(SpillSpec { limit: 1_000_000 });
    let process = cx.spawn("spawn cat with spill", spec).await?;
    feed(cx, &process, &[&data]).await?;
    let status = cx.ok("wait", process.wait()).await?;
    ensure!(
        status.success(),
        "cat with spill: expected exit 0, got {status:?}"
    );
    let out = cx
        .ok(
            "read_output stdout",
            process.read_output(OutputStream::Stdout, 0, 0),
        )
        .await?;
    let err = cx
        .ok(
            "read_output stderr",
            process.read_output(OutputStream::Stderr, 0, 0),
        )
        .await?;
    let (Some(out_spill), Some(err_spill)) = (out.spill, err.spill) else {
        fail!("read_output with SpillSpec: spill info is missing for stdout or stderr");
    };
    ensure!(
        out_spill.path.starts_with('/') && out_spill.path != err_spill.path,
        "spill: expected two distinct absolute paths, got {:?} and {:?}",
        out_spill.path,
        err_spill.path
    );
    let mode = cx
        .sh_ok(
            "stat -c %a of the spill file",
            r#"stat -c %a -- "$1""#,
            &[&out_spill.path],
        )
        .await?;
    let mode = String::from_utf8_lossy(&mode).trim().to_owned();
    ensure!(
        u32::from_str_radix(&mode, 8).is_ok_and(|mode| mode & 0o077 == 0),
        "spill file {}: mode {mode} lets group or others in (it must be private)",
        out_spill.path
    );
    ensure_eq("spill of stdout: len", &out_spill.len, &(data.len() as u64))?;
    ensure_eq("spill of stdout: complete", &out_spill.complete, &true)?;
    let copy = cx.read_all(&out_spill.path).await?;
    ensure_bytes(&format!("spill file {}", out_spill.path), &copy, &data)?;
    ensure_eq("spill of stderr: len", &err_spill.len, &1)?;
    let copy = cx.read_all(&err_spill.path).await?;
    ensure_bytes(&format!("spill file {}", err_spill.path), &copy, b"E")?;

    let mut spec = sh_spec("cat", &[], Some(&cx.dir));
    spec.stdin = StdinMode::Pipe;
    spec.stdout = OutputMode::Null;
    spec.stderr = OutputMode::Null;
    spec.spill = Some(SpillSpec { limit: 1000 });
    let process = cx.spawn("spawn cat with a 1000-byte spill", spec).await?;
    feed(cx, &process, &[&data[..5000]]).await?;
    cx.ok("wait", process.wait()).await?;
    let out = cx
        .ok(
            "read_output stdout",
            process.read_output(OutputStream::Stdout, 0, 0),
        )
        .await?;
    let Some(cut) = out.spill else {
        fail!("read_output with SpillSpec: spill info is missing for stdout");
    };
    ensure_eq("spill cut at 1000: len", &cut.len, &1000)?;
    ensure_eq("spill cut at 1000: complete", &cut.complete, &false)?;
    ensure_eq(
        "spill cut at 1000: total still counts everything",
        &out.total,
        &5000,
    )?;
    let copy = cx.read_all(&cut.path).await?;
    ensure_bytes(
        &format!("spill file {} (cut)", cut.path),
        &copy,
        &data[..1000],
    )
}

async fn null_and_inherit(cx: &Cx) -> CaseResult {
    // Inherit is checked on stderr so the host's stdout (e.g. the JSON of
    // `dsh conformance --json`) stays clean.
    for (label, stream, mode, text) in [
        (
            "null",
            OutputStream::Stdout,
            OutputMode::Null,
            "discarded output\n",
        ),
        (
            "inherit",
            OutputStream::Stderr,
            OutputMode::Inherit,
            "dsh-conformance: inherit-mode check line (expected on the host's stderr)\n",
        ),
    ] {
        let (script, name) = match stream {
            OutputStream::Stdout => (r#"printf '%s' "$1""#, "stdout"),
            OutputStream::Stderr => (r#"printf '%s' "$1" >&2"#, "stderr"),
        };
        let mut spec = sh_spec(script, &[text], Some(&cx.dir));
        (spec.stdout, spec.stderr) = match stream {
            OutputStream::Stdout => (mode, OutputMode::Null),
            OutputStream::Stderr => (OutputMode::Null, mode),
        };
        let process = cx.spawn(&format!("spawn writer ({label})"), spec).await?;
        let taken = match stream {
            OutputStream::Stdout => process.take_stdout(),
            OutputStream::Stderr => process.take_stderr(),
        };
        ensure!(
            taken.is_none(),
            "take_{name}: returned a stream for OutputMode::{label}"
        );
        let status = cx.ok("wait", process.wait()).await?;
        ensure!(
            status.success(),
            "writer ({label}): expected exit 0, got {status:?}"
        );
        let what = format!("read_output {name} ({label})");
        let snap = cx.ok(&what, process.read_output(stream, 0, 1024)).await?;
        ensure!(
            snap.bytes.is_empty(),
            "{what}: expected no retained bytes, got {}",
            show(&snap.bytes)
        );
        ensure_eq(&format!("{what}: total"), &snap.total, &(text.len() as u64))?;
    }
    Ok(())
}

async fn stdin_pipe_and_close(cx: &Cx) -> CaseResult {
    let process = cx
        .spawn(
            "spawn cat (collect)",
            cat_spec(cx, OutputMode::Collect { limit: 1024 }, OutputMode::Null),
        )
        .await?;
    let Some(mut stdin) = process.take_stdin() else {
        fail!("spawn with StdinMode::Pipe: take_stdin returned None");
    };
    ensure!(
        process.take_stdin().is_none(),
        "take_stdin: a second call returned a writer"
    );
    cx.ok("write \"a\"", stdin.write(Bytes::from_static(b"a")))
        .await?;
    cx.ok("write \"b\"", stdin.write(Bytes::from_static(b"b")))
        .await?;
    cx.ok("close stdin", stdin.close()).await?;
    let status = cx.ok("wait for cat after close", process.wait()).await?;
    ensure!(
        status.success(),
        "cat after stdin close: expected exit 0, got {status:?}"
    );
    let err = cx
        .err(
            "write after close",
            ErrorKind::Closed,
            stdin.write(Bytes::from_static(b"c")),
        )
        .await?;
    ensure!(
        !err.message().is_empty(),
        "write after close: the error has no message"
    );
    cx.ok("close stdin a second time", stdin.close()).await?;
    let snap = cx
        .ok(
            "read_output stdout",
            process.read_output(OutputStream::Stdout, 0, 1024),
        )
        .await?;
    ensure_bytes("cat output of the piped input", &snap.bytes, b"ab")?;

    let mut spec = cat_spec(cx, OutputMode::Collect { limit: 64 }, OutputMode::Null);
    spec.stdin = StdinMode::Null;
    let process = cx.spawn("spawn cat with null stdin", spec).await?;
    ensure!(
        process.take_stdin().is_none(),
        "take_stdin: returned a writer for StdinMode::Null"
    );
    let status = cx.ok("wait for cat on /dev/null", process.wait()).await?;
    ensure!(
        status.success(),
        "cat with null stdin: expected exit 0, got {status:?}"
    );
    let snap = cx
        .ok(
            "read_output stdout",
            process.read_output(OutputStream::Stdout, 0, 64),
        )
        .await?;
    ensure!(
        snap.total == 0,
        "cat with null stdin: expected no output, got {} bytes",
        snap.total
    );
    Ok(())
}

async fn stdin_backpressure(cx: &Cx) -> CaseResult {
    const CHUNK: usize = 1 << 20;
    const MAX_CHUNKS: usize = 64;
    let mut spec = sh_spec("exec sleep 30", &[], Some(&cx.dir));
    spec.stdin = StdinMode::Pipe;
    let process = cx
        .spawn("spawn a command that never reads stdin", spec)
        .await?;
    let Some(mut stdin) = process.take_stdin() else {
        fail!("spawn with StdinMode::Pipe: take_stdin returned None");
    };
    let chunk = vec![b'x'; CHUNK];
    let mut accepted = 0;
    while accepted < MAX_CHUNKS {
        match tokio::time::timeout(
            Duration::from_secs(1),
            stdin.write(Bytes::from(chunk.clone())),
        )
        .await
        {
            Err(_) => break,
            Ok(Ok(())) => accepted += 1,
            Ok(Err(err)) => fail!(
                "write to an unread stdin: expected it to block, got {}: {err}",
                err.kind()
            ),
        }
    }
    ensure!(
        accepted < MAX_CHUNKS,
        "write to an unread stdin: all {MAX_CHUNKS} MiB were accepted (no backpressure: they are buffered without bound)"
    );
    drop(stdin);
    cx.ok("terminate", process.terminate(Duration::from_millis(200)))
        .await
}
