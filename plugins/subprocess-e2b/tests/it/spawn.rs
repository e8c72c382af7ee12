//! Commands in the sandbox: bad input rejected before anything starts,
//! identity, the environment boundary, raw bytes, the control state out of
//! the sandbox user's reach, and the faults a command can throw at its
//! supervisor.

use std::time::Duration;

use crate::support::{CWD, RUNTIME_ROOT, World, kept, sh, sh_collect, stdout_of, within};
use dsh_plugin_api::stream::collect_bytes;
use dsh_plugin_api::subprocess::{
    OutputMode, OutputStream, Signal, SpawnSpec, SpillSpec, StdinMode, SubprocessProvider,
};
use dsh_plugin_api::{Bytes, ErrorKind};

const LIMIT: Duration = Duration::from_secs(30);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_input_is_refused_before_anything_starts() {
    let world = World::start().await;
    let provider = world.provider();
    let marker = format!("{CWD}/ran");
    let runs = format!(": > {marker}");
    let with_env = |name: &str| {
        let mut spec = sh(&runs);
        spec.env.insert(name.to_owned(), "v".to_owned());
        spec
    };
    let with_argv = |argv: &[&str]| SpawnSpec::new(argv.iter().copied());
    let mut empty_cwd = sh(&runs);
    empty_cwd.cwd = Some(String::new());
    let mut huge = sh(&runs);
    huge.env.insert("HUGE".into(), "x".repeat(200 * 1024));
    for (label, spec) in [
        ("an empty env name", with_env("")),
        ("an env name with '='", with_env("A=B")),
        ("an env name with NUL", with_env("A\0B")),
        ("an empty argv", with_argv(&[])),
        (
            "a relative argv[0] with '/'",
            with_argv(&["bin/sh", "-c", &runs]),
        ),
        ("a relative argv[0] with './'", with_argv(&["./sh"])),
        ("an empty cwd", empty_cwd),
        ("argv and env too large to pass in", huge),
    ] {
        let err = provider
            .spawn(spec)
            .await
            .err()
            .unwrap_or_else(|| panic!("{label}: accepted"));
        assert_eq!(err.kind(), ErrorKind::InvalidInput, "{label}: {err}");
        assert!(err.message().starts_with("spawn: "), "{label}: {err}");
    }
    let probe = world
        .root(r#"test -e "$1" && echo ran || echo clean"#, &[&marker])
        .await;
    assert_eq!(probe.stdout, b"clean\n", "a refused spawn ran");
    assert_eq!(provider.owned(), 0);
    provider.dispose().await.expect("dispose");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn missing_programs_and_directories_fail_the_spawn_itself() {
    let world = World::start().await;
    let provider = world.provider();
    let err = provider
        .spawn(SpawnSpec::new(["dsh-no-such-program"]))
        .await
        .err()
        .expect("missing");
    assert_eq!(err.kind(), ErrorKind::NotFound, "{err}");
    // The program is the error's subject, named once.
    assert_eq!(err.subject(), Some("dsh-no-such-program"));
    assert!(
        err.to_string()
            .starts_with("dsh-no-such-program: spawn: command not found (searched /"),
        "{err}"
    );
    let err = provider
        .spawn(SpawnSpec::new(["/nonexistent/prog"]))
        .await
        .err()
        .expect("missing");
    assert_eq!(err.kind(), ErrorKind::NotFound, "{err}");
    assert_eq!(err.subject(), Some("/nonexistent/prog"));
    let err = provider
        .spawn(SpawnSpec::new(["/tmp"]))
        .await
        .err()
        .expect("a directory");
    assert_eq!(err.kind(), ErrorKind::IsADirectory, "{err}");

    let mut spec = sh("exit 0");
    spec.cwd = Some("missing-dir".into());
    let err = provider.spawn(spec).await.err().expect("missing cwd");
    assert_eq!(err.kind(), ErrorKind::NotFound, "{err}");
    assert_eq!(err.subject(), Some(format!("{CWD}/missing-dir").as_str()));
    let mut spec = sh("exit 0");
    spec.cwd = Some("/etc/passwd".into());
    let err = provider.spawn(spec).await.err().expect("a file as cwd");
    assert_eq!(err.kind(), ErrorKind::NotADirectory, "{err}");
    // The runtime root is root's: the user may not enter it.
    let mut spec = sh("exit 0");
    spec.cwd = Some(RUNTIME_ROOT.into());
    let err = provider.spawn(spec).await.err().expect("a private cwd");
    assert_eq!(err.kind(), ErrorKind::PermissionDenied, "{err}");

    // resolve_executable agrees, as the sandbox user.
    let sh = provider.resolve_executable("sh", &[]).await.expect("sh");
    assert!(sh.starts_with('/') && sh.ends_with("/sh"), "{sh}");
    let err = provider
        .resolve_executable("bin/sh", &[])
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidInput);
    let private = world
        .root(r#"printf '#!/bin/sh\n' > /usr/local/bin/root-only && chmod 0700 /usr/local/bin/root-only"#, &[])
        .await;
    assert!(private.status.success());
    let err = provider
        .resolve_executable("/usr/local/bin/root-only", &[])
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::PermissionDenied, "{err}");
    let err = provider
        .spawn(SpawnSpec::new(["/usr/local/bin/root-only"]))
        .await
        .err()
        .expect("not executable");
    assert_eq!(err.kind(), ErrorKind::PermissionDenied, "{err}");
    assert_eq!(provider.owned(), 0);
    provider.dispose().await.expect("dispose");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn identity_user_and_environment_boundary() {
    let world = World::start().await;
    let provider = world.provider();
    let mut spec =
        sh(r#"echo "$$ $(ps -o pgid= -p $$) $(ps -o sid= -p $$) $(id -un) $(umask)"; env -0 >&2"#);
    spec.env.insert("EXPLICIT_API_KEY".into(), "mine".into());
    spec.env.insert("DSH_EXPLICIT".into(), "on".into());
    spec.env.insert("MULTI".into(), "a=b\nc é".into());
    let process = provider.spawn(spec).await.expect("spawn");
    let pid = process.pid();
    let (out, err) = tokio::join!(
        collect_bytes(process.take_stdout().expect("stdout")),
        collect_bytes(process.take_stderr().expect("stderr"))
    );
    let out = String::from_utf8(out.expect("stdout")).expect("utf-8");
    let fields: Vec<&str> = out.split_whitespace().collect();
    assert_eq!(
        fields[..3],
        [pid.to_string(), pid.to_string(), pid.to_string()],
        "{out}"
    );
    assert_eq!(fields[3], "user", "{out}");
    assert_eq!(fields[4], "0022", "the umask is envd's, unchanged");
    let env: Vec<(String, String)> = err
        .expect("stderr")
        .split(|&b| b == 0)
        .filter(|entry| !entry.is_empty())
        .map(|entry| {
            let text = String::from_utf8(entry.to_vec()).expect("utf-8 env");
            let (name, value) = text.split_once('=').expect("NAME=VALUE");
            (name.to_owned(), value.to_owned())
        })
        .collect();
    let get = |name: &str| env.iter().find(|(n, _)| n == name).map(|(_, v)| v.as_str());
    for scrubbed in [
        "OPENAI_API_KEY",
        "GITHUB_TOKEN",
        "DSH_AMBIENT",
        "db_secret_password",
        "DSH_E2B_REQUEST",
        "DSH_RUNTIME_ROOT",
    ] {
        assert_eq!(get(scrubbed), None, "{scrubbed} reached the command");
    }
    assert_eq!(get("PLAIN_AMBIENT"), Some("visible"));
    assert_eq!(get("EXPLICIT_API_KEY"), Some("mine"));
    assert_eq!(get("DSH_EXPLICIT"), Some("on"));
    assert_eq!(get("MULTI"), Some("a=b\nc é"));
    assert_eq!(get("HOME"), Some("/home/user"));
    assert_eq!(get("USER"), Some("user"));
    assert_eq!(get("PWD"), Some(CWD));
    assert!(get("PATH").is_some_and(|path| path.contains("/usr/bin")));
    assert!(process.wait().await.expect("wait").success());
    provider.dispose().await.expect("dispose");
}

/// The identity the helper's probe learns from the account files is the one
/// `id` reports for the user: uid, primary group, supplementary groups in
/// order (one added before the provider starts).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn commands_have_the_users_uid_and_every_group() {
    let world = World::start().await;
    let expected = world
        .root(
            "groupadd -g 4242 dsh-extra && gpasswd -a user dsh-extra >/dev/null && id -u user && id -g user && id -G user",
            &[],
        )
        .await;
    assert!(expected.status.success(), "{}", expected.stderr_text());
    let expected = String::from_utf8(expected.stdout).expect("utf-8");
    assert!(expected.contains("4242"), "{expected}");
    let provider = world.provider();
    let process = provider
        .spawn(sh("id -u; id -g; id -G"))
        .await
        .expect("spawn");
    let out = String::from_utf8(stdout_of(&*process).await).expect("utf-8");
    assert_eq!(out, expected);
    provider.dispose().await.expect("dispose");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn values_never_appear_on_a_command_line() {
    let world = World::start().await;
    let provider = world.provider();
    let mut spec = sh("sleep 5");
    spec.env
        .insert("VISIBLE_ONLY_IN_ENV".into(), "needle-7f3a".into());
    let process = provider.spawn(spec).await.expect("spawn");
    let table = world.root("ps -e -ww -o args=", &[]).await;
    let table = String::from_utf8_lossy(&table.stdout);
    assert!(
        !table.contains("needle-7f3a"),
        "an env value is on a command line:\n{table}"
    );
    process
        .terminate(Duration::from_millis(100))
        .await
        .expect("terminate");
    provider.dispose().await.expect("dispose");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_sandbox_user_cannot_alter_the_control_state() {
    let world = World::start().await;
    let provider = world.provider();
    // A command that tries everything a same-UID process could try against
    // a control channel, then prints frames of its own that claim a
    // different start and exit.
    let script = format!(
        r#"
for p in "{RUNTIME_ROOT}" "{RUNTIME_ROOT}/x"; do printf x 2>/dev/null > "$p" && echo "wrote $p"; done
ls "{RUNTIME_ROOT}" >/dev/null 2>&1 && echo listed
cat /proc/$PPID/environ >/dev/null 2>&1 && echo read-environ
kill -STOP $PPID 2>/dev/null && echo stopped-helper
kill -TERM $PPID 2>/dev/null && echo killed-helper
echo forged > /proc/$PPID/fd/1 2>/dev/null && echo forged-frame
printf 'X\007\000\000\000\000\000\000\000\000\001\001'
printf 'S\014\000\000\000\001\000\000\000\000\000\000\000\000\000\000\000'
exit 3"#
    );
    let process = provider.spawn(sh(&script)).await.expect("spawn");
    let out = stdout_of(process.as_ref()).await;
    let status = process.wait().await.expect("wait");
    assert_eq!(status.code, Some(3), "the real exit, not a forged one");
    let mut expected = b"X\x07\x00\x00\x00\x00\x00\x00\x00\x00\x01\x01".to_vec();
    expected
        .extend_from_slice(b"S\x0c\x00\x00\x00\x01\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00");
    assert_eq!(
        out, expected,
        "every attempt failed and the forged frames are plain output"
    );
    let helper = world
        .root(r#"stat -c '%U %a' -- "$1""#, &[RUNTIME_ROOT])
        .await;
    assert_eq!(helper.stdout, b"root 700\n");
    provider.dispose().await.expect("dispose");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn split_utf8_and_binary_round_trip_in_every_mode() {
    let world = World::start().await;
    let provider = world.provider();
    let all_bytes: Vec<u8> = (0..=255u8).cycle().take(300_000).collect();
    let script = r"printf '\303'; sleep 0.2; printf '\251'; cat; printf '\000\377\200' >&2";
    let mut spec = sh(script);
    spec.stdin = StdinMode::Pipe;
    spec.spill = Some(SpillSpec { limit: 1 << 20 });
    let process = provider.spawn(spec).await.expect("spawn");
    let mut stdin = process.take_stdin().expect("stdin");
    let feed = {
        let data = all_bytes.clone();
        async move {
            for chunk in data.chunks(7919) {
                stdin
                    .write(Bytes::copy_from_slice(chunk))
                    .await
                    .expect("write");
            }
            stdin.close().await.expect("close");
        }
    };
    let (_, out, err) = tokio::join!(
        feed,
        collect_bytes(process.take_stdout().expect("stdout")),
        collect_bytes(process.take_stderr().expect("stderr"))
    );
    let mut expected = "é".as_bytes().to_vec();
    expected.extend_from_slice(&all_bytes);
    assert_eq!(out.expect("stdout"), expected);
    assert_eq!(err.expect("stderr"), b"\0\xff\x80");
    assert!(process.wait().await.expect("wait").success());
    let snapshot = process
        .read_output(OutputStream::Stdout, 0, 0)
        .await
        .expect("read_output");
    assert_eq!(snapshot.total, expected.len() as u64);
    let spill = snapshot.spill.expect("spill info");
    assert!(
        spill.complete && spill.len == expected.len() as u64,
        "{spill:?}"
    );
    let copy = world.root(r#"cat -- "$1""#, &[&spill.path]).await;
    assert_eq!(copy.stdout, expected, "the spill copy is raw and complete");
    let mode = world
        .root(
            r#"stat -c '%U %a' -- "$1" "$(dirname -- "$1")""#,
            &[&spill.path],
        )
        .await;
    assert_eq!(mode.stdout, b"user 600\nuser 700\n");

    // Collect mode keeps the same bytes.
    let process = provider
        .spawn(sh_collect(
            r"printf '\342\202'; sleep 0.1; printf '\254 \000\377'",
        ))
        .await
        .expect("spawn");
    assert!(process.wait().await.expect("wait").success());
    assert_eq!(
        kept(process.as_ref(), OutputStream::Stdout).await,
        b"\xe2\x82\xac \x00\xff"
    );
    provider.dispose().await.expect("dispose");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_command_closing_stdout_early_keeps_its_status() {
    let world = World::start().await;
    let provider = world.provider();
    let process = provider
        .spawn(sh("echo before; exec >&-; sleep 1; exit 4"))
        .await
        .expect("spawn");
    let out = within(
        Duration::from_millis(900),
        "stdout ends when closed",
        stdout_of(process.as_ref()),
    )
    .await;
    assert_eq!(out, b"before\n");
    let status = within(LIMIT, "wait", process.wait()).await.expect("wait");
    assert_eq!(status.code, Some(4));
    provider.dispose().await.expect("dispose");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tree_that_double_forks_into_its_own_session_settles() {
    let world = World::start().await;
    let provider = world.provider();
    // The grandchild leaves the group and session and keeps stdout open.
    let mut spec = sh("(setsid sh -c 'echo escaped; sleep 30' &); sleep 0.2; echo direct");
    spec.stdout = OutputMode::Collect { limit: 4096 };
    spec.drain_grace = Duration::from_millis(300);
    let process = provider.spawn(spec).await.expect("spawn");
    let pid = process.pid();
    let status = within(LIMIT, "wait with an escaped writer", process.wait())
        .await
        .expect("wait");
    assert!(status.success(), "{status:?}");
    let out = kept(process.as_ref(), OutputStream::Stdout).await;
    assert!(
        out.ends_with(b"direct\n") && out.starts_with(b"escaped\n"),
        "{:?}",
        String::from_utf8_lossy(&out)
    );
    within(
        LIMIT,
        "terminate",
        process.terminate(Duration::from_millis(200)),
    )
    .await
    .expect("the group itself is empty");
    assert!(world.group_members(pid).await.is_empty());
    assert_eq!(provider.owned(), 0);
    within(LIMIT, "dispose", provider.dispose())
        .await
        .expect("dispose");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn terminate_kills_a_term_ignoring_tree_and_proves_it_in_the_sandbox() {
    let world = World::start().await;
    let provider = world.provider();
    let mut spec = sh("trap '' TERM; sleep 30 & sleep 31 & echo ready; wait");
    spec.stderr = OutputMode::Null;
    let process = provider.spawn(spec).await.expect("spawn");
    let pid = process.pid();
    let mut stdout = process.take_stdout().expect("stdout");
    let first = futures::StreamExt::next(&mut stdout)
        .await
        .expect("ready")
        .expect("bytes");
    assert_eq!(first, &b"ready\n"[..]);
    assert!(world.group_members(pid).await.len() >= 3);
    within(
        LIMIT,
        "terminate",
        process.terminate(Duration::from_millis(200)),
    )
    .await
    .expect("terminate");
    assert!(
        world.group_members(pid).await.is_empty(),
        "the group is empty in the sandbox"
    );
    let status = process.wait().await.expect("wait");
    assert_eq!(status.signal, Some(Signal::KILL));
    process
        .terminate(Duration::from_millis(200))
        .await
        .expect("a no-op");
    provider.dispose().await.expect("dispose");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn our_own_signals_and_timeouts_are_reported_as_signals() {
    let world = World::start().await;
    let provider = world.provider();
    let mut spec = sh("echo partial; sleep 30");
    spec.stdout = OutputMode::Collect { limit: 64 };
    spec.timeout = Some(Duration::from_millis(300));
    let process = provider.spawn(spec).await.expect("spawn");
    let status = within(LIMIT, "timeout", process.wait())
        .await
        .expect("wait");
    assert!(
        status.timed_out && status.signal == Some(Signal::TERM),
        "{status:?}"
    );
    assert_eq!(
        kept(process.as_ref(), OutputStream::Stdout).await,
        b"partial\n"
    );
    // An exit code equal to 128 + a signal stays a code.
    let process = provider.spawn(sh("exit 143")).await.expect("spawn");
    assert_eq!(process.wait().await.expect("wait").code, Some(143));
    provider.dispose().await.expect("dispose");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dropped_pipe_cuts_the_writer_off() {
    let world = World::start().await;
    let provider = world.provider();
    let process = provider
        .spawn(sh("while echo line; do :; done; echo stopped-by-epipe >&2"))
        .await
        .expect("spawn");
    let mut stdout = process.take_stdout().expect("stdout");
    let _ = futures::StreamExt::next(&mut stdout).await;
    drop(stdout);
    let status = within(LIMIT, "the writer ends", process.wait())
        .await
        .expect("wait");
    let err = collect_bytes(process.take_stderr().expect("stderr"))
        .await
        .expect("stderr");
    assert!(
        status.signal == Some(Signal(13)) || err.ends_with(b"stopped-by-epipe\n"),
        "{status:?} {:?}",
        String::from_utf8_lossy(&err)
    );
    provider.dispose().await.expect("dispose");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn disposal_terminates_everything_refuses_new_work_and_cleans_up() {
    let world = World::start().await;
    let provider = world.provider();
    let mut pids = Vec::new();
    for _ in 0..3 {
        let mut spec = sh("trap '' TERM; sleep 60 & sleep 61");
        spec.spill = Some(SpillSpec { limit: 10 });
        let process = provider.spawn(spec).await.expect("spawn");
        pids.push(process.pid());
        // Handles may be dropped: the provider still owns the groups.
    }
    let terminal = provider
        .spawn_terminal(dsh_plugin_api::subprocess::TerminalSpec::new([
            "sh",
            "-c",
            "sleep 60 & sleep 61",
        ]))
        .await
        .expect("terminal");
    let sid = terminal.pid();
    assert_eq!(provider.owned(), 4);
    within(LIMIT, "dispose", provider.dispose())
        .await
        .expect("dispose");
    assert_eq!(provider.owned(), 0);
    for pid in pids {
        assert!(
            world.group_members(pid).await.is_empty(),
            "group {pid} survived disposal"
        );
    }
    assert!(
        world.session_members(sid).await.is_empty(),
        "session {sid} survived disposal"
    );
    let left = world
        .root(
            r#"test -e "$1" || test -e "$2"; echo $?"#,
            &[provider.install_dir(), provider.spill_dir()],
        )
        .await;
    assert_eq!(left.stdout, b"1\n", "private state left behind");
    let err = provider.spawn(sh("true")).await.err().expect("refused");
    assert_eq!(err.kind(), ErrorKind::Closed);
    provider.dispose().await.expect("disposing again is fine");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_sandbox_settles_every_handle_within_seconds() {
    let world = World::start().await;
    let provider = world.provider();
    let piped = provider
        .spawn(sh("echo up; sleep 60"))
        .await
        .expect("spawn");
    let collected = provider.spawn(sh_collect("sleep 60")).await.expect("spawn");
    let terminal = provider
        .spawn_terminal(dsh_plugin_api::subprocess::TerminalSpec::new([
            "sh", "-c", "sleep 60",
        ]))
        .await
        .expect("terminal");
    let mut stdout = piped.take_stdout().expect("stdout");
    assert_eq!(
        futures::StreamExt::next(&mut stdout)
            .await
            .expect("up")
            .expect("bytes"),
        &b"up\n"[..]
    );
    world.kill_sandbox().await;
    let settle = Duration::from_secs(10);
    let err = within(settle, "wait (pipe)", piped.wait())
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Unavailable, "{err}");
    let err = within(settle, "wait (collect)", collected.wait())
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Unavailable, "{err}");
    let err = within(settle, "wait (terminal)", terminal.wait())
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Unavailable, "{err}");
    let rest = within(settle, "the pipe ends", collect_bytes(stdout)).await;
    assert_eq!(rest.unwrap_err().kind(), ErrorKind::Unavailable);
    within(settle, "terminate (pipe)", piped.terminate(Duration::ZERO))
        .await
        .expect("quiescent");
    within(
        settle,
        "terminate (collect)",
        collected.terminate(Duration::ZERO),
    )
    .await
    .expect("quiescent");
    within(settle, "terminate (terminal)", terminal.terminate())
        .await
        .expect("quiescent");
    assert_eq!(provider.owned(), 0);
    let err = provider.spawn(sh("true")).await.err().expect("no world");
    assert_eq!(err.kind(), ErrorKind::Unavailable, "{err}");
    within(settle, "dispose", provider.dispose())
        .await
        .expect("dispose of a gone world");
}
