//! `dsh mcp`: the world as MCP tools (docs/design.md §11), served until the
//! client goes away or a signal comes (`with_host` tells it through
//! [`Stop`]).

use std::sync::Arc;

use dsh_consumers::Tools;
use dsh_consumers::lsp::LspConfig;
use dsh_host::Host;
use dsh_mcp::{DshMcp, HttpOptions, McpOptions, SessionLimits};
use dsh_plugin_api::subprocess::SubprocessProvider;
use dsh_plugin_api::{OwnerKind, ServiceKind};

use crate::Stop;
use crate::args::McpArgs;
use crate::failure::{EXIT_CONFIG, EXIT_FAILURE, Failure};

/// Serves the composition's world until the stdio client closes stdin or
/// `stop` says a signal came (over HTTP, the usual end), then ends what the
/// tools started (ordinary
/// background commands, terminals, language servers; durable commands are only detached from,
/// so a later `dsh mcp` of the same world finds them) before the
/// composition is disposed.
/// `token` is what [`preflight`] resolved (for `--http`).
pub async fn run(
    host: &Host,
    args: McpArgs,
    token: Option<Token>,
    lsp: LspConfig,
    stop: Stop,
) -> Result<i32, Failure> {
    let fs = host.fs()?;
    let subprocess = host.subprocess()?;
    let mut about_world = about_world(host, subprocess.as_ref(), &lsp).await;
    let tools = Arc::new(Tools::with_lsp_config(fs, subprocess, lsp));
    if let Some(ms) = args.run_wait_ms {
        tools
            .commands
            .set_run_wait(std::time::Duration::from_millis(ms));
    }
    match world_ends(host) {
        Some(why) => {
            about_world.push(format!(
                "Every command ends with this server, durable ones too: {why}."
            ));
            tools.commands.set_world_ends_with_server(why);
        }
        None => about_world.push(
            "Background commands end with this server; one run with durable: true outlives it, \
             and a later server of this world lists it and reads on."
                .to_owned(),
        ),
    }
    let options = McpOptions {
        groups: args.tools.clone(),
        output_schemas: args.output_schemas,
        about_world,
    };
    let server = DshMcp::new(Arc::clone(&tools), options)
        .map_err(|err| Failure::new(EXIT_CONFIG, format!("dsh mcp --tools: {err}")))?;
    let served = match (args.http, token) {
        (Some(addr), Some(token)) => {
            let options = HttpOptions {
                addr,
                token: token.value.clone(),
                sessions: SessionLimits::default(),
            };
            // The token goes where only the owner sees it: this process's stderr.
            let ready = |bound| {
                eprintln!("dsh mcp: serving http://{bound}/mcp");
                if token.generated {
                    eprintln!("dsh mcp: bearer token: {}", token.value);
                }
            };
            dsh_mcp::serve_http(server, options, ready, stop.requested())
                .await
                .map_err(|err| match err {
                    dsh_mcp::HttpError::Token(_) => Failure::new(EXIT_CONFIG, err.to_string()),
                    err => Failure::new(EXIT_FAILURE, err.to_string()),
                })
        }
        _ => dsh_mcp::serve_stdio(server, stop.requested())
            .await
            .map_err(|err| Failure::new(EXIT_FAILURE, err.to_string())),
    };
    for problem in tools.shutdown().await {
        tracing::warn!("dsh mcp: {problem}");
    }
    served.map(|()| 0)
}

/// What the model is told about the world in the server's instructions: the
/// composition (its plugins; the sandbox, in an E2B world), the world's working directory, user and OS
/// (asked of the world; a world that cannot answer is said to), and the
/// language servers configured, each said to be missing when the world does
/// not have its program.
async fn about_world(
    host: &Host,
    subprocess: &dyn SubprocessProvider,
    lsp: &LspConfig,
) -> Vec<String> {
    let plugins: Vec<String> = host
        .plugins()
        .iter()
        .map(|plugin| format!("{} ({})", plugin.id, plugin.name))
        .collect();
    let mut facts = vec![format!(
        "Composition {}: {}.",
        host.origin(),
        plugins.join(", ")
    )];
    if let Ok(owner) = host.owner(OwnerKind::E2B) {
        let info = owner.info();
        facts.push(format!(
            "The world is E2B sandbox {} (template {}).",
            info.sandbox_id, info.template_id
        ));
    }
    match dsh_consumers::world::facts(subprocess).await {
        Ok(world) => facts.extend(world.lines()),
        Err(err) => facts.push(format!("The world did not say where it is: {err}")),
    }
    let servers = futures::future::join_all(lsp.languages.iter().map(|language| async move {
        let program = language.command.first().map(String::as_str).unwrap_or("");
        match subprocess.resolve_executable(program, &[]).await {
            Ok(_) => format!("{} ({program})", language.name),
            Err(_) => format!("{} ({program}: not installed)", language.name),
        }
    }))
    .await;
    facts.push(format!("Language servers: {}.", servers.join(", ")));
    facts
}

/// Why the world ends when this server does, if it does: an E2B sandbox
/// whose owner kills it at disposal (`onDispose: kill`, the owner's
/// default, read from the composition's manifest), which takes durable
/// commands with it. The local world and a sandbox left or paused outlive
/// the server.
fn world_ends(host: &Host) -> Option<String> {
    let owner = host.owner(OwnerKind::E2B).ok()?;
    // The entry that serves the owner, by id: whatever name it was loaded by
    // (scoped, or the deprecated `dsh-e2b`).
    let owner_kind = ServiceKind::Owner(OwnerKind::E2B);
    let owner_id = host
        .plugins()
        .iter()
        .find(|plugin| plugin.serves.contains(&owner_kind))
        .map(|plugin| plugin.id.as_str())?;
    let manifest = dsh_host::Manifest::from_path(std::path::Path::new(host.origin())).ok();
    let on_dispose = manifest
        .as_ref()
        .and_then(|manifest| manifest.entries().iter().find(|entry| entry.id == owner_id))
        .and_then(|entry| entry.config.get("onDispose"))
        .and_then(|value| value.as_str())
        .unwrap_or("kill")
        .to_owned();
    (on_dispose == "kill").then(|| {
        format!(
            "this world, sandbox {}, is killed when this server ends (onDispose: kill)",
            owner.info().sandbox_id
        )
    })
}

/// Checks what `dsh mcp` was given before any composition starts (a bad
/// argument costs no sandbox): the tool groups, then the bearer token,
/// which it returns ([`token`]).
pub fn preflight(args: &McpArgs) -> Result<Option<Token>, Failure> {
    dsh_mcp::check_groups(&args.tools)
        .map_err(|err| Failure::new(EXIT_CONFIG, format!("dsh mcp --tools: {err}")))?;
    token(args)
}

/// The bearer token of `dsh mcp --http`.
pub struct Token {
    value: String,
    /// Made up here, so printed for the owner.
    generated: bool,
}

/// The HTTP bearer token (`None` over stdio): `--token`, else the first line
/// of `--token-file`, else DSH_MCP_TOKEN, else a new random one (the
/// environment yields to either option given). Checked before the
/// composition starts: a bad token costs no sandbox.
fn token(args: &McpArgs) -> Result<Option<Token>, Failure> {
    if args.http.is_none() {
        return Ok(None);
    }
    let (value, generated, source) = match (&args.token, &args.token_file) {
        (Some(token), _) => (token.clone(), false, "--token".to_owned()),
        (None, Some(path)) => {
            let source = format!("--token-file {}", path.display());
            let text = std::fs::read_to_string(path)
                .map_err(|err| Failure::new(EXIT_CONFIG, format!("dsh mcp {source}: {err}")))?;
            let token = text.lines().next().unwrap_or_default().trim().to_owned();
            (token, false, source)
        }
        (None, None) => match std::env::var("DSH_MCP_TOKEN") {
            Ok(token) => (token, false, "(DSH_MCP_TOKEN)".to_owned()),
            Err(_) => (dsh_mcp::generate_token(), true, "--http".to_owned()),
        },
    };
    dsh_mcp::check_token(&value)
        .map_err(|reason| Failure::new(EXIT_CONFIG, format!("dsh mcp {source}: {reason}")))?;
    Ok(Some(Token { value, generated }))
}
