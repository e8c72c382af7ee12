//! stdio: the transport MCP clients use when they start `dsh mcp` themselves.

use std::future::Future;

use rmcp::ServiceExt;

use crate::server::DshMcp;

/// Why the stdio server stopped with an error.
#[derive(Debug, thiserror::Error)]
#[error("dsh mcp (stdio): {0}")]
pub struct StdioError(String);

/// Serves `server` on this process's stdin and stdout until the client
/// closes stdin (EOF) or `shutdown` resolves, whichever comes first —
/// including before the client ever initialized.
pub async fn serve_stdio(
    server: DshMcp,
    shutdown: impl Future<Output = ()>,
) -> Result<(), StdioError> {
    let serving = async {
        let running = server
            .serve(rmcp::transport::stdio())
            .await
            .map_err(|err| StdioError(format!("initialization failed: {err}")))?;
        running
            .waiting()
            .await
            .map(drop)
            .map_err(|err| StdioError(err.to_string()))
    };
    tokio::select! {
        served = serving => served,
        () = shutdown => Ok(()),
    }
}
