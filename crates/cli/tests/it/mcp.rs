//! `dsh mcp` driven by the official MCP SDKs (npm `@modelcontextprotocol/sdk`, PyPI `mcp`) as
//! independent clients: one scenario (`tests/sdk-peers/mcp/scenario.json`, every tool at least once)
//! over stdio and streamable HTTP, on the local composition and on a fresh e2b-local, must give
//! the same transcript everywhere, with exactly the expected tool errors; nothing the tools
//! started outlives the server; a client that disappears mid-call stops what the call started.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use e2b_local::harness::LocalServer;
use serde_json::Value;

use crate::e2b_shutdown::sandboxes;
use crate::shutdown::{processes_with, send};
use crate::support::{config_dir, dsh, dsh_binary, plugin_dir, require, wait_until};

pub const LOCAL: [&str; 2] = ["dsh-fs-local", "dsh-subprocess-local"];
pub const E2B: [&str; 3] = ["dsh-e2b-owner", "dsh-fs-e2b", "dsh-subprocess-e2b"];

pub fn peers() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/sdk-peers")
}

/// An official MCP client running the scenario.
#[derive(Debug, Clone, Copy)]
pub enum Client {
    Js,
    Python,
}

impl Client {
    /// The client running the scenario.
    fn command(self) -> Command {
        self.script("scenario")
    }

    /// The client running its peer script `name` (`js/mcp/NAME.mjs`,
    /// `python/mcp_peer/NAME.py`).
    pub fn script(self, name: &str) -> Command {
        let peers = peers();
        let (program, script) = match self {
            Client::Js => (
                PathBuf::from("node"),
                peers.join(format!("js/mcp/{name}.mjs")),
            ),
            Client::Python => (
                peers.join("python/.venv/bin/python"),
                peers.join(format!("python/mcp_peer/{name}.py")),
            ),
        };
        assert!(
            script.is_file() && (program.is_file() || program == Path::new("node")),
            "the MCP SDK peers are not installed: run scripts/install-sdk-peers.sh"
        );
        let mut command = Command::new(program);
        command
            .arg(script)
            .env("DSH_PLUGIN_PATH", plugin_dir())
            // The `dsh mcp` the client starts inherits it.
            .env("XDG_STATE_HOME", crate::support::state_home())
            .env_remove("RUST_LOG")
            .stdin(Stdio::null());
        command
    }
}

/// How the client reaches the server.
pub enum Transport<'a> {
    /// The client starts `dsh mcp ARGS…` itself, in `cwd`.
    Stdio { args: &'a [String], cwd: &'a Path },
    /// A running `dsh mcp --http` at this URL, with this token.
    Http { url: &'a str, token: &'a str },
}

/// Runs the scenario with `client` over `transport` and returns its transcript.
fn transcript(client: Client, transport: &Transport<'_>, envs: &[(String, String)]) -> Value {
    run_client(client.command(), client, transport, envs)
}

/// What `client` sees before its first call (`about.{mjs,py}`): the
/// instructions, the tools listed and the listing's size.
fn about(client: Client, transport: &Transport<'_>, envs: &[(String, String)]) -> Value {
    run_client(client.script("about"), client, transport, envs)
}

/// Runs `command` (a client's peer script) over `transport` and returns the JSON it prints.
pub fn run_client(
    mut command: Command,
    client: Client,
    transport: &Transport<'_>,
    envs: &[(String, String)],
) -> Value {
    command.envs(envs.iter().map(|(k, v)| (k, v)));
    reach(&mut command, transport);
    let output = command.output().expect("run the MCP client");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success(),
        "{client:?} client failed: {stderr}"
    );
    serde_json::from_slice(&output.stdout).unwrap_or_else(|err| {
        panic!(
            "{client:?} transcript ({err}): {}\n{stderr}",
            String::from_utf8_lossy(&output.stdout)
        )
    })
}

/// Tells a client started by `command` how to reach the server (see `connect.mjs`); a stdio
/// server runs in `cwd`, where the client runs.
fn reach(command: &mut Command, transport: &Transport<'_>) {
    match transport {
        Transport::Stdio { args, cwd } => {
            let mut argv = vec![dsh_binary().display().to_string(), "mcp".to_owned()];
            argv.extend(args.iter().cloned());
            command
                .env("DSH_MCP_COMMAND", serde_json::to_string(&argv).unwrap())
                .current_dir(cwd);
        }
        Transport::Http { url, token } => {
            command.env("DSH_MCP_URL", url).env("DSH_MCP_TOKEN", token);
        }
    }
}

/// Every step ran, failed exactly when the scenario expects, every text it looked for was
/// there, and the image content a step expects (and only a step that expects some) came.
fn check(transcript: &Value, what: &str) {
    let scenario: Value = serde_json::from_str(
        &std::fs::read_to_string(peers().join("mcp/scenario.json")).expect("scenario"),
    )
    .expect("scenario JSON");
    let steps = scenario["steps"].as_array().expect("steps");
    let entries = transcript.as_array().expect("a transcript");
    assert_eq!(entries.len(), steps.len(), "{what}: every step ran");
    for (step, entry) in steps.iter().zip(entries) {
        let name = &step["name"];
        assert_eq!(&entry["step"], name, "{what}");
        let expected_error = step["error"].as_bool().unwrap_or(false);
        assert_eq!(
            entry["error"].as_bool(),
            Some(expected_error),
            "{what}: step {name}: {entry}"
        );
        assert_eq!(
            entry.get("images"),
            step.get("images"),
            "{what}: step {name}: image content"
        );
        for (key, value) in entry.as_object().expect("an entry") {
            if key.contains(" contains ") {
                assert_eq!(value, &Value::Bool(true), "{what}: step {name}: {key}");
            }
        }
    }
}

/// Processes whose working directory lies under `dir` (what a local composition started
/// there), other than this test.
pub fn processes_under(dir: &Path) -> Vec<u32> {
    std::fs::read_dir("/proc")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|entry| {
            let pid: u32 = entry.file_name().to_str()?.parse().ok()?;
            let cwd = std::fs::read_link(entry.path().join("cwd")).ok()?;
            cwd.starts_with(dir).then_some(pid)
        })
        .filter(|pid| *pid != std::process::id())
        .collect()
}

/// `dsh mcp --http 127.0.0.1:0 --token TOKEN ARGS…` in `cwd`, and its URL once it serves.
fn http_server(args: &[String], cwd: &Path, envs: &[(String, String)]) -> (Child, String) {
    let mut command = dsh();
    command
        .args(["mcp", "--http", "127.0.0.1:0", "--token", TOKEN])
        .args(args)
        .envs(envs.iter().map(|(k, v)| (k, v)))
        .current_dir(cwd);
    let (child, url, _) = start_http(command);
    (child, url)
}

/// Starts `command` (a `dsh mcp --http …`) and returns it with its URL once it serves, and
/// the token it generated (when it printed one: when none was given).
pub fn start_http(mut command: Command) -> (Child, String, Option<String>) {
    let mut child = command
        .stderr(Stdio::piped())
        .spawn()
        .expect("start dsh mcp --http");
    let (lines_tx, lines_rx) = std::sync::mpsc::channel();
    let stderr = BufReader::new(child.stderr.take().expect("stderr"));
    // Keep draining its log so it never blocks on a full pipe.
    std::thread::spawn(move || {
        for line in stderr.lines().map_while(Result::ok) {
            let _ = lines_tx.send(line);
        }
    });
    let next = || {
        lines_rx
            .recv_timeout(Duration::from_secs(60))
            .expect("dsh mcp --http announces itself on stderr")
    };
    let url = loop {
        if let Some(url) = next().strip_prefix("dsh mcp: serving ") {
            break url.to_owned();
        }
    };
    let token = lines_rx
        .recv_timeout(Duration::from_millis(500))
        .ok()
        .and_then(|line| {
            line.strip_prefix("dsh mcp: bearer token: ")
                .map(str::to_owned)
        });
    (child, url, token)
}

pub const TOKEN: &str = "test-token-0123456789";

/// Runs the scenario with each client over each transport against the composition `args`
/// selects, and returns the transcripts; `after` checks what is left once each server is gone.
fn scenario_runs(
    args: &[String],
    envs: &[(String, String)],
    runs: &[(Client, bool)],
    mut after: impl FnMut(&Path, &str),
) -> Vec<Value> {
    let mut transcripts = Vec::new();
    for &(client, over_http) in runs {
        let dir = tempfile::tempdir().expect("tempdir");
        let what = format!(
            "{client:?} over {}",
            if over_http { "http" } else { "stdio" }
        );
        let transcript = if over_http {
            let (mut server, url) = http_server(args, dir.path(), envs);
            let transport = Transport::Http {
                url: &url,
                token: TOKEN,
            };
            let transcript = transcript(client, &transport, envs);
            send(server.id(), libc::SIGTERM);
            let status = server.wait().expect("wait for dsh mcp");
            assert_eq!(status.code(), Some(143), "{what}: SIGTERM ends dsh mcp");
            transcript
        } else {
            let transport = Transport::Stdio {
                args,
                cwd: dir.path(),
            };
            transcript(client, &transport, envs)
        };
        check(&transcript, &what);
        after(dir.path(), &what);
        transcripts.push(transcript);
    }
    transcripts
}

fn assert_same(transcripts: &[Value], reference: &Value) {
    for transcript in transcripts {
        assert_eq!(transcript, reference, "transcripts differ");
    }
}

#[test]
fn the_scenario_gives_the_same_results_on_both_compositions_over_both_transports_and_sdks() {
    require(&LOCAL);
    require(&E2B);
    let runs = [
        (Client::Js, false),
        (Client::Python, false),
        (Client::Js, true),
        (Client::Python, true),
    ];
    let local = scenario_runs(&[], &[], &runs, |dir, what| {
        assert!(
            wait_until(Duration::from_secs(10), || processes_under(dir).is_empty()),
            "{what}: processes outlived dsh mcp: {:?}",
            processes_under(dir)
        );
    });
    let server = LocalServer::start();
    let config = vec![
        "--config".to_owned(),
        config_dir().join("e2b-local.yaml").display().to_string(),
    ];
    let e2b = scenario_runs(
        &config,
        &server.env(),
        &[(Client::Js, false), (Client::Python, true)],
        |_, what| {
            assert!(
                wait_until(Duration::from_secs(10), || sandboxes(&server) == 0),
                "{what}: the sandbox outlived dsh mcp"
            );
        },
    );
    // With output schemas listed, the Python SDK checks every result against its schema.
    let checked = scenario_runs(
        &["--output-schemas".to_owned()],
        &[],
        &[(Client::Python, false)],
        |_, _| {},
    );
    assert_same(&local[1..], &local[0]);
    assert_same(&e2b, &local[0]);
    assert_same(&checked, &local[0]);
}

/// Before its first call an agent is told where it is — composition, working directory, user,
/// OS, language servers, the tool groups served — and gets only the groups asked for, without
/// output schemas unless asked: the same through both SDKs, on both compositions.
#[test]
fn the_agent_is_told_its_world_and_gets_the_tool_groups_it_asked_for() {
    require(&LOCAL);
    require(&E2B);
    let dir = tempfile::tempdir().expect("a scratch dir");
    let cwd = dir.path().canonicalize().expect("canonical");
    let grouped = ["--tools".to_owned(), "files,commands".to_owned()];
    for client in [Client::Js, Client::Python] {
        let seen = about(
            client,
            &Transport::Stdio {
                args: &grouped,
                cwd: &cwd,
            },
            &[],
        );
        let instructions = seen["instructions"].as_str().expect("instructions");
        for fact in [
            format!("Working directory: {}", cwd.display()),
            "User: ".to_owned(),
            "OS: Linux".to_owned(),
            "Tool groups served: files, commands.".to_owned(),
            "Language servers: ".to_owned(),
            "(dsh-fs-local)".to_owned(),
            "durable: true outlives it".to_owned(),
        ] {
            assert!(
                instructions.contains(&fact),
                "{client:?}: {fact:?} in {instructions}"
            );
        }
        let tools = seen["tools"].as_array().expect("tools");
        assert!(
            tools.iter().any(|tool| tool["name"] == "read_file"),
            "{client:?}: {seen}"
        );
        assert!(
            tools.iter().any(|tool| tool["name"] == "run"),
            "{client:?}: {seen}"
        );
        let names: Vec<&str> = tools
            .iter()
            .map(|tool| tool["name"].as_str().expect("a name"))
            .collect();
        assert_eq!(
            names,
            [
                "read_file",
                "write_file",
                "edit_file",
                "list_dir",
                "stat",
                "find_files",
                "grep",
                "move_path",
                "remove_path",
                "make_dir",
                "run",
                "read_output",
                "write_stdin",
                "kill",
                "list_commands"
            ],
            "{client:?}: the groups asked for, and only those"
        );
        for tool in tools {
            assert_eq!(tool["output_schema"], false, "{client:?}: {tool}");
        }
    }
    let with_schemas = ["--output-schemas".to_owned()];
    let seen = about(
        Client::Python,
        &Transport::Stdio {
            args: &with_schemas,
            cwd: &cwd,
        },
        &[],
    );
    let tools = seen["tools"].as_array().expect("tools");
    assert!(
        tools.iter().any(|tool| tool["name"] == "terminal_open"),
        "{seen}"
    );
    assert!(
        tools.iter().all(|tool| tool["output_schema"] == true),
        "{seen}"
    );

    let server = LocalServer::start();
    let config = vec![
        "--config".to_owned(),
        config_dir().join("e2b-local.yaml").display().to_string(),
    ];
    let seen = about(
        Client::Js,
        &Transport::Stdio {
            args: &config,
            cwd: &cwd,
        },
        &server.env(),
    );
    let instructions = seen["instructions"].as_str().expect("instructions");
    for fact in [
        "Working directory: /home/user/workspace",
        "User: user",
        "E2B sandbox ",
        "Every command ends with this server, durable ones too",
    ] {
        assert!(
            instructions.contains(fact),
            "e2b-local: {fact:?} in {instructions}"
        );
    }
}

/// The tools/list response a default `dsh mcp` (the local composition) gives, as it gives it.
fn default_listing() -> Value {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut session = RawSession::start(dir.path(), &[]);
    let listing = session.request("tools/list", serde_json::json!({}));
    session.end();
    listing
}

/// The default tool list costs the model little on every turn (issue 26, item 4): at most
/// 20,000 characters in all, and at most 12,000 of names, descriptions and input schemas —
/// with the code runtime's tools in it (issue 27).
#[test]
fn the_default_tool_list_fits_its_budget() {
    require(&LOCAL);
    let listing = default_listing();
    let tools = listing["tools"].as_array().expect("tools");
    let chars = |value: &Value| serde_json::to_string(value).expect("JSON").chars().count();
    let total = chars(&listing);
    let core: usize = tools
        .iter()
        .map(|tool| {
            tool["name"].as_str().expect("a name").chars().count()
                + tool["description"].as_str().unwrap_or("").chars().count()
                + chars(&tool["inputSchema"])
        })
        .sum();
    let figures = format!(
        "{} tools, {total} characters in all, {core} of names, descriptions and input schemas",
        tools.len()
    );
    assert!(
        tools.iter().any(|tool| tool["name"] == "code_run"),
        "the code tools are listed: {figures}"
    );
    assert!(
        tools.iter().all(|tool| tool.get("outputSchema").is_none()),
        "{figures}"
    );
    assert!(total <= 20_000, "over 20,000 in all: {figures}");
    assert!(
        core <= 12_000,
        "over 12,000 of names, descriptions and input schemas: {figures}"
    );
}

/// The SDK scenario calls every tool the default server lists, and every operation of a tool
/// of several (its `op` values): what one tool now serves stays reachable, and is exercised on
/// both compositions.
#[test]
fn the_scenario_calls_every_tool_and_every_operation() {
    require(&LOCAL);
    let listing = default_listing();
    let scenario: Value = serde_json::from_str(
        &std::fs::read_to_string(peers().join("mcp/scenario.json")).expect("scenario"),
    )
    .expect("scenario JSON");
    let steps = scenario["steps"].as_array().expect("steps");
    let called = |tool: &str, op: Option<&Value>| {
        steps.iter().any(|step| {
            step["tool"] == tool
                && step["error"] != Value::Bool(true)
                && op.is_none_or(|op| &step["arguments"]["op"] == op)
        })
    };
    for tool in listing["tools"].as_array().expect("tools") {
        let name = tool["name"].as_str().expect("a name");
        match tool["inputSchema"]["properties"]["op"]["enum"].as_array() {
            Some(ops) => {
                for op in ops {
                    assert!(
                        called(name, Some(op)),
                        "the scenario never runs {name} {op}"
                    );
                }
            }
            None => assert!(called(name, None), "the scenario never calls {name}"),
        }
    }
}

/// An unknown tool group is refused before any world starts, naming the groups there are.
#[test]
fn an_unknown_tool_group_is_refused_before_the_world_starts() {
    let output = dsh()
        .args(["mcp", "--tools", "files,nope"])
        .output()
        .expect("run dsh");
    assert_eq!(output.status.code(), Some(2), "{output:?}");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("unknown tool group \"nope\"") && stderr.contains("files, commands"),
        "{stderr}"
    );
}

/// A client killed in the middle of a call (`run` of a long command): dsh sees its stdin
/// close, stops the call — the command's whole process group — and exits.
#[test]
fn a_client_that_disappears_mid_call_stops_the_call_and_the_server() {
    require(&LOCAL);
    let marker = format!("mcp-disconnect-{}", std::process::id());
    let connect = peers().join("js/mcp/connect.mjs");
    let script = format!(
        "import {{ connect }} from {connect:?};\n\
         const client = await connect();\n\
         console.log('calling');\n\
         await client.callTool({{ name: 'run', arguments: {{ command: 'sleep 300; : {marker}' }} }});",
        connect = connect.display().to_string(),
    );
    let argv = serde_json::to_string(&[dsh_binary().display().to_string(), "mcp".into()]).unwrap();
    let mut node = node(&script)
        .env("DSH_MCP_COMMAND", argv)
        .stdout(Stdio::piped())
        .spawn()
        .expect("run node");
    // The client's own command line carries the marker too.
    let client = node.id();
    assert!(
        wait_until(Duration::from_secs(30), || processes_with(&marker)
            .iter()
            .any(|pid| *pid != client)),
        "the command did not start"
    );
    node.kill().expect("kill the client");
    node.wait().expect("reap the client");
    assert!(
        wait_until(Duration::from_secs(10), || processes_with(&marker)
            .is_empty()),
        "the call's command or dsh outlived the client: {:?}",
        processes_with(&marker)
    );
}

/// Runs `body` (an ES module body with `client` connected to `dsh mcp` over `transport`, with
/// `envs` added to its environment) with the official TypeScript SDK; its last stdout line is
/// returned parsed.
pub fn js_session(transport: &Transport<'_>, envs: &[(String, String)], body: &str) -> Value {
    let connect = peers().join("js/mcp/connect.mjs");
    let script = format!(
        "import {{ connect }} from {connect:?};\nconst client = await connect();\n{body}\nawait client.close();",
        connect = connect.display().to_string(),
    );
    let mut command = node(&script);
    command.envs(envs.iter().map(|(name, value)| (name, value)));
    reach(&mut command, transport);
    last_json(command)
}

/// `node` running the ES module `script` in the JS peers' directory (where it finds the
/// SDK), with the plugin path set and no stdin.
pub fn node(script: &str) -> Command {
    let mut command = Command::new("node");
    command
        .args(["--input-type=module", "-e", script])
        .current_dir(peers().join("js"))
        .env("DSH_PLUGIN_PATH", plugin_dir())
        .stdin(Stdio::null());
    command
}

/// Runs a client that must succeed and returns its last stdout line, parsed.
pub fn last_json(mut command: Command) -> Value {
    let output = command.output().expect("run the client");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_str(stdout.lines().last().expect("a result line")).expect("JSON result")
}

/// A long wait reports progress to a client that asked for it; a client's cancellation stops
/// the call's command at once and the server keeps serving; concurrent calls all complete.
#[test]
fn progress_cancellation_and_concurrent_calls() {
    require(&LOCAL);
    let marker = format!("mcp-cancel-{}", std::process::id());
    // A pattern for the marker that its own command line does not match.
    let (head, last) = marker.split_at(marker.len() - 1);
    let pattern = format!("{head}[{last}]");
    // The background command is durable and ends on its own, so the world keeps it: in a
    // state directory of this test's.
    let state = tempfile::tempdir().expect("tempdir");
    let result = js_session(
        &Transport::Stdio {
            args: &[],
            cwd: &peers().join("js"),
        },
        &[(
            "XDG_STATE_HOME".to_owned(),
            state.path().display().to_string(),
        )],
        &format!(
            r#"
const progress = [];
const bg = await client.callTool({{ name: "run", arguments: {{ command: "sleep 12; echo done", background: true }} }});
const waited = await client.callTool(
  {{ name: "read_output", arguments: {{ id: bg.structuredContent.id, wait_ms: 20000, until: "exit" }} }},
  undefined,
  {{ onprogress: (p) => progress.push(p.progress), resetTimeoutOnProgress: true }},
);
const controller = new AbortController();
const cancelled = client.callTool(
  {{ name: "run", arguments: {{ command: "sleep 300; : {marker}" }} }},
  undefined,
  {{ signal: controller.signal }},
).then(() => "completed", (e) => "rejected: " + e.message);
await new Promise((r) => setTimeout(r, 1500));
controller.abort();
const outcome = await cancelled;
await new Promise((r) => setTimeout(r, 2000));
const left = await client.callTool({{ name: "run", arguments: {{ command: "pgrep -f '{pattern}' | wc -l" }} }});
const many = await Promise.all(Array.from({{ length: 12 }}, (_, i) =>
  client.callTool({{ name: "run", arguments: {{ argv: ["echo", String(i)] }} }})));
console.log(JSON.stringify({{
  progress: progress.length,
  waited: waited.structuredContent.output,
  outcome,
  left: left.structuredContent.output.trim(),
  many: many.map((r) => r.structuredContent.output.trim()),
}}));
"#
        ),
    );
    assert!(
        result["progress"].as_u64().unwrap_or(0) >= 2,
        "progress while waiting 12 s: {result}"
    );
    assert_eq!(result["waited"], "done\n", "{result}");
    assert!(
        result["outcome"]
            .as_str()
            .unwrap_or("")
            .starts_with("rejected"),
        "{result}"
    );
    // `pgrep` counts itself's shell only when the command line matches: the sleep is gone.
    assert_eq!(
        result["left"], "1",
        "the cancelled call's command is gone: {result}"
    );
    let many: Vec<String> = (0..12).map(|i| i.to_string()).collect();
    assert_eq!(result["many"], serde_json::json!(many), "{result}");
}

/// `dsh mcp` on the E2B composition keeps its one sandbox for as long as it serves, well past
/// the manifest's `timeoutMs` (the owner renews the lease), and the sandbox ends with it.
#[test]
fn an_e2b_world_lives_exactly_as_long_as_the_server() {
    require(&LOCAL);
    require(&E2B);
    let server = LocalServer::start();
    let dir = tempfile::tempdir().expect("tempdir");
    let manifest = dir.path().join("short-lease.yaml");
    let text = std::fs::read_to_string(config_dir().join("e2b-local.yaml")).expect("manifest");
    assert!(text.contains("timeoutMs: 300000"), "{text}");
    std::fs::write(
        &manifest,
        text.replace("timeoutMs: 300000", "timeoutMs: 3000"),
    )
    .expect("write the manifest");
    let result = js_session(
        &Transport::Stdio {
            args: &["--config".to_owned(), manifest.display().to_string()],
            cwd: &peers().join("js"),
        },
        &server.env(),
        r#"
const text = (r) => r.structuredContent;
await client.callTool({ name: "write_file", arguments: { path: "lease.txt", content: "one sandbox\n" } });
const busy = await client.callTool({ name: "run", arguments: { command: "sleep 4; echo slept" } });
await new Promise((r) => setTimeout(r, 4000));
const read = await client.callTool({ name: "read_file", arguments: { path: "lease.txt" } });
console.log(JSON.stringify({ busy: text(busy).output, read: text(read).content, error: read.isError ?? false }));
"#,
    );
    assert_eq!(result["busy"], "slept\n", "{result}");
    assert_eq!(result["error"], false, "{result}");
    assert_eq!(result["read"], "one sandbox\n", "{result}");
    assert!(
        wait_until(Duration::from_secs(10), || sandboxes(&server) == 0),
        "the sandbox outlived dsh mcp"
    );
}

/// A `dsh mcp` over stdio driven by hand: newline-delimited JSON-RPC, one request at a time.
pub struct RawSession {
    child: Child,
    stdin: Option<std::process::ChildStdin>,
    /// The server's stdout, line by line (read on a thread of its own, so a server that
    /// does not answer fails the test instead of hanging it).
    lines: std::sync::mpsc::Receiver<String>,
    next_id: u64,
}

impl RawSession {
    /// `dsh mcp` (the local composition) in `cwd` with `envs`, initialized.
    pub fn start(cwd: &Path, envs: &[(&str, &Path)]) -> RawSession {
        let mut child = dsh()
            .arg("mcp")
            .envs(envs.iter().map(|(name, value)| (name, value)))
            .current_dir(cwd)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("start dsh mcp");
        let stdin = child.stdin.take();
        let stdout = BufReader::new(child.stdout.take().expect("stdout"));
        let (lines_tx, lines) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in stdout.lines().map_while(Result::ok) {
                if lines_tx.send(line).is_err() {
                    break;
                }
            }
        });
        let mut session = RawSession {
            child,
            stdin,
            lines,
            next_id: 1,
        };
        session.request(
            "initialize",
            serde_json::json!({
                "protocolVersion": "2024-11-05",
                "capabilities": {},
                "clientInfo": {"name": "dsh-it-raw", "version": "1"},
            }),
        );
        session.send(&serde_json::json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
        session
    }

    fn send(&mut self, message: &Value) {
        self.send_line(message.to_string().as_bytes());
    }

    /// Writes `bytes` and a newline: one line of the protocol, whatever it holds.
    pub fn send_line(&mut self, bytes: &[u8]) {
        use std::io::Write;
        let stdin = self.stdin.as_mut().expect("the session is open");
        stdin.write_all(bytes).expect("write to dsh mcp");
        stdin.write_all(b"\n").expect("write to dsh mcp");
        stdin.flush().expect("flush");
    }

    /// The server's next line, parsed; a minute without one fails the test.
    pub fn next_message(&mut self) -> Value {
        let line = self
            .lines
            .recv_timeout(Duration::from_secs(60))
            .expect("dsh mcp answers within a minute");
        serde_json::from_str(&line).expect("JSON-RPC")
    }

    /// The server process's id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Sends a request and returns its result (skipping notifications).
    fn request(&mut self, method: &str, params: Value) -> Value {
        let id = self.next_id;
        self.next_id += 1;
        self.send(
            &serde_json::json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}),
        );
        loop {
            let message = self.next_message();
            if message["id"] == serde_json::json!(id) {
                assert!(message.get("error").is_none(), "{method}: {message}");
                return message["result"].clone();
            }
        }
    }

    /// Calls `tool` and returns its structured result, which must not be a tool error.
    pub fn call(&mut self, tool: &str, arguments: Value) -> Value {
        let result = self.request(
            "tools/call",
            serde_json::json!({"name": tool, "arguments": arguments}),
        );
        assert_ne!(result["isError"], Value::Bool(true), "{tool}: {result}");
        result["structuredContent"].clone()
    }

    /// Closes stdin (the client is gone) and waits for the server to end.
    pub fn end(mut self) {
        drop(self.stdin.take());
        assert!(
            wait_until(Duration::from_secs(30), || matches!(
                self.child.try_wait(),
                Ok(Some(_))
            )),
            "dsh mcp did not end after its client went away"
        );
        let status = self.child.wait().expect("wait for dsh mcp");
        assert!(status.success(), "dsh mcp: {status}");
    }
}

/// A background command started by one `dsh mcp` outlives it (it is durable: the local
/// provider keeps it under `$XDG_STATE_HOME/dsh/durable`), and a new `dsh mcp` of the same
/// world reads its whole output by cursor, under the same id, with its true exit status; once
/// killed, its retained state goes with the server that killed it.
#[test]
fn background_output_is_read_by_cursor_across_a_server_restart() {
    require(&LOCAL);
    let dir = tempfile::tempdir().expect("tempdir");
    let (cwd, state) = (dir.path().join("work"), dir.path().join("state"));
    std::fs::create_dir(&cwd).expect("cwd");
    let envs = [("XDG_STATE_HOME", state.as_path())];
    let marker = format!("mcp-durable-{}", std::process::id());
    let command = format!(
        "for i in $(seq 1 150); do echo \"line $i\"; sleep 0.01; done; echo bye >&2; exit 3; : {marker}"
    );
    let mut expected: String = (1..=150).map(|i| format!("line {i}\n")).collect();
    expected.push_str("bye\n");

    let mut first = RawSession::start(&cwd, &envs);
    let started = first.call(
        "run",
        serde_json::json!({"command": command, "background": true, "durable": true}),
    );
    assert_eq!(started["durable"], Value::Bool(true), "{started}");
    let id = started["id"].as_str().expect("an id").to_owned();
    let head = first.call(
        "read_output",
        serde_json::json!({"id": id, "cursor": 0, "pattern": "^line 3$", "wait_ms": 10000}),
    );
    assert_eq!(head["matched"], Value::Bool(true), "{head}");
    first.end();
    assert!(
        !processes_with(&marker).is_empty(),
        "the durable command ended with the server"
    );

    let mut second = RawSession::start(&cwd, &envs);
    let listed = second.call("list_commands", serde_json::json!({}));
    assert!(
        listed["commands"]
            .as_array()
            .expect("commands")
            .iter()
            .any(|info| info["id"] == serde_json::json!(id) && info["durable"] == Value::Bool(true)),
        "{listed}"
    );
    let mut got = String::new();
    let mut cursor = 0;
    let last = loop {
        let piece = second.call(
            "read_output",
            serde_json::json!({"id": id, "cursor": cursor, "max_bytes": 256, "wait_ms": 5000}),
        );
        assert_eq!(piece["dropped"], serde_json::json!(0), "{piece}");
        got.push_str(piece["output"].as_str().expect("output"));
        cursor = piece["cursor"].as_u64().expect("cursor");
        if piece["status"] == "exited" && piece["remaining_bytes"] == serde_json::json!(0) {
            break piece;
        }
    };
    assert_eq!(got, expected);
    assert_eq!(last["exit_code"], serde_json::json!(3), "{last}");
    let hex = id.strip_prefix("cmd-").expect("cmd-<durable id>");
    assert!(
        durable_state(&state, hex).is_some(),
        "retained until killed"
    );
    second.call("kill", serde_json::json!({"id": id}));
    second.end();
    assert_eq!(
        durable_state(&state, hex),
        None,
        "the killed command's retained state outlived the server that killed it"
    );
    assert!(
        wait_until(Duration::from_secs(10), || processes_with(&marker)
            .is_empty()),
        "{:?}",
        processes_with(&marker)
    );
}

/// Where the local provider keeps durable command `id` under `state` (`XDG_STATE_HOME`): in
/// its scope's directory; `None` once forgotten.
fn durable_state(state: &Path, id: &str) -> Option<PathBuf> {
    std::fs::read_dir(state.join("dsh/durable"))
        .ok()?
        .flatten()
        .map(|scope| scope.path().join(id))
        .find(|dir| dir.is_dir())
}

/// `dsh mcp --http` ends on a signal (its usual end) as cleanly as a stdio server ends when its
/// client leaves: an ordinary background command ends with it, a durable one runs on, and the
/// retained state of one that `kill` ended is gone from the world.
#[test]
fn a_signal_ends_an_http_server_as_cleanly_as_a_leaving_client_ends_a_stdio_one() {
    require(&LOCAL);
    let dir = tempfile::tempdir().expect("tempdir");
    let (cwd, state) = (dir.path().join("work"), dir.path().join("state"));
    std::fs::create_dir(&cwd).expect("cwd");
    let envs = [("XDG_STATE_HOME".to_owned(), state.display().to_string())];
    let marker = format!("mcp-http-stop-{}", std::process::id());
    let (mut server, url) = http_server(&[], &cwd, &envs);
    let result = js_session(
        &Transport::Http {
            url: &url,
            token: TOKEN,
        },
        &envs,
        &format!(
            r#"
const run = (args) => client.callTool({{ name: "run", arguments: args }}).then((r) => r.structuredContent);
const killed = await run({{ command: "sleep 300; : {marker}-killed", background: true, durable: true }});
const kept = await run({{ command: "sleep 300; : {marker}-kept", background: true, durable: true }});
const plain = await run({{ command: "sleep 300; : {marker}-plain", background: true, keep_stdin: true }});
const kill = await client.callTool({{ name: "kill", arguments: {{ id: killed.id }} }});
console.log(JSON.stringify({{ killed, kept, plain, kill: kill.isError ?? false }}));
"#
        ),
    );
    assert_eq!(result["killed"]["durable"], Value::Bool(true), "{result}");
    assert_eq!(result["kept"]["durable"], Value::Bool(true), "{result}");
    assert_eq!(result["plain"]["durable"], Value::Bool(false), "{result}");
    assert_eq!(result["kill"], Value::Bool(false), "{result}");
    let durable_dir = |key: &str| {
        let id = result[key]["id"].as_str().expect("an id");
        durable_state(&state, id.strip_prefix("cmd-").expect("cmd-<durable id>"))
    };
    assert!(durable_dir("killed").is_some(), "killed, not yet forgotten");

    send(server.id(), libc::SIGTERM);
    let status = server.wait().expect("wait for dsh mcp");
    assert_eq!(status.code(), Some(143), "SIGTERM ends dsh mcp");
    assert_eq!(
        durable_dir("killed"),
        None,
        "the killed command's retained state outlived the server"
    );
    assert!(
        wait_until(Duration::from_secs(10), || {
            processes_with(&format!("{marker}-plain")).is_empty()
        }),
        "the ordinary background command outlived the server"
    );
    assert!(
        !processes_with(&format!("{marker}-kept")).is_empty(),
        "the durable command ended with the server"
    );
    let kept = durable_dir("kept").expect("the durable command's state");
    let kept_id = kept.file_name().and_then(|name| name.to_str()).expect("id");
    for verb in ["kill", "forget"] {
        let status = dsh()
            .args([verb, kept_id])
            .env("XDG_STATE_HOME", &state)
            .current_dir(&cwd)
            .status()
            .expect("run dsh");
        assert!(status.success(), "dsh {verb} {kept_id}");
    }
    assert!(!kept.exists() && processes_with(&format!("{marker}-kept")).is_empty());
}

/// The language tools through `dsh mcp` on each composition: clangd's diagnostics follow a
/// write and a `sed -i` at each version, typescript-language-server finds references across
/// files and workspace symbols, a killed server is restarted (the call says so), and once the
/// server ends no language server runs in the world (checked from outside on the local
/// composition; on e2b-local in the sandbox, kept by `onDispose: leave`, then killed).
#[test]
fn language_tools_follow_every_writer_restart_and_end_on_both_compositions() {
    require(&LOCAL);
    require(&E2B);
    let body = r#"
const call = async (name, args) => {
  const r = await client.callTool({ name, arguments: args });
  if (r.isError) throw new Error(`${name}: ${r.content[0].text}`);
  return r.structuredContent;
};
const out = {};
await call("write_file", { path: "lspw/compile_flags.txt", content: "-std=c++17\n" });
const written = await call("write_file", { path: "lspw/main.cpp", content: 'int main() {\n  int x = "text";\n  return x;\n}\n' });
const broken = await call("lsp", { op: "diagnostics", path: "lspw/main.cpp" });
out.broken = [broken.errors, broken.version === written.version, broken.diagnostics[0].start.line];
await call("run", { command: "sed -i 's/\"text\"/1/' lspw/main.cpp" });
const fixed = await call("lsp", { op: "diagnostics", path: "lspw/main.cpp" });
out.fixed = [fixed.errors, fixed.version !== broken.version];
await call("write_file", { path: "lspw/web/tsconfig.json", content: '{"compilerOptions": {"strict": true}}\n' });
await call("write_file", { path: "lspw/web/util.ts", content: "export function twice(n: number): number {\n  return n * 2;\n}\n" });
await call("write_file", { path: "lspw/web/main.ts", content: "import { twice } from './util';\nconsole.log(twice(2), twice(3));\n" });
const refs = await call("lsp", { op: "references", path: "lspw/web/util.ts", line: 1, column: 17, include_declaration: false });
out.references = refs.locations.filter((l) => l.path.endsWith("/main.ts")).map((l) => l.start.line);
const symbols = await call("lsp", { op: "symbols", query: "twice", path: "lspw/web/main.ts" });
out.symbols = symbols.symbols.some((s) => s.name === "twice" && s.location.path.endsWith("/util.ts"));
// Only this world's clangd: the one whose cwd is its workspace.
await call("run", { command: 'for p in $(pgrep -f "^clangd "); do [ "$(readlink /proc/$p/cwd)" = "$PWD/lspw" ] && kill -KILL $p; done; true' });
out.restarted = false;
for (let i = 0; i < 50 && !out.restarted; i++) {
  try {
    // Until the server's end is seen, the last diagnostics (of this very version) answer.
    const again = await call("lsp", { op: "diagnostics", path: "lspw/main.cpp" });
    out.restarted = (again.notice ?? "").includes("restarted");
  } catch (err) {
    // A call that met the dying server; the next one restarts it.
  }
  if (!out.restarted) await new Promise((r) => setTimeout(r, 100));
}
out.sandbox = (await call("run", { command: "echo ${E2B_SANDBOX_ID:-local}" })).output.trim();
console.log(JSON.stringify(out));
"#;
    let check_result = |result: &Value, what: &str| {
        assert_eq!(
            result["broken"],
            serde_json::json!([1, true, 2]),
            "{what}: {result}"
        );
        assert_eq!(
            result["fixed"],
            serde_json::json!([0, true]),
            "{what}: {result}"
        );
        assert_eq!(
            result["references"],
            // The import, and the two calls.
            serde_json::json!([1, 2, 2]),
            "{what}: {result}"
        );
        assert_eq!(result["symbols"], true, "{what}: {result}");
        assert_eq!(result["restarted"], true, "{what}: {result}");
    };

    let dir = tempfile::tempdir().expect("tempdir");
    let local = js_session(
        &Transport::Stdio {
            args: &[],
            cwd: dir.path(),
        },
        &[],
        body,
    );
    check_result(&local, "local");
    assert_eq!(
        processes_under(dir.path()),
        Vec::<u32>::new(),
        "local: servers outlived dsh mcp"
    );

    let server = LocalServer::start();
    let text = std::fs::read_to_string(config_dir().join("e2b-local.yaml")).expect("manifest");
    let leave = dir.path().join("leave.yaml");
    std::fs::write(&leave, text.replace("onDispose: kill", "onDispose: leave")).unwrap();
    let remote = js_session(
        &Transport::Stdio {
            args: &["--config".to_owned(), leave.display().to_string()],
            cwd: dir.path(),
        },
        &server.env(),
        body,
    );
    check_result(&remote, "e2b-local");
    let sandbox = remote["sandbox"]
        .as_str()
        .expect("the sandbox id")
        .to_owned();
    let again = dir.path().join("again.yaml");
    std::fs::write(
        &again,
        text.replace("template: base", &format!("sandboxId: {sandbox}")),
    )
    .unwrap();
    let output = dsh()
        .args(["--config", &again.display().to_string(), "exec", "--"])
        .args([
            "sh",
            "-c",
            "ps -eo args= | grep -cE '^(clangd|node) ' || true",
        ])
        .envs(server.env())
        .output()
        .expect("run dsh");
    let (stdout, stderr) = crate::support::text(&output);
    assert!(output.status.success(), "{stderr}");
    assert_eq!(
        stdout.trim(),
        "0",
        "e2b-local: language servers outlived dsh mcp"
    );
    assert!(
        wait_until(Duration::from_secs(10), || sandboxes(&server) == 0),
        "the sandbox was killed by the second dsh"
    );
}

/// A policy decorator sees what `run` runs (issue 26): with `dsh-example-subprocess-audit`
/// (`deny: [touch]`) in front of each composition's provider, `run {"argv": ["touch", …]}`
/// through the official SDK is refused and creates nothing, a shell string reaches the
/// decorator as the `bash -c` it is, and the audit log holds exactly the argv given — no
/// wrapper.
#[test]
fn a_deny_list_decorator_sees_run_s_argv_on_both_compositions() {
    require(&LOCAL);
    require(&E2B);
    require(&["dsh-example-subprocess-audit"]);
    let body = r#"
const denied = await client.callTool({ name: "run", arguments: { argv: ["touch", "denied.txt"] } });
const bg = await client.callTool({ name: "run", arguments: { argv: ["touch", "bg.txt"], background: true } });
const shell = await client.callTool({ name: "run", arguments: { command: "echo shell" } });
const allowed = await client.callTool({ name: "run", arguments: { argv: ["echo", "allowed"] } });
const left = await client.callTool({ name: "run", arguments: { command: "ls denied.txt bg.txt 2>/dev/null | wc -l" } });
console.log(JSON.stringify({
  denied: [denied.isError ?? false, denied.content[0].text],
  bg: [bg.isError ?? false, bg.content[0].text],
  shell: shell.structuredContent.output,
  allowed: allowed.structuredContent.output,
  left: left.structuredContent.output.trim(),
}));
"#;
    let dir = tempfile::tempdir().expect("tempdir");
    let server = LocalServer::start();
    let e2b = std::fs::read_to_string(config_dir().join("e2b-local.yaml")).expect("manifest");
    let local = "plugins:\n  - { id: fs, name: dsh-fs-local }\n  - { id: local, name: dsh-subprocess-local }\n";
    for (what, manifest, envs) in [
        ("local", local.to_owned(), vec![]),
        ("e2b-local", e2b, server.env()),
    ] {
        let cwd = dir.path().join(what);
        std::fs::create_dir(&cwd).expect("cwd");
        let log = dir.path().join(format!("{what}.jsonl"));
        let path = dir.path().join(format!("{what}.yaml"));
        std::fs::write(
            &path,
            format!(
                "{manifest}  - {{ id: audit, name: dsh-example-subprocess-audit, config: {{ deny: [touch], auditLog: {} }} }}\n",
                log.display()
            ),
        )
        .expect("write the manifest");
        let result = js_session(
            &Transport::Stdio {
                args: &["--config".to_owned(), path.display().to_string()],
                cwd: &cwd,
            },
            &envs,
            body,
        );
        for refused in ["denied", "bg"] {
            assert_eq!(result[refused][0], true, "{what}: {result}");
            assert!(
                result[refused][1]
                    .as_str()
                    .is_some_and(|text| text.contains("touch") && text.contains("denied")),
                "{what}: the refusal names the program: {result}"
            );
        }
        assert_eq!(result["left"], "0", "{what}: nothing was touched: {result}");
        assert_eq!(result["shell"], "shell\n", "{what}: {result}");
        assert_eq!(result["allowed"], "allowed\n", "{what}: {result}");
        let audit: Vec<Value> = std::fs::read_to_string(&log)
            .expect("the audit log")
            .lines()
            .map(|line| serde_json::from_str(line).expect("a JSON line"))
            .collect();
        let argvs = |event: &str| -> Vec<Value> {
            audit
                .iter()
                .filter(|entry| entry["event"] == event && entry["operation"] == "spawn")
                .map(|entry| entry["argv"].clone())
                .collect()
        };
        assert_eq!(
            argvs("deny"),
            [
                serde_json::json!(["touch", "denied.txt"]),
                serde_json::json!(["touch", "bg.txt"])
            ],
            "{what}: {audit:?}"
        );
        let started = argvs("start");
        assert!(
            started.contains(&serde_json::json!(["echo", "allowed"]))
                && started.contains(&serde_json::json!(["bash", "-c", "echo shell"])),
            "{what}: the decorator saw each command as run gave it: {audit:?}"
        );
    }
}

/// Small things of issue 26, as the official SDK sees them on both compositions: the language
/// servers' queries (`lsp`) are announced read-only (`lsp_rename` is not); an error names its reason
/// once on E2B as locally (`read_file: stream_text: file not found`, not `stream_text: stat:
/// not found: file not found`); a background `run` says it ends with the server.
#[test]
fn lsp_queries_are_read_only_and_errors_say_their_reason_once_on_both_compositions() {
    require(&LOCAL);
    require(&E2B);
    let body = r#"
const { tools } = await client.listTools();
const readOnly = Object.fromEntries(tools.filter((t) => t.name.startsWith("lsp"))
  .map((t) => [t.name, t.annotations?.readOnlyHint ?? null]));
const missing = await client.callTool({ name: "read_file", arguments: { path: "no-such-file.txt" } });
const bg = await client.callTool({ name: "run", arguments: { command: "sleep 100", background: true } });
console.log(JSON.stringify({
  readOnly,
  missing: [missing.isError ?? false, missing.content[0].text],
  bg: bg.content[0].text,
}));
"#;
    let check = |result: &Value, what: &str| {
        assert_eq!(
            result["readOnly"],
            serde_json::json!({"lsp": true, "lsp_rename": false}),
            "{what}: {result}"
        );
        assert_eq!(result["missing"][0], true, "{what}: {result}");
        let text = result["missing"][1].as_str().expect("the error text");
        let reason = text
            .split_once("read_file: stream_text: ")
            .map(|(_, reason)| reason)
            .unwrap_or_else(|| panic!("{what}: the tool and the operation are named: {text}"));
        assert!(
            !reason.contains(": ") && !reason.is_empty(),
            "{what}: one reason, said once: {text}"
        );
        assert!(
            result["bg"]
                .as_str()
                .is_some_and(|text| text.contains("this server ends")),
            "{what}: a background command is the session's: {result}"
        );
    };
    let dir = tempfile::tempdir().expect("tempdir");
    let local = js_session(
        &Transport::Stdio {
            args: &[],
            cwd: dir.path(),
        },
        &[],
        body,
    );
    check(&local, "local");
    let server = LocalServer::start();
    let config = config_dir().join("e2b-local.yaml").display().to_string();
    let remote = js_session(
        &Transport::Stdio {
            args: &["--config".to_owned(), config],
            cwd: dir.path(),
        },
        &server.env(),
        body,
    );
    check(&remote, "e2b-local");
}

/// Sessions own their commands (issue 26): a background `run` ends with its server unless it
/// asked to be durable; a durable one is listed only by servers of its scope (locally: its
/// folder), while a server elsewhere reaches it only by naming its id; and the result says
/// what is true of the world — on e2b-local with `onDispose: kill`, that the sandbox, and so
/// the durable command, ends with the server.
#[test]
fn sessions_own_their_commands_and_say_how_long_they_live() {
    require(&LOCAL);
    require(&E2B);
    let dir = tempfile::tempdir().expect("tempdir");
    let (here, elsewhere, state) = (
        dir.path().join("here"),
        dir.path().join("elsewhere"),
        dir.path().join("state"),
    );
    std::fs::create_dir(&here).expect("cwd");
    std::fs::create_dir(&elsewhere).expect("cwd");
    let envs = [("XDG_STATE_HOME", state.as_path())];
    let marker = format!("mcp-scope-{}", std::process::id());

    let mut first = RawSession::start(&here, &envs);
    let session = first.call(
        "run",
        serde_json::json!({"command": format!("sleep 100; : {marker}-session"), "background": true}),
    );
    assert_eq!(session["durable"], Value::Bool(false), "{session}");
    assert!(
        session["lifetime"]
            .as_str()
            .is_some_and(|text| text.contains("this server ends")),
        "{session}"
    );
    let durable = first.call(
        "run",
        serde_json::json!({"command": format!("sleep 100; : {marker}-durable"), "background": true, "durable": true}),
    );
    assert!(
        durable["lifetime"]
            .as_str()
            .is_some_and(|text| text.contains("outlives this server")),
        "{durable}"
    );
    let id = durable["id"].as_str().expect("an id").to_owned();
    first.end();
    assert!(
        wait_until(Duration::from_secs(10), || processes_with(&format!(
            "{marker}-session"
        ))
        .is_empty()),
        "a session's background command ended with its server"
    );
    assert!(
        !processes_with(&format!("{marker}-durable")).is_empty(),
        "the durable command outlived it"
    );

    let ids = |session: &mut RawSession| -> Vec<String> {
        session.call("list_commands", serde_json::json!({}))["commands"]
            .as_array()
            .expect("commands")
            .iter()
            .map(|command| command["id"].as_str().expect("id").to_owned())
            .collect()
    };
    let mut other = RawSession::start(&elsewhere, &envs);
    assert!(
        !ids(&mut other).contains(&id),
        "another folder's server does not list it"
    );
    // Named explicitly, it is reached across scopes.
    let read = other.call("read_output", serde_json::json!({"id": id}));
    assert_eq!(read["status"], "running", "{read}");
    other.end();
    let mut again = RawSession::start(&here, &envs);
    assert!(
        ids(&mut again).contains(&id),
        "its folder's next server lists it"
    );
    let killed = again.call("kill", serde_json::json!({"id": id}));
    assert_eq!(killed["status"], "exited", "{killed}");
    again.end();

    let server = LocalServer::start();
    let config = config_dir().join("e2b-local.yaml").display().to_string();
    let result = js_session(
        &Transport::Stdio {
            args: &["--config".to_owned(), config],
            cwd: dir.path(),
        },
        &server.env(),
        r#"
const durable = await client.callTool({ name: "run", arguments: { command: "sleep 100", background: true, durable: true } });
console.log(JSON.stringify({ error: durable.isError ?? false, lifetime: durable.structuredContent?.lifetime, text: durable.content[0].text }));
"#,
    );
    assert_eq!(result["error"], false, "{result}");
    assert!(
        result["lifetime"]
            .as_str()
            .is_some_and(|text| text.contains("killed when this server ends (onDispose: kill)")),
        "e2b-local, onDispose: kill: {result}"
    );
    assert!(
        !result["text"]
            .as_str()
            .unwrap_or("")
            .contains("outlives this server"),
        "{result}"
    );

    // The owner loaded by its deprecated name, told to leave the sandbox: the result says the
    // command outlives the server (the entry is found by the id the host knows, not by name).
    let text = std::fs::read_to_string(config_dir().join("e2b-local.yaml")).expect("manifest");
    let renamed = dir.path().join("renamed-leave.yaml");
    std::fs::write(
        &renamed,
        text.replace("name: dsh-e2b-owner", "name: dsh-e2b")
            .replace("onDispose: kill", "onDispose: leave"),
    )
    .unwrap();
    let result = js_session(
        &Transport::Stdio {
            args: &["--config".to_owned(), renamed.display().to_string()],
            cwd: dir.path(),
        },
        &server.env(),
        r#"
const durable = await client.callTool({ name: "run", arguments: { command: "sleep 100", background: true, durable: true } });
console.log(JSON.stringify({ error: durable.isError ?? false, lifetime: durable.structuredContent?.lifetime }));
"#,
    );
    assert_eq!(result["error"], false, "{result}");
    assert!(
        result["lifetime"]
            .as_str()
            .is_some_and(|text| text.contains("outlives this server")),
        "e2b-local, the owner as dsh-e2b, onDispose: leave: {result}"
    );
}
