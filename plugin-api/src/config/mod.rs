//! Plugin configuration: validated without creating anything.
//!
//! Every plugin names its config type ([`crate::Plugin::Config`]), which
//! derives `Deserialize` and [`JsonSchema`]. [`validate`] checks an entry's
//! `config` against the schema derived from that type and reports *every*
//! field error at once, each with its path (`config.deny[1]: …`) — serde
//! alone stops at the first — and then deserialises it (serde stays the
//! authority for what the schema cannot say, e.g. a custom
//! `deserialize_with`). The host runs it for every entry through the
//! library before anything is created (`dsh check`), and the export layer
//! runs it again before [`crate::Plugin::create`], so a config `check`
//! accepts is a config `create` accepts.

mod schema;

use std::fmt;

use schemars::JsonSchema;
use serde::de::DeserializeOwned;

use crate::error::Error;

/// One problem in a plugin's config.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldError {
    /// The field's path below `config` (`deny[1]`, `limits.maxBytes`);
    /// empty for the config as a whole.
    pub path: String,
    /// What is wrong (`invalid type: string "rm", expected an array`).
    pub message: String,
}

impl FieldError {
    /// A problem at `path` (below `config`; empty for the whole config).
    pub fn new(path: impl Into<String>, message: impl Into<String>) -> FieldError {
        FieldError {
            path: path.into(),
            message: message.into(),
        }
    }
}

impl fmt::Display for FieldError {
    /// `config.deny[1]: invalid type: …`, or `config: …` for the whole.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.path.is_empty() {
            write!(f, "config: {}", self.message)
        } else if self.path.starts_with('[') {
            write!(f, "config{}: {}", self.path, self.message)
        } else {
            write!(f, "config.{}: {}", self.path, self.message)
        }
    }
}

/// The config of a plugin that takes none: an absent or empty mapping;
/// any field is an error.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct NoConfig {}

/// Validates `config` (`null` reads as an empty mapping) against `C`: every
/// schema violation, each with its path, then `C`'s own deserialisation.
/// On success, the parsed config.
pub fn validate<C: DeserializeOwned + JsonSchema>(
    config: &serde_json::Value,
) -> Result<C, Vec<FieldError>> {
    let value = match config {
        serde_json::Value::Null => serde_json::Value::Object(serde_json::Map::new()),
        other => other.clone(),
    };
    let schema = schemars::SchemaGenerator::default().into_root_schema_for::<C>();
    let errors = schema::check(schema.as_value(), &value);
    if !errors.is_empty() {
        return Err(errors);
    }
    serde_path_to_error::deserialize(value).map_err(|err| {
        let path = err.path().to_string();
        let path = if path == "." { String::new() } else { path };
        vec![FieldError::new(path, err.inner().to_string())]
    })
}

/// The `Config` error of entry `id` listing `errors`, one per line.
pub fn config_error(id: &str, errors: &[FieldError]) -> Error {
    let lines: Vec<String> = errors.iter().map(ToString::to_string).collect();
    Error::config(lines.join("\n")).with_subject(id)
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use serde_json::json;

    use super::*;

    /// What a real plugin's config looks like: optional fields, defaults,
    /// renames, a nested struct, an enum, lists and maps.
    #[derive(Debug, serde::Deserialize, JsonSchema)]
    #[serde(deny_unknown_fields, rename_all = "camelCase")]
    #[allow(
        dead_code,
        reason = "only deserialised: the tests check what parsing accepts"
    )]
    struct Sample {
        #[serde(default)]
        deny: Vec<String>,
        timeout_ms: Option<u64>,
        level: Option<Level>,
        nested: Option<Nested>,
        #[serde(default)]
        labels: BTreeMap<String, String>,
        name: String,
    }

    #[derive(Debug, serde::Deserialize, JsonSchema)]
    #[serde(rename_all = "lowercase")]
    enum Level {
        /// Documented variants make schemars emit `oneOf` of consts.
        Low,
        /// The other one.
        High,
    }

    #[derive(Debug, serde::Deserialize, JsonSchema)]
    #[serde(deny_unknown_fields)]
    #[allow(
        dead_code,
        reason = "only deserialised: the tests check what parsing accepts"
    )]
    struct Nested {
        depth: u8,
    }

    fn errors(config: serde_json::Value) -> Vec<String> {
        validate::<Sample>(&config)
            .expect_err("invalid")
            .iter()
            .map(ToString::to_string)
            .collect()
    }

    #[test]
    fn every_field_error_is_reported_with_its_path() {
        assert_eq!(
            errors(json!({
                "deny": "rm",
                "timeoutMs": -1,
                "level": "medium",
                "nested": {"depth": 300, "extra": true},
                "labels": {"a": 1},
                "bogus": 1,
            })),
            [
                "config.bogus: unknown field (expected deny, labels, level, name, nested, timeoutMs)",
                "config.deny: invalid type: string \"rm\", expected an array",
                "config.labels.a: invalid type: number 1, expected a string",
                "config.level: invalid value: string \"medium\", expected \"low\" or \"high\"",
                "config.nested.depth: invalid value: 300, expected at most 255",
                "config.nested.extra: unknown field (expected depth)",
                "config.timeoutMs: invalid value: -1, expected at least 0",
                "config.name: missing required field",
            ]
        );
        assert_eq!(
            errors(json!({"name": "x", "deny": ["ok", 7]})),
            ["config.deny[1]: invalid type: number 7, expected a string"]
        );
        assert_eq!(
            errors(json!([1])),
            ["config: invalid type: a list, expected a mapping"]
        );
    }

    #[test]
    fn a_valid_config_parses_and_null_is_empty() {
        let sample: Sample =
            validate(&json!({"name": "x", "level": "high", "nested": null})).expect("valid");
        assert!(matches!(sample.level, Some(Level::High)));
        assert!(validate::<NoConfig>(&serde_json::Value::Null).is_ok());
        let err = validate::<NoConfig>(&json!({"x": 1})).expect_err("no fields");
        assert_eq!(
            err[0].to_string(),
            "config.x: unknown field (expected no fields)"
        );
    }

    #[test]
    fn serde_stays_the_authority_for_what_the_schema_cannot_say() {
        #[derive(Debug, serde::Deserialize, JsonSchema)]
        #[allow(dead_code, reason = "only deserialised")]
        struct Custom {
            #[serde(deserialize_with = "even")]
            #[schemars(with = "u32")]
            count: u32,
        }
        fn even<'de, D: serde::Deserializer<'de>>(d: D) -> Result<u32, D::Error> {
            let n = <u32 as serde::Deserialize>::deserialize(d)?;
            if n % 2 == 0 {
                Ok(n)
            } else {
                Err(serde::de::Error::custom("must be even"))
            }
        }
        let err = validate::<Custom>(&json!({"count": 3})).expect_err("odd");
        assert_eq!(err, [FieldError::new("count", "must be even")]);
    }
}
