//! Terminals in the sandbox: exactly the program's bytes (its first prompt
//! included), bad input refused before anything starts, the operation gate
//! around `terminate`, the session torn down, and a start nobody waits for
//! rolled back.

use std::time::Duration;

use crate::support::{CWD, World, give_up_after, survivors, within};
use dsh_plugin_api::stream::collect_bytes;
use dsh_plugin_api::subprocess::{Signal, SubprocessProvider, TerminalSpec};
use dsh_plugin_api::{Bytes, ErrorKind};
use futures::{FutureExt, StreamExt};

const LIMIT: Duration = Duration::from_secs(30);

fn spec(argv: &[&str]) -> TerminalSpec {
    let mut spec = TerminalSpec::new(argv.iter().copied());
    spec.env.insert("TERM".into(), "xterm".into());
    spec
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_output_is_the_programs_own_from_its_first_byte() {
    let world = World::start().await;
    let provider = world.provider();
    let terminal = provider
        .spawn_terminal(spec(&[
            "sh",
            "-c",
            r#"printf 'first> '; read x; printf 'got [%s]\n' "$x""#,
        ]))
        .await
        .expect("terminal");
    let mut output = terminal.take_output().expect("output");
    let mut seen = Vec::new();
    while !seen.ends_with(b"first> ") {
        let chunk = within(LIMIT, "the first prompt", output.next()).await;
        seen.extend(chunk.expect("open").expect("bytes"));
    }
    assert_eq!(
        seen, b"first> ",
        "nothing precedes the program's first prompt"
    );
    terminal
        .write(Bytes::from_static(b"abc\r"))
        .await
        .expect("write");
    let rest = within(LIMIT, "the rest", collect_bytes(output))
        .await
        .expect("output");
    assert_eq!(rest, b"abc\r\ngot [abc]\r\n");
    let status = terminal.wait().await.expect("wait");
    assert!(status.success(), "{status:?}");
    // The program is gone and nothing else of its session runs.
    for _ in 0..50 {
        if provider.owned() == 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(provider.owned(), 0, "an ended, empty session is not owned");
    provider.dispose().await.expect("dispose");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wait_returns_when_the_program_exits_even_if_a_job_holds_the_terminal() {
    let world = World::start().await;
    let provider = world.provider();
    let terminal = provider
        // The job ignores the hangup the program's exit brings, and keeps
        // the terminal open.
        .spawn_terminal(spec(&[
            "sh",
            "-c",
            "trap '' HUP; sleep 60 & echo started; exit 4",
        ]))
        .await
        .expect("terminal");
    let sid = terminal.pid();
    let status = within(Duration::from_secs(5), "wait", terminal.wait())
        .await
        .expect("status");
    assert_eq!(status.code, Some(4));
    assert!(
        !world.session_members(sid).await.is_empty(),
        "the job still runs in the session"
    );
    assert_eq!(provider.owned(), 1, "the session is still owned");
    within(LIMIT, "terminate", terminal.terminate())
        .await
        .expect("terminate");
    assert!(world.session_members(sid).await.is_empty());
    let output = within(
        LIMIT,
        "the output ends",
        collect_bytes(terminal.take_output().expect("output")),
    )
    .await
    .expect("output");
    assert_eq!(output, b"started\r\n");
    assert_eq!(
        terminal.wait().await.expect("wait").code,
        Some(4),
        "the status stays"
    );
    provider.dispose().await.expect("dispose");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_input_and_missing_things_fail_the_start() {
    let world = World::start().await;
    let provider = world.provider();
    let mut zero = spec(&["sh"]);
    zero.rows = 0;
    let mut bad_env = spec(&["sh"]);
    bad_env.env.insert("A=B".into(), "v".into());
    for (label, spec) in [
        ("a zero size", zero),
        ("an env name with '='", bad_env),
        ("a relative argv[0] with '/'", spec(&["bin/sh"])),
    ] {
        let err = provider
            .spawn_terminal(spec)
            .await
            .err()
            .unwrap_or_else(|| panic!("{label}"));
        assert_eq!(err.kind(), ErrorKind::InvalidInput, "{label}: {err}");
    }
    let err = provider
        .spawn_terminal(spec(&["dsh-no-such-program"]))
        .await
        .err()
        .expect("missing");
    assert_eq!(err.kind(), ErrorKind::NotFound, "{err}");
    assert_eq!(err.subject(), Some("dsh-no-such-program"));
    assert!(
        err.message()
            .starts_with("spawn_terminal: command not found"),
        "{err}"
    );
    let mut missing = spec(&["sh"]);
    missing.cwd = Some("missing-dir".into());
    let err = provider
        .spawn_terminal(missing)
        .await
        .err()
        .expect("missing cwd");
    assert_eq!(err.kind(), ErrorKind::NotFound, "{err}");
    assert_eq!(err.subject(), Some(format!("{CWD}/missing-dir").as_str()));
    let mut file = spec(&["sh"]);
    file.cwd = Some("/etc/hostname".into());
    let err = provider
        .spawn_terminal(file)
        .await
        .err()
        .expect("a file as cwd");
    assert_eq!(err.kind(), ErrorKind::NotADirectory, "{err}");
    assert_eq!(provider.owned(), 0);
    provider.dispose().await.expect("dispose");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn terminate_cancels_a_blocked_write_and_closes_the_gate() {
    let world = World::start().await;
    let provider = world.provider();
    // Raw mode and nobody reading: the terminal's input queue fills up and
    // the write waits.
    let terminal = provider
        .spawn_terminal(spec(&[
            "sh",
            "-c",
            "stty raw -echo; echo ready; sleep 60 & wait",
        ]))
        .await
        .expect("terminal");
    let sid = terminal.pid();
    let mut output = terminal.take_output().expect("output");
    let mut seen = Vec::new();
    while !seen.windows(5).any(|w| w == b"ready") {
        seen.extend(
            within(LIMIT, "ready", output.next())
                .await
                .expect("open")
                .expect("bytes"),
        );
    }
    assert_eq!(
        terminal.foreground_pgid().await.expect("foreground"),
        sid,
        "the shell is in the foreground"
    );
    let writer = tokio::spawn({
        let terminal = terminal.clone();
        async move { terminal.write(Bytes::from(vec![b'x'; 4 << 20])).await }
    });
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(
        !writer.is_finished(),
        "4 MiB into an unread raw terminal did not block"
    );
    within(LIMIT, "terminate", terminal.terminate())
        .await
        .expect("terminate");
    let err = within(LIMIT, "the blocked write", writer)
        .await
        .expect("join")
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Closed, "{err}");
    assert!(
        world.session_members(sid).await.is_empty(),
        "session {sid} survived"
    );
    for err in [
        terminal.write(Bytes::from_static(b"x")).await.unwrap_err(),
        terminal.resize(100, 40).await.unwrap_err(),
        terminal.foreground_pgid().await.unwrap_err(),
        terminal.signal(Signal::INT).await.unwrap_err(),
    ] {
        assert_eq!(err.kind(), ErrorKind::Closed, "{err}");
        assert!(
            err.message()
                .contains(&format!("terminal {sid} is terminated")),
            "{err}"
        );
    }
    terminal.terminate().await.expect("a no-op");
    terminal.wait().await.expect("wait after terminate");
    let err = terminal.resize(0, 40).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidInput, "size is checked first");
    let err = terminal.signal(Signal(0)).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidInput);
    provider.dispose().await.expect("dispose");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_terminal_start_nobody_waits_for_is_rolled_back() {
    let world = World::start().await;
    let provider = world.provider();
    // Prepare the sandbox first, so the drops land inside the start.
    provider.resolve_executable("sh", &[]).await.expect("ready");
    let mut markers = Vec::new();
    for (attempt, delay) in [0u64, 1, 3, 8, 20].into_iter().enumerate() {
        let marker = format!("41.{attempt}{}", std::process::id());
        let future = provider.spawn_terminal(spec(&["sleep", &marker])).boxed();
        if let Some(started) = give_up_after(future, delay).await {
            // It started before the caller gave up: it is the caller's.
            started
                .expect("start")
                .terminate()
                .await
                .expect("terminate");
        }
        markers.push(marker);
    }
    let left = survivors(&world, &markers).await;
    assert!(
        left.is_empty(),
        "dropped starts left terminals running:\n{left}"
    );
    within(LIMIT, "dispose", provider.dispose())
        .await
        .expect("dispose");
    assert_eq!(provider.owned(), 0);
}
