//! A JSON Schema checker for the subset schemars derives from config types
//! (draft 2020-12): `type`, `enum`, `const`, `properties`, `required`,
//! `additionalProperties`, `items`, `anyOf`/`oneOf`/`allOf`, `$ref` into
//! `$defs`, numeric and length bounds. It collects every violation instead
//! of stopping at the first. Keywords outside the subset are ignored:
//! serde's deserialisation, which runs after this check, stays the
//! authority.

use serde_json::{Map, Value};

use super::FieldError;

/// Every violation of `schema` (a root schema, holding `$defs`) by `value`.
pub fn check(schema: &Value, value: &Value) -> Vec<FieldError> {
    let mut errors = Vec::new();
    Checker { root: schema }.check(schema, value, "", &mut errors);
    errors
}

struct Checker<'a> {
    root: &'a Value,
}

impl Checker<'_> {
    fn check(&self, schema: &Value, value: &Value, path: &str, errors: &mut Vec<FieldError>) {
        let schema = match schema {
            Value::Bool(true) => return,
            Value::Bool(false) => {
                errors.push(FieldError::new(path, "no value is allowed here"));
                return;
            }
            Value::Object(schema) => schema,
            _ => return,
        };
        if let Some(target) = schema.get("$ref").and_then(Value::as_str)
            && let Some(resolved) = self.resolve(target)
        {
            self.check(resolved, value, path, errors);
        }
        if let Some(types) = schema.get("type")
            && !type_matches(types, value)
        {
            errors.push(invalid_type(path, value, &describe_types(types)));
            // Nothing below applies to a value of the wrong type.
            return;
        }
        if let Some(allowed) = schema.get("enum").and_then(Value::as_array)
            && !allowed.contains(value)
        {
            errors.push(invalid_value(path, value, &one_of(allowed)));
        }
        if let Some(constant) = schema.get("const")
            && constant != value
        {
            errors.push(invalid_value(path, value, &constant.to_string()));
        }
        for (keyword, all) in [("anyOf", false), ("oneOf", false), ("allOf", true)] {
            if let Some(branches) = schema.get(keyword).and_then(Value::as_array) {
                if all {
                    for branch in branches {
                        self.check(branch, value, path, errors);
                    }
                } else {
                    self.check_alternatives(branches, value, path, errors);
                }
            }
        }
        self.check_bounds(schema, value, path, errors);
        match value {
            Value::Object(fields) => self.check_object(schema, fields, path, errors),
            Value::Array(items) => {
                if let Some(item_schema) = schema.get("items") {
                    for (index, item) in items.iter().enumerate() {
                        self.check(item_schema, item, &format!("{path}[{index}]"), errors);
                    }
                }
            }
            _ => {}
        }
    }

    /// `anyOf`/`oneOf`: fine if a branch accepts the value. Otherwise the
    /// errors of the one branch the value matches in shape (its errors all
    /// lie deeper — `Option<Struct>` given a mapping with a bad field);
    /// else one error listing what was expected.
    fn check_alternatives(
        &self,
        branches: &[Value],
        value: &Value,
        path: &str,
        errors: &mut Vec<FieldError>,
    ) {
        let outcomes: Vec<Vec<FieldError>> = branches
            .iter()
            .map(|branch| {
                let mut found = Vec::new();
                self.check(branch, value, path, &mut found);
                found
            })
            .collect();
        if outcomes.iter().any(Vec::is_empty) {
            return;
        }
        let shaped: Vec<&Vec<FieldError>> = outcomes
            .iter()
            .filter(|found| found.iter().all(|error| error.path != path))
            .collect();
        if let [only] = shaped.as_slice() {
            errors.extend(only.iter().cloned());
            return;
        }
        let mut expected = Vec::new();
        for branch in branches {
            self.expectations(branch, &mut expected);
        }
        // `Option<T>`'s null branch says nothing useful about a value given.
        if expected.len() > 1 {
            expected.retain(|item| item != "nothing");
        }
        errors.push(invalid_value(path, value, &join_or(&expected)));
    }

    /// How a branch reads in "expected …", one item per alternative.
    fn expectations(&self, branch: &Value, out: &mut Vec<String>) {
        let Some(schema) = branch.as_object() else {
            out.push("anything".to_owned());
            return;
        };
        if let Some(target) = schema.get("$ref").and_then(Value::as_str)
            && let Some(resolved) = self.resolve(target)
        {
            return self.expectations(resolved, out);
        }
        if let Some(constant) = schema.get("const") {
            out.push(constant.to_string());
        } else if let Some(allowed) = schema.get("enum").and_then(Value::as_array) {
            out.extend(allowed.iter().map(ToString::to_string));
        } else if let Some(branches) = schema
            .get("anyOf")
            .or_else(|| schema.get("oneOf"))
            .and_then(Value::as_array)
        {
            for branch in branches {
                self.expectations(branch, out);
            }
        } else if let Some(types) = schema.get("type") {
            out.push(describe_types(types));
        } else {
            out.push("another value".to_owned());
        }
    }

    fn check_object(
        &self,
        schema: &Map<String, Value>,
        fields: &Map<String, Value>,
        path: &str,
        errors: &mut Vec<FieldError>,
    ) {
        let properties = schema.get("properties").and_then(Value::as_object);
        let additional = schema.get("additionalProperties");
        for (key, field) in fields {
            let field_path = if path.is_empty() {
                key.clone()
            } else {
                format!("{path}.{key}")
            };
            match (properties.and_then(|known| known.get(key)), additional) {
                (Some(field_schema), _) => self.check(field_schema, field, &field_path, errors),
                (None, Some(Value::Bool(false))) => {
                    let known: Vec<&str> = properties
                        .map(|known| known.keys().map(String::as_str).collect())
                        .unwrap_or_default();
                    errors.push(FieldError::new(
                        field_path,
                        if known.is_empty() {
                            "unknown field (expected no fields)".to_owned()
                        } else {
                            format!("unknown field (expected {})", known.join(", "))
                        },
                    ));
                }
                (None, Some(extra)) => self.check(extra, field, &field_path, errors),
                (None, None) => {}
            }
        }
        for required in schema
            .get("required")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
        {
            if !fields.contains_key(required) {
                let field_path = if path.is_empty() {
                    required.to_owned()
                } else {
                    format!("{path}.{required}")
                };
                errors.push(FieldError::new(field_path, "missing required field"));
            }
        }
    }

    fn check_bounds(
        &self,
        schema: &Map<String, Value>,
        value: &Value,
        path: &str,
        errors: &mut Vec<FieldError>,
    ) {
        let bound = |keyword: &str| schema.get(keyword).and_then(Value::as_f64);
        if let Some(number) = value.as_f64() {
            if let Some(min) = bound("minimum")
                && number < min
            {
                errors.push(invalid_value(path, value, &format!("at least {min}")));
            }
            if let Some(max) = bound("maximum")
                && number > max
            {
                errors.push(invalid_value(path, value, &format!("at most {max}")));
            }
            if let Some(min) = bound("exclusiveMinimum")
                && number <= min
            {
                errors.push(invalid_value(path, value, &format!("more than {min}")));
            }
            if let Some(max) = bound("exclusiveMaximum")
                && number >= max
            {
                errors.push(invalid_value(path, value, &format!("less than {max}")));
            }
        }
        let length = match value {
            Value::String(text) => Some((text.chars().count(), "characters", "Length")),
            Value::Array(items) => Some((items.len(), "items", "Items")),
            _ => None,
        };
        if let Some((length, unit, suffix)) = length {
            if let Some(min) = bound(&format!("min{suffix}"))
                && (length as f64) < min
            {
                errors.push(FieldError::new(
                    path,
                    format!("has {length} {unit}, expected at least {min}"),
                ));
            }
            if let Some(max) = bound(&format!("max{suffix}"))
                && (length as f64) > max
            {
                errors.push(FieldError::new(
                    path,
                    format!("has {length} {unit}, expected at most {max}"),
                ));
            }
        }
    }

    /// `#/$defs/Name` (or the older `#/definitions/Name`) in the root.
    fn resolve(&self, target: &str) -> Option<&Value> {
        let pointer = target.strip_prefix('#')?;
        self.root.pointer(pointer)
    }
}

fn type_matches(types: &Value, value: &Value) -> bool {
    let matches = |name: &str| match name {
        "null" => value.is_null(),
        "boolean" => value.is_boolean(),
        "object" => value.is_object(),
        "array" => value.is_array(),
        "string" => value.is_string(),
        "number" => value.is_number(),
        "integer" => value.is_i64() || value.is_u64(),
        _ => true,
    };
    match types {
        Value::String(name) => matches(name),
        Value::Array(names) => names.iter().filter_map(Value::as_str).any(matches),
        _ => true,
    }
}

fn describe_types(types: &Value) -> String {
    fn name(name: &str) -> &str {
        match name {
            "null" => "nothing",
            "boolean" => "true or false",
            "object" => "a mapping",
            "array" => "an array",
            "string" => "a string",
            "number" => "a number",
            "integer" => "an integer",
            other => other,
        }
    }
    match types {
        Value::String(single) => name(single).to_owned(),
        Value::Array(names) => {
            let names: Vec<String> = names
                .iter()
                .filter_map(Value::as_str)
                .filter(|kind| *kind != "null")
                .map(|kind| name(kind).to_owned())
                .collect();
            join_or(&names)
        }
        _ => "another type".to_owned(),
    }
}

/// How a value reads in messages: serde's wording for the scalars.
fn describe_value(value: &Value) -> String {
    match value {
        Value::Null => "nothing".to_owned(),
        Value::Bool(flag) => format!("boolean {flag}"),
        Value::Number(number) => format!("number {number}"),
        Value::String(text) => format!("string {text:?}"),
        Value::Array(_) => "a list".to_owned(),
        Value::Object(_) => "a mapping".to_owned(),
    }
}

fn invalid_type(path: &str, value: &Value, expected: &str) -> FieldError {
    FieldError::new(
        path,
        format!(
            "invalid type: {}, expected {expected}",
            describe_value(value)
        ),
    )
}

fn invalid_value(path: &str, value: &Value, expected: &str) -> FieldError {
    let shown = match value {
        Value::Number(number) => number.to_string(),
        other => describe_value(other),
    };
    FieldError::new(path, format!("invalid value: {shown}, expected {expected}"))
}

fn one_of(allowed: &[Value]) -> String {
    let shown: Vec<String> = allowed.iter().map(ToString::to_string).collect();
    join_or(&shown)
}

fn join_or(items: &[String]) -> String {
    match items {
        [] => "nothing".to_owned(),
        [one] => one.clone(),
        [init @ .., last] => format!("{} or {last}", init.join(", ")),
    }
}
