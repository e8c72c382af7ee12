//! `process.Process/Start`: output, exit facts, environment, working directory, users, stdin
//! modes, chunking and event order (docs/e2b-protocol.md §5.3–5.4).

use connectrpc::ErrorCode;

use crate::common::process::{command, run, shell, with_cwd, with_envs};
use crate::common::{self, TestDaemon, config, shared_tempdir};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn echo_over_json_and_binary() {
    let daemon = TestDaemon::start(config()).await;
    for json in [true, false] {
        let outcome = run(&daemon.process(json), shell("echo hi; echo err >&2")).await;
        assert!(outcome.error.is_none(), "{outcome:?}");
        assert_eq!(outcome.stdout_text(), "hi\n");
        assert_eq!(outcome.stderr_text(), "err\n");
        assert!(outcome.pid > 1);
        let end = outcome.end();
        assert!(end.exited);
        assert_eq!(end.exit_code, 0);
        assert_eq!(end.status, "exit status 0");
        assert_eq!(end.error, None);
        assert_eq!(outcome.order.first(), Some(&"start"));
        assert_eq!(outcome.order.last(), Some(&"end"));
        assert_eq!(
            outcome.order.iter().filter(|kind| **kind == "end").count(),
            1
        );
    }
    daemon.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exit_codes_and_signals_are_reported_like_go() {
    let daemon = TestDaemon::start(config()).await;
    let client = daemon.process(true);
    let failed = run(&client, shell("exit 3")).await;
    let end = failed.end();
    assert_eq!((end.exit_code, end.exited), (3, true));
    assert_eq!(end.status, "exit status 3");
    assert_eq!(end.error.as_deref(), Some("exit status 3"));

    let killed = run(&client, shell("kill -9 $$")).await;
    let end = killed.end();
    assert_eq!((end.exit_code, end.exited), (-1, false));
    assert_eq!(end.status, "signal: killed");
    assert_eq!(end.error.as_deref(), Some("signal: killed"));

    let terminated = run(&client, shell("kill -TERM $$")).await;
    assert_eq!(terminated.end().status, "signal: terminated");
    daemon.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn missing_command_is_reported_by_the_shell() {
    let daemon = TestDaemon::start(config()).await;
    let outcome = run(
        &daemon.process(true),
        command("definitely-not-a-command-xyz", &[]),
    )
    .await;
    assert!(outcome.error.is_none(), "{outcome:?}");
    assert_eq!(outcome.end().exit_code, 127);
    assert!(
        outcome
            .stderr_text()
            .contains("definitely-not-a-command-xyz"),
        "{outcome:?}"
    );
    daemon.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pid_is_the_user_commands_own() {
    let daemon = TestDaemon::start(config()).await;
    let outcome = run(&daemon.process(true), shell("echo $$")).await;
    assert_eq!(outcome.stdout_text().trim(), outcome.pid.to_string());
    daemon.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn environment_is_built_exactly_as_envd_does() {
    let mut config = config();
    config.env_vars.insert("GLOBAL".to_owned(), "g".to_owned());
    config
        .env_vars
        .insert("OVERRIDE".to_owned(), "global".to_owned());
    config
        .env_vars
        .insert("E2B_SANDBOX".to_owned(), "user-cannot-override".to_owned());
    let daemon = TestDaemon::start(config).await;
    let client = daemon.process(true);
    let outcome = run(
        &client,
        with_envs(
            command("/usr/bin/env", &[]),
            &[("OVERRIDE", "request"), ("EXTRA", "x")],
        ),
    )
    .await;
    let mut lines: Vec<String> = outcome.stdout_text().lines().map(str::to_owned).collect();
    lines.sort();
    let path = std::env::var("PATH").unwrap();
    let mut want = vec![
        "E2B_SANDBOX=true".to_owned(),
        "E2B_SANDBOX_ID=sbxtest".to_owned(),
        "E2B_TEMPLATE_ID=base".to_owned(),
        "EXTRA=x".to_owned(),
        "GLOBAL=g".to_owned(),
        "HOME=/root".to_owned(),
        "LOGNAME=root".to_owned(),
        "OVERRIDE=request".to_owned(),
        format!("PATH={path}"),
        // Exported by the /bin/sh wrapper, as under envd.
        "PWD=/root".to_owned(),
        "USER=root".to_owned(),
    ];
    want.sort();
    assert_eq!(lines, want);

    // Per-command envs do not persist.
    let again = run(&client, command("/usr/bin/env", &[])).await;
    assert!(!again.stdout_text().contains("EXTRA="));
    assert!(again.stdout_text().contains("OVERRIDE=global"));
    daemon.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn working_directory_rules() {
    let dir = tempfile::tempdir().unwrap();
    let mut config = config();
    config.default_workdir = Some(dir.path().to_path_buf());
    let daemon = TestDaemon::start(config).await;
    let client = daemon.process(true);

    let default = run(&client, command("/bin/pwd", &[])).await;
    assert_eq!(default.stdout_text().trim(), dir.path().to_str().unwrap());

    let tilde = run(&client, with_cwd(command("/bin/pwd", &[]), "~")).await;
    assert_eq!(tilde.stdout_text().trim(), "/root");

    // A relative cwd joins the user's home (root's here), not the default workdir.
    let name = format!(".e2b-local-envd-test-{}", std::process::id());
    let home_dir = std::path::Path::new("/root").join(&name);
    std::fs::create_dir_all(&home_dir).unwrap();
    let relative = run(&client, with_cwd(command("/bin/pwd", &[]), &name)).await;
    std::fs::remove_dir(&home_dir).unwrap();
    assert_eq!(relative.stdout_text().trim(), home_dir.to_str().unwrap());

    let missing = run(&client, with_cwd(command("/bin/pwd", &[]), "/no/such/dir")).await;
    let err = missing.error.expect("missing cwd fails");
    assert_eq!(err.code, ErrorCode::InvalidArgument);
    assert_eq!(
        err.message.as_deref(),
        Some("cwd '/no/such/dir' does not exist")
    );
    assert!(
        missing.order.is_empty(),
        "no events before the error: {:?}",
        missing.order
    );
    daemon.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn commands_run_as_the_requested_user() {
    let dir = shared_tempdir();
    let daemon = TestDaemon::start(config()).await;
    let root = run(&daemon.process(true), shell("id -u; id -g; id -G")).await;
    assert_eq!(root.stdout_text().lines().next(), Some("0"));

    let nobody_client =
        daemon.process_with_headers(true, &[("authorization", &common::basic("nobody"))]);
    let outcome = run(
        &nobody_client,
        with_cwd(
            shell("id -u; id -g; echo $HOME $USER $LOGNAME; touch f; stat -c %U f"),
            dir.path().to_str().unwrap(),
        ),
    )
    .await;
    assert!(outcome.error.is_none(), "{outcome:?}");
    let lines: Vec<&str> = outcome
        .stdout
        .split(|b| *b == b'\n')
        .map(|l| std::str::from_utf8(l).unwrap())
        .collect();
    assert_eq!(lines[0], "65534");
    assert_eq!(lines[1], "65534");
    assert_eq!(lines[2], "/nonexistent nobody nobody");
    assert_eq!(lines[3], "nobody");
    daemon.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn supplementary_groups_come_from_etc_group() {
    let daemon = TestDaemon::start(config()).await;
    let outcome = run(&daemon.process(true), shell("id -G")).await;
    let groups: Vec<u32> = outcome
        .stdout_text()
        .split_whitespace()
        .map(|gid| gid.parse().unwrap())
        .collect();
    let group_file = std::fs::read_to_string("/etc/group").unwrap();
    let mut want = vec![0u32];
    for line in group_file.lines() {
        let fields: Vec<&str> = line.split(':').collect();
        if fields.len() >= 4 && fields[3].split(',').any(|member| member == "root") {
            let gid: u32 = fields[2].parse().unwrap();
            if !want.contains(&gid) {
                want.push(gid);
            }
        }
    }
    let mut got = groups.clone();
    got.sort();
    want.sort();
    assert_eq!(got, want);
    daemon.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stdin_is_dev_null_when_disabled_and_a_pipe_otherwise() {
    let daemon = TestDaemon::start(config()).await;
    let client = daemon.process(true);
    let disabled = run(&client, shell("readlink /proc/self/fd/0")).await;
    assert_eq!(disabled.stdout_text().trim(), "/dev/null");
    let mut enabled = shell("readlink /proc/self/fd/0");
    enabled.stdin = None;
    let piped = run(&client, enabled).await;
    assert!(piped.stdout_text().starts_with("pipe:"), "{piped:?}");
    daemon.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pipe_output_comes_in_chunks_of_at_most_32_kib() {
    let daemon = TestDaemon::start(config()).await;
    let outcome = run(
        &daemon.process(false),
        shell("head -c 1000000 /dev/zero | tr '\\0' a"),
    )
    .await;
    assert_eq!(outcome.stdout.len(), 1_000_000);
    assert!(outcome.stdout.iter().all(|b| *b == b'a'));
    assert!(
        outcome.chunks.iter().all(|len| *len <= 32 * 1024),
        "{:?}",
        outcome.chunks
    );
    assert!(
        outcome.chunks.contains(&(32 * 1024)),
        "{:?}",
        outcome.chunks
    );
    daemon.stop().await;
}
