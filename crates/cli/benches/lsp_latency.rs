//! Language tools (issue 12): the latency from an edit to its diagnostics through dsh's LSP
//! consumer (`dsh_consumers::lsp::Lsp`: the file written through the `fs` seam, then
//! `lsp_diagnostics`, which syncs the document and waits for that version's publish) against a
//! minimal direct LSP client driving the same server (`clangd`) on this machine — the file
//! written with `std::fs`, `didChange`, the publish of that version read off the pipe — in
//! interleaved rounds; the consumer on the local composition and, beside it, on the E2B
//! composition against e2b-local (clangd in the sandbox). Then references on a generated
//! 500-file TypeScript project (`typescript-language-server`), cold (a fresh server) and warm.
//!
//! Run (as root: e2b-local needs it; clangd and typescript-language-server from
//! scripts/setup.sh):
//!
//! ```sh
//! cargo build --release --workspace
//! cargo bench -p dsh-cli --bench lsp_latency
//! ```
//!
//! `DSH_BENCH_ROUNDS` (default 30) sets the rounds.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail, ensure};
use dsh_consumers::lsp::tools::{DiagnosticsRequest, PositionRequest, ReferencesRequest};
use dsh_consumers::lsp::{Lsp, LspConfig};
use dsh_host::Host;
use dsh_plugin_api::fs::{FsProvider, WriteGuard};
use e2b_local::harness::{LocalServer, millis, quantile};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};

/// The two versions a round alternates between: one error, none.
const BROKEN: &str = "int main(void) {\n  int x = undeclared;\n  return x;\n}\n";
const FIXED: &str = "int main(void) {\n  int x = 1;\n  return x;\n}\n";
/// Files of the generated TypeScript project.
const TS_FILES: usize = 500;
/// Warm reference queries per world, interleaved.
const WARM_ROUNDS: usize = 15;
/// Warm references on e2b-local against local (issue 25).
const WARM_TARGET: f64 = 1.5;

fn main() -> Result<()> {
    let rounds: usize = match std::env::var("DSH_BENCH_ROUNDS") {
        Ok(value) => value.parse().context("DSH_BENCH_ROUNDS")?,
        Err(_) => 30,
    };
    let dsh = PathBuf::from(env!("CARGO_BIN_EXE_dsh"));
    let plugins = dsh.parent().context("dsh has a directory")?.to_owned();
    let state = tempfile::tempdir()?;
    let server = LocalServer::start();
    // SAFETY: single-threaded here; no runtime or host exists yet.
    unsafe {
        std::env::set_var("DSH_PLUGIN_PATH", &plugins);
        std::env::set_var("XDG_STATE_HOME", state.path());
        for (name, value) in server.env() {
            std::env::set_var(name, value);
        }
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    runtime.block_on(run(rounds))
}

async fn run(rounds: usize) -> Result<()> {
    let config = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../config");
    let scratch = tempfile::tempdir()?;
    let local_dir = scratch.path().canonicalize()?.display().to_string();
    let local = Host::load(&config.join("local.yaml")).await?;
    let remote = Host::load(&config.join("e2b-local.yaml")).await?;
    let worlds = [
        ("local", &local, local_dir.clone()),
        (
            "e2b-local",
            &remote,
            "/home/user/workspace/lsp-bench".to_owned(),
        ),
    ];
    let mut consumers = Vec::new();
    for (name, host, dir) in &worlds {
        let fs = host.fs()?;
        fs.write(
            &format!("{dir}/compile_flags.txt"),
            "-std=c11\n".into(),
            WriteGuard::Overwrite,
        )
        .await?;
        let lsp = Lsp::new(fs.clone(), host.subprocess()?, LspConfig::default());
        consumers.push((*name, fs, lsp, format!("{dir}/main.c")));
    }
    let mut direct = DirectClient::start(&local_dir, &format!("{local_dir}/main.c")).await?;

    // One untimed round each: servers started, the file opened.
    let mut samples: Vec<Vec<Duration>> = vec![Vec::with_capacity(rounds); consumers.len() + 1];
    for round in 0..=rounds {
        let text = if round % 2 == 0 { BROKEN } else { FIXED };
        let expected = usize::from(round % 2 == 0);
        let order: Vec<usize> = (0..=consumers.len())
            .map(|i| (i + round) % (consumers.len() + 1))
            .collect();
        for contender in order {
            let started = Instant::now();
            if contender == consumers.len() {
                let errors = direct.edit(text).await?;
                ensure!(errors == expected, "direct client: {errors} errors");
            } else {
                let (_, fs, lsp, path) = &consumers[contender];
                fs.write(path, text.into(), WriteGuard::Overwrite).await?;
                let found = lsp
                    .lsp_diagnostics(DiagnosticsRequest {
                        path: path.clone(),
                        timeout_secs: None,
                    })
                    .await?;
                ensure!(
                    found.errors == expected,
                    "{}: {found:?}",
                    consumers[contender].0
                );
            }
            if round > 0 {
                samples[contender].push(started.elapsed());
            }
        }
    }
    direct.stop().await;
    println!("edit → diagnostics (clangd, {rounds} interleaved rounds)\n");
    println!(
        "{:<44} {:>10} {:>10} {:>10} {:>18}",
        "contender", "p25 ms", "median ms", "p75 ms", "median / direct"
    );
    let direct_median = quantile(&samples[consumers.len()], 0.5);
    let row = |name: &str, samples: &[Duration]| {
        let median = quantile(samples, 0.5);
        println!(
            "{name:<44} {:>10.2} {:>10.2} {:>10.2} {:>18}",
            millis(quantile(samples, 0.25)),
            millis(median),
            millis(quantile(samples, 0.75)),
            format!(
                "{:.2}× ({:+.2} ms)",
                median.as_secs_f64() / direct_median.as_secs_f64(),
                millis(median) - millis(direct_median)
            )
        );
    };
    row("direct LSP client (local)", &samples[consumers.len()]);
    for (index, (name, ..)) in consumers.iter().enumerate() {
        row(
            &format!("dsh Lsp, write + lsp_diagnostics ({name})"),
            &samples[index],
        );
    }
    for (_, _, lsp, _) in &consumers {
        lsp.shutdown().await;
    }

    // Both worlds' servers stay up: a cold query each, then warm queries interleaved round by
    // round, so a load that comes and goes hits both alike.
    let mut projects = Vec::new();
    for (name, host, dir) in &worlds {
        let fs = host.fs()?;
        let project = format!("{dir}/ts-project");
        write_project(fs.as_ref(), &project).await?;
        let lsp = Lsp::new(fs.clone(), host.subprocess()?, LspConfig::default());
        projects.push((*name, lsp, project));
    }
    let request = |project: &str| ReferencesRequest {
        at: PositionRequest {
            path: format!("{project}/core.ts"),
            line: Some(1),
            column: Some(17),
            symbol: None,
        },
        include_declaration: Some(true),
    };
    let mut cold = Vec::new();
    for (name, lsp, project) in &projects {
        let started = Instant::now();
        let found = lsp.lsp_references(request(project)).await?;
        cold.push((started.elapsed(), found.locations.len()));
        ensure!(found.locations.len() > TS_FILES, "{name}: {found:?}");
    }
    let mut warm = vec![Vec::new(); projects.len()];
    for _ in 0..WARM_ROUNDS {
        for ((name, lsp, project), samples) in projects.iter().zip(&mut warm) {
            let started = Instant::now();
            let found = lsp.lsp_references(request(project)).await?;
            samples.push(started.elapsed());
            ensure!(
                found.locations.len() == cold[0].1,
                "{name}: warm found {}, cold {}",
                found.locations.len(),
                cold[0].1
            );
        }
    }
    println!(
        "\nreferences to one function used by {TS_FILES} files (typescript-language-server; \
         warm: {WARM_ROUNDS} interleaved rounds)\n"
    );
    println!(
        "{:<12} {:>10} {:>12} {:>10} {:>12} {:>12}",
        "world", "cold ms", "warm p25 ms", "median ms", "p75 ms", "references"
    );
    for (((name, ..), (cold_time, found)), samples) in projects.iter().zip(&cold).zip(&warm) {
        println!(
            "{name:<12} {:>10.1} {:>12.1} {:>10.1} {:>12.1} {found:>12}",
            millis(*cold_time),
            millis(quantile(samples, 0.25)),
            millis(quantile(samples, 0.5)),
            millis(quantile(samples, 0.75)),
        );
    }
    let ratio = quantile(&warm[1], 0.5).as_secs_f64() / quantile(&warm[0], 0.5).as_secs_f64();
    println!(
        "warm e2b-local / local: {ratio:.2}x (target <= {WARM_TARGET:.1}x: {})",
        if ratio <= WARM_TARGET {
            "met"
        } else {
            "MISSED"
        }
    );
    for (_, lsp, _) in &projects {
        lsp.shutdown().await;
    }
    local.dispose().await?;
    remote.dispose().await?;
    Ok(())
}

/// `core.ts` exporting `shared`, and [`TS_FILES`] modules each calling it.
async fn write_project(fs: &dyn FsProvider, dir: &str) -> Result<()> {
    let put = |path: String, text: String| async move {
        fs.write(&path, text.into(), WriteGuard::Overwrite).await
    };
    put(
        format!("{dir}/tsconfig.json"),
        "{\"compilerOptions\": {\"strict\": true}}\n".to_owned(),
    )
    .await?;
    put(
        format!("{dir}/core.ts"),
        "export function shared(n: number): number {\n  return n + 1;\n}\n".to_owned(),
    )
    .await?;
    for i in 0..TS_FILES {
        put(
            format!("{dir}/src/m{i}.ts"),
            format!("import {{ shared }} from '../core';\nexport const v{i} = shared({i});\n"),
        )
        .await?;
    }
    Ok(())
}

/// A minimal LSP client of its own (no dsh code): clangd on pipes, one document.
struct DirectClient {
    child: tokio::process::Child,
    stdin: tokio::process::ChildStdin,
    stdout: BufReader<tokio::process::ChildStdout>,
    path: String,
    uri: String,
    version: i64,
}

impl DirectClient {
    async fn start(root: &str, path: &str) -> Result<DirectClient> {
        let mut child = tokio::process::Command::new("clangd")
            .arg("--log=error")
            .current_dir(root)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .context("start clangd")?;
        let mut client = DirectClient {
            stdin: child.stdin.take().context("stdin")?,
            stdout: BufReader::new(child.stdout.take().context("stdout")?),
            child,
            path: path.to_owned(),
            uri: format!("file://{path}"),
            version: 1,
        };
        client
            .send(json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
                "processId": null, "rootUri": format!("file://{root}"),
                "capabilities": {"textDocument": {"publishDiagnostics": {"versionSupport": true}}}
            }}))
            .await?;
        while client.receive().await?.get("id") != Some(&json!(1)) {}
        client
            .send(json!({"jsonrpc": "2.0", "method": "initialized", "params": {}}))
            .await?;
        std::fs::write(path, FIXED)?;
        client
            .send(json!({"jsonrpc": "2.0", "method": "textDocument/didOpen", "params": {
                "textDocument": {"uri": client.uri, "languageId": "c", "version": 1, "text": FIXED}
            }}))
            .await?;
        client.errors_of(1).await?;
        Ok(client)
    }

    /// Writes `text` to the file, sends it, and returns the error count of its diagnostics.
    async fn edit(&mut self, text: &str) -> Result<usize> {
        std::fs::write(&self.path, text)?;
        self.version += 1;
        self.send(
            json!({"jsonrpc": "2.0", "method": "textDocument/didChange", "params": {
                "textDocument": {"uri": self.uri, "version": self.version},
                "contentChanges": [{"text": text}]
            }}),
        )
        .await?;
        self.errors_of(self.version).await
    }

    async fn errors_of(&mut self, version: i64) -> Result<usize> {
        loop {
            let message = self.receive().await?;
            if message["method"] == "textDocument/publishDiagnostics"
                && message["params"]["uri"] == self.uri.as_str()
                && message["params"]["version"] == version
            {
                let all = message["params"]["diagnostics"]
                    .as_array()
                    .cloned()
                    .unwrap_or_default();
                return Ok(all.iter().filter(|d| d["severity"] == 1).count());
            }
        }
    }

    async fn send(&mut self, message: Value) -> Result<()> {
        let body = serde_json::to_vec(&message)?;
        self.stdin
            .write_all(format!("Content-Length: {}\r\n\r\n", body.len()).as_bytes())
            .await?;
        self.stdin.write_all(&body).await?;
        Ok(self.stdin.flush().await?)
    }

    async fn receive(&mut self) -> Result<Value> {
        let mut length = None;
        loop {
            let mut line = String::new();
            if self.stdout.read_line(&mut line).await? == 0 {
                bail!("clangd closed its output");
            }
            let line = line.trim_end();
            if line.is_empty() {
                break;
            }
            if let Some(value) = line.strip_prefix("Content-Length: ") {
                length = Some(value.parse::<usize>()?);
            }
        }
        let mut body = vec![0; length.context("a Content-Length")?];
        self.stdout.read_exact(&mut body).await?;
        Ok(serde_json::from_slice(&body)?)
    }

    async fn stop(mut self) {
        let _ = self.child.kill().await;
    }
}
