//! The functions a program calls: the world's tools (read, write and edit
//! files, list, find, grep, run commands, language-server queries), with
//! the MCP tools' names, arguments and bounds, and host bindings an
//! embedder registers. Each call is dispatched here on the host; the
//! program sees a promise (JavaScript) or a return value or coroutine
//! (Python) of the handler's JSON result.
//!
//! [`declarations`] turns the bindings' JSON schemas into what a model
//! reads to write a program: a TypeScript declaration of `dsh`, or a
//! Python stub of the `dsh` module.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::future::Future;
use std::sync::Arc;

use dsh_plugin_api::{Error, Result};
use futures::future::BoxFuture;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use super::Language;
use crate::commands::Commands;
use crate::files::Files;
use crate::lsp::Lsp;

/// A binding's handler: the call's JSON arguments in, its JSON result out.
pub type BindingHandler = Arc<dyn Fn(Value) -> BoxFuture<'static, Result<Value>> + Send + Sync>;

/// One function a program can call as `dsh.<name>(args)`.
#[derive(Clone)]
pub struct Binding {
    name: String,
    description: String,
    input: Value,
    output: Option<Value>,
    handler: BindingHandler,
}

impl std::fmt::Debug for Binding {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Binding").field("name", &self.name).finish()
    }
}

impl Binding {
    /// A host binding: `name` (a lowercase identifier: `[a-z][a-z0-9_]*`,
    /// at most 64 bytes), what it does for the model, the JSON schema of its
    /// one argument object (its properties are the keyword arguments in
    /// Python), and the handler run on the host for each call. The handler
    /// validates its arguments; its error reaches the program as a
    /// `BindingError` with the error's kind and message.
    pub fn new<F, Fut>(
        name: impl Into<String>,
        description: impl Into<String>,
        input_schema: Value,
        handler: F,
    ) -> Result<Binding>
    where
        F: Fn(Value) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<Value>> + Send + 'static,
    {
        let name = name.into();
        let valid = name.len() <= 64
            && name.starts_with(|c: char| c.is_ascii_lowercase())
            && name
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_');
        if !valid {
            return Err(Error::invalid_input(format!(
                "code binding: {name:?} is not a binding name (a lowercase identifier: [a-z][a-z0-9_]*, at most 64 bytes)"
            ))
            .with_subject(name));
        }
        if !input_schema.is_object() {
            return Err(Error::invalid_input(format!(
                "code binding: the input schema of {name} is not a JSON object"
            ))
            .with_subject(name));
        }
        Ok(Binding {
            name,
            description: description.into(),
            input: input_schema,
            output: None,
            handler: Arc::new(move |args| Box::pin(handler(args))),
        })
    }

    /// The binding's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Runs one call.
    pub(crate) fn call(&self, args: Value) -> BoxFuture<'static, Result<Value>> {
        (self.handler)(args)
    }
}

/// The binding of tool `name`: arguments decoded into the tool's request
/// type (a mistyped or missing one is an error naming the tool, as over
/// MCP), the result encoded as the tool's result type.
fn tool<Req, Res, F, Fut>(name: &str, description: &str, run: F) -> Binding
where
    Req: DeserializeOwned + schemars::JsonSchema + Send + 'static,
    Res: Serialize + schemars::JsonSchema + 'static,
    F: Fn(Req) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<Res>> + Send + 'static,
{
    let owned = name.to_owned();
    let handler: BindingHandler = Arc::new(move |args| {
        let name = owned.clone();
        match serde_json::from_value::<Req>(args) {
            Err(err) => Box::pin(std::future::ready(Err(Error::invalid_input(format!(
                "{name}: invalid arguments: {err}"
            ))))),
            Ok(request) => {
                let running = run(request);
                Box::pin(async move {
                    let result = running.await?;
                    serde_json::to_value(result).map_err(|err| {
                        Error::io(format!("{name}: the result could not be encoded: {err}"))
                    })
                })
            }
        }
    });
    Binding {
        name: name.to_owned(),
        description: description.to_owned(),
        input: serde_json::to_value(schemars::schema_for!(Req)).unwrap_or(Value::Null),
        output: serde_json::to_value(schemars::schema_for!(Res)).ok(),
        handler,
    }
}

/// The binding of tool method `$owner.$method`.
macro_rules! tool_binding {
    ($owner:expr, $method:ident, $description:expr) => {{
        let owner = Arc::clone(&$owner);
        tool(stringify!($method), $description, move |request| {
            let owner = Arc::clone(&owner);
            async move { owner.$method(request).await }
        })
    }};
}

/// The world's tools as bindings.
pub(crate) fn tool_bindings(
    files: &Arc<Files>,
    commands: &Arc<Commands>,
    lsp: &Arc<Lsp>,
) -> Vec<Binding> {
    vec![
        tool_binding!(
            files,
            read_file,
            "Read a text file (a window of lines or bytes) and its version."
        ),
        tool_binding!(
            files,
            write_file,
            "Write a whole file atomically, creating parent directories."
        ),
        tool_binding!(
            files,
            edit_file,
            "Replace old_string with new_string in a file, or make several edits in one file \
             or more (all or none); returns a diff."
        ),
        tool_binding!(
            files,
            list_dir,
            "List a directory, skipping what .gitignore ignores."
        ),
        tool_binding!(files, stat, "Metadata of a path."),
        tool_binding!(
            files,
            find_files,
            "Paths under a directory matching a glob."
        ),
        tool_binding!(
            files,
            grep,
            "Search file contents with a regular expression."
        ),
        tool_binding!(files, move_path, "Move or rename a file or directory."),
        tool_binding!(
            files,
            remove_path,
            "Remove a file or (recursive) a directory tree."
        ),
        tool_binding!(files, make_dir, "Create a directory and its parents."),
        tool_binding!(
            commands,
            run,
            "Run a command (bash string or argv); exit code and bounded output."
        ),
        tool_binding!(
            commands,
            read_output,
            "Read a command's output from a cursor."
        ),
        tool_binding!(
            lsp,
            lsp_diagnostics,
            "Compiler and type-checker problems of a file or directory."
        ),
        tool_binding!(
            lsp,
            lsp_definition,
            "Where the symbol at a position is defined."
        ),
        tool_binding!(
            lsp,
            lsp_references,
            "References to the symbol at a position."
        ),
        tool_binding!(lsp, lsp_hover, "Type and docs of the symbol at a position."),
        tool_binding!(
            lsp,
            lsp_symbols,
            "Symbols of a file, or of the workspace matching a query."
        ),
    ]
}

/// The declaration of `bindings` in `language`: a TypeScript declaration
/// of the `dsh` object for JavaScript and TypeScript, a stub of the `dsh`
/// module for Python.
pub(crate) fn declarations(language: Language, bindings: &BTreeMap<String, Binding>) -> String {
    match language {
        Language::Python => python_stub(bindings),
        Language::Javascript | Language::Typescript => typescript_declaration(bindings),
    }
}

fn typescript_declaration(bindings: &BTreeMap<String, Binding>) -> String {
    let mut out = String::from(
        "/** The world's tools: dsh.<name>(args) sends one call to the host. Arguments are the \
         MCP tools' (snake_case); a failed call rejects with dsh.BindingError (kind, message). */\n\
         declare const dsh: {\n",
    );
    for binding in bindings.values() {
        let input = ts_type(&binding.input, &binding.input, 1);
        let output = binding
            .output
            .as_ref()
            .map_or_else(|| "unknown".to_owned(), |schema| ts_type(schema, schema, 1));
        let _ = writeln!(
            out,
            "  /** {} */\n  {}(args: {input}): Promise<{output}>;",
            binding.description, binding.name
        );
    }
    out.push_str(
        "  BindingError: { new (kind: string, message: string): Error & { kind: string } };\n};\n",
    );
    out
}

/// `schema` as a TypeScript type; `root` holds the `$defs` its `$ref`s name.
fn ts_type(schema: &Value, root: &Value, depth: usize) -> String {
    if let Some(reference) = schema.get("$ref").and_then(Value::as_str) {
        return match resolve(reference, root) {
            Some(target) if depth < 8 => ts_type(target, root, depth + 1),
            _ => "unknown".to_owned(),
        };
    }
    if let Some(values) = schema.get("enum").and_then(Value::as_array) {
        return values
            .iter()
            .map(Value::to_string)
            .collect::<Vec<_>>()
            .join(" | ");
    }
    if let Some(value) = schema.get("const") {
        return value.to_string();
    }
    for key in ["anyOf", "oneOf"] {
        if let Some(options) = schema.get(key).and_then(Value::as_array) {
            return options
                .iter()
                .map(|option| ts_type(option, root, depth + 1))
                .collect::<Vec<_>>()
                .join(" | ");
        }
    }
    match schema.get("type") {
        Some(Value::Array(kinds)) => kinds
            .iter()
            .map(|kind| {
                let mut single = schema.clone();
                single["type"] = kind.clone();
                ts_type(&single, root, depth + 1)
            })
            .collect::<Vec<_>>()
            .join(" | "),
        Some(Value::String(kind)) => match kind.as_str() {
            "string" => "string".to_owned(),
            "integer" | "number" => "number".to_owned(),
            "boolean" => "boolean".to_owned(),
            "null" => "null".to_owned(),
            "array" => {
                let item = schema.get("items").map_or_else(
                    || "unknown".to_owned(),
                    |items| ts_type(items, root, depth + 1),
                );
                format!("Array<{item}>")
            }
            "object" => ts_object(schema, root, depth),
            _ => "unknown".to_owned(),
        },
        _ if schema.get("properties").is_some() => ts_object(schema, root, depth),
        _ => "unknown".to_owned(),
    }
}

fn ts_object(schema: &Value, root: &Value, depth: usize) -> String {
    let Some(properties) = schema.get("properties").and_then(Value::as_object) else {
        return "Record<string, unknown>".to_owned();
    };
    let required = required(schema);
    let fields: Vec<String> = properties
        .iter()
        .map(|(name, property)| {
            let optional = if required.contains(&name.as_str()) {
                ""
            } else {
                "?"
            };
            format!("{name}{optional}: {}", ts_type(property, root, depth + 1))
        })
        .collect();
    format!("{{ {} }}", fields.join("; "))
}

fn required(schema: &Value) -> Vec<&str> {
    schema
        .get("required")
        .and_then(Value::as_array)
        .map(|names| names.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default()
}

fn resolve<'a>(reference: &str, root: &'a Value) -> Option<&'a Value> {
    let name = reference.strip_prefix("#/$defs/")?;
    root.get("$defs")?.get(name)
}

fn python_stub(bindings: &BTreeMap<String, Binding>) -> String {
    let mut out = String::from(
        "\"\"\"The world's tools: dsh.<name>(**args) sends one call to the host and returns its \
         result (a dict); dsh.aio.<name> is the same as a coroutine (asyncio.gather runs calls \
         concurrently). An argument named by a Python keyword takes a trailing _ (from_=...). A \
         failed call raises dsh.BindingError (.kind, message).\"\"\"\n\
         from typing import Any, Literal\n\n\
         class BindingError(Exception):\n    kind: str\n\n",
    );
    let mut aio = String::from("class aio:\n");
    for binding in bindings.values() {
        let schema = &binding.input;
        let required = required(schema);
        let mut parameters = Vec::new();
        if let Some(properties) = schema.get("properties").and_then(Value::as_object) {
            let (mandatory, optional): (Vec<_>, Vec<_>) = properties
                .iter()
                .partition(|(name, _)| required.contains(&name.as_str()));
            for (name, property) in mandatory {
                let name = py_name(name);
                parameters.push(format!("{name}: {}", py_type(property, schema, 1)));
            }
            for (name, property) in optional {
                let name = py_name(name);
                let mut members = py_members(property, schema, 1);
                members.push(PyMember::Plain("None".to_owned()));
                parameters.push(format!("{name}: {} = None", py_union(members)));
            }
        }
        let parameters = if parameters.is_empty() {
            String::new()
        } else {
            format!("*, {}", parameters.join(", "))
        };
        let _ = writeln!(
            out,
            "def {}({parameters}) -> dict[str, Any]:\n    \"\"\"{}\"\"\"\n",
            binding.name, binding.description
        );
        let _ = writeln!(
            aio,
            "    @staticmethod\n    async def {}({parameters}) -> dict[str, Any]: ...",
            binding.name
        );
    }
    out.push_str(&aio);
    out
}

/// Python's keywords: an argument so named is written with a trailing `_`
/// (`from_`), which the runner drops (runner.py, `_arguments`).
const PY_KEYWORDS: [&str; 35] = [
    "False", "None", "True", "and", "as", "assert", "async", "await", "break", "class", "continue",
    "def", "del", "elif", "else", "except", "finally", "for", "from", "global", "if", "import",
    "in", "is", "lambda", "nonlocal", "not", "or", "pass", "raise", "return", "try", "while",
    "with", "yield",
];

/// An argument's name as a Python parameter.
fn py_name(name: &str) -> String {
    if PY_KEYWORDS.contains(&name) {
        format!("{name}_")
    } else {
        name.to_owned()
    }
}

/// `schema` as a Python annotation.
fn py_type(schema: &Value, root: &Value, depth: usize) -> String {
    py_union(py_members(schema, root, depth))
}

/// A member of a Python union annotation.
#[derive(PartialEq)]
enum PyMember {
    /// A literal value (JSON text, also Python's for strings, numbers).
    Literal(String),
    Plain(String),
}

/// Union members as one annotation: each member once, the literal values
/// gathered into one `Literal[…]` where the first of them stood.
fn py_union(members: Vec<PyMember>) -> String {
    let literals: Vec<&str> = members.iter().fold(Vec::new(), |mut seen, member| {
        if let PyMember::Literal(value) = member
            && !seen.contains(&value.as_str())
        {
            seen.push(value);
        }
        seen
    });
    let mut out: Vec<String> = Vec::new();
    for member in &members {
        let text = match member {
            PyMember::Literal(_) => format!("Literal[{}]", literals.join(", ")),
            PyMember::Plain(plain) => plain.clone(),
        };
        if !out.contains(&text) {
            out.push(text);
        }
    }
    out.join(" | ")
}

/// The members of the union `schema` is (one for a plain type).
fn py_members(schema: &Value, root: &Value, depth: usize) -> Vec<PyMember> {
    if let Some(reference) = schema.get("$ref").and_then(Value::as_str) {
        return match resolve(reference, root) {
            Some(target) if depth < 8 => py_members(target, root, depth + 1),
            _ => vec![PyMember::Plain("Any".to_owned())],
        };
    }
    if let Some(value) = schema.get("const") {
        return vec![PyMember::Literal(value.to_string())];
    }
    if let Some(values) = schema.get("enum").and_then(Value::as_array) {
        return values
            .iter()
            .map(|value| PyMember::Literal(value.to_string()))
            .collect();
    }
    for key in ["anyOf", "oneOf"] {
        if let Some(options) = schema.get(key).and_then(Value::as_array) {
            return options
                .iter()
                .flat_map(|option| py_members(option, root, depth + 1))
                .collect();
        }
    }
    let single = |kind: &str| {
        PyMember::Plain(match kind {
            "string" => "str".to_owned(),
            "integer" => "int".to_owned(),
            "number" => "float".to_owned(),
            "boolean" => "bool".to_owned(),
            "null" => "None".to_owned(),
            "array" => {
                let item = schema
                    .get("items")
                    .map_or_else(|| "Any".to_owned(), |items| py_type(items, root, depth + 1));
                format!("list[{item}]")
            }
            _ => "dict[str, Any]".to_owned(),
        })
    };
    match schema.get("type") {
        Some(Value::String(kind)) => vec![single(kind)],
        Some(Value::Array(kinds)) => kinds.iter().filter_map(Value::as_str).map(single).collect(),
        _ => vec![PyMember::Plain("Any".to_owned())],
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn python_annotations_name_each_member_once() {
        let root = json!({"$defs": {"Mode": {"type": "string", "enum": ["lines", "a, b"]}}});
        let annotation = |schema: Value| py_type(&schema, &root, 1);
        assert_eq!(
            annotation(json!({"anyOf": [{"$ref": "#/$defs/Mode"}, {"type": "null"}]})),
            r#"Literal["lines", "a, b"] | None"#
        );
        assert_eq!(
            annotation(
                json!({"oneOf": [{"const": "x"}, {"type": "string"}, {"const": "y"}, {"const": "x"}]})
            ),
            r#"Literal["x", "y"] | str"#
        );
        assert_eq!(
            annotation(json!({"type": ["integer", "null"]})),
            "int | None"
        );
        assert_eq!(
            annotation(json!({"type": "array", "items": {"type": ["string", "null"]}})),
            "list[str | None]"
        );
    }

    #[test]
    fn an_optional_nullable_parameter_says_none_once() {
        let binding = Binding::new(
            "pick",
            "Picks.",
            json!({"type": "object", "properties": {
                "n": {"type": ["integer", "null"]},
                "mode": {"anyOf": [{"const": "a"}, {"const": "b"}, {"type": "null"}]},
                "tag": {"type": "string"}
            }, "required": ["tag"]}),
            |_| async { Ok(Value::Null) },
        )
        .expect("a binding");
        let stub = python_stub(&BTreeMap::from([("pick".to_owned(), binding)]));
        assert!(
            stub.contains(
                r#"def pick(*, tag: str, mode: Literal["a", "b"] | None = None, n: int | None = None)"#
            ),
            "{stub}"
        );
    }
}
