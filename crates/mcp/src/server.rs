//! The MCP server handler: lists the catalog and runs calls — each until it
//! ends or its client cancels it, with progress notifications while it
//! waits.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use dsh_consumers::Tools;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, ErrorCode, Implementation, ListToolsResult,
    PaginatedRequestParams, ProgressNotificationParam, ServerCapabilities, ServerConfig, Tool,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer, ServerHandler};

use crate::catalog;
use crate::entry::Entry;

/// How often a call still running reports progress (when its client asked
/// for progress with a token): often enough that clients which reset their
/// request timeout on progress never time out a bounded wait.
const PROGRESS_EVERY: Duration = Duration::from_secs(5);

/// What the server tells clients about itself and how to use it.
const INSTRUCTIONS: &str = "Tools over one execution world (files, commands, terminals). \
Paths are the world's own; relative paths are relative to the world's working directory. \
Long output is bounded: read more with read_output by cursor.";

/// The `dsh mcp` server: every tool of the catalog over one world. Cheap to
/// clone: every clone (one per HTTP session) shares the same world and
/// catalog, so a background command started in one session is visible to
/// all.
#[derive(Clone)]
pub struct DshMcp {
    tools: Arc<Tools>,
    catalog: Arc<HashMap<&'static str, Entry>>,
    listed: Arc<Vec<Tool>>,
}

impl DshMcp {
    /// A server over `tools`.
    pub fn new(tools: Arc<Tools>) -> DshMcp {
        let entries = catalog::entries();
        let listed = entries.iter().map(|entry| entry.tool.clone()).collect();
        let catalog = entries
            .into_iter()
            .map(|entry| (entry.name, entry))
            .collect();
        DshMcp {
            tools,
            catalog: Arc::new(catalog),
            listed: Arc::new(listed),
        }
    }

    /// The tools this server lists, in catalog order.
    pub fn tools(&self) -> &[Tool] {
        &self.listed
    }
}

impl ServerHandler for DshMcp {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new("dsh", env!("CARGO_PKG_VERSION")))
            .with_instructions(INSTRUCTIONS)
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        Ok(ListToolsResult::with_all_items(self.listed.to_vec()))
    }

    fn get_tool(&self, name: &str) -> Option<Tool> {
        self.catalog.get(name).map(|entry| entry.tool.clone())
    }

    /// Runs the call until it ends or the client cancels it (then the
    /// call's future is dropped, which stops what it started in the world:
    /// `dsh-consumers`' cancellation contract). An unknown tool is an
    /// invalid-params error listing the known ones.
    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let Some(entry) = self.catalog.get(request.name.as_ref()) else {
            let known: Vec<&str> = self.listed.iter().map(|tool| tool.name.as_ref()).collect();
            return Err(ErrorData::new(
                ErrorCode::INVALID_PARAMS,
                format!(
                    "unknown tool {:?}; the tools are: {}",
                    request.name,
                    known.join(", ")
                ),
                None,
            ));
        };
        let arguments = request.arguments.unwrap_or_default();
        let call = (entry.call)(Arc::clone(&self.tools), arguments);
        let token = context.meta.get_progress_token();
        let mut call = std::pin::pin!(call);
        // The first tick one period from now: awaiting an immediate first tick costs a turn of
        // the timer wheel (about a millisecond) on every call.
        let mut ticks =
            tokio::time::interval_at(tokio::time::Instant::now() + PROGRESS_EVERY, PROGRESS_EVERY);
        let mut reported = 0u32;
        loop {
            tokio::select! {
                biased;
                () = context.ct.cancelled() => {
                    return Err(ErrorData::new(
                        ErrorCode::INVALID_REQUEST,
                        format!("{}: cancelled by the client", request.name),
                        None,
                    ));
                }
                result = &mut call => return Ok(result.into()),
                _ = ticks.tick() => {
                    if let Some(token) = &token {
                        reported += 1;
                        let progress = ProgressNotificationParam::new(token.clone(), reported.into())
                            .with_message(format!("{} still running", request.name));
                        // A client gone is noticed by the service itself.
                        let _ = context.peer.notify_progress(progress).await;
                    }
                }
            }
        }
    }
}
