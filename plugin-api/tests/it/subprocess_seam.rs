//! Every `subprocess`, process and terminal method, host → plugin, through
//! the real loader: pipes with backpressure, stdin writes and close,
//! collected output, exit statuses, terminate and timeout, terminals,
//! errors, panics and cancellation.

use std::sync::Arc;
use std::time::Duration;

use dsh_plugin_api::stream::collect_bytes;
use dsh_plugin_api::subprocess::{
    OutputMode, OutputStream, Process, Signal, SpawnSpec, StdinMode, SubprocessProvider,
    TerminalSpec,
};
use dsh_plugin_api::{Bytes, ErrorKind};
use futures::StreamExt;

use crate::support::World;

async fn spawn(subprocess: &Arc<dyn SubprocessProvider>, spec: SpawnSpec) -> Arc<dyn Process> {
    subprocess.spawn(spec).await.expect("spawn")
}

async fn next_text(output: &mut dsh_plugin_api::stream::ByteStream) -> String {
    let chunk = output.next().await.expect("output chunk").expect("ok");
    String::from_utf8(Vec::from(chunk)).expect("UTF-8 output")
}

async fn counters(subprocess: &Arc<dyn SubprocessProvider>) -> serde_json::Value {
    let process = spawn(subprocess, SpawnSpec::new(["state"])).await;
    let out = collect_bytes(process.take_stdout().expect("stdout"))
        .await
        .expect("state output");
    serde_json::from_slice(&out).expect("state JSON")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resolve_executable_round_trips_values_and_errors() {
    let world = World::new(serde_json::Value::Null).await;
    let subprocess = world.subprocess();
    let extra = vec!["/opt/bin".to_owned()];
    assert_eq!(
        subprocess
            .resolve_executable("cat", &extra)
            .await
            .expect("bare"),
        "/probe/bin/cat"
    );
    assert_eq!(
        subprocess
            .resolve_executable("/probe/bin/flood", &[])
            .await
            .expect("absolute"),
        "/probe/bin/flood"
    );
    let err = subprocess
        .resolve_executable("bin/cat", &[])
        .await
        .expect_err("relative");
    assert_eq!(err.kind(), ErrorKind::InvalidInput);
    assert_eq!(err.subject(), Some("bin/cat"));
    let err = subprocess
        .resolve_executable("nope", &[])
        .await
        .expect_err("missing");
    assert_eq!(err.kind(), ErrorKind::NotFound);
    assert_eq!(err.subject(), Some("nope"));
    world.dispose().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_piped_process_yields_its_output_and_status() {
    let world = World::new(serde_json::Value::Null).await;
    let subprocess = world.subprocess();
    let mut spec = SpawnSpec::new(["echo-argv", "a b", "ü"]);
    spec.env.insert("PROBE_EXIT_CODE".into(), "3".into());
    let process = spawn(&subprocess, spec).await;
    let pid = process.pid();
    assert!(pid >= 4242, "{pid}");
    assert!(process.take_stdin().is_none(), "stdin is null");
    let stdout = process.take_stdout().expect("stdout");
    assert!(process.take_stdout().is_none(), "taken once");
    let stderr = process.take_stderr().expect("stderr");
    assert_eq!(
        collect_bytes(stdout).await.expect("stdout"),
        "echo-argv\na b\nü\n".as_bytes()
    );
    assert_eq!(
        collect_bytes(stderr).await.expect("stderr"),
        format!("stderr of {pid}\n").as_bytes()
    );
    let status = process.wait().await.expect("wait");
    assert_eq!(status.code, Some(3));
    assert_eq!(status.signal, None);
    assert!(!status.timed_out);
    assert_eq!(
        process.wait().await.expect("wait again"),
        status,
        "idempotent"
    );
    // Pids are distinct.
    let other = spawn(&subprocess, SpawnSpec::new(["exit", "0"])).await;
    assert_ne!(other.pid(), pid);
    assert!(other.wait().await.expect("wait").success());
    world.dispose().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stdin_writes_flow_through_and_close_ends_them() {
    let world = World::new(serde_json::Value::Null).await;
    let subprocess = world.subprocess();
    let mut spec = SpawnSpec::new(["cat"]);
    spec.stdin = StdinMode::Pipe;
    let process = spawn(&subprocess, spec).await;
    let mut stdin = process.take_stdin().expect("stdin");
    assert!(process.take_stdin().is_none(), "taken once");
    let stdout = process.take_stdout().expect("stdout");
    let reader = tokio::spawn(collect_bytes(stdout));
    stdin
        .write(Bytes::from_static(b"abc"))
        .await
        .expect("write");
    stdin
        .write(Bytes::from_static(b"def"))
        .await
        .expect("write");
    stdin.close().await.expect("close");
    stdin.close().await.expect("close twice");
    let err = stdin
        .write(Bytes::from_static(b"late"))
        .await
        .expect_err("closed");
    assert_eq!(err.kind(), ErrorKind::Closed);
    assert_eq!(reader.await.expect("reader").expect("stdout"), b"abcdef");
    assert_eq!(process.wait().await.expect("wait").code, Some(0));
    world.dispose().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unread_pipe_stops_the_writer() {
    let world = World::new(serde_json::Value::Null).await;
    let subprocess = world.subprocess();
    let process = spawn(&subprocess, SpawnSpec::new(["flood", "64"])).await;
    let mut stdout = process.take_stdout().expect("stdout");
    tokio::time::sleep(Duration::from_millis(100)).await;
    let written = |snapshot: dsh_plugin_api::subprocess::OutputSnapshot| snapshot.total / 4096;
    let before = written(
        process
            .read_output(OutputStream::Stdout, 0, 0)
            .await
            .expect("snapshot"),
    );
    // Pipe capacity (4 chunks) plus the chunk the program is blocked on.
    assert!(
        before <= 5,
        "the program ran ahead of its reader: {before} chunks"
    );
    for index in 0..10u8 {
        assert_eq!(
            stdout.next().await.expect("chunk").expect("ok"),
            vec![index; 4096]
        );
    }
    tokio::time::sleep(Duration::from_millis(50)).await;
    let after = written(
        process
            .read_output(OutputStream::Stdout, 0, 0)
            .await
            .expect("snapshot"),
    );
    assert!(
        (10..=15).contains(&after),
        "{after} chunks after reading 10"
    );
    let rest: Vec<_> = stdout.collect().await;
    assert_eq!(rest.len(), 54);
    assert!(process.wait().await.expect("wait").success());
    world.dispose().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn collected_output_is_a_bounded_tail_with_offsets() {
    let world = World::new(serde_json::Value::Null).await;
    let subprocess = world.subprocess();
    let mut spec = SpawnSpec::new(["flood", "10"]);
    spec.stdout = OutputMode::Collect { limit: 5000 };
    spec.stderr = OutputMode::Null;
    let process = spawn(&subprocess, spec).await;
    assert!(process.take_stdout().is_none(), "collected, not piped");
    assert!(process.wait().await.expect("wait").success());
    let all = process
        .read_output(OutputStream::Stdout, 0, usize::MAX)
        .await
        .expect("read");
    assert_eq!(all.total, 40960);
    assert!(all.truncated);
    assert_eq!(all.offset, 40960 - 5000);
    assert_eq!(all.bytes.len(), 5000);
    assert_eq!(all.spill, None);
    let part = process
        .read_output(OutputStream::Stdout, 40000, 16)
        .await
        .expect("read");
    assert_eq!(part.offset, 40000);
    assert_eq!(part.bytes, vec![9u8; 16]);
    let stderr = process
        .read_output(OutputStream::Stderr, 0, 10)
        .await
        .expect("read");
    assert_eq!(stderr.total, 0);
    world.dispose().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn terminate_and_timeout_end_a_process_with_a_signal() {
    let world = World::new(serde_json::Value::Null).await;
    let subprocess = world.subprocess();
    let process = spawn(&subprocess, SpawnSpec::new(["sleep"])).await;
    process
        .terminate(Duration::from_millis(10))
        .await
        .expect("terminate");
    process
        .terminate(Duration::from_millis(10))
        .await
        .expect("terminate again");
    let status = process.wait().await.expect("wait");
    assert_eq!(
        (status.code, status.signal, status.timed_out),
        (None, Some(Signal::TERM), false)
    );

    let mut spec = SpawnSpec::new(["sleep"]);
    spec.timeout = Some(Duration::from_millis(30));
    let process = spawn(&subprocess, spec).await;
    let status = process.wait().await.expect("wait");
    assert_eq!(
        (status.signal, status.timed_out),
        (Some(Signal::KILL), true)
    );
    world.dispose().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn spawn_errors_panics_and_cancellation_cross() {
    let world = World::new(serde_json::Value::Null).await;
    let subprocess = world.subprocess();
    let err = subprocess
        .spawn(SpawnSpec::new(Vec::<String>::new()))
        .await
        .err()
        .expect("empty argv");
    assert_eq!(err.kind(), ErrorKind::InvalidInput);
    assert_eq!(err.message(), "spawn: argv is empty");
    let mut bad_env = SpawnSpec::new(["cat"]);
    bad_env.env.insert("A=B".into(), "x".into());
    let err = subprocess.spawn(bad_env).await.err().expect("bad env");
    assert_eq!(err.kind(), ErrorKind::InvalidInput);
    assert_eq!(err.subject(), Some("A=B"));
    let err = subprocess
        .spawn(SpawnSpec::new(["error", "11"]))
        .await
        .err()
        .expect("injected");
    assert_eq!(err.kind(), ErrorKind::Unavailable);
    let err = subprocess
        .spawn(SpawnSpec::new(["no-such-program"]))
        .await
        .err()
        .expect("missing");
    assert_eq!(err.kind(), ErrorKind::NotFound);
    assert_eq!(err.subject(), Some("no-such-program"));
    let err = subprocess
        .spawn(SpawnSpec::new(["panic"]))
        .await
        .err()
        .expect("panic");
    assert_eq!(err.kind(), ErrorKind::Panicked);
    assert_eq!(
        err.message(),
        "spawn: plugin \"subprocess\" panicked: spawn: probe panic"
    );

    let hung = tokio::time::timeout(
        Duration::from_millis(50),
        subprocess.spawn(SpawnSpec::new(["hang"])),
    )
    .await;
    assert!(hung.is_err());
    let counters = counters(&subprocess).await;
    assert_eq!(counters["hangsStarted"], 1);
    assert_eq!(
        counters["hangsCancelled"], 1,
        "the dropped spawn was rolled back in the plugin"
    );
    world.dispose().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_terminal_round_trips_every_method() {
    let world = World::new(serde_json::Value::Null).await;
    let subprocess = world.subprocess();
    let mut spec = TerminalSpec::new(["bash", "-i"]);
    spec.cols = 100;
    let terminal = subprocess
        .spawn_terminal(spec)
        .await
        .expect("spawn_terminal");
    let pid = terminal.pid();
    assert!(pid >= 4242);
    let mut output = terminal.take_output().expect("output");
    assert!(terminal.take_output().is_none(), "taken once");
    assert_eq!(next_text(&mut output).await, "bash -i\r\n");
    terminal
        .write(Bytes::from_static(b"ls\n"))
        .await
        .expect("write");
    assert_eq!(next_text(&mut output).await, "ls\n");
    terminal
        .write(Bytes::from(vec![0x03]))
        .await
        .expect("ctrl-c");
    assert_eq!(next_text(&mut output).await, "\u{3}");
    assert_eq!(next_text(&mut output).await, "^C\r\n");
    terminal.resize(120, 40).await.expect("resize");
    assert_eq!(next_text(&mut output).await, "size 120x40\r\n");
    let err = terminal.resize(0, 40).await.expect_err("zero size");
    assert_eq!(err.kind(), ErrorKind::InvalidInput);
    assert_eq!(terminal.foreground_pgid().await.expect("pgid"), pid);
    terminal.signal(Signal::USR1).await.expect("signal");
    assert_eq!(next_text(&mut output).await, "signal 10\r\n");
    terminal.signal(Signal::INT).await.expect("interrupt");
    assert_eq!(next_text(&mut output).await, "signal 2\r\n");
    assert!(
        output.next().await.is_none(),
        "output ends with the program"
    );
    let status = terminal.wait().await.expect("wait");
    assert_eq!(status.signal, Some(Signal::INT));
    let err = terminal
        .write(Bytes::from_static(b"late"))
        .await
        .expect_err("exited");
    assert_eq!(err.kind(), ErrorKind::Closed);
    assert_eq!(err.subject(), Some(pid.to_string().as_str()));

    let other = subprocess
        .spawn_terminal(TerminalSpec::new(["sh"]))
        .await
        .expect("spawn_terminal");
    other.terminate().await.expect("terminate");
    other.terminate().await.expect("terminate again");
    assert_eq!(other.wait().await.expect("wait").signal, Some(Signal::HUP));
    let err = subprocess
        .spawn_terminal(TerminalSpec::new(["panic"]))
        .await
        .err()
        .expect("panic");
    assert_eq!(err.kind(), ErrorKind::Panicked);
    world.dispose().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn disposal_refuses_new_work_through_retained_handles() {
    let world = World::new(serde_json::Value::Null).await;
    let subprocess = world.subprocess();
    let process = spawn(&subprocess, SpawnSpec::new(["sleep"])).await;
    world.dispose().await;
    let err = subprocess
        .spawn(SpawnSpec::new(["cat"]))
        .await
        .err()
        .expect("disposed");
    assert_eq!(err.kind(), ErrorKind::Closed);
    assert_eq!(
        err.message(),
        "spawn: plugin instance `subprocess` was disposed"
    );
    let err = process.wait().await.expect_err("disposed");
    assert_eq!(err.kind(), ErrorKind::Closed);
    assert!(
        process.take_stdout().is_none(),
        "an error is reported as no handle"
    );
}
