//! `dsh mcp`: the world as MCP tools (docs/design.md §11), served until the
//! client goes away or a signal comes (`with_host` tells it through
//! [`Stop`]).

use std::sync::Arc;

use dsh_consumers::Tools;
use dsh_consumers::lsp::LspConfig;
use dsh_host::Host;
use dsh_mcp::{DshMcp, HttpOptions, SessionLimits};

use crate::Stop;
use crate::args::McpArgs;
use crate::failure::{EXIT_CONFIG, EXIT_FAILURE, Failure};

/// Serves the composition's world until the stdio client closes stdin or
/// `stop` says a signal came (over HTTP, the usual end), then ends what the
/// tools started (ordinary
/// background commands, terminals, language servers; durable commands are only detached from,
/// so a later `dsh mcp` of the same world finds them) before the
/// composition is disposed.
/// `token` is what [`token`] resolved (for `--http`).
pub async fn run(
    host: &Host,
    args: McpArgs,
    token: Option<Token>,
    lsp: LspConfig,
    stop: Stop,
) -> Result<i32, Failure> {
    let fs = host.fs()?;
    let subprocess = host.subprocess()?;
    let tools = Arc::new(Tools::with_lsp_config(fs, subprocess, lsp));
    let server = DshMcp::new(Arc::clone(&tools));
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
pub fn token(args: &McpArgs) -> Result<Option<Token>, Failure> {
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
