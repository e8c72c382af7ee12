//! `resolve_executable` and `spawn`: bad input rejected before anything
//! starts, process-group identity, cwd, the environment boundary,
//! concurrency and cancellation (docs/design.md §5.2).

use std::collections::BTreeMap;
use std::time::Duration;

use dsh_plugin_api::ErrorKind;
use dsh_plugin_api::subprocess::{SpawnSpec, StdinMode};
use futures::FutureExt;

use crate::check::{CaseResult, Failure, ensure, ensure_eq, ensure_names, fail, show};
use crate::commands::sh_spec;
use crate::context::Cx;
use crate::process_table::show_rows;
use crate::registry::{CaseInfo, case};

pub(crate) const CASES: &[CaseInfo] = &[
    case!(
        "subprocess.resolve_executable.path_search",
        Subprocess,
        [Subprocess],
        "a bare name is found on the world's PATH; an absolute executable path is verified and returned as is",
        resolve_path_search
    ),
    case!(
        "subprocess.resolve_executable.extra_path",
        Subprocess,
        [Subprocess, Fixtures],
        "extra_path directories are searched after the world's PATH",
        resolve_extra_path
    ),
    case!(
        "subprocess.resolve_executable.errors",
        Subprocess,
        [Subprocess, Fixtures],
        "relative paths with '/' are InvalidInput; missing names and paths NotFound; non-executables refused",
        resolve_errors
    ),
    case!(
        "subprocess.spawn.bad_input",
        Subprocess,
        [Subprocess, Fixtures],
        "empty argv, empty argv[0], relative argv with '/', env names empty/with '='/NUL, NUL in values, argv or cwd: InvalidInput before anything runs",
        spawn_bad_input
    ),
    case!(
        "subprocess.spawn.missing_program",
        Subprocess,
        [Subprocess],
        "spawning a program that does not exist (bare or absolute) is NotFound naming it",
        spawn_missing_program
    ),
    case!(
        "subprocess.spawn.missing_cwd",
        Subprocess,
        [Subprocess, Fixtures],
        "a cwd that does not exist is NotFound naming it; a cwd that is a file is NotADirectory",
        spawn_missing_cwd
    ),
    case!(
        "subprocess.spawn.cwd",
        Subprocess,
        [Subprocess],
        "the command runs in spec.cwd; without one, in the world's cwd (absolute)",
        spawn_cwd
    ),
    case!(
        "subprocess.spawn.group_leader",
        Subprocess,
        [Subprocess],
        "pid() > 1 is the command's own pid, its process group and its session, checked with ps inside the world",
        group_leader
    ),
    case!(
        "subprocess.spawn.env_boundary",
        Subprocess,
        [Subprocess],
        "no ambient DSH_* or *KEY*/*SECRET*/*TOKEN* name reaches the command; explicit entries arrive exactly; PATH survives",
        env_boundary
    ),
    case!(
        "subprocess.spawn.concurrent",
        Subprocess,
        [Subprocess],
        "8 concurrent spawns get 8 distinct process groups and their own output",
        concurrent
    ),
    case!(
        "subprocess.spawn.cancel_rolls_back",
        Subprocess,
        [Subprocess],
        "a spawn future dropped unpolled, after one poll or mid-start leaves no process running",
        cancel_rolls_back
    ),
];

async fn resolve_path_search(cx: &Cx) -> CaseResult {
    let sp = cx.sp();
    let sh = cx
        .ok("resolve_executable sh", sp.resolve_executable("sh", &[]))
        .await?;
    ensure!(
        sh.starts_with('/') && sh.ends_with("/sh"),
        "resolve_executable sh: expected an absolute path ending in /sh, got {sh:?}"
    );
    let again = cx
        .ok(
            &format!("resolve_executable {sh}"),
            sp.resolve_executable(&sh, &[]),
        )
        .await?;
    ensure_eq(&format!("resolve_executable {sh} (absolute)"), &again, &sh)?;
    let ran = cx
        .run(
            &format!("spawn {sh} -c 'exit 0'"),
            SpawnSpec::new([sh.as_str(), "-c", "exit 0"]),
            None,
        )
        .await?;
    ensure!(
        ran.status.success(),
        "spawn of the resolved {sh}: expected exit 0, got {:?}",
        ran.status
    );
    Ok(())
}

/// Creates `rel` as an executable script.
async fn put_tool(cx: &Cx, rel: &str) -> Result<String, Failure> {
    let path = cx.put(rel, b"#!/bin/sh\necho tool\n").await?;
    cx.chmod(&path, 0o755).await?;
    Ok(path)
}

async fn resolve_extra_path(cx: &Cx) -> CaseResult {
    let sp = cx.sp();
    let tool = put_tool(cx, "bin/dsh-conformance-tool").await?;
    put_tool(cx, "bin/sh").await?;
    let bin = cx.path("bin");
    cx.err(
        "resolve_executable dsh-conformance-tool without extra_path",
        ErrorKind::NotFound,
        sp.resolve_executable("dsh-conformance-tool", &[]),
    )
    .await?;
    let found = cx
        .ok(
            &format!("resolve_executable dsh-conformance-tool with extra_path [{bin}]"),
            sp.resolve_executable("dsh-conformance-tool", std::slice::from_ref(&bin)),
        )
        .await?;
    ensure_eq(
        "resolve_executable dsh-conformance-tool via extra_path",
        &found,
        &tool,
    )?;
    let world_sh = cx
        .ok("resolve_executable sh", sp.resolve_executable("sh", &[]))
        .await?;
    let with_extra = cx
        .ok(
            &format!("resolve_executable sh with extra_path [{bin}]"),
            sp.resolve_executable("sh", std::slice::from_ref(&bin)),
        )
        .await?;
    ensure_eq(
        "resolve_executable sh: the world's PATH comes before extra_path",
        &with_extra,
        &world_sh,
    )
}

async fn resolve_errors(cx: &Cx) -> CaseResult {
    let sp = cx.sp();
    for name in ["bin/sh", "./sh", "../bin/sh"] {
        let what = format!("resolve_executable {name:?} (relative with '/')");
        let err = cx
            .err(
                &what,
                ErrorKind::InvalidInput,
                sp.resolve_executable(name, &[]),
            )
            .await?;
        ensure_names(&what, &err, name)?;
    }
    let what = "resolve_executable dsh-conformance-no-such-program";
    let err = cx
        .err(
            what,
            ErrorKind::NotFound,
            sp.resolve_executable("dsh-conformance-no-such-program", &[]),
        )
        .await?;
    ensure_names(what, &err, "dsh-conformance-no-such-program")?;
    let missing = cx.path("no-such-program");
    cx.err(
        &format!("resolve_executable {missing}"),
        ErrorKind::NotFound,
        sp.resolve_executable(&missing, &[]),
    )
    .await?;
    let plain = cx.put("not-executable", b"#!/bin/sh\n").await?;
    cx.chmod(&plain, 0o644).await?;
    cx.err_of(
        &format!("resolve_executable {plain} (mode 644)"),
        &[ErrorKind::PermissionDenied, ErrorKind::NotFound],
        sp.resolve_executable(&plain, &[]),
    )
    .await?;
    cx.err_of(
        &format!("resolve_executable {} (a directory)", cx.dir),
        &[
            ErrorKind::PermissionDenied,
            ErrorKind::NotFound,
            ErrorKind::IsADirectory,
        ],
        sp.resolve_executable(&cx.dir, &[]),
    )
    .await?;
    Ok(())
}

async fn spawn_bad_input(cx: &Cx) -> CaseResult {
    // A program that would leave a trace if it ever ran.
    let marker = cx.path("ran");
    let script = format!("#!/bin/sh\n: > '{marker}'\n");
    let prog = cx.put("sub/prog", script.as_bytes()).await?;
    cx.chmod(&prog, 0o755).await?;
    let base = || {
        let mut spec = SpawnSpec::new(["sh", "-c", "exit 0"]);
        spec.cwd = Some(cx.dir.clone());
        spec
    };
    let with_argv = |argv: &[&str]| {
        let mut spec = base();
        spec.argv = argv.iter().map(|arg| (*arg).to_owned()).collect();
        spec
    };
    let with_env = |name: &str, value: &str| {
        let mut spec = base();
        spec.env.insert(name.to_owned(), value.to_owned());
        spec
    };
    let mut bad_cwd = base();
    bad_cwd.cwd = Some(format!("{}\0x", cx.dir));
    let bad: Vec<(&str, SpawnSpec)> = vec![
        ("empty argv", with_argv(&[])),
        ("empty argv[0]", with_argv(&["", "x"])),
        ("relative argv[0] with '/'", with_argv(&["sub/prog"])),
        ("relative argv[0] with './'", with_argv(&["./sub/prog"])),
        ("empty env name", with_env("", "v")),
        ("env name with '='", with_env("A=B", "v")),
        ("env name with NUL", with_env("A\0B", "v")),
        ("env value with NUL", with_env("GOOD", "a\0b")),
        ("argv with NUL", with_argv(&["sh", "-c", "exit 0", "a\0b"])),
        ("cwd with NUL", bad_cwd),
    ];
    for (label, spec) in bad {
        let what = format!("spawn with {label}");
        let err = cx
            .err(&what, ErrorKind::InvalidInput, cx.sp().spawn(spec))
            .await?;
        ensure!(
            !err.message().is_empty(),
            "{what}: the error carries no message"
        );
    }
    let traces = cx
        .sh(
            "probe: did a rejected spawn run?",
            r#"test -e "$1" && echo ran || echo clean"#,
            &[&marker],
        )
        .await?;
    ensure!(
        traces.stdout == b"clean\n",
        "spawn of relative \"sub/prog\": rejected, yet the program ran (marker {marker} exists)"
    );
    Ok(())
}

async fn spawn_missing_program(cx: &Cx) -> CaseResult {
    for program in [
        "dsh-conformance-no-such-program",
        "/nonexistent/dsh-conformance-prog",
    ] {
        let what = format!("spawn {program}");
        let err = cx
            .err(
                &what,
                ErrorKind::NotFound,
                cx.sp().spawn(SpawnSpec::new([program])),
            )
            .await?;
        ensure_names(&what, &err, program.trim_start_matches("/nonexistent/"))?;
    }
    Ok(())
}

async fn spawn_missing_cwd(cx: &Cx) -> CaseResult {
    let missing = cx.path("missing-cwd");
    let what = format!("spawn with cwd {missing}");
    let mut spec = SpawnSpec::new(["sh", "-c", "exit 0"]);
    spec.cwd = Some(missing.clone());
    let err = cx
        .err(&what, ErrorKind::NotFound, cx.sp().spawn(spec))
        .await?;
    ensure_names(&what, &err, "missing-cwd")?;
    let file = cx.put("a-file", b"x").await?;
    let mut spec = SpawnSpec::new(["sh", "-c", "exit 0"]);
    spec.cwd = Some(file.clone());
    cx.err(
        &format!("spawn with cwd {file} (a file)"),
        ErrorKind::NotADirectory,
        cx.sp().spawn(spec),
    )
    .await?;
    Ok(())
}

async fn spawn_cwd(cx: &Cx) -> CaseResult {
    let ran = cx
        .run(
            "spawn pwd -P in the case dir",
            sh_spec("pwd -P", &[], Some(&cx.dir)),
            None,
        )
        .await?;
    ensure_eq(
        "pwd -P with spec.cwd",
        &String::from_utf8_lossy(&ran.stdout).into_owned(),
        &format!("{}\n", cx.dir),
    )?;
    let ran = cx
        .run(
            "spawn pwd -P without cwd",
            sh_spec("pwd -P", &[], None),
            None,
        )
        .await?;
    let cwd = String::from_utf8_lossy(&ran.stdout).into_owned();
    ensure!(
        ran.status.success() && cwd.starts_with('/') && cwd.ends_with('\n'),
        "pwd -P without spec.cwd: expected the world's absolute cwd, got {} ({:?})",
        show(&ran.stdout),
        ran.status
    );
    Ok(())
}

async fn group_leader(cx: &Cx) -> CaseResult {
    let script = r#"echo "$$ $(ps -o pgid= -p $$) $(ps -o sid= -p $$)""#;
    let process = cx
        .spawn("spawn ps probe", sh_spec(script, &[], Some(&cx.dir)))
        .await?;
    let pid = process.pid();
    ensure!(
        pid > 1,
        "spawn: pid() is {pid}; it must be a real process id > 1"
    );
    let stdout = process.take_stdout();
    let Some(stdout) = stdout else {
        fail!("spawn with OutputMode::Pipe: take_stdout returned None");
    };
    let out = cx
        .ok(
            "read stdout of the ps probe",
            crate::commands::drain(stdout),
        )
        .await?;
    let status = cx.ok("wait for the ps probe", process.wait()).await?;
    ensure!(
        status.success(),
        "ps probe: expected exit 0, got {status:?}"
    );
    let text = String::from_utf8_lossy(&out);
    let ids: Vec<u32> = text
        .split_whitespace()
        .filter_map(|field| field.parse().ok())
        .collect();
    ensure!(
        ids.len() == 3,
        "ps probe: expected \"<pid> <pgid> <sid>\", got {}",
        show(&out)
    );
    ensure!(
        ids[0] == pid,
        "spawn: pid() is {pid} but the command's own pid ($$) is {}",
        ids[0]
    );
    ensure!(
        ids[1] == pid,
        "spawn: the command (pid {pid}) is not its process group's leader: pgid {}",
        ids[1]
    );
    ensure!(
        ids[2] == pid,
        "spawn: the command (pid {pid}) does not lead its own session (setsid): sid {}",
        ids[2]
    );
    ensure_eq("pid() after exit", &process.pid(), &pid)
}

/// Whether an ambient name must not reach a command.
fn scrubbed(name: &str) -> bool {
    name.starts_with("DSH_")
        || ["KEY", "SECRET", "TOKEN"]
            .iter()
            .any(|needle| name.contains(needle))
}

async fn env_boundary(cx: &Cx) -> CaseResult {
    let explicit: BTreeMap<String, String> = [
        ("DSH_CONFORMANCE_EXPLICIT", "on"),
        ("CONFORMANCE_API_KEY", "explicit key value"),
        ("CONFORMANCE_PLAIN", "spaces, = signs,\nnewline and é名"),
        ("CONFORMANCE_EMPTY", ""),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v.to_owned()))
    .collect();
    let mut spec = SpawnSpec::new(["env", "-0"]);
    spec.cwd = Some(cx.dir.clone());
    spec.env = explicit.clone();
    let ran = cx.run("spawn env -0", spec, None).await?;
    ensure!(
        ran.status.success(),
        "env -0: expected exit 0, got {:?}; stderr {}",
        ran.status,
        show(&ran.stderr)
    );
    let mut seen = BTreeMap::new();
    for entry in ran.stdout.split(|&b| b == 0).filter(|e| !e.is_empty()) {
        let text = String::from_utf8_lossy(entry);
        let Some((name, value)) = text.split_once('=') else {
            fail!("env -0: malformed entry {}", show(entry));
        };
        seen.insert(name.to_owned(), value.to_owned());
    }
    // Values are never printed: they may be credentials.
    let leaked: Vec<&String> = seen
        .keys()
        .filter(|name| scrubbed(name) && !explicit.contains_key(*name))
        .collect();
    ensure!(
        leaked.is_empty(),
        "env boundary: ambient credential-shaped or DSH_* names reached the command: {leaked:?}"
    );
    for (name, value) in &explicit {
        match seen.get(name) {
            None => fail!("env boundary: the explicit entry {name} is missing in the command"),
            Some(got) if got != value => fail!(
                "env boundary: the explicit entry {name} arrived altered ({} bytes instead of {})",
                got.len(),
                value.len()
            ),
            Some(_) => {}
        }
    }
    ensure!(
        seen.get("PATH").is_some_and(|path| !path.is_empty()),
        "env boundary: PATH is missing or empty in the command's environment"
    );
    Ok(())
}

async fn concurrent(cx: &Cx) -> CaseResult {
    const N: usize = 8;
    let runs = (0..N).map(|i| {
        cx.run(
            "concurrent spawn",
            sh_spec(r#"echo "$$ $1""#, &[&i.to_string()], Some(&cx.dir)),
            None,
        )
    });
    let results = futures::future::join_all(runs).await;
    let mut pids = Vec::new();
    for (i, result) in results.into_iter().enumerate() {
        let ran = result?;
        let text = String::from_utf8_lossy(&ran.stdout).into_owned();
        let mut fields = text.split_whitespace();
        let pid: Option<u32> = fields.next().and_then(|f| f.parse().ok());
        ensure!(
            fields.next() == Some(i.to_string().as_str()),
            "concurrent spawn #{i}: got another command's output {}",
            show(&ran.stdout)
        );
        let Some(pid) = pid else {
            fail!(
                "concurrent spawn #{i}: unparsable output {}",
                show(&ran.stdout)
            );
        };
        pids.push(pid);
    }
    let mut unique = pids.clone();
    unique.sort_unstable();
    unique.dedup();
    ensure!(
        unique.len() == N,
        "concurrent spawns: pids {pids:?} are not distinct"
    );
    Ok(())
}

async fn cancel_rolls_back(cx: &Cx) -> CaseResult {
    // A recognisable argument lets the probe find any survivor.
    let nonce = cx
        .dir
        .bytes()
        .fold(7u32, |h, b| h.wrapping_mul(31).wrapping_add(u32::from(b)));
    let mut markers = Vec::new();
    // Drop points: never polled (a provider that starts work eagerly, e.g.
    // on its own runtime behind an FFI future, must roll it back), after one
    // poll, and after short delays that land inside slower starts.
    let drops: [Option<u64>; 7] = [
        None,
        None,
        Some(0),
        Some(0),
        Some(200),
        Some(1000),
        Some(5000),
    ];
    for (attempt, drop_point) in drops.into_iter().enumerate() {
        let marker = format!("37.{nonce}{attempt}");
        markers.push(marker.clone());
        let mut spec = SpawnSpec::new(["sleep", marker.as_str()]);
        spec.cwd = Some(cx.dir.clone());
        spec.stdin = StdinMode::Null;
        let mut fut = cx.sp().spawn(spec).fuse();
        let resolved = match drop_point {
            None => None,
            Some(0) => match futures::poll!(&mut fut) {
                std::task::Poll::Ready(result) => Some(result),
                std::task::Poll::Pending => None,
            },
            Some(micros) => tokio::select! {
                // Poll the spawn first so it always gets started.
                biased;
                result = &mut fut => Some(result),
                () = tokio::time::sleep(Duration::from_micros(micros)) => None,
            },
        };
        drop(fut);
        match resolved {
            None => {}
            Some(Ok(process)) => {
                // It started before the drop: stop it the ordinary way.
                cx.ok(
                    "terminate a spawn that resolved before the drop",
                    process.terminate(Duration::from_millis(100)),
                )
                .await?;
            }
            Some(Err(err)) => fail!(
                "spawn sleep {marker}: expected success, got {}: {err}",
                err.kind()
            ),
        }
    }
    // A provider may finish its rollback just after the drop: allow it a
    // bounded moment before calling anything a leak.
    let mut survivors = Vec::new();
    for _ in 0..30 {
        survivors = cx
            .process_table()
            .await?
            .into_iter()
            .filter(|row| row.is_live() && markers.iter().any(|m| row.args.contains(m.as_str())))
            .collect();
        if survivors.is_empty() {
            return Ok(());
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    fail!(
        "spawn futures dropped before resolving left processes running 3 s later: {}",
        show_rows(&survivors)
    )
}
