//! One tool of the catalog: what a client lists (name, description, input
//! and output schemas, hints) and how a call runs — arguments decoded into
//! the tool's request type, the `dsh-consumers` method awaited, its outcome or
//! error rendered as an MCP tool result.

use std::future::Future;
use std::sync::Arc;

use dsh_consumers::{Outcome, Tools};
use futures::future::BoxFuture;
use rmcp::model::{CallToolResult, ContentBlock, JsonObject, Tool, ToolAnnotations};
use serde::de::DeserializeOwned;
use serde_json::Value;

/// How a tool treats the world, as MCP's tool annotations say it.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Effect {
    /// Changes nothing.
    ReadOnly,
    /// Adds or replaces without losing anything the caller did not name
    /// (repeating the call is harmless).
    Idempotent,
    /// Adds or changes state (starting a command, typing into a terminal).
    Additive,
    /// May destroy data or processes (remove, overwrite, kill).
    Destructive,
}

impl Effect {
    fn annotations(self) -> ToolAnnotations {
        let annotations = ToolAnnotations::new().open_world(false);
        match self {
            Effect::ReadOnly => annotations.read_only(true),
            Effect::Idempotent => annotations
                .read_only(false)
                .destructive(false)
                .idempotent(true),
            Effect::Additive => annotations
                .read_only(false)
                .destructive(false)
                .idempotent(false),
            Effect::Destructive => annotations
                .read_only(false)
                .destructive(true)
                .idempotent(false),
        }
    }
}

/// Runs one call of a tool with its raw arguments.
type Call = Box<dyn Fn(Arc<Tools>, JsonObject) -> BoxFuture<'static, CallToolResult> + Send + Sync>;

/// A tool as listed and as called.
pub(crate) struct Entry {
    /// The tool group it belongs to (`files`, `commands`, …).
    pub(crate) group: &'static str,
    pub(crate) name: &'static str,
    pub(crate) tool: Tool,
    pub(crate) call: Call,
}

/// The entry of tool `name`: `run` is the `dsh-consumers` method, taking the
/// decoded request. Arguments that do not decode into `Req` (missing,
/// mistyped, unknown fields) are a tool error naming the tool and what was
/// wrong, and nothing runs.
pub(crate) fn entry<Req, Res, Run, Fut>(
    group: &'static str,
    name: &'static str,
    description: &'static str,
    effect: Effect,
    run: Run,
) -> Entry
where
    Req: DeserializeOwned + schemars::JsonSchema + Send + 'static,
    Res: Outcome + Send + 'static,
    Run: Fn(Arc<Tools>, Req) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = dsh_plugin_api::Result<Res>> + Send + 'static,
{
    let mut tool = Tool::new(name, description, Arc::new(JsonObject::new()))
        .with_input_schema::<Req>()
        .with_output_schema::<Res>()
        .with_annotations(effect.annotations());
    compact(Arc::make_mut(&mut tool.input_schema));
    if let Some(output) = tool.output_schema.as_mut() {
        compact(Arc::make_mut(output));
    }
    let call: Call = Box::new(move |tools, arguments| {
        let request = match serde_json::from_value::<Req>(Value::Object(arguments)) {
            Ok(request) => request,
            Err(err) => {
                let message = format!("{name}: invalid arguments: {err}");
                let kind = dsh_plugin_api::ErrorKind::InvalidInput.as_str();
                return Box::pin(std::future::ready(failure(kind, &message)));
            }
        };
        let running = run(tools, request);
        Box::pin(async move {
            match running.await {
                Ok(outcome) => success(&outcome),
                Err(err) => failure(err.kind().as_str(), &err.to_string()),
            }
        })
    });
    Entry {
        group,
        name,
        tool,
        call,
    }
}

/// Shortens a schemars schema to what a client needs, since every listed
/// character is read by the model on every turn: no `$schema` (the draft is
/// MCP's default), no `default: null` (an optional field's absence says it),
/// an optional field typed `T` rather than `[T, "null"]` (it is not in
/// `required`; null is still accepted when decoding), and no `format` on
/// integers (`uint64`, `int32` … are schemars' names for Rust's types, not
/// JSON Schema formats, and validators warn about them; the range stays in
/// `minimum`).
fn compact(schema: &mut JsonObject) {
    schema.remove("$schema");
    if schema.get("default") == Some(&Value::Null) {
        schema.remove("default");
    }
    if let Some(Value::Array(kinds)) = schema.get("type")
        && kinds.len() == 2
        && let Some(position) = kinds.iter().position(|kind| kind == "null")
    {
        let kind = kinds[1 - position].clone();
        schema.insert("type".to_owned(), kind);
    }
    if schema.get("type").is_some_and(|kind| kind == "integer") {
        schema.remove("format");
    }
    for value in schema.values_mut() {
        match value {
            Value::Object(inner) => compact(inner),
            Value::Array(items) => {
                for item in items.iter_mut() {
                    if let Value::Object(inner) = item {
                        compact(inner);
                    }
                }
            }
            _ => {}
        }
    }
}

/// A tool's outcome: its text for the model, its value as the structured
/// result.
fn success<Res: Outcome>(outcome: &Res) -> CallToolResult {
    match serde_json::to_value(outcome) {
        Ok(structured) => {
            let mut result = CallToolResult::success(vec![ContentBlock::text(outcome.text())]);
            result.structured_content = Some(structured);
            result
        }
        Err(err) => failure(
            dsh_plugin_api::ErrorKind::Io.as_str(),
            &format!("the result could not be encoded: {err}"),
        ),
    }
}

/// A tool error: the kind and the message (operation, subject, why) as the
/// text a model reads. No structured content: clients check it against the
/// tool's output schema, which describes success.
pub(crate) fn failure(kind: &str, message: &str) -> CallToolResult {
    CallToolResult::error(vec![ContentBlock::text(format!("{kind}: {message}"))])
}
