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

/// How the server uses the world, for every client: the start of its
/// instructions (the world's own facts follow).
const INSTRUCTIONS: &str = "Tools over one execution world. Paths are the world's own; \
relative paths are relative to the world's working directory. Long output is bounded: read \
more with read_output by cursor.";

/// What a `dsh mcp` server serves beyond its world.
#[derive(Debug, Clone, Default)]
pub struct McpOptions {
    /// The tool groups to serve (`files`, `commands`, `terminals`, `lsp`,
    /// …: [`groups`]); empty serves them all.
    pub groups: Vec<String>,
    /// List each tool's output schema as well. Off by default: the schemas
    /// double what a client puts in the model's context on every turn, and
    /// the structured result is returned either way.
    pub output_schemas: bool,
    /// Facts about the world for the model (composition, working directory,
    /// user, OS, language servers, where durable commands are kept), one per
    /// line, appended to the instructions.
    pub about_world: Vec<String>,
}

/// A tool group [`McpOptions::groups`] names that the catalog does not have.
#[derive(Debug, thiserror::Error)]
#[error("unknown tool group {group:?}; the groups are: {}", groups().join(", "))]
pub struct UnknownGroup {
    pub group: String,
}

/// The catalog's tool groups, in listing order.
pub fn groups() -> Vec<&'static str> {
    groups_of(&catalog::entries())
}

/// The groups of `entries`, in order of first appearance.
fn groups_of(entries: &[Entry]) -> Vec<&'static str> {
    let mut groups: Vec<&'static str> = Vec::new();
    for entry in entries {
        if !groups.contains(&entry.group) {
            groups.push(entry.group);
        }
    }
    groups
}

/// The tools `entries` list, in order: with their output schemas only when
/// asked for.
fn listing(entries: &[Entry], output_schemas: bool) -> Vec<Tool> {
    entries
        .iter()
        .map(|entry| {
            let mut tool = entry.tool.clone();
            if !output_schemas {
                tool.output_schema = None;
            }
            tool
        })
        .collect()
}

/// Refuses a group the catalog does not have (the first one named).
pub fn check_groups(names: &[String]) -> Result<(), UnknownGroup> {
    check_against(names, &groups())
}

/// Refuses the first of `names` that is not one of `known`.
fn check_against(names: &[String], known: &[&str]) -> Result<(), UnknownGroup> {
    match names.iter().find(|name| !known.contains(&name.as_str())) {
        Some(name) => Err(UnknownGroup {
            group: name.clone(),
        }),
        None => Ok(()),
    }
}

/// The `dsh mcp` server: the catalog's tools (those of the chosen groups)
/// over one world. Cheap to clone: every clone (one per HTTP session)
/// shares the same world and catalog, so a background command started in
/// one session is visible to all.
#[derive(Clone)]
pub struct DshMcp {
    tools: Arc<Tools>,
    catalog: Arc<HashMap<&'static str, Entry>>,
    listed: Arc<Vec<Tool>>,
    instructions: Arc<str>,
}

impl DshMcp {
    /// A server over `tools`, serving what `options` say. An unknown group
    /// is refused (nothing is served).
    pub fn new(tools: Arc<Tools>, options: McpOptions) -> Result<DshMcp, UnknownGroup> {
        // The catalog is built once: its schemas are generated per build.
        let all = catalog::entries();
        check_against(&options.groups, &groups_of(&all))?;
        let entries: Vec<Entry> = all
            .into_iter()
            .filter(|entry| {
                options.groups.is_empty() || options.groups.iter().any(|group| group == entry.group)
            })
            .collect();
        let served = groups_of(&entries);
        let listed = listing(&entries, options.output_schemas);
        let mut instructions =
            format!("{INSTRUCTIONS}\nTool groups served: {}.", served.join(", "));
        for fact in &options.about_world {
            instructions.push('\n');
            instructions.push_str(fact);
        }
        let catalog = entries
            .into_iter()
            .map(|entry| (entry.name, entry))
            .collect();
        Ok(DshMcp {
            tools,
            catalog: Arc::new(catalog),
            listed: Arc::new(listed),
            instructions: instructions.into(),
        })
    }

    /// What `initialize` tells every client: how to use the tools, the
    /// groups served and the world's facts.
    pub fn instructions(&self) -> &str {
        &self.instructions
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
            .with_instructions(self.instructions.to_string())
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        Ok(ListToolsResult::with_all_items(self.listed.to_vec()))
    }

    fn get_tool(&self, name: &str) -> Option<Tool> {
        self.listed.iter().find(|tool| tool.name == name).cloned()
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
        let mut call = std::pin::pin!(call);
        let cancelled = || {
            ErrorData::new(
                ErrorCode::INVALID_REQUEST,
                format!("{}: cancelled by the client", request.name),
                None,
            )
        };
        // The call is polled first: one that ends at once (most do: a read, a listing) never
        // registers with the cancellation token, which polling it first would cost every call
        // (a lock to enqueue a waiter and one to remove it). A call cancelled while it can
        // still end is answered with its result, which rmcp drops for a cancelled request.
        // Without a progress token there is nothing to report: no timer is armed, which
        // would cost a call that waits a registration in the runtime's timer wheel.
        let Some(token) = context.meta.get_progress_token() else {
            return tokio::select! {
                biased;
                result = &mut call => Ok(result.into()),
                () = context.ct.cancelled() => Err(cancelled()),
            };
        };
        // The first tick one period from now: awaiting an immediate first tick costs a turn of
        // the timer wheel (about a millisecond) on every call.
        let mut ticks =
            tokio::time::interval_at(tokio::time::Instant::now() + PROGRESS_EVERY, PROGRESS_EVERY);
        let mut reported = 0u32;
        loop {
            tokio::select! {
                biased;
                result = &mut call => return Ok(result.into()),
                () = context.ct.cancelled() => return Err(cancelled()),
                _ = ticks.tick() => {
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

#[cfg(test)]
mod tests {
    use super::*;

    /// Output schemas are listed only when asked for, and then for every
    /// tool.
    #[test]
    fn output_schemas_are_listed_on_request() {
        let entries = catalog::entries();
        assert!(
            listing(&entries, false)
                .iter()
                .all(|tool| tool.output_schema.is_none())
        );
        assert!(
            listing(&entries, true)
                .iter()
                .all(|tool| tool.output_schema.is_some())
        );
    }

    /// Input schemas are written out whole and compact: no references or
    /// definitions to resolve, no Rust type formats, no null unions.
    #[test]
    fn input_schemas_are_self_contained_and_compact() {
        for entry in catalog::entries() {
            let schema = serde_json::to_string(entry.tool.input_schema.as_ref()).unwrap();
            for needle in [
                "$ref",
                "$defs",
                "$schema",
                "\"format\"",
                "\"null\"",
                "oneOf",
            ] {
                assert!(
                    !schema.contains(needle),
                    "{}: {needle} in {schema}",
                    entry.name
                );
            }
        }
    }

    /// A result's optional field stays nullable in its output schema: a
    /// client validating results (the Python SDK does) accepts the null an
    /// edit's dry run holds for its version.
    #[test]
    fn output_schemas_keep_the_nulls_results_hold() {
        let entries = catalog::entries();
        let edit = entries
            .iter()
            .find(|entry| entry.name == "edit_file")
            .unwrap();
        let output = edit.tool.output_schema.as_ref().expect("an output schema");
        // Each edited file's, defined once beside the schema.
        let version = &output["$defs"]["EditedFile"]["properties"]["version"];
        assert_eq!(
            version["type"],
            serde_json::json!(["string", "null"]),
            "{version}"
        );
    }

    /// Exactly the tools that change nothing are announced read-only; a
    /// tool of several operations is as careful as its most destructive one.
    #[test]
    fn the_queries_and_only_they_are_read_only() {
        let read_only: Vec<&str> = catalog::entries()
            .iter()
            .filter(|entry| {
                entry
                    .tool
                    .annotations
                    .as_ref()
                    .and_then(|a| a.read_only_hint)
                    == Some(true)
            })
            .map(|entry| entry.name)
            .collect();
        assert_eq!(
            read_only,
            [
                "read_file",
                "list_dir",
                "stat",
                "find_files",
                "grep",
                "read_output",
                "list_commands",
                "terminal_read",
                "list_terminals",
                "lsp",
            ]
        );
        for entry in catalog::entries() {
            if ["terminal_control", "code_session", "lsp_rename"].contains(&entry.name) {
                let hints = entry.tool.annotations.as_ref().expect("annotations");
                assert_eq!(hints.destructive_hint, Some(true), "{}", entry.name);
            }
        }
    }

    /// A group the catalog lacks is refused, naming it and the groups there
    /// are.
    #[test]
    fn an_unknown_group_is_refused_naming_the_known_ones() {
        let err = check_groups(&["files".to_owned(), "nope".to_owned()]).unwrap_err();
        let message = err.to_string();
        assert!(message.contains("\"nope\""), "{message}");
        for group in ["files", "commands", "terminals", "lsp"] {
            assert!(message.contains(group), "{message}");
        }
        assert!(check_groups(&["lsp".to_owned(), "files".to_owned()]).is_ok());
    }
}
