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
/// wrong, and nothing runs. `fields` are the texts the model reads for the
/// request's fields ([`document`]).
pub(crate) fn entry<Req, Res, Run, Fut>(
    group: &'static str,
    name: &'static str,
    description: &'static str,
    effect: Effect,
    fields: Fields,
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
    let input = Arc::make_mut(&mut tool.input_schema);
    inline_definitions(input);
    compact(input, Nulls::Dropped);
    document(name, input, fields);
    if let Some(output) = tool.output_schema.as_mut() {
        compact(Arc::make_mut(output), Nulls::Kept);
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

/// What the model reads about a tool's fields: `(field, text)` pairs. A
/// text replaces the one the request type's docs give (those state the whole
/// contract for Rust callers; the model gets the part it acts on, since it
/// reads every listed character on every turn); an empty text leaves the
/// field undescribed, for a name that says it all (`id`, `path`).
pub(crate) type Fields = &'static [(&'static str, &'static str)];

/// Sets the descriptions of `schema`'s properties from `fields`, and drops
/// those of what a property holds (an array's items' fields): the
/// property's text describes them, and their names say the rest.
///
/// # Panics
///
/// When `fields` names a property the schema does not have: a catalog
/// mistake, made when the catalog is built, so every test that lists or
/// calls a tool shows it.
fn document(tool: &str, schema: &mut JsonObject, fields: Fields) {
    let mut properties = schema.get_mut("properties").and_then(Value::as_object_mut);
    for (field, text) in fields {
        let property = properties
            .as_mut()
            .and_then(|properties| properties.get_mut(*field))
            .and_then(Value::as_object_mut)
            .unwrap_or_else(|| panic!("catalog: tool {tool} has no field {field}"));
        if text.is_empty() {
            property.remove("description");
        } else {
            property.insert("description".to_owned(), Value::from(*text));
        }
    }
    for property in properties
        .into_iter()
        .flat_map(|properties| properties.values_mut())
    {
        if let Value::Object(property) = property {
            for (key, inner) in property.iter_mut() {
                if key != "description" {
                    undocument(inner);
                }
            }
        }
    }
}

/// `value` without any `description`, however deep.
fn undocument(value: &mut Value) {
    match value {
        Value::Object(object) => {
            object.remove("description");
            object.values_mut().for_each(undocument);
        }
        Value::Array(items) => items.iter_mut().for_each(undocument),
        _ => {}
    }
}

/// The entry of tool `name` that serves several operations, each one
/// call of the `ops` entries: the `op` argument picks it, the other
/// arguments are that entry's, decoded as its own (so an argument another
/// operation takes is refused, naming it). The listed input schema is the
/// union of the operations' fields and `op` (required, an enum of their
/// names), with `fields`' texts; the output schema, any of theirs.
///
/// # Panics
///
/// When two operations type a field differently, or `fields` names a field
/// none has: catalog mistakes (see [`document`]).
pub(crate) fn operations(
    group: &'static str,
    name: &'static str,
    description: &'static str,
    effect: Effect,
    fields: Fields,
    ops: Vec<(&'static str, Entry)>,
) -> Entry {
    let names: Vec<&'static str> = ops.iter().map(|(op, _)| *op).collect();
    let mut properties = JsonObject::new();
    properties.insert(
        "op".to_owned(),
        serde_json::json!({"type": "string", "enum": names}),
    );
    let mut required: Option<Vec<Value>> = None;
    let mut outputs = Vec::new();
    let mut definitions = JsonObject::new();
    for (op, entry) in &ops {
        let input = &entry.tool.input_schema;
        for (field, schema) in input
            .get("properties")
            .and_then(Value::as_object)
            .into_iter()
            .flatten()
        {
            let mut schema = schema.clone();
            if let Value::Object(schema) = &mut schema {
                schema.remove("description");
            }
            match properties.get(field) {
                Some(known) if *known != schema => {
                    panic!("catalog: {name} {op}: field {field} is typed {schema}, not {known}")
                }
                Some(_) => {}
                None => {
                    properties.insert(field.clone(), schema);
                }
            }
        }
        // A field every operation requires is required of the tool.
        let theirs: Vec<Value> = input
            .get("required")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        required = Some(match required {
            None => theirs,
            Some(ours) => ours.into_iter().filter(|f| theirs.contains(f)).collect(),
        });
        if let Some(output) = &entry.tool.output_schema {
            let mut output = output.as_ref().clone();
            if let Some(Value::Object(defs)) = output.remove("$defs") {
                for (def, schema) in defs {
                    match definitions.get(&def) {
                        Some(known) if *known != schema => {
                            panic!(
                                "catalog: {name} {op}: output type {def} differs from another operation's"
                            )
                        }
                        _ => {
                            definitions.insert(def, schema);
                        }
                    }
                }
            }
            outputs.push(Value::Object(output));
        }
    }
    let mut required = required.unwrap_or_default();
    required.insert(0, Value::from("op"));
    let mut input = JsonObject::new();
    input.insert("type".to_owned(), Value::from("object"));
    input.insert("properties".to_owned(), Value::Object(properties));
    input.insert("required".to_owned(), Value::Array(required));
    document(name, &mut input, fields);
    let mut output = JsonObject::new();
    output.insert("type".to_owned(), Value::from("object"));
    output.insert("anyOf".to_owned(), Value::Array(outputs));
    if !definitions.is_empty() {
        output.insert("$defs".to_owned(), Value::Object(definitions));
    }
    let tool = Tool::new(name, description, Arc::new(input))
        .with_raw_output_schema(Arc::new(output))
        .with_annotations(effect.annotations());
    let calls: Vec<(&'static str, Call)> = ops
        .into_iter()
        .map(|(op, entry)| (op, entry.call))
        .collect();
    let call: Call = Box::new(move |tools, mut arguments| {
        let op = arguments.remove("op");
        let chosen = op
            .as_ref()
            .and_then(Value::as_str)
            .and_then(|op| calls.iter().find(|(name, _)| *name == op));
        match chosen {
            Some((_, call)) => call(tools, arguments),
            None => {
                let given = op.map_or_else(|| "missing".to_owned(), |op| op.to_string());
                let message = format!(
                    "{name}: invalid arguments: op is {given}; it is one of {}",
                    names.join(", ")
                );
                let kind = dsh_plugin_api::ErrorKind::InvalidInput.as_str();
                Box::pin(std::future::ready(failure(kind, &message)))
            }
        }
    });
    Entry {
        group,
        name,
        tool,
        call,
    }
}

/// Puts each `$ref` to the schema's own `$defs` in place (the referring
/// field's description winning over the definition's) and drops `$defs`:
/// a request's definitions are its enums, used once or twice, which cost
/// more characters behind a reference than written out.
///
/// # Panics
///
/// On a recursive definition, which a request type does not have.
fn inline_definitions(schema: &mut JsonObject) {
    let Some(Value::Object(definitions)) = schema.remove("$defs") else {
        return;
    };
    fn resolve(schema: &mut JsonObject, definitions: &JsonObject, depth: usize) {
        assert!(depth < 16, "catalog: a recursive input schema");
        if let Some(Value::String(reference)) = schema.get("$ref")
            && let Some(Value::Object(definition)) = reference
                .strip_prefix("#/$defs/")
                .and_then(|name| definitions.get(name))
        {
            let definition = definition.clone();
            schema.remove("$ref");
            for (key, value) in definition {
                schema.entry(key).or_insert(value);
            }
        }
        for value in schema.values_mut() {
            match value {
                Value::Object(inner) => resolve(inner, definitions, depth + 1),
                Value::Array(items) => {
                    for item in items.iter_mut() {
                        if let Value::Object(inner) = item {
                            resolve(inner, definitions, depth + 1);
                        }
                    }
                }
                _ => {}
            }
        }
    }
    resolve(schema, &definitions, 0);
}

/// Whether [`compact`] drops `null` from an optional field's type.
#[derive(Clone, Copy, PartialEq)]
enum Nulls {
    /// An argument's: its absence says it, and null is still accepted when
    /// decoding.
    Dropped,
    /// A result's: a result holds the null it is typed with, and clients
    /// that validate results against the schema must accept it.
    Kept,
}

/// Shortens a schemars schema to what a client needs, since every listed
/// character is read by the model on every turn: no `$schema` (the draft is
/// MCP's default), no `default: null` (an optional field's absence says it),
/// an optional argument typed `T` rather than `[T, "null"]` or `anyOf` `T`
/// and null (it is not in `required`; null is still accepted when decoding), an
/// enum of strings as `enum` and a union of plain types as a list of types
/// (its field's text says what the values mean),
/// and no `format` or type bounds on integers (`uint64`, `int32` … are
/// schemars' names for Rust's types, not JSON Schema formats, and validators
/// warn about them; `minimum: 0` of an unsigned type and the maximum of a
/// 16-bit one say nothing the decoding does not enforce and the field's text
/// does not say better). An argument schema drops `additionalProperties:
/// false` too: the properties listed are what a model sends, and an unknown
/// argument is still refused when decoding, by name (`unknown field
/// \`x\`, expected one of …`) — 28 characters per tool and per object
/// nested in one, on every turn, for what the first wrong call says.
fn compact(schema: &mut JsonObject, nulls: Nulls) {
    // Inner schemas first: a union is judged by its compacted members.
    for value in schema.values_mut() {
        match value {
            Value::Object(inner) => compact(inner, nulls),
            Value::Array(items) => {
                for item in items.iter_mut() {
                    if let Value::Object(inner) = item {
                        compact(inner, nulls);
                    }
                }
            }
            _ => {}
        }
    }
    schema.remove("$schema");
    if nulls == Nulls::Dropped && schema.get("additionalProperties") == Some(&Value::Bool(false)) {
        schema.remove("additionalProperties");
    }
    if schema.get("default") == Some(&Value::Null) {
        schema.remove("default");
    }
    if nulls == Nulls::Dropped
        && let Some(Value::Array(kinds)) = schema.get("type")
        && kinds.len() == 2
        && let Some(position) = kinds.iter().position(|kind| kind == "null")
    {
        let kind = kinds[1 - position].clone();
        schema.insert("type".to_owned(), kind);
    }
    if nulls == Nulls::Dropped
        && let Some(Value::Array(options)) = schema.get("anyOf")
        && options.len() == 2
        && let Some(position) = options
            .iter()
            .position(|option| *option == serde_json::json!({"type": "null"}))
        && let Value::Object(option) = options[1 - position].clone()
    {
        schema.remove("anyOf");
        for (key, value) in option {
            schema.entry(key).or_insert(value);
        }
    }
    if !schema.contains_key("type")
        && let Some(Value::Array(options)) = schema.get("anyOf")
        && let Some(kinds) = options
            .iter()
            .map(plain_type)
            .collect::<Option<Vec<Value>>>()
    {
        schema.remove("anyOf");
        schema.insert("type".to_owned(), Value::Array(kinds));
    }
    if let Some(Value::Array(options)) = schema.get("oneOf")
        && let Some(values) = options
            .iter()
            .map(|option| {
                option
                    .get("const")
                    .filter(|value| value.is_string())
                    .cloned()
            })
            .collect::<Option<Vec<Value>>>()
    {
        schema.remove("oneOf");
        schema.insert("type".to_owned(), Value::from("string"));
        schema.insert("enum".to_owned(), Value::Array(values));
    }
    if schema.get("type").is_some_and(|kind| kind == "integer") {
        schema.remove("format");
        if schema.get("minimum") == Some(&Value::from(0)) {
            schema.remove("minimum");
        }
        if schema.get("maximum") == Some(&Value::from(u16::MAX)) {
            schema.remove("maximum");
        }
    }
}

/// The type of a schema that says nothing but its type (and what it is, in
/// words): one of a union its field's text describes.
fn plain_type(schema: &Value) -> Option<Value> {
    let schema = schema.as_object()?;
    let kind = schema.get("type").filter(|kind| kind.is_string())?;
    schema
        .keys()
        .all(|key| key == "type" || key == "description")
        .then(|| kind.clone())
}

/// A tool's outcome: its text for the model, its value as the structured
/// result.
fn success<Res: Outcome>(outcome: &Res) -> CallToolResult {
    match serde_json::to_value(outcome) {
        Ok(structured) => {
            let mut content = vec![ContentBlock::text(outcome.text())];
            if let Some((mime, data)) = outcome.image() {
                content.push(ContentBlock::image(data, mime));
            }
            let mut result = CallToolResult::success(content);
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
