//! `dsh mcp`: the world as MCP tools (docs/design.md §11), served until the
//! client goes away or a signal comes (`with_host` tells it through
//! [`Stop`]).

use std::sync::Arc;

use dsh_host::Host;
use dsh_mcp::{DshMcp, HttpOptions};
use dsh_tools::Tools;
use dsh_tools::lsp::LspConfig;

use crate::Stop;
use crate::args::McpArgs;
use crate::failure::{EXIT_CONFIG, EXIT_FAILURE, Failure};

/// Serves the composition's world until the stdio client closes stdin or
/// `stop` says a signal came (over HTTP, the usual end), then ends what the
/// tools started (ordinary
/// background commands, terminals, language servers; durable commands are only detached from,
/// so a later `dsh mcp` of the same world finds them) before the
/// composition is disposed.
pub async fn run(host: &Host, args: McpArgs, lsp: LspConfig, stop: Stop) -> Result<i32, Failure> {
    let fs = host.fs()?;
    let subprocess = host.subprocess()?;
    let tools = Arc::new(Tools::with_lsp_config(fs, subprocess, lsp));
    let server = DshMcp::new(Arc::clone(&tools));
    let served = match args.http {
        None => dsh_mcp::serve_stdio(server, stop.requested())
            .await
            .map_err(|err| Failure::new(EXIT_FAILURE, err.to_string())),
        Some(addr) => {
            let options = HttpOptions {
                addr,
                token: args.token,
            };
            let ready = |bound| eprintln!("dsh mcp: serving http://{bound}/mcp");
            dsh_mcp::serve_http(server, options, ready, stop.requested())
                .await
                .map_err(|err| match err {
                    dsh_mcp::HttpError::TokenRequired(_) => {
                        Failure::new(EXIT_CONFIG, err.to_string())
                    }
                    err => Failure::new(EXIT_FAILURE, err.to_string()),
                })
        }
    };
    for problem in tools.shutdown().await {
        tracing::warn!("dsh mcp: {problem}");
    }
    served.map(|()| 0)
}
