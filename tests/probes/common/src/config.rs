//! The probes' configuration (the same strict set for every probe).

use std::path::PathBuf;

use schemars::{JsonSchema, Schema, SchemaGenerator, json_schema};
use serde::Deserialize;

/// A probe's `config` subtree. Unknown fields are refused.
#[derive(Debug, Clone, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ProbeConfig {
    /// A file to append one JSON line per lifecycle event to.
    #[serde(default)]
    pub record: Option<PathBuf>,
    /// Make `create` fail (after recording it): `true`/`"error"` returns an
    /// error, `"panic"` panics.
    #[serde(default)]
    pub fail_create: Failure,
    /// Make `dispose` fail the same way (after its delay, after recording).
    #[serde(default)]
    pub fail_dispose: Failure,
    /// How long `dispose` takes, in milliseconds.
    #[serde(default)]
    pub dispose_delay_ms: u64,
    /// How long `create` takes after recording it, in milliseconds (to
    /// cancel or interrupt a create in progress).
    #[serde(default)]
    pub create_delay_ms: u64,
}

/// How a lifecycle step is told to fail.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Failure {
    #[default]
    None,
    Error,
    Panic,
}

impl Failure {
    /// The name recorded in events (`null` for none).
    pub fn name(self) -> Option<&'static str> {
        match self {
            Failure::None => None,
            Failure::Error => Some("error"),
            Failure::Panic => Some("panic"),
        }
    }
}

/// What the hand-written `Deserialize` below accepts.
impl JsonSchema for Failure {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "Failure".into()
    }

    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        json_schema!({ "anyOf": [{ "type": "boolean" }, { "enum": ["error", "panic"] }] })
    }
}

impl<'de> Deserialize<'de> for Failure {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Failure, D::Error> {
        struct Visitor;
        impl serde::de::Visitor<'_> for Visitor {
            type Value = Failure;

            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(r#"true, false, "error" or "panic""#)
            }

            fn visit_bool<E: serde::de::Error>(self, value: bool) -> Result<Failure, E> {
                Ok(if value { Failure::Error } else { Failure::None })
            }

            fn visit_str<E: serde::de::Error>(self, value: &str) -> Result<Failure, E> {
                match value {
                    "error" => Ok(Failure::Error),
                    "panic" => Ok(Failure::Panic),
                    other => Err(E::invalid_value(serde::de::Unexpected::Str(other), &self)),
                }
            }
        }
        deserializer.deserialize_any(Visitor)
    }
}

#[cfg(test)]
mod tests {
    use dsh_plugin_api::{CreateContext, ErrorKind, Injected};

    use super::*;

    fn parse(config: serde_json::Value) -> dsh_plugin_api::Result<ProbeConfig> {
        CreateContext {
            id: "p".into(),
            config,
            services: Injected::default(),
        }
        .config()
    }

    #[test]
    fn accepts_every_documented_field() {
        let config = parse(serde_json::json!({
            "record": "/tmp/r.jsonl",
            "failCreate": true,
            "failDispose": "panic",
            "disposeDelayMs": 25,
            "createDelayMs": 5
        }))
        .expect("valid");
        assert_eq!(config.record, Some(PathBuf::from("/tmp/r.jsonl")));
        assert_eq!(config.fail_create, Failure::Error);
        assert_eq!(config.fail_dispose, Failure::Panic);
        assert_eq!(config.dispose_delay_ms, 25);
        assert_eq!(config.create_delay_ms, 5);
        let empty = parse(serde_json::Value::Null).expect("empty");
        assert_eq!(empty.fail_create, Failure::None);
    }

    #[test]
    fn refuses_unknown_and_mistyped_fields_naming_them() {
        let err = parse(serde_json::json!({"bogus": 1})).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Config);
        assert!(err.message().contains("unknown field `bogus`"), "{err}");
        let err = parse(serde_json::json!({"failCreate": "sometimes"})).unwrap_err();
        assert!(err.message().starts_with("config.failCreate:"), "{err}");
        let err = parse(serde_json::json!({"disposeDelayMs": "x"})).unwrap_err();
        assert!(err.message().starts_with("config.disposeDelayMs:"), "{err}");
    }
}
