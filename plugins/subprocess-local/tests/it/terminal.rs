//! Terminals on real PTYs: exact output, echo, resize and SIGWINCH, Ctrl-C,
//! the foreground group, signals, teardown of the whole session.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::support::{alive, provider, session_members};
use dsh_plugin_api::stream::collect_bytes;
use dsh_plugin_api::subprocess::{Signal, SubprocessProvider, Terminal, TerminalSpec};
use dsh_plugin_api::{Bytes, ErrorKind};
use futures::StreamExt;

/// Collects a terminal's output in the background.
struct Screen {
    bytes: Arc<Mutex<Vec<u8>>>,
}

impl Screen {
    fn attach(terminal: &dyn Terminal) -> Screen {
        let mut output = terminal.take_output().expect("output");
        let bytes = Arc::new(Mutex::new(Vec::new()));
        let sink = bytes.clone();
        tokio::spawn(async move {
            while let Some(chunk) = output.next().await {
                sink.lock()
                    .expect("screen")
                    .extend_from_slice(&chunk.expect("chunk"));
            }
        });
        Screen { bytes }
    }

    fn text(&self) -> String {
        String::from_utf8_lossy(&self.bytes.lock().expect("screen")).into_owned()
    }

    /// Waits until the output contains `needle` (after `from` bytes).
    async fn expect(&self, needle: &str, from: usize) -> usize {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let text = self.text();
            if let Some(at) = text.get(from..).and_then(|rest| rest.find(needle)) {
                return from + at + needle.len();
            }
            assert!(
                Instant::now() < deadline,
                "never saw {needle:?}; screen: {text:?}"
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }
}

fn spec(argv: &[&str]) -> TerminalSpec {
    let mut spec = TerminalSpec::new(argv.iter().copied());
    spec.env.insert("TERM".into(), "xterm".into());
    spec.env.insert("PS1".into(), "$ ".into());
    spec
}

fn bash() -> TerminalSpec {
    spec(&["bash", "--norc", "--noprofile", "-i"])
}

async fn until_foreground(terminal: &dyn Terminal, want: impl Fn(u32) -> bool) -> u32 {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let pgid = terminal.foreground_pgid().await.expect("foreground_pgid");
        if want(pgid) {
            return pgid;
        }
        assert!(Instant::now() < deadline, "foreground group stayed {pgid}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// Waits until the foreground job leaves the shell and has exec'd `program`. Between bash's
/// `tcsetpgrp` and the `exec` the forked child still runs bash's own SIGINT handling, so an
/// interrupt sent in that window is lost and the job runs its full course.
async fn until_job_runs(terminal: &dyn Terminal, shell: u32, program: &str) -> u32 {
    let job = until_foreground(terminal, |pgid| pgid != shell).await;
    let exec_done = crate::support::eventually(Duration::from_secs(10), || {
        std::fs::read_to_string(format!("/proc/{job}/comm"))
            .is_ok_and(|comm| comm.trim() == program)
    })
    .await;
    assert!(exec_done, "job {job} never became {program}");
    job
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn output_is_exactly_what_the_program_writes() {
    let p = provider();
    let terminal = p
        .spawn_terminal(spec(&["printf", "a\\tb"]))
        .await
        .expect("spawn_terminal");
    let output = collect_bytes(terminal.take_output().expect("output"))
        .await
        .expect("output");
    assert_eq!(
        output, b"a\tb",
        "no bootstrap noise, stream ends with the terminal"
    );
    assert!(terminal.take_output().is_none(), "taken once");
    let status = terminal.wait().await.expect("wait");
    assert!(status.success());
    assert_eq!(terminal.wait().await.expect("again"), status);
    p.dispose().await.expect("dispose");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_program_owns_its_session_and_controlling_terminal() {
    let p = provider();
    let terminal = p
        .spawn_terminal(spec(&[
            "sh",
            "-c",
            "set -- $(sed 's/.*) //' /proc/$$/stat); echo \"$$ $3 $4 $(tty)\"",
        ]))
        .await
        .expect("spawn_terminal");
    let pid = terminal.pid();
    let out = String::from_utf8(
        collect_bytes(terminal.take_output().expect("output"))
            .await
            .expect("out"),
    )
    .expect("utf-8");
    let fields: Vec<&str> = out.split_whitespace().collect();
    assert_eq!(
        fields[..3],
        [pid.to_string(), pid.to_string(), pid.to_string()],
        "{out}"
    );
    assert!(
        fields[3].starts_with("/dev/pts/"),
        "a controlling terminal: {out}"
    );
    p.dispose().await.expect("dispose");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_paused_consumer_buffers_and_the_program_never_blocks() {
    let p = provider();
    let terminal = p
        .spawn_terminal(spec(&[
            "sh",
            "-c",
            "head -c 300000 /dev/zero | tr '\\000' a",
        ]))
        .await
        .expect("spawn_terminal");
    // Nobody reads while the program writes 300 kB, far beyond the PTY's
    // own buffer: it still finishes.
    tokio::time::timeout(Duration::from_secs(10), terminal.wait())
        .await
        .expect("the program was not blocked")
        .expect("wait");
    let output = collect_bytes(terminal.take_output().expect("output"))
        .await
        .expect("output");
    assert_eq!(output.len(), 300_000);
    assert!(output.iter().all(|b| *b == b'a'));
    p.dispose().await.expect("dispose");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn typed_input_echoes() {
    let p = provider();
    let terminal = p
        .spawn_terminal(spec(&["cat"]))
        .await
        .expect("spawn_terminal");
    let screen = Screen::attach(terminal.as_ref());
    terminal
        .write(Bytes::from_static(b"hello\n"))
        .await
        .expect("write");
    // The line discipline echoes the input, then cat writes it back.
    screen.expect("hello\r\nhello\r\n", 0).await;
    terminal.write(Bytes::from(vec![0x04])).await.expect("EOF");
    assert!(terminal.wait().await.expect("wait").success());
    p.dispose().await.expect("dispose");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resize_is_seen_through_sigwinch_stty_and_tput() {
    let p = provider();
    let terminal = p
        .spawn_terminal(spec(&[
            "bash",
            "--norc",
            "--noprofile",
            "-c",
            "trap 'echo got-winch size $(stty size) cols $(tput cols); exit 0' WINCH; \
             echo size $(stty size) cols $(tput cols); echo ready; \
             while :; do sleep 0.05; done",
        ]))
        .await
        .expect("spawn_terminal");
    let screen = Screen::attach(terminal.as_ref());
    let at = screen.expect("size 24 80 cols 80", 0).await;
    let at = screen.expect("ready", at).await;
    terminal.resize(100, 30).await.expect("resize");
    screen.expect("got-winch size 30 100 cols 100", at).await;
    assert!(terminal.wait().await.expect("wait").success());

    let err = terminal.resize(0, 10).await.expect_err("zero size");
    assert_eq!(err.kind(), ErrorKind::InvalidInput);
    p.dispose().await.expect("dispose");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ctrl_c_interrupts_the_foreground_job_and_the_shell_survives() {
    let p = provider();
    let terminal = p.spawn_terminal(bash()).await.expect("spawn_terminal");
    let shell = terminal.pid();
    let screen = Screen::attach(terminal.as_ref());
    let at = screen.expect("$ ", 0).await;
    assert_eq!(
        terminal.foreground_pgid().await.expect("fg"),
        shell,
        "the shell is in the foreground"
    );

    terminal
        .write(Bytes::from_static(b"sleep 30\n"))
        .await
        .expect("write");
    let job = until_job_runs(terminal.as_ref(), shell, "sleep").await;
    assert!(alive(job as i32), "the job runs in its own group");

    terminal
        .write(Bytes::from(vec![0x03]))
        .await
        .expect("Ctrl-C");
    until_foreground(terminal.as_ref(), |pgid| pgid == shell).await;
    assert!(
        crate::support::eventually(Duration::from_secs(5), || !alive(job as i32)).await,
        "sleep was interrupted"
    );

    // signal() reaches the foreground job the same way.
    terminal
        .write(Bytes::from_static(b"sleep 31\n"))
        .await
        .expect("write");
    let job = until_job_runs(terminal.as_ref(), shell, "sleep").await;
    terminal.signal(Signal::INT).await.expect("signal");
    until_foreground(terminal.as_ref(), |pgid| pgid == shell).await;
    assert!(crate::support::eventually(Duration::from_secs(5), || !alive(job as i32)).await);

    terminal
        .write(Bytes::from_static(b"echo alive-$((40+2))\n"))
        .await
        .expect("write");
    screen.expect("alive-42", at).await;
    assert!(alive(shell as i32), "the shell survived");

    let err = terminal.signal(Signal(0)).await.expect_err("not a signal");
    assert_eq!(err.kind(), ErrorKind::InvalidInput);
    terminal.terminate().await.expect("terminate");
    p.dispose().await.expect("dispose");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn terminate_leaves_no_process_of_the_session_and_closes_the_handle() {
    let p = provider();
    let terminal = p.spawn_terminal(bash()).await.expect("spawn_terminal");
    let sid = terminal.pid() as i32;
    let screen = Screen::attach(terminal.as_ref());
    screen.expect("$ ", 0).await;
    // A background job (its own group under job control), a job that
    // ignores SIGHUP, and a foreground job.
    terminal
        .write(Bytes::from_static(
            b"sleep 40 & (trap '' HUP TERM; sleep 41) & sleep 42\n",
        ))
        .await
        .expect("write");
    until_foreground(terminal.as_ref(), |pgid| pgid != sid as u32).await;
    assert!(
        crate::support::eventually(Duration::from_secs(5), || session_members(sid).len() >= 4)
            .await
    );
    let members = session_members(sid);
    assert_eq!(p.owned(), 1);

    terminal.terminate().await.expect("terminate");
    assert!(
        session_members(sid).is_empty(),
        "nothing of the session is left"
    );
    for pid in members {
        assert!(!alive(pid), "{pid} survived");
    }
    assert_eq!(p.owned(), 0);
    let status = terminal.wait().await.expect("wait");
    assert!(status.signal.is_some(), "{status:?}");

    for err in [
        terminal
            .write(Bytes::from_static(b"x"))
            .await
            .expect_err("write"),
        terminal.resize(10, 10).await.expect_err("resize"),
        terminal
            .foreground_pgid()
            .await
            .map(drop)
            .expect_err("foreground_pgid"),
        terminal.signal(Signal::INT).await.expect_err("signal"),
    ] {
        assert_eq!(err.kind(), ErrorKind::Closed, "{err}");
        assert!(err.message().contains("is terminated"), "{err}");
    }
    terminal
        .terminate()
        .await
        .expect("a no-op once it succeeded");
    p.dispose().await.expect("dispose");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn terminate_cancels_a_write_blocked_on_a_full_terminal() {
    let p = provider();
    // The program never reads, so the terminal's input queue fills up.
    let terminal: Arc<dyn Terminal> = p
        .spawn_terminal(spec(&["sleep", "30"]))
        .await
        .expect("spawn_terminal");
    let writer = tokio::spawn({
        let terminal = terminal.clone();
        async move {
            loop {
                if let Err(err) = terminal.write(Bytes::from(vec![b'x'; 4096])).await {
                    return err;
                }
            }
        }
    });
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!writer.is_finished(), "the write is blocked");
    tokio::time::timeout(Duration::from_secs(10), terminal.terminate())
        .await
        .expect("terminate joined the blocked write")
        .expect("terminate");
    let err = writer.await.expect("join");
    assert_eq!(err.kind(), ErrorKind::Closed);
    p.dispose().await.expect("dispose");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_terminal_input_is_rejected() {
    let p = provider();
    let mut zero = spec(&["bash"]);
    zero.cols = 0;
    let mut missing_cwd = spec(&["bash"]);
    missing_cwd.cwd = Some("/no/such/dir".into());
    let mut bad_env = spec(&["bash"]);
    bad_env.env.insert("A=B".into(), "x".into());
    for (spec, kind) in [
        (zero, ErrorKind::InvalidInput),
        (spec(&["bin/bash"]), ErrorKind::InvalidInput),
        (spec(&["no-such-program-9c1d"]), ErrorKind::NotFound),
        (missing_cwd, ErrorKind::NotFound),
        (bad_env, ErrorKind::InvalidInput),
    ] {
        let err = p
            .spawn_terminal(spec.clone())
            .await
            .err()
            .unwrap_or_else(|| panic!("{spec:?}"));
        assert_eq!(err.kind(), kind, "{spec:?}: {err}");
        assert!(err.message().starts_with("spawn_terminal"), "{err}");
    }
    assert_eq!(p.owned(), 0);
    p.dispose().await.expect("dispose");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn disposal_tears_down_live_terminals() {
    let p = provider();
    let terminal = p.spawn_terminal(bash()).await.expect("spawn_terminal");
    let sid = terminal.pid() as i32;
    let screen = Screen::attach(terminal.as_ref());
    screen.expect("$ ", 0).await;
    terminal
        .write(Bytes::from_static(b"sleep 50 &\n"))
        .await
        .expect("write");
    assert!(
        crate::support::eventually(Duration::from_secs(5), || session_members(sid).len() >= 2)
            .await
    );
    drop(terminal);
    p.dispose().await.expect("dispose");
    assert!(session_members(sid).is_empty());
    let err = p
        .spawn_terminal(bash())
        .await
        .err()
        .expect("refused after disposal");
    assert_eq!(err.kind(), ErrorKind::Closed);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_program_gets_exactly_the_scrubbed_environment_and_its_cwd() {
    let ambient = [
        ("PATH", "/usr/bin:/bin"),
        ("DSH_LOG", "debug"),
        ("ANTHROPIC_API_KEY", "secret"),
        ("LANG", "C.UTF-8"),
    ]
    .into_iter()
    .map(|(n, v)| (n.into(), v.into()));
    let p = dsh_subprocess_local::LocalSubprocess::with_environment(
        &dsh_subprocess_local::Config::default(),
        dsh_subprocess_local::Environment::scrubbed(ambient),
    )
    .expect("provider");
    let mut env_spec = TerminalSpec::new(["env"]);
    env_spec.env.insert("ONLY".into(), "explicit".into());
    let terminal = p.spawn_terminal(env_spec).await.expect("spawn_terminal");
    let out = String::from_utf8(
        collect_bytes(terminal.take_output().expect("output"))
            .await
            .expect("out"),
    )
    .expect("utf-8");
    let mut lines: Vec<&str> = out.split("\r\n").filter(|l| !l.is_empty()).collect();
    lines.sort_unstable();
    assert_eq!(
        lines,
        ["LANG=C.UTF-8", "ONLY=explicit", "PATH=/usr/bin:/bin"]
    );

    let dir = tempfile::tempdir().expect("tempdir");
    let cwd = dir.path().canonicalize().expect("canonical");
    let mut pwd_spec = TerminalSpec::new(["pwd"]);
    pwd_spec.cwd = Some(cwd.display().to_string());
    let terminal = p.spawn_terminal(pwd_spec).await.expect("spawn_terminal");
    let out = collect_bytes(terminal.take_output().expect("output"))
        .await
        .expect("out");
    assert_eq!(out, format!("{}\r\n", cwd.display()).into_bytes());
    p.dispose().await.expect("dispose");
}
