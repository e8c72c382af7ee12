//! Spawning: bad input, identity, environment boundary, cwd, exit facts,
//! stdin and lossless pipes.

use std::ffi::OsString;

use crate::support::{provider, sh, stdout_of};
use dsh_plugin_api::stream::collect_bytes;
use dsh_plugin_api::subprocess::{OutputMode, Signal, SpawnSpec, StdinMode, SubprocessProvider};
use dsh_plugin_api::{Bytes, ErrorKind};
use dsh_subprocess_local::{Config, Environment, LocalSubprocess};
use futures::StreamExt;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_input_is_rejected_before_anything_starts() {
    let p = provider();
    let mut cases: Vec<(SpawnSpec, ErrorKind, &str)> = vec![
        (
            SpawnSpec::new(Vec::<String>::new()),
            ErrorKind::InvalidInput,
            "argv is empty",
        ),
        (
            SpawnSpec::new(["bin/ls"]),
            ErrorKind::InvalidInput,
            "contains '/'",
        ),
        (
            SpawnSpec::new(["./ls"]),
            ErrorKind::InvalidInput,
            "contains '/'",
        ),
        (
            SpawnSpec::new(["definitely-not-a-command-7f3a"]),
            ErrorKind::NotFound,
            "command not found",
        ),
        (
            SpawnSpec::new(["/no/such/program"]),
            ErrorKind::NotFound,
            "spawn",
        ),
    ];
    for name in ["", "A=B", "NUL\0"] {
        let mut spec = SpawnSpec::new(["true"]);
        spec.env.insert(name.to_owned(), "v".to_owned());
        let expected = if name.is_empty() {
            "empty environment variable name"
        } else {
            "contains"
        };
        cases.push((spec, ErrorKind::InvalidInput, expected));
    }
    let mut spec = SpawnSpec::new(["true"]);
    spec.cwd = Some("/definitely/missing/dir".to_owned());
    cases.push((spec, ErrorKind::NotFound, "cwd"));
    let mut spec = SpawnSpec::new(["true"]);
    spec.cwd = Some(String::new());
    cases.push((spec, ErrorKind::InvalidInput, "cwd is empty"));
    let mut spec = SpawnSpec::new(["true"]);
    spec.cwd = Some("/etc/passwd".to_owned());
    cases.push((spec, ErrorKind::NotADirectory, "cwd"));

    for (spec, kind, text) in cases {
        let err = p
            .spawn(spec.clone())
            .await
            .err()
            .unwrap_or_else(|| panic!("{spec:?} must fail"));
        assert_eq!(err.kind(), kind, "{spec:?}: {err}");
        assert!(err.to_string().contains(text), "{spec:?}: {err}");
        assert!(
            err.message().starts_with("spawn"),
            "names the operation: {err}"
        );
    }
    assert_eq!(p.owned(), 0, "nothing was started");
    p.dispose().await.expect("dispose");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_child_leads_its_own_session_and_group() {
    let p = provider();
    let process = p
        .spawn(sh(
            r#"set -- $(cat /proc/$$/stat | sed 's/.*) //'); echo "$$ $3 $4""#,
        ))
        .await
        .expect("spawn");
    let pid = process.pid();
    assert!(pid > 1);
    let out = String::from_utf8(stdout_of(process.as_ref()).await).expect("utf-8");
    assert_eq!(out.trim(), format!("{pid} {pid} {pid}"), "pid = pgid = sid");
    assert!(process.wait().await.expect("wait").success());
    p.dispose().await.expect("dispose");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn environment_boundary_scrubs_ambient_and_restores_explicit() {
    let ambient: Vec<(OsString, OsString)> = [
        ("PATH", "/usr/local/bin:/usr/bin:/bin"),
        ("HOME", "/root"),
        ("DSH_PLUGIN_PATH", "/x"),
        ("OPENAI_API_KEY", "sk-ambient"),
        ("github_token", "ghp"),
        ("MY_SECRET_THING", "s"),
        ("LANG", "C.UTF-8"),
    ]
    .into_iter()
    .map(|(n, v)| (n.into(), v.into()))
    .collect();
    let p = LocalSubprocess::with_environment(&Config::default(), Environment::scrubbed(ambient))
        .expect("provider");
    let mut spec = SpawnSpec::new(["env"]);
    spec.env
        .insert("OPENAI_API_KEY".into(), "sk-explicit".into());
    spec.env.insert("EMPTY".into(), String::new());
    spec.env.insert("WITH_EQUALS".into(), "a=b".into());
    let process = p.spawn(spec).await.expect("spawn");
    let out = String::from_utf8(stdout_of(process.as_ref()).await).expect("utf-8");
    let mut seen: Vec<&str> = out.lines().collect();
    seen.sort_unstable();
    assert_eq!(
        seen,
        [
            "EMPTY=",
            "HOME=/root",
            "LANG=C.UTF-8",
            "OPENAI_API_KEY=sk-explicit",
            "PATH=/usr/local/bin:/usr/bin:/bin",
            "WITH_EQUALS=a=b",
        ]
    );
    p.dispose().await.expect("dispose");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn explicit_path_is_used_to_find_the_program() {
    let p = provider();
    let dir = tempfile::tempdir().expect("tempdir");
    let tool = dir.path().join("only-here");
    std::fs::write(&tool, "#!/bin/sh\necho found\n").expect("write");
    std::fs::set_permissions(&tool, std::os::unix::fs::PermissionsExt::from_mode(0o755))
        .expect("chmod");
    let mut spec = SpawnSpec::new(["only-here"]);
    spec.env.insert(
        "PATH".into(),
        format!("{}:/usr/bin:/bin", dir.path().display()),
    );
    let process = p.spawn(spec).await.expect("spawn via explicit PATH");
    assert_eq!(stdout_of(process.as_ref()).await, b"found\n");

    let resolved = p
        .resolve_executable("only-here", &[dir.path().display().to_string()])
        .await
        .expect("extra dir");
    assert_eq!(resolved, tool.display().to_string());
    let err = p
        .resolve_executable("only-here", &[])
        .await
        .expect_err("not on PATH");
    assert_eq!(err.kind(), ErrorKind::NotFound);
    let err = p
        .resolve_executable("bin/sh", &[])
        .await
        .expect_err("relative");
    assert_eq!(err.kind(), ErrorKind::InvalidInput);
    assert_eq!(
        p.resolve_executable("/bin/sh", &[])
            .await
            .expect("absolute"),
        "/bin/sh"
    );
    p.dispose().await.expect("dispose");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cwd_defaults_to_the_world_and_relative_cwd_joins_it() {
    let world = tempfile::tempdir().expect("tempdir");
    std::fs::create_dir(world.path().join("sub")).expect("mkdir");
    let world_path = world.path().canonicalize().expect("canonical");
    let p = LocalSubprocess::new(&Config {
        cwd: Some(world_path.display().to_string()),
        ..Config::default()
    })
    .expect("provider");
    let process = p.spawn(SpawnSpec::new(["pwd"])).await.expect("spawn");
    assert_eq!(
        stdout_of(process.as_ref()).await,
        format!("{}\n", world_path.display()).into_bytes()
    );
    let mut spec = SpawnSpec::new(["pwd"]);
    spec.cwd = Some("sub".into());
    let process = p.spawn(spec).await.expect("spawn");
    assert_eq!(
        stdout_of(process.as_ref()).await,
        format!("{}/sub\n", world_path.display()).into_bytes()
    );
    p.dispose().await.expect("dispose");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exit_codes_and_signals_are_reported() {
    let p = provider();
    let process = p.spawn(sh("exit 7")).await.expect("spawn");
    let status = process.wait().await.expect("wait");
    assert_eq!(
        (status.code, status.signal, status.timed_out),
        (Some(7), None, false)
    );
    assert!(!status.success());
    assert_eq!(
        process.wait().await.expect("again"),
        status,
        "wait is idempotent"
    );

    let process = p.spawn(sh("kill -USR1 $$")).await.expect("spawn");
    let status = process.wait().await.expect("wait");
    assert_eq!((status.code, status.signal), (None, Some(Signal::USR1)));

    let process = p.spawn(SpawnSpec::new(["true"])).await.expect("spawn");
    assert!(process.wait().await.expect("wait").success());
    assert_eq!(
        p.owned(),
        0,
        "an exited command with no descendants is released"
    );
    p.dispose().await.expect("dispose");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_child_starts_with_default_signal_dispositions() {
    // The test harness (like any Rust program) ignores SIGPIPE; the child
    // must not inherit that.
    let p = provider();
    let process = p
        .spawn(SpawnSpec::new([
            "grep",
            "-E",
            "^Sig(Ign|Blk)",
            "/proc/self/status",
        ]))
        .await
        .expect("spawn");
    let out = String::from_utf8(stdout_of(process.as_ref()).await).expect("utf-8");
    let mask = |name: &str| {
        let line = out.lines().find(|l| l.starts_with(name)).expect("line");
        u64::from_str_radix(line.split_whitespace().nth(1).expect("mask"), 16).expect("hex")
    };
    // Signals 1..=31 (SIGPIPE among them) are at their defaults. glibc's
    // posix_spawn itself leaves its two internal real-time signals (32, 33)
    // ignored, as for every program it starts.
    assert_eq!(mask("SigIgn:") & 0x7fff_ffff, 0, "{out}");
    assert_eq!(mask("SigBlk:"), 0, "{out}");
    p.dispose().await.expect("dispose");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stdin_pipe_round_trips_binary_and_closes() {
    let p = provider();
    let mut spec = SpawnSpec::new(["cat"]);
    spec.stdin = StdinMode::Pipe;
    let process = p.spawn(spec).await.expect("spawn");
    let mut stdin = process.take_stdin().expect("stdin");
    assert!(process.take_stdin().is_none(), "taken once");
    let stdout = process.take_stdout().expect("stdout");
    assert!(process.take_stdout().is_none(), "taken once");
    let reader = tokio::spawn(collect_bytes(stdout));

    let payload: Vec<u8> = (0..=255u8).cycle().take(3 * 65536 + 17).collect();
    for chunk in payload.chunks(10_000) {
        stdin
            .write(Bytes::copy_from_slice(chunk))
            .await
            .expect("write");
    }
    stdin.close().await.expect("close");
    stdin.close().await.expect("close twice is a no-op");
    let err = stdin
        .write(Bytes::from_static(b"late"))
        .await
        .expect_err("closed");
    assert_eq!(err.kind(), ErrorKind::Closed);
    assert_eq!(reader.await.expect("join").expect("read"), payload);
    assert!(process.wait().await.expect("wait").success());
    let snapshot = process
        .read_output(dsh_plugin_api::subprocess::OutputStream::Stdout, 0, 10)
        .await
        .expect("read_output");
    assert_eq!(
        snapshot.total,
        payload.len() as u64,
        "pipe bytes are counted"
    );
    assert!(snapshot.bytes.is_empty(), "nothing retained in pipe mode");
    p.dispose().await.expect("dispose");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn writing_to_a_child_that_closed_stdin_fails_closed() {
    let p = provider();
    let mut spec = sh("exec 0<&-; sleep 5");
    spec.stdin = StdinMode::Pipe;
    let process = p.spawn(spec).await.expect("spawn");
    let mut stdin = process.take_stdin().expect("stdin");
    let mut result = Ok(());
    for _ in 0..50 {
        result = stdin.write(Bytes::from(vec![b'x'; 4096])).await;
        if result.is_err() {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    let err = result.expect_err("EPIPE once the child closed its stdin");
    assert_eq!(err.kind(), ErrorKind::Closed, "{err}");
    assert!(err.message().contains("stdin"), "{err}");
    process
        .terminate(std::time::Duration::from_millis(200))
        .await
        .expect("terminate");
    p.dispose().await.expect("dispose");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn split_utf8_and_binary_output_round_trip_exactly() {
    let p = provider();
    // "€" is E2 82 AC. The child writes the first two bytes, then waits for
    // a line on stdin before writing the rest, so the first chunk ends in
    // the middle of the character whatever the scheduling.
    let mut spec = sh(r"printf '\342\202'; read line; printf '\254 ok\000\377\n'");
    spec.stdin = StdinMode::Pipe;
    let process = p.spawn(spec).await.expect("spawn");
    let mut stdin = process.take_stdin().expect("stdin");
    let mut stdout = process.take_stdout().expect("stdout");
    let first = stdout.next().await.expect("a chunk").expect("chunk");
    assert_eq!(
        first,
        &b"\xe2\x82"[..],
        "the split is visible to the reader"
    );
    stdin
        .write(Bytes::from_static(b"go\n"))
        .await
        .expect("write");
    let mut rest = Vec::new();
    while let Some(chunk) = stdout.next().await {
        let chunk = chunk.expect("chunk");
        assert!(!chunk.is_empty(), "chunks are never empty");
        rest.extend_from_slice(&chunk);
    }
    assert_eq!(
        [first, Bytes::from(rest)].concat(),
        b"\xe2\x82\xac ok\x00\xff\n"
    );
    assert!(process.wait().await.expect("wait").success());
    p.dispose().await.expect("dispose");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unread_pipe_applies_backpressure() {
    let p = provider();
    // Four times the output pipe's capacity: the writer must block.
    let mut spec = sh("head -c 4194304 /dev/zero; echo done >&2");
    spec.stderr = OutputMode::Collect { limit: 64 };
    let process = p.spawn(spec).await.expect("spawn");
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    let stderr = process
        .read_output(dsh_plugin_api::subprocess::OutputStream::Stderr, 0, 64)
        .await
        .expect("stderr");
    assert!(
        stderr.bytes.is_empty(),
        "the writer is blocked on the full pipe"
    );
    let out = stdout_of(process.as_ref()).await;
    assert_eq!(out.len(), 4 << 20);
    assert!(process.wait().await.expect("wait").success());
    assert_eq!(
        crate::support::retained(
            process.as_ref(),
            dsh_plugin_api::subprocess::OutputStream::Stderr
        )
        .await,
        b"done\n"
    );
    p.dispose().await.expect("dispose");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_waits_agree_in_every_mode() {
    let p = provider();
    for (stdout, timeout) in [
        (OutputMode::Pipe, None),
        (OutputMode::Collect { limit: 8 }, None),
        (OutputMode::Pipe, Some(std::time::Duration::from_secs(30))),
    ] {
        for _ in 0..20 {
            let mut spec = sh("exit 5");
            spec.stdout = stdout;
            spec.timeout = timeout;
            let process = p.spawn(spec).await.expect("spawn");
            let (a, b, c) = tokio::join!(process.wait(), process.wait(), process.wait());
            let a = a.expect("wait");
            assert_eq!(a.code, Some(5));
            assert_eq!(b.expect("wait"), a);
            assert_eq!(c.expect("wait"), a);
        }
    }
    assert!(
        crate::support::eventually(std::time::Duration::from_secs(5), || p.owned() == 0).await,
        "every group was released"
    );
    p.dispose().await.expect("dispose");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_stdio_descriptors_reach_the_child() {
    // A descriptor the host opened without close-on-exec.
    let leaky = std::fs::File::open("/dev/null").expect("open");
    let fd = std::os::fd::AsRawFd::as_raw_fd(&leaky);
    // SAFETY: clearing FD_CLOEXEC on a descriptor this test owns.
    unsafe {
        libc::fcntl(fd, libc::F_SETFD, 0);
    }
    let p = provider();
    // `ls` lists the descriptors of the shell that started it.
    let process = p.spawn(sh("ls /proc/$$/fd")).await.expect("spawn");
    let out = String::from_utf8(stdout_of(process.as_ref()).await).expect("utf-8");
    let mut fds: Vec<i32> = out.lines().map(|l| l.parse().expect("fd number")).collect();
    fds.sort_unstable();
    assert_eq!(
        fds,
        [0, 1, 2],
        "the leaky descriptor {fd} must not be inherited"
    );
    drop(leaky);
    p.dispose().await.expect("dispose");
}
