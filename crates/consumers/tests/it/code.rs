//! The code runtime on both compositions — the local one and a fresh
//! e2b-local (`cargo build -p e2b-local` first; root): programs run in the
//! world through the seams, call the world's tools and host bindings, keep
//! session state, and end within their timeouts with nothing left running;
//! hostile traffic on the runner's channel is a clear error after which
//! the runtime keeps serving.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use dsh_consumers::Tools;
use dsh_consumers::code::{
    Binding, CodeRunRequest, CodeRunResult, Language, SessionCloseRequest, SessionListRequest,
    SessionOpenRequest,
};
use dsh_plugin_api::{Error, ErrorKind};
use dsh_testkit::World;
use serde_json::{Value, json};

/// Runs each scenario on the local composition and on e2b-local.
macro_rules! on_both_compositions {
    ($($name:ident),* $(,)?) => {
        mod local {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
                async fn $name() {
                    let world = dsh_testkit::World::local().await;
                    super::$name(&world).await;
                    world.dispose().await;
                }
            )*
        }
        mod e2b_local {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
                async fn $name() {
                    let world = dsh_testkit::World::e2b_local().await;
                    super::$name(&world).await;
                    world.dispose().await;
                }
            )*
        }
    };
}

on_both_compositions!(
    a_typescript_program_greps_reads_and_returns_a_summary,
    a_python_session_keeps_its_state_across_runs_and_survives_an_exception,
    binding_calls_run_concurrently_and_host_bindings_answer,
    an_endless_program_and_a_child_holding_stdout_end_within_the_timeout,
    garbage_floods_and_oversized_results_are_clear_errors_and_the_runtime_keeps_serving,
    program_output_is_the_programs_own,
    processes_that_leave_the_group_end_with_the_runner,
);

fn tools(world: &World) -> Tools {
    Tools::new(world.fs(), world.subprocess())
}

fn request(language: Language, code: &str) -> CodeRunRequest {
    CodeRunRequest {
        code: code.to_owned(),
        language: Some(language),
        session: None,
        timeout_ms: Some(30_000),
    }
}

/// A run of `code` in session `session`, with the default timeout unless `timeout_ms`.
fn in_session(session: &str, code: &str, timeout_ms: Option<u64>) -> CodeRunRequest {
    CodeRunRequest {
        code: code.to_owned(),
        language: None,
        session: Some(session.to_owned()),
        timeout_ms,
    }
}

/// Opens a session of `language`; its id.
async fn open(tools: &Tools, language: Language) -> String {
    tools
        .code
        .code_session_open(SessionOpenRequest { language })
        .await
        .expect("open a session")
        .session
}

async fn run(tools: &Tools, language: Language, code: &str) -> CodeRunResult {
    tools
        .code
        .code_run(request(language, code))
        .await
        .unwrap_or_else(|err| panic!("code_run {code:?}: {err}"))
}

/// A command's output in the world.
async fn sh(tools: &Tools, command: &str) -> String {
    let request = serde_json::from_value(json!({ "command": command })).expect("run request");
    let result = tools.commands.run(request).await.expect("run");
    result.output.unwrap_or_default()
}

/// Whether any process of the world has `pattern` in its command line (the
/// pattern's first character bracketed so the search does not find itself).
async fn running(tools: &Tools, pattern: &str) -> bool {
    let bracketed = format!("[{}]{}", &pattern[..1], &pattern[1..]);
    !sh(tools, &format!("pgrep -f '{bracketed}' || true"))
        .await
        .trim()
        .is_empty()
}

/// Whether process `pid` of the world is alive (a zombie is gone).
async fn alive(tools: &Tools, pid: u64) -> bool {
    let state = sh(
        tools,
        &format!("cut -d' ' -f3 /proc/{pid}/stat 2>/dev/null || true"),
    )
    .await;
    !matches!(state.trim(), "" | "Z")
}

async fn a_typescript_program_greps_reads_and_returns_a_summary(world: &World) {
    let tools = tools(world);
    // A fresh directory of the world's own: the local world's cwd is the test's (this crate's
    // source directory), which a test must not write into.
    let dir = sh(&tools, "mktemp -d").await.trim().to_owned();
    for (name, content) in [
        ("a.txt", "one\nTODO: first\n"),
        ("b.txt", "TODO: second\nTODO: third\n"),
        ("c.txt", "nothing here\n"),
    ] {
        let request =
            serde_json::from_value(json!({"path": format!("{dir}/{name}"), "content": content}))
                .expect("write request");
        tools.files.write_file(request).await.expect("write");
    }
    let program = r#"
interface Summary { files: string[]; todos: number; firstLines: string[] }
const found = await dsh.grep({ pattern: "TODO", path: DIR });
const files: string[] = [...new Set<string>(found.matches.map((m: { path: string }) => m.path))].sort();
const contents = await Promise.all(files.map((path) => dsh.read_file({ path })));
const summary: Summary = {
  files,
  todos: found.match_count,
  firstLines: contents.map((c) => (c.content as string).split("\n")[0]),
};
return summary;
"#
    .replace("DIR", &serde_json::to_string(&dir).expect("a JSON string"));
    let result = run(&tools, Language::Typescript, &program).await;
    assert!(result.ok, "{result:?}");
    assert_eq!(
        result.value,
        json!({
            "files": [format!("{dir}/a.txt"), format!("{dir}/b.txt")],
            "todos": 3,
            "firstLines": ["one", "TODO: second"],
        })
    );
    assert_eq!(result.binding_calls, 3);

    // A TypeScript error is reported at the line the user wrote (types stripped in place).
    let failing = "const n: number = 1;\ntype T = { a: number };\nthrow new TypeError(`bad ${n as number}`);\n";
    let result = run(&tools, Language::Typescript, failing).await;
    let error = result.error.expect("an exception");
    assert_eq!(error.exception.as_deref(), Some("TypeError"));
    assert!(error.message.contains("bad 1"), "{error:?}");
    let frame = error.traceback.last().expect("a frame in the program");
    assert_eq!(
        (frame.file.as_str(), frame.line),
        ("run-1.ts", 3),
        "{error:?}"
    );
    assert!(
        frame.text.contains("n as number"),
        "the TypeScript line: {frame:?}"
    );
    sh(&tools, &format!("rm -r -- '{dir}'")).await;
    assert!(tools.shutdown().await.is_empty());
}

async fn a_python_session_keeps_its_state_across_runs_and_survives_an_exception(world: &World) {
    let tools = tools(world);
    let opened = tools
        .code
        .code_session_open(SessionOpenRequest {
            language: Language::Python,
        })
        .await
        .expect("open");
    let session = opened.session.clone();
    assert!(
        opened.declarations.contains("def read_file("),
        "{}",
        opened.declarations
    );
    let here = |code: &str| in_session(&session, code, None);
    let first = tools
        .code
        .code_run(here(
            "import json\ncount = 41\ndef bump(n):\n    return n + 1\n",
        ))
        .await
        .expect("first run");
    assert!(first.ok && first.value.is_null(), "{first:?}");
    let second = tools
        .code
        .code_run(here("x = 1\nbump(count) / 0\n"))
        .await
        .expect("second run");
    let error = second.error.expect("the division raised");
    assert_eq!(error.exception.as_deref(), Some("ZeroDivisionError"));
    assert_eq!(
        error.traceback.last().map(|f| (f.file.as_str(), f.line)),
        Some(("run-2.py", 2))
    );
    assert!(!second.session_ended);
    let third = tools
        .code
        .code_run(here("json.dumps({'n': bump(count), 'x': x})"))
        .await
        .expect("third run");
    assert_eq!(third.value, json!("{\"n\": 42, \"x\": 1}"), "{third:?}");
    let listed = tools
        .code
        .code_sessions(SessionListRequest {})
        .await
        .expect("list");
    assert_eq!(listed.sessions.len(), 1);
    assert_eq!(listed.sessions[0].runs, 3);
    let pids = tools.code.session_pids().await;
    let closed = tools
        .code
        .code_session_close(SessionCloseRequest {
            session: session.clone(),
        })
        .await
        .expect("close");
    assert_eq!(closed.runs, 3);
    for pid in pids {
        assert!(
            !alive(&tools, pid.into()).await,
            "the session's runner {pid} ended"
        );
    }
    let gone = tools.code.code_run(here("1")).await.unwrap_err();
    assert_eq!(gone.kind(), ErrorKind::NotFound, "{gone}");
    assert!(tools.shutdown().await.is_empty());
}

async fn binding_calls_run_concurrently_and_host_bindings_answer(world: &World) {
    let tools = tools(world);
    let in_flight = Arc::new(AtomicUsize::new(0));
    let most = Arc::new(AtomicUsize::new(0));
    let nap = {
        let (in_flight, most) = (Arc::clone(&in_flight), Arc::clone(&most));
        Binding::new(
            "nap",
            "Sleeps ms milliseconds on the host and returns the tag it was given.",
            json!({"type": "object", "properties": {"ms": {"type": "integer"}, "tag": {"type": "string"}}, "required": ["ms", "tag"]}),
            move |args: Value| {
                let (in_flight, most) = (Arc::clone(&in_flight), Arc::clone(&most));
                async move {
                    let now = in_flight.fetch_add(1, Ordering::SeqCst) + 1;
                    most.fetch_max(now, Ordering::SeqCst);
                    tokio::time::sleep(Duration::from_millis(args["ms"].as_u64().unwrap_or(0))).await;
                    in_flight.fetch_sub(1, Ordering::SeqCst);
                    if args["tag"] == "fail" {
                        return Err(Error::new(ErrorKind::Conflict, "nap: asked to fail"));
                    }
                    Ok(json!({ "tag": args["tag"] }))
                }
            },
        )
        .expect("a binding")
    };
    tools.code.register(nap).expect("register");
    assert!(
        tools
            .code
            .declarations(Language::Typescript)
            .contains("nap(args: { ms: number; tag: string })")
    );
    let taken = Binding::new("grep", "", json!({"type": "object"}), |_| async {
        Ok(Value::Null)
    })
    .expect("a binding");
    assert_eq!(
        tools.code.register(taken).unwrap_err().kind(),
        ErrorKind::AlreadyExists
    );

    let started = Instant::now();
    let js = r#"
const tags = await Promise.all([1, 2, 3, 4, 5, 6, 7, 8].map((i) => dsh.nap({ ms: 400, tag: `t${i}` })));
let refused;
try { await dsh.nap({ ms: 0, tag: "fail" }); } catch (e) { refused = `${e.kind}: ${e.message}`; }
return { tags: tags.map((t) => t.tag), refused };
"#;
    let result = run(&tools, Language::Javascript, js).await;
    assert_eq!(
        result.value,
        json!({"tags": ["t1", "t2", "t3", "t4", "t5", "t6", "t7", "t8"], "refused": "conflict: nap: asked to fail"}),
        "{result:?}"
    );
    assert!(
        most.load(Ordering::SeqCst) >= 4,
        "concurrent calls: {most:?}"
    );
    assert!(
        started.elapsed() < Duration::from_millis(8 * 400),
        "{:?}",
        started.elapsed()
    );

    most.store(0, Ordering::SeqCst);
    let python = "import asyncio\nasync def main():\n    return await asyncio.gather(*(dsh.aio.nap(ms=400, tag=str(i)) for i in range(8)))\n[r['tag'] for r in await main()]";
    let result = run(&tools, Language::Python, python).await;
    assert_eq!(
        result.value,
        json!(["0", "1", "2", "3", "4", "5", "6", "7"]),
        "{result:?}"
    );
    assert!(
        most.load(Ordering::SeqCst) >= 4,
        "concurrent calls: {most:?}"
    );
    let python = "try:\n    dsh.nap(ms=0, tag='fail')\nexcept dsh.BindingError as e:\n    r = (e.kind, str(e))\nr";
    let result = run(&tools, Language::Python, python).await;
    assert_eq!(
        result.value,
        json!(["conflict", "nap: asked to fail"]),
        "{result:?}"
    );
    // A tool's arguments are checked as over MCP.
    let result = run(&tools, Language::Python, "dsh.read_file(pth='x')").await;
    let error = result.error.expect("refused");
    assert!(
        error.message.contains("read_file: invalid arguments") && error.message.contains("pth"),
        "{error:?}"
    );
    assert!(tools.shutdown().await.is_empty());
}

async fn an_endless_program_and_a_child_holding_stdout_end_within_the_timeout(world: &World) {
    let tools = tools(world);
    let marker = format!("86399.{}", rand_digits());
    let programs = [
        (
            Language::Python,
            "import os\nprint(os.getpid(), flush=True)\nwhile True:\n    pass\n".to_owned(),
        ),
        (
            Language::Python,
            format!(
                "import os, subprocess\nprint(os.getpid(), flush=True)\nsubprocess.Popen('sleep {marker} &', shell=True)\nwhile True:\n    pass\n"
            ),
        ),
        (
            Language::Javascript,
            format!(
                "console.log(process.pid);\nrequire('child_process').spawn('sh', ['-c', 'sleep {marker} & wait'], {{ stdio: 'inherit' }});\nawait new Promise(() => {{}});\n"
            ),
        ),
    ];
    for (language, program) in programs {
        let started = Instant::now();
        let mut request = request(language, &program);
        // Long enough for an interpreter to start and print under CI's load (1.5 s was not).
        request.timeout_ms = Some(3000);
        let result = tools.code.code_run(request).await.expect("run");
        let took = started.elapsed();
        assert!(took < Duration::from_millis(3000 + 2000), "{took:?}");
        let error = result.error.expect("timed out");
        assert_eq!(error.kind, "timeout", "{error:?}");
        let pid: u64 = result.stdout.text.trim().parse().expect("the worker's pid");
        assert!(
            !alive(&tools, pid).await,
            "{language:?}: the worker {pid} ended"
        );
        assert!(
            !running(&tools, &format!("sleep {marker}")).await,
            "{language:?}: the child ended"
        );
    }
    // A session's run that times out ends the session.
    let session = open(&tools, Language::Python).await;
    let result = tools
        .code
        .code_run(in_session(&session, "while True: pass", Some(1000)))
        .await
        .expect("run");
    assert!(result.session_ended, "{result:?}");
    assert!(
        tools
            .code
            .code_sessions(SessionListRequest {})
            .await
            .expect("list")
            .sessions
            .is_empty()
    );
    // A session's run whose call is dropped (a client's cancellation) ends the session too.
    let session = open(&tools, Language::Python).await;
    let pids = tools.code.session_pids().await;
    let endless = in_session(&session, "while True: pass", None);
    let dropped =
        tokio::time::timeout(Duration::from_millis(500), tools.code.code_run(endless)).await;
    assert!(dropped.is_err(), "the call was still running");
    let after = tools
        .code
        .code_run(in_session(&session, "1", None))
        .await
        .unwrap_err();
    assert_eq!(after.kind(), ErrorKind::Closed, "{after}");
    let deadline = Instant::now() + Duration::from_secs(3);
    for pid in pids {
        while alive(&tools, pid.into()).await {
            assert!(
                Instant::now() < deadline,
                "the dropped run's runner {pid} ended"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
    assert!(tools.shutdown().await.is_empty());
}

async fn garbage_floods_and_oversized_results_are_clear_errors_and_the_runtime_keeps_serving(
    world: &World,
) {
    let tools = tools(world);
    tools
        .code
        .register(
            Binding::new("noop", "Nothing.", json!({"type": "object"}), |_| async {
                Ok(Value::Null)
            })
            .expect("a binding"),
        )
        .expect("register");
    let refused = [
        (
            Language::Python,
            "import os\nos.write(199, b'garbage!\\n')\nimport time\ntime.sleep(5)\n",
            "not base64",
        ),
        (
            Language::Javascript,
            "require('fs').writeSync(3, 'garbage!\\n');\nawait new Promise((r) => setTimeout(r, 5000));\n",
            "not base64",
        ),
        (
            Language::Python,
            "import os\nos.write(199, b'A' * (20 << 20))\nimport time\ntime.sleep(5)\n",
            "over 16777216 bytes",
        ),
    ];
    for (language, program, expected) in refused {
        let started = Instant::now();
        let err = tools
            .code
            .code_run(request(language, program))
            .await
            .unwrap_err();
        assert!(err.to_string().contains(expected), "{language:?}: {err}");
        assert!(err.to_string().contains("code_run"), "{err}");
        assert!(
            started.elapsed() < Duration::from_secs(4),
            "ended at once: {:?}",
            started.elapsed()
        );
    }
    // A 100 MB result is the program's error, and its session lives on.
    let session = open(&tools, Language::Python).await;
    let result = tools
        .code
        .code_run(in_session(&session, "'x' * 100_000_000", None))
        .await
        .expect("run");
    let error = result.error.expect("too large");
    assert!(
        error.message.contains("over the limit of 1048576"),
        "{error:?}"
    );
    let js = run(
        &tools,
        Language::Javascript,
        "return 'x'.repeat(100_000_000);",
    )
    .await;
    assert!(
        js.error
            .expect("too large")
            .message
            .contains("over the limit")
    );
    // A flood of binding calls: the calls past the bound are refused, each with the reason.
    let flood = "const calls = [];\nfor (let i = 0; i < 10050; i++) calls.push(dsh.noop({}).then(() => 'ok', (e) => e.message));\nconst outcomes = await Promise.all(calls);\nreturn [outcomes.filter((o) => o === 'ok').length, outcomes.find((o) => o !== 'ok')];";
    let mut flooding = request(Language::Javascript, flood);
    flooding.timeout_ms = Some(300_000);
    let result = tools.code.code_run(flooding).await.expect("flood");
    assert_eq!(result.value[0], json!(10_000), "{:?}", result.value);
    assert!(
        result.value[1]
            .as_str()
            .is_some_and(|m| m.contains("more than 10000 binding calls")),
        "{:?}",
        result.value
    );
    // Still serving: the session and new runs.
    let after = tools
        .code
        .code_run(in_session(&session, "6 * 7", None))
        .await
        .expect("run");
    assert_eq!(after.value, json!(42));
    assert_eq!(
        run(&tools, Language::Javascript, "return 7 * 6;")
            .await
            .value,
        json!(42)
    );
    assert!(tools.shutdown().await.is_empty());
}

async fn program_output_is_the_programs_own(world: &World) {
    let tools = tools(world);
    // A line that is a valid frame, printed by the program and by a child of it.
    let frame = "eyJ0IjoiZG9uZSIsIm9rIjp0cnVlLCJ2YWx1ZSI6OTl9";
    let python = format!(
        "import os, subprocess, sys, time\nprint('{frame}')\nsubprocess.run(['echo', '{frame}'])\nsys.stdout.flush()\nos.write(1, 'é'.encode()[:1])\ntime.sleep(0.3)\nos.write(1, 'é'.encode()[1:] + b'\\n')\nprint('to stderr', file=sys.stderr)\n'real'"
    );
    let result = run(&tools, Language::Python, &python).await;
    assert_eq!(result.value, json!("real"), "{result:?}");
    assert_eq!(result.stdout.text, format!("{frame}\n{frame}\né\n"));
    assert_eq!(result.stderr.text, "to stderr\n");
    let js = format!(
        "console.log('{frame}');\nrequire('child_process').execSync('echo {frame}', {{ stdio: 'inherit' }});\nconst e = Buffer.from('é');\nprocess.stdout.write(e.subarray(0, 1));\nawait new Promise((r) => setTimeout(r, 300));\nprocess.stdout.write(e.subarray(1));\nconsole.error('to stderr');\nreturn 'real';"
    );
    let result = run(&tools, Language::Javascript, &js).await;
    assert_eq!(result.value, json!("real"), "{result:?}");
    assert_eq!(result.stdout.text, format!("{frame}\n{frame}\né"));
    assert_eq!(result.stderr.text, "to stderr\n");
    // Output past the bounds keeps its head and tail and counts the rest.
    let result = run(
        &tools,
        Language::Python,
        "import sys\nsys.stdout.write('h' + 'x' * 1_000_000 + 't')\nNone",
    )
    .await;
    assert_eq!(result.stdout.bytes, 1_000_002);
    assert!(
        result.stdout.omitted_bytes > 900_000,
        "{}",
        result.stdout.omitted_bytes
    );
    assert!(result.stdout.text.starts_with('h') && result.stdout.text.ends_with('t'));
    assert!(tools.shutdown().await.is_empty());
}

/// Waits up to 3 s for no process of the world to have `pattern` in its command line.
async fn gone_soon(tools: &Tools, pattern: &str) -> bool {
    let deadline = Instant::now() + Duration::from_secs(3);
    while running(tools, pattern).await {
        if Instant::now() > deadline {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    true
}

/// A program in `language` that starts `sleep {marker}` in a new session (setsid), orphaned at
/// once (its shell exits: no ancestry or group leads to it any more), waits until it runs, and
/// then does `then` (Python) / `then_js`.
fn escaping(language: Language, marker: &str, then: &str) -> String {
    let escape = format!("setsid sleep {marker} > /dev/null 2>&1 < /dev/null & echo $!");
    match language {
        Language::Python => format!(
            "import subprocess, time\n\
             pid = int(subprocess.run({escape:?}, shell=True, capture_output=True, text=True).stdout)\n\
             for _ in range(500):\n\
             \x20   try:\n\
             \x20       if b'{marker}' in open(f'/proc/{{pid}}/cmdline', 'rb').read():\n\
             \x20           break\n\
             \x20   except OSError:\n\
             \x20       pass\n\
             \x20   time.sleep(0.01)\n\
             else:\n\
             \x20   raise RuntimeError('the escaped sleep never ran')\n\
             {then}"
        ),
        _ => format!(
            "const fs = require('fs');\n\
             const pid = Number(require('child_process').execSync({escape:?}).toString());\n\
             const runs = () => {{ try {{ return fs.readFileSync(`/proc/${{pid}}/cmdline`, 'latin1').includes('{marker}'); }} catch {{ return false; }} }};\n\
             for (let i = 0; !runs(); i++) {{\n\
             \x20 if (i === 500) throw new Error('the escaped sleep never ran');\n\
             \x20 await new Promise((r) => setTimeout(r, 10));\n\
             }}\n\
             {then}"
        ),
    }
}

async fn processes_that_leave_the_group_end_with_the_runner(world: &World) {
    let tools = tools(world);
    for (language, then) in [(Language::Python, "1"), (Language::Javascript, "return 1;")] {
        let marker = format!("86398.{}", rand_digits());
        let result = run(&tools, language, &escaping(language, &marker, then)).await;
        assert_eq!(result.value, json!(1), "{language:?}: {result:?}");
        assert!(
            gone_soon(&tools, &format!("sleep {marker}")).await,
            "{language:?}: the process that left the group outlived the one-shot run"
        );
    }
    // In a session it lives as long as the session.
    let marker = format!("86397.{}", rand_digits());
    let session = open(&tools, Language::Python).await;
    let program = escaping(Language::Python, &marker, "1");
    let result = tools
        .code
        .code_run(in_session(&session, &program, None))
        .await
        .expect("run");
    assert_eq!(result.value, json!(1), "{result:?}");
    assert!(
        running(&tools, &format!("sleep {marker}")).await,
        "it runs while the session is open"
    );
    tools
        .code
        .code_session_close(SessionCloseRequest { session })
        .await
        .expect("close");
    assert!(
        gone_soon(&tools, &format!("sleep {marker}")).await,
        "the process that left the group outlived its session"
    );
    // A one-shot run whose call is dropped (a client's cancellation, Ctrl-C): shutdown waits
    // for its runner to end, and the escaped process is gone with it.
    let marker = format!("86396.{}", rand_digits());
    let program = escaping(
        Language::Python,
        &marker,
        "print('escaped', flush=True)\ntime.sleep(300)",
    );
    let mut call = Box::pin(tools.code.code_run(request(Language::Python, &program)));
    let escaped = async {
        while !running(&tools, &format!("sleep {marker}")).await {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    };
    tokio::select! {
        outcome = &mut call => panic!("the call ended: {outcome:?}"),
        () = escaped => {}
        () = tokio::time::sleep(Duration::from_secs(20)) => panic!("the escaped sleep never ran"),
    }
    drop(call);
    assert!(tools.shutdown().await.is_empty());
    // The tools are shut down: another instance looks.
    let looking = self::tools(world);
    assert!(
        !running(&looking, &format!("sleep {marker}")).await,
        "the process that left the group of a dropped run outlived shutdown"
    );
    assert!(looking.shutdown().await.is_empty());
}

fn rand_digits() -> u32 {
    // The nanoseconds of now: distinct enough between concurrent tests.
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(1, |now| now.subsec_nanos())
}

/// The Python stub the model is given is Python (`python3` parses it), and
/// what it writes works: `move_path(from_=…, to=…)` for the argument named by a
/// keyword.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_python_stub_parses_and_its_keyword_spelling_works() {
    let world = World::local().await;
    let tools = tools(&world);
    let stub = tools.code.declarations(Language::Python);
    assert!(
        stub.contains("def move_path(*, from_: str, to: str)"),
        "{stub}"
    );
    let mut parse = std::process::Command::new("python3")
        .args(["-c", "import ast, sys; ast.parse(sys.stdin.read())"])
        .stdin(std::process::Stdio::piped())
        .spawn()
        .expect("python3");
    std::io::Write::write_all(&mut parse.stdin.take().expect("stdin"), stub.as_bytes())
        .expect("write the stub");
    assert!(
        parse.wait().expect("wait").success(),
        "the stub is not Python:\n{stub}"
    );

    // A fresh directory: the local world's cwd is this crate's source directory.
    let dir = sh(&tools, "mktemp -d").await.trim().to_owned();
    let program = format!(
        "dsh.write_file(path='{dir}/a', content='x')\n\
         dsh.move_path(from_='{dir}/a', to='{dir}/b')\n\
         dsh.read_file(path='{dir}/b')['content']"
    );
    let result = run(&tools, Language::Python, &program).await;
    assert_eq!(result.value, json!("x"), "{result:?}");
    sh(&tools, &format!("rm -r -- '{dir}'")).await;
    assert!(tools.shutdown().await.is_empty());
    world.dispose().await;
}
