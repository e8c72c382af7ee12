//! The language tools ([`dsh_consumers::lsp::Lsp`]) against real language servers — clangd (Debian),
//! pyright and typescript-language-server (npm; scripts/setup.sh installs all three) — in the
//! local world: diagnostics of the file as the file tools or a shell command left it, at that
//! version; definition, references, hover, symbols and rename across files; a killed server
//! restarted and the caller told; nothing left running after shutdown.

use std::time::Duration;

use dsh_consumers::Tools;
use dsh_consumers::lsp::tools::{
    DiagnosticsRequest, PositionRequest, ReferencesRequest, RenameRequest, RenameResult,
    SymbolsRequest,
};
use dsh_plugin_api::{Error, ErrorKind};
use serde_json::json;

use crate::file_edits::before_write;
use crate::world::LocalWorld;

fn tools(world: &LocalWorld) -> Tools {
    Tools::new(world.fs.clone(), world.subprocess.clone())
}

/// Tools whose only language server is `command`, for files ending in `.{extension}` (the
/// language named after it).
fn tools_with_one_server(world: &LocalWorld, extension: &str, command: Vec<String>) -> Tools {
    use dsh_consumers::lsp::LspConfig;
    use dsh_consumers::lsp::config::{Extension, LanguageConfig};
    let language = LanguageConfig {
        name: extension.to_owned(),
        command,
        extensions: vec![Extension {
            extension: extension.to_owned(),
            language_id: extension.to_owned(),
        }],
        root_markers: Vec::new(),
        initialization_options: None,
    };
    Tools::with_lsp_config(
        world.fs.clone(),
        world.subprocess.clone(),
        LspConfig {
            languages: vec![language],
        },
    )
}

fn at(path: &str, line: u32, column: u32) -> PositionRequest {
    PositionRequest {
        path: path.to_owned(),
        line: Some(line),
        column: Some(column),
        symbol: None,
    }
}

fn named(path: &str, symbol: &str) -> PositionRequest {
    PositionRequest {
        path: path.to_owned(),
        line: None,
        column: None,
        symbol: Some(symbol.to_owned()),
    }
}

fn diagnostics(path: &str) -> DiagnosticsRequest {
    DiagnosticsRequest {
        path: path.to_owned(),
        timeout_secs: None,
    }
}

async fn write(tools: &Tools, path: &str, content: &str) -> String {
    let request = serde_json::from_value(json!({"path": path, "content": content})).unwrap();
    tools.files.write_file(request).await.unwrap().version
}

/// `greet` in `proj/lib.py` renamed to `welcome`, applied.
async fn rename_greet(tools: &Tools) -> dsh_plugin_api::Result<RenameResult> {
    tools
        .lsp
        .lsp_rename(RenameRequest {
            at: named("proj/lib.py", "greet"),
            new_name: "welcome".to_owned(),
            apply: None,
        })
        .await
}

async fn run(tools: &Tools, command: &str) {
    let request = serde_json::from_value(json!({"command": command})).unwrap();
    let result = tools.commands.run(request).await.unwrap();
    assert_eq!(
        result.exit.exit_code,
        Some(0),
        "{command}: {:?}",
        result.output
    );
}

/// Live processes (the providers' own rule, `Stat::is_live`) whose process group is one of
/// `groups` (the servers' whole groups).
fn in_groups(groups: &[u32]) -> Vec<u32> {
    dsh_process_group::table::live(|stat| {
        u32::try_from(stat.pgid).is_ok_and(|pgid| groups.contains(&pgid))
    })
    .expect("read the process table")
    .into_iter()
    .map(|stat| stat.pid.unsigned_abs())
    .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn c_diagnostics_follow_the_file_tools_and_shell_commands_at_each_version() {
    let world = LocalWorld::new();
    let tools = tools(&world);
    write(&tools, "compile_flags.txt", "-std=c++17\n").await;
    let broken = write(
        &tools,
        "main.cpp",
        "int main() {\n  int x = \"text\";\n  return x;\n}\n",
    )
    .await;
    let found = tools
        .lsp
        .lsp_diagnostics(diagnostics("main.cpp"))
        .await
        .unwrap();
    assert_eq!(
        found.version,
        Some(broken),
        "the diagnostics are of the version just written"
    );
    assert_eq!(found.errors, 1, "{found:#?}");
    assert_eq!(found.diagnostics[0].start.line, 2);
    assert!(found.path.ends_with("/cwd/main.cpp"));

    let request = serde_json::from_value(json!({
        "path": "main.cpp", "old_string": "\"text\"", "new_string": "1"
    }))
    .unwrap();
    let edited = tools.files.edit_file(request).await.unwrap();
    let clean = tools
        .lsp
        .lsp_diagnostics(diagnostics("main.cpp"))
        .await
        .unwrap();
    assert_eq!(clean.version, edited.files[0].version);
    assert_eq!(clean.errors, 0, "{clean:#?}");

    // Changed behind the tools' back, by a shell command.
    run(
        &tools,
        "sed -i 's/int x = 1;/int x = undeclared;/' main.cpp",
    )
    .await;
    let again = tools
        .lsp
        .lsp_diagnostics(diagnostics("main.cpp"))
        .await
        .unwrap();
    assert_eq!(again.errors, 1, "{again:#?}");
    assert!(
        again.diagnostics[0].message.contains("undeclared"),
        "{again:#?}"
    );
    assert_ne!(again.version, clean.version);

    let pids = tools.lsp.server_pids().await;
    assert_eq!(pids.len(), 1);
    assert!(tools.shutdown().await.is_empty());
    assert_eq!(
        in_groups(&pids),
        Vec::<u32>::new(),
        "clangd's group is gone"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn python_definition_references_hover_symbols_and_rename_across_files() {
    let world = LocalWorld::new();
    let tools = tools(&world);
    write(&tools, "proj/pyrightconfig.json", "{}\n").await;
    write(
        &tools,
        "proj/lib.py",
        "def greet(name: str) -> str:\n    return 'hi ' + name\n",
    )
    .await;
    write(
        &tools,
        "proj/app.py",
        "from lib import greet\n\nprint(greet(42))\nprint(greet('you'))\n",
    )
    .await;
    let typed = tools
        .lsp
        .lsp_diagnostics(diagnostics("proj/app.py"))
        .await
        .expect("pyright-langserver runs (scripts/setup.sh installs it)");
    assert_eq!(typed.errors, 1, "{typed:#?}");
    assert_eq!(typed.diagnostics[0].start.line, 3);
    // A directory: every file in it a server takes.
    write(&tools, "proj/notes.txt", "not code\n").await;
    let all = tools
        .lsp
        .lsp_diagnostics(diagnostics("proj"))
        .await
        .unwrap();
    assert_eq!(
        (all.files, all.truncated, all.errors),
        (2, false, 1),
        "{all:#?}"
    );
    assert!(all.version.is_none());
    assert!(
        all.diagnostics[0].path.ends_with("/proj/app.py"),
        "{all:#?}"
    );

    let definition = tools
        .lsp
        .lsp_definition(at("proj/app.py", 3, 7))
        .await
        .unwrap();
    let target = &definition.locations[0];
    assert!(target.path.ends_with("/proj/lib.py"), "{definition:#?}");
    assert_eq!((target.start.line, target.start.column), (1, 5));

    let references = tools
        .lsp
        .lsp_references(ReferencesRequest {
            at: named("proj/lib.py", "greet"),
            include_declaration: Some(true),
        })
        .await
        .unwrap();
    let mut places: Vec<(String, u32)> = references
        .locations
        .iter()
        .map(|l| (l.path.rsplit('/').next().unwrap().to_owned(), l.start.line))
        .collect();
    places.sort();
    assert_eq!(
        places,
        [
            ("app.py".to_owned(), 1),
            ("app.py".to_owned(), 3),
            ("app.py".to_owned(), 4),
            ("lib.py".to_owned(), 1)
        ],
        "{references:#?}"
    );

    let hover = tools
        .lsp
        .lsp_hover(named("proj/lib.py", "greet"))
        .await
        .unwrap();
    assert!(
        hover
            .text
            .as_deref()
            .unwrap_or("")
            .contains("def greet(name: str) -> str"),
        "{hover:#?}"
    );

    let symbols = tools
        .lsp
        .lsp_symbols(SymbolsRequest {
            path: Some("proj".to_owned()),
            query: Some("greet".to_owned()),
            language: Some("python".to_owned()),
        })
        .await
        .unwrap();
    assert!(
        symbols
            .symbols
            .iter()
            .any(|s| s.name == "greet" && s.location.path.ends_with("/lib.py")),
        "{symbols:#?}"
    );

    let renamed = rename_greet(&tools).await.unwrap();
    assert!(
        renamed.applied && renamed.conflicts.is_empty(),
        "{renamed:#?}"
    );
    assert_eq!(renamed.files.len(), 2);
    let app = std::fs::read_to_string(world.dir.path().join("cwd/proj/app.py")).unwrap();
    assert_eq!(
        app,
        "from lib import welcome\n\nprint(welcome(42))\nprint(welcome('you'))\n"
    );
    // The renamed files are what the server now has: the type error is still found, by the
    // new name.
    let after = tools
        .lsp
        .lsp_diagnostics(diagnostics("proj/app.py"))
        .await
        .unwrap();
    assert_eq!(after.errors, 1, "{after:#?}");
    assert_eq!(
        after.version,
        renamed
            .files
            .iter()
            .find(|f| f.edits.path.ends_with("app.py"))
            .and_then(|f| f.version.clone())
    );
    assert!(tools.shutdown().await.is_empty());
}

/// A rename whose second file's write fails puts the first back: nothing is
/// left half renamed, and the error says what was restored.
#[tokio::test(flavor = "multi_thread")]
async fn a_rename_whose_write_fails_puts_back_the_files_written_before() {
    let world = LocalWorld::new();
    let setup = tools(&world);
    write(&setup, "proj/pyrightconfig.json", "{}\n").await;
    let lib = "def greet(name: str) -> str:\n    return 'hi ' + name\n";
    let app = "from lib import greet\n\nprint(greet('you'))\n";
    write(&setup, "proj/lib.py", lib).await;
    write(&setup, "proj/app.py", app).await;
    // The rename's second write is refused.
    let fs = before_write(
        world.fs.clone(),
        Box::new(|n, path| {
            let refused = (n == 1).then(|| {
                Error::new(ErrorKind::PermissionDenied, "write: refused by the test")
                    .with_subject(path)
            });
            Box::pin(async move { refused.map_or(Ok(()), Err) })
        }),
    );
    let tools = Tools::new(fs, world.subprocess.clone());
    let err = rename_greet(&tools)
        .await
        .expect_err("the second write is refused");
    assert_eq!(err.kind(), ErrorKind::PermissionDenied, "{err}");
    let message = err.to_string();
    assert!(message.contains("refused by the test"), "{message}");
    assert!(message.contains("no file is changed"), "{message}");
    assert!(message.contains(".py restored (version "), "{message}");
    let read = |name: &str| std::fs::read_to_string(world.dir.path().join("cwd/proj").join(name));
    assert_eq!(read("lib.py").unwrap(), lib);
    assert_eq!(read("app.py").unwrap(), app);
    assert!(tools.shutdown().await.is_empty());
    assert!(setup.shutdown().await.is_empty());
}

#[tokio::test(flavor = "multi_thread")]
async fn typescript_diagnostics_and_references_across_files() {
    let world = LocalWorld::new();
    let tools = tools(&world);
    write(
        &tools,
        "web/tsconfig.json",
        "{\"compilerOptions\": {\"strict\": true}}\n",
    )
    .await;
    write(
        &tools,
        "web/util.ts",
        "export function twice(n: number): number {\n  return n * 2;\n}\n",
    )
    .await;
    write(
        &tools,
        "web/main.ts",
        "import { twice } from './util';\nconst a: string = twice(2);\nconsole.log(a, twice(3));\n",
    )
    .await;
    let found = tools
        .lsp
        .lsp_diagnostics(diagnostics("web/main.ts"))
        .await
        .expect("typescript-language-server runs (scripts/setup.sh installs it)");
    assert_eq!(found.errors, 1, "{found:#?}");
    assert!(
        found.diagnostics[0].message.contains("not assignable"),
        "{found:#?}"
    );
    let references = tools
        .lsp
        .lsp_references(ReferencesRequest {
            at: at("web/util.ts", 1, 17),
            include_declaration: Some(false),
        })
        .await
        .unwrap();
    let lines: Vec<u32> = references
        .locations
        .iter()
        .filter(|l| l.path.ends_with("/main.ts"))
        .map(|l| l.start.line)
        .collect();
    assert_eq!(lines, [1, 2, 3], "{references:#?}");
    assert!(tools.shutdown().await.is_empty());
}

#[tokio::test(flavor = "multi_thread")]
async fn a_killed_server_is_restarted_and_the_caller_told() {
    let world = LocalWorld::new();
    let tools = tools(&world);
    write(&tools, "compile_flags.txt", "-std=c++17\n").await;
    write(&tools, "a.cpp", "int f() { return 1; }\n").await;
    let first = tools
        .lsp
        .lsp_diagnostics(diagnostics("a.cpp"))
        .await
        .unwrap();
    assert!(first.notes.notice.is_none());
    let pids = tools.lsp.server_pids().await;
    let killed = std::process::Command::new("kill")
        .args(["-KILL", &pids[0].to_string()])
        .status()
        .unwrap();
    assert!(killed.success());
    // The next call finds it ended, starts it again and says so.
    let mut notice = None;
    for _ in 0..50 {
        let again = tools.lsp.lsp_diagnostics(diagnostics("a.cpp")).await;
        match again {
            Ok(result) => {
                notice = result.notes.notice;
                if notice.is_some() {
                    break;
                }
            }
            // A call that met the server dying (before its end was seen) fails as closed.
            Err(err) => assert_eq!(err.kind(), ErrorKind::Closed, "{err}"),
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let notice = notice.expect("a call was told of the restart");
    assert!(
        notice.contains("restarted") && notice.contains("ended"),
        "{notice}"
    );
    let now = tools.lsp.server_pids().await;
    assert_ne!(now, pids);
    assert!(tools.shutdown().await.is_empty());
    assert_eq!(in_groups(&now), Vec::<u32>::new());
}

#[tokio::test(flavor = "multi_thread")]
async fn bad_requests_are_refused_clearly() {
    let world = LocalWorld::new();
    let tools = tools(&world);
    write(&tools, "notes.txt", "plain\n").await;
    let no_server = tools
        .lsp
        .lsp_diagnostics(diagnostics("notes.txt"))
        .await
        .unwrap_err();
    assert_eq!(no_server.kind(), ErrorKind::InvalidInput);
    assert!(
        no_server.to_string().contains("no language server"),
        "{no_server}"
    );
    std::fs::write(
        world.dir.path().join("cwd/huge.py"),
        "x = 1\n".repeat(3 << 20),
    )
    .unwrap();
    let huge = tools
        .lsp
        .lsp_diagnostics(diagnostics("huge.py"))
        .await
        .unwrap_err();
    assert_eq!(huge.kind(), ErrorKind::InvalidInput);
    assert!(
        huge.to_string().contains("not given to language servers"),
        "{huge}"
    );
    let missing = tools
        .lsp
        .lsp_diagnostics(diagnostics("gone.py"))
        .await
        .unwrap_err();
    assert_eq!(missing.kind(), ErrorKind::NotFound, "{missing}");
    write(&tools, "x.py", "x = 1\n").await;
    let neither = tools
        .lsp
        .lsp_definition(PositionRequest {
            path: "x.py".to_owned(),
            line: Some(1),
            column: None,
            symbol: None,
        })
        .await
        .unwrap_err();
    assert!(
        neither.to_string().contains("line and column, or symbol"),
        "{neither}"
    );
    let timeout = tools
        .lsp
        .lsp_diagnostics(DiagnosticsRequest {
            path: "x.py".to_owned(),
            timeout_secs: Some(0),
        })
        .await
        .unwrap_err();
    assert_eq!(timeout.kind(), ErrorKind::InvalidInput);
    let symbols = tools
        .lsp
        .lsp_symbols(SymbolsRequest {
            path: None,
            query: None,
            language: None,
        })
        .await
        .unwrap_err();
    assert_eq!(symbols.kind(), ErrorKind::InvalidInput);
    assert!(tools.shutdown().await.is_empty());
}

#[tokio::test(flavor = "multi_thread")]
async fn a_cold_server_answers_references_completely_or_says_it_is_indexing() {
    const FILES: usize = 150;
    let world = LocalWorld::new();
    let tools = tools(&world);
    write(
        &tools,
        "big/tsconfig.json",
        "{\"compilerOptions\": {\"strict\": true}}\n",
    )
    .await;
    write(
        &tools,
        "big/core.ts",
        "export function shared(n: number): number {\n  return n + 1;\n}\n",
    )
    .await;
    for i in 0..FILES {
        write(
            &tools,
            &format!("big/src/m{i}.ts"),
            &format!("import {{ shared }} from '../core';\nexport const v{i} = shared({i});\n"),
        )
        .await;
    }
    // The first question of a fresh server: the declaration, and an import and a call in
    // every module — or a result that says it may be incomplete.
    let cold = tools
        .lsp
        .lsp_references(ReferencesRequest {
            at: at("big/core.ts", 1, 17),
            include_declaration: Some(true),
        })
        .await
        .unwrap();
    if cold.notes.indexing.is_none() {
        assert_eq!(cold.locations.len(), 1 + 2 * FILES, "{:?}", cold.notes);
    }
    let warm = tools
        .lsp
        .lsp_references(ReferencesRequest {
            at: at("big/core.ts", 1, 17),
            include_declaration: Some(true),
        })
        .await
        .unwrap();
    assert_eq!(warm.locations.len(), 1 + 2 * FILES);
    assert!(tools.shutdown().await.is_empty());
}

#[tokio::test(flavor = "multi_thread")]
async fn a_file_no_question_named_changed_by_a_command_is_seen() {
    let world = LocalWorld::new();
    let tools = tools(&world);
    write(&tools, "proj/pyrightconfig.json", "{}\n").await;
    write(
        &tools,
        "proj/lib.py",
        "def greet(name: str) -> str:\n    return name\n",
    )
    .await;
    write(
        &tools,
        "proj/app.py",
        "from lib import greet\n\nprint(greet('x'))\n",
    )
    .await;
    let clean = tools
        .lsp
        .lsp_diagnostics(diagnostics("proj/app.py"))
        .await
        .unwrap();
    assert_eq!(clean.errors, 0, "{clean:#?}");
    // lib.py was never asked about (never opened): a command renames its function.
    run(&tools, "sed -i 's/def greet/def hello/' proj/lib.py").await;
    let mut errors = 0;
    for _ in 0..50 {
        // app.py is unchanged, so the server is not sent it again: what changes its
        // diagnostics is the server seeing lib.py change.
        errors = tools
            .lsp
            .lsp_diagnostics(diagnostics("proj/app.py"))
            .await
            .unwrap()
            .errors;
        if errors > 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(
        errors > 0,
        "the import of a function that is gone is an error"
    );
    assert!(tools.shutdown().await.is_empty());
}

/// No question waits longer than the question wait (30 s by default; 1.5 s here): a server that
/// never answers `initialize` makes each question a clear `Timeout` naming it within the wait,
/// every time, while its start goes on; shutdown ends it.
#[tokio::test(flavor = "multi_thread")]
async fn a_question_to_a_server_that_never_answers_ends_within_the_question_wait() {
    let world = LocalWorld::new();
    // A server that never answers, told apart from any other `sleep` by its argument.
    let argument = format!("1000.{}", std::process::id());
    let silent_servers = || {
        std::fs::read_dir("/proc")
            .unwrap()
            .flatten()
            .filter(|entry| {
                std::fs::read(entry.path().join("cmdline"))
                    .is_ok_and(|cmdline| cmdline == format!("sleep\0{argument}\0").as_bytes())
            })
            .count()
    };
    let tools = tools_with_one_server(&world, "quiet", vec!["sleep".to_owned(), argument.clone()]);
    tools.lsp.set_question_wait(Duration::from_millis(1500));
    write(&tools, "a.quiet", "x\n").await;
    for round in 0..2 {
        let started = std::time::Instant::now();
        let err = tools
            .lsp
            .lsp_definition(at("a.quiet", 1, 1))
            .await
            .expect_err("no answer");
        let took = started.elapsed();
        assert_eq!(err.kind(), ErrorKind::Timeout, "round {round}: {err}");
        assert!(
            err.to_string().contains("lsp_definition a.quiet")
                && err.to_string().contains("no answer within 1.5 s"),
            "round {round}: {err}"
        );
        assert!(
            took >= Duration::from_millis(1400) && took < Duration::from_secs(4),
            "round {round}: took {took:?}"
        );
    }
    let started = std::time::Instant::now();
    let err = tools
        .lsp
        .lsp_symbols(serde_json::from_value(json!({"path": "a.quiet"})).expect("symbols request"))
        .await
        .expect_err("no answer");
    assert_eq!(err.kind(), ErrorKind::Timeout, "{err}");
    assert!(started.elapsed() < Duration::from_secs(4));
    // One start, still going on: the questions did not start it again, nor end it.
    assert_eq!(silent_servers(), 1);
    let shutting = std::time::Instant::now();
    assert!(tools.shutdown().await.is_empty());
    assert!(shutting.elapsed() < Duration::from_secs(10));
    assert_eq!(silent_servers(), 0);
}

/// Diagnostics of a directory are each file's full analysis: pyright, given several documents at
/// once, publishes a document's version first empty and then in full, and the empty one must not
/// be taken for the answer (an agent asking about a package was told it was clean).
#[tokio::test(flavor = "multi_thread")]
async fn a_directory_of_python_files_reports_the_error_pyright_publishes_after_an_empty_list() {
    let world = LocalWorld::new();
    let tools = tools(&world);
    write(&tools, "calc/pyrightconfig.json", "{}\n").await;
    // Three rounds, each sending every file anew (a new version of each): the race is pyright's.
    for round in 0..3 {
        let mark = format!("# round {round}\n");
        write(
            &tools,
            "calc/__init__.py",
            &format!("from .stats import mean\n{mark}"),
        )
        .await;
        write(
            &tools,
            "calc/stats.py",
            &format!(
                "def mean(values: list[float]) -> float:\n    return sum(values) / len(values)\n{mark}"
            ),
        )
        .await;
        write(
            &tools,
            "calc/report.py",
            &format!(
                "from .stats import mean\n\n\ndef report(values: list[float]) -> str:\n    \
                 return 'mean: ' + mean(values)\n{mark}"
            ),
        )
        .await;
        let found = tools
            .lsp
            .lsp_diagnostics(diagnostics("calc"))
            .await
            .expect("pyright-langserver runs (scripts/setup.sh installs it)");
        assert_eq!(found.files, 3, "round {round}: {found:#?}");
        assert_eq!(found.errors, 1, "round {round}: {found:#?}");
        assert!(
            found.diagnostics[0].path.ends_with("calc/report.py")
                && found.diagnostics[0].start.line == 5,
            "round {round}: {found:#?}"
        );
    }
    assert!(tools.shutdown().await.is_empty());
}

/// A language server that does what pyright does on a loaded machine, slowed down so that no
/// quiet window can cover it: given two documents, it publishes both empty, asks for a progress
/// token, and only 1.5 s later (three times `QUIET`) publishes the error it found in one and then
/// begins and ends its progress. Python, reading and writing LSP frames on stdin and stdout.
const LATE_SERVER: &str = r#"
import json, sys, time
def read():
    length = None
    while True:
        line = sys.stdin.buffer.readline()
        if not line:
            sys.exit(0)
        if line == b"\r\n":
            break
        name, _, value = line.decode().partition(":")
        if name.lower() == "content-length":
            length = int(value)
    return json.loads(sys.stdin.buffer.read(length))
def send(message):
    body = json.dumps(dict(message, jsonrpc="2.0")).encode()
    sys.stdout.buffer.write(b"Content-Length: %d\r\n\r\n" % len(body) + body)
    sys.stdout.buffer.flush()
def publish(uri, version, diagnostics):
    send({"method": "textDocument/publishDiagnostics",
          "params": {"uri": uri, "version": version, "diagnostics": diagnostics}})
opened = {}
while True:
    message = read()
    method = message.get("method")
    if method == "initialize":
        send({"id": message["id"], "result": {"capabilities": {"textDocumentSync": 1}}})
    elif method == "shutdown":
        send({"id": message["id"], "result": None})
    elif method == "exit":
        sys.exit(0)
    elif method == "textDocument/didOpen":
        document = message["params"]["textDocument"]
        opened[document["uri"]] = document
        if len(opened) < 2:
            continue
        for uri, document in opened.items():
            publish(uri, document["version"], [])
        send({"id": "token-request", "method": "window/workDoneProgress/create",
              "params": {"token": "analysis"}})
        time.sleep(1.5)
        for uri, document in opened.items():
            if "wrong" in document["text"]:
                at = {"line": 0, "character": document["text"].index("wrong")}
                found = {"range": {"start": at, "end": at}, "severity": 1, "message": "wrong"}
                publish(uri, document["version"], [found])
        send({"method": "$/progress", "params": {"token": "analysis", "value": {"kind": "begin", "title": ""}}})
        send({"method": "$/progress", "params": {"token": "analysis", "value": {"kind": "end"}}})
"#;

/// Diagnostics of a directory wait for the work a server announced by creating a progress token,
/// not only for work it began: the error published after the token's creation, well past any
/// quiet window, is in the answer (taken for silence, the directory was reported clean).
#[tokio::test(flavor = "multi_thread")]
async fn a_directory_waits_for_the_work_a_server_announced_by_creating_a_progress_token() {
    let world = LocalWorld::new();
    let script = world.dir.path().join("late_server.py");
    std::fs::write(&script, LATE_SERVER).unwrap();
    let command = vec!["python3".to_owned(), script.display().to_string()];
    let tools = tools_with_one_server(&world, "late", command);
    write(&tools, "pkg/fine.late", "all good\n").await;
    write(&tools, "pkg/bad.late", "this is wrong\n").await;
    let found = tools
        .lsp
        .lsp_diagnostics(diagnostics("pkg"))
        .await
        .expect("the scripted server answers");
    assert_eq!((found.files, found.errors), (2, 1), "{found:#?}");
    assert!(
        found.diagnostics[0].path.ends_with("pkg/bad.late")
            && found.diagnostics[0].message == "wrong",
        "{found:#?}"
    );
    assert!(tools.shutdown().await.is_empty());
}
