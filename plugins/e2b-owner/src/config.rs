//! The owner's configuration (docs/design.md §5.3): the manifest entry's
//! `config`, read strictly, plus the connection settings the environment
//! supplies.
//!
//! | key | default | meaning |
//! |---|---|---|
//! | `apiKey` | `E2B_API_KEY` | control-plane key; only ever an `X-API-KEY` header, never logged, never installed in the sandbox |
//! | `template` | `base` | template of a created sandbox |
//! | `cwd` | `/home/user/workspace` | the world's cwd: absolute POSIX, no `.`/`..` components |
//! | `timeoutMs` | `300000` | the sandbox's lease: while the owner lives, its remaining lifetime is renewed to this every third of it (see [`crate::lease`]); a created sandbox starts with it, a connected one keeps at least it |
//! | `keepAlive` | `true` | renew the lease; `false` makes `timeoutMs` a fixed lifetime the sandbox ends at, owner or not |
//! | `sandboxId` | — | connect to this sandbox instead of creating one |
//! | `onDispose` | `kill` | `kill`, `pause` or `leave` the sandbox when the owner is disposed |
//! | `apiUrl`, `sandboxUrl`, `domain` | `E2B_API_URL`, `E2B_SANDBOX_URL`, `E2B_DOMAIN` | where the control plane and envd are |
//! | `caFile` | — | a PEM file of CA certificates trusted for `https://` besides the system's store (or `SSL_CERT_FILE` / `SSL_CERT_DIR`) and Mozilla's roots: a self-hosted E2B's or a proxy's CA; relative to dsh's working directory |
//! | `metadata` | — | string metadata of a created sandbox (the `dsh-*` keys are reserved) |
//!
//! Every error is a `Config` error naming the field path
//! (`config.cwd: …`) or, for a value taken from the environment, the
//! variable.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use dsh_plugin_api::{CreateContext, Error, FieldError, Result};
use e2b_client::{ConnectionConfig, ConnectionOptions, Secret};
use schemars::JsonSchema;
use serde::Deserialize;

/// The template of a created sandbox when none is configured: E2B's `base`.
pub const DEFAULT_TEMPLATE: &str = dsh_e2b_gateway::BASE_TEMPLATE;
/// The world's cwd when none is configured.
pub const DEFAULT_CWD: &str = "/home/user/workspace";
/// The sandbox lifetime when none is configured: five minutes.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_millis(300_000);
/// The metadata key marking a sandbox as created by dsh.
pub const OWNER_METADATA_KEY: &str = "dsh-owner";
/// Its value: the plugin's first name, kept when the crate became
/// `dsh-e2b-owner` because sandboxes already tagged with it (kept by
/// `onDispose: leave`, found by the soak's sweeps) must still be recognised.
pub const OWNER_METADATA_VALUE: &str = "dsh-e2b";
/// The metadata key naming the manifest entry that created the sandbox.
pub const ENTRY_METADATA_KEY: &str = "dsh-entry";
/// The largest `timeoutMs`: the API counts whole seconds in a signed
/// 32-bit number.
const MAX_TIMEOUT_MS: u64 = i32::MAX as u64 * 1000;

/// What disposal does to the sandbox.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum OnDispose {
    /// Delete it (the default).
    #[default]
    Kill,
    /// Pause it; `sandboxId` reconnects (and resumes) it later.
    Pause,
    /// Leave it running until its timeout.
    Leave,
}

/// The `config` subtree as written (the plugin's `Config`: its schema is
/// what `dsh check` validates against; [`OwnerConfig::from_context`]
/// applies the defaults and the environment).
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct RawConfig {
    #[schemars(with = "Option<String>")]
    api_key: Option<Secret>,
    template: Option<String>,
    cwd: Option<String>,
    timeout_ms: Option<u64>,
    keep_alive: Option<bool>,
    /// `Some(None)` when written without a value (`sandboxId:`, what a
    /// recipe's empty substitution leaves): refused, not taken as absent —
    /// that would create a sandbox where one was meant to be reconnected.
    #[serde(default, deserialize_with = "given")]
    #[schemars(with = "Option<String>")]
    sandbox_id: Option<Option<String>>,
    on_dispose: Option<OnDispose>,
    api_url: Option<String>,
    sandbox_url: Option<String>,
    domain: Option<String>,
    ca_file: Option<String>,
    metadata: Option<BTreeMap<String, String>>,
}

/// A field's value when it is present: `Some(None)` for an explicit null
/// (with `#[serde(default)]`, absent stays `None`).
fn given<'de, D, T>(deserializer: D) -> std::result::Result<Option<Option<T>>, D::Error>
where
    D: serde::Deserializer<'de>,
    T: Deserialize<'de>,
{
    Option::<T>::deserialize(deserializer).map(Some)
}

/// How the sandbox is acquired.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Acquisition {
    /// Create one from `template`, tagged with `metadata` (which already
    /// carries the dsh tags).
    Create {
        template: String,
        metadata: BTreeMap<String, String>,
    },
    /// Connect to `sandbox_id` (resuming it when paused).
    Connect { sandbox_id: String },
}

/// The validated configuration. `Debug` never shows the API key.
#[derive(Debug, Clone)]
pub struct OwnerConfig {
    /// Create or connect.
    pub acquisition: Acquisition,
    /// The world's cwd, normalised (no repeated or trailing `/`).
    pub cwd: String,
    /// The lease: lifetime of a created sandbox, least remaining lifetime
    /// of a connected one, renewed while the owner lives when `keep_alive`.
    pub timeout: Duration,
    /// Whether the owner renews the lease.
    pub keep_alive: bool,
    /// What disposal does.
    pub on_dispose: OnDispose,
    /// Control-plane and envd settings, credentials included.
    pub connection: ConnectionConfig,
}

impl OwnerConfig {
    /// Reads `ctx.config` strictly; `env` supplies the `E2B_*` variables
    /// for whatever the config leaves out.
    ///
    /// # Errors
    /// A `Config` error about the entry `ctx.id`, naming the field path or
    /// the environment variable.
    pub fn from_context(
        ctx: &CreateContext,
        env: impl Fn(&str) -> Option<String>,
    ) -> Result<OwnerConfig> {
        let raw: RawConfig = ctx.config()?;
        let bad = |field: &str, why: String| {
            Error::config(format!("config.{field}: {why}")).with_subject(ctx.id.clone())
        };

        // The checks that need no environment, as `dsh check` runs them.
        if let Some(problem) = field_problems(&raw).into_iter().next() {
            return Err(bad(&problem.path, problem.message));
        }
        let cwd = normalize_cwd(raw.cwd.as_deref().unwrap_or(DEFAULT_CWD))
            .map_err(|why| bad("cwd", why))?;
        let timeout_ms = raw.timeout_ms.unwrap_or(DEFAULT_TIMEOUT.as_millis() as u64);
        let acquisition = match raw.sandbox_id.flatten() {
            Some(sandbox_id) => Acquisition::Connect { sandbox_id },
            None => {
                let mut metadata = raw.metadata.unwrap_or_default();
                metadata.insert(
                    OWNER_METADATA_KEY.to_owned(),
                    OWNER_METADATA_VALUE.to_owned(),
                );
                metadata.insert(ENTRY_METADATA_KEY.to_owned(), ctx.id.clone());
                Acquisition::Create {
                    template: raw.template.unwrap_or_else(|| DEFAULT_TEMPLATE.to_owned()),
                    metadata,
                }
            }
        };

        if env("E2B_DEBUG").is_some_and(|value| value.eq_ignore_ascii_case("true")) {
            return Err(Error::config(
                "E2B_DEBUG=true is not supported by dsh-e2b-owner (debug mode fakes sandbox creation); unset it",
            )
            .with_subject(ctx.id.clone()));
        }
        let mut options = ConnectionOptions::default()
            .with_user_agent(concat!("dsh-e2b-owner/", env!("CARGO_PKG_VERSION")));
        if let Some(key) = &raw.api_key {
            options = options.with_api_key(key.expose());
        }
        if let Some(url) = raw.api_url {
            options = options.with_api_url(url);
        }
        if let Some(url) = raw.sandbox_url {
            options = options.with_sandbox_url(url);
        }
        if let Some(domain) = raw.domain {
            options = options.with_domain(domain);
        }
        if let Some(path) = raw.ca_file {
            let tls = e2b_client::tls_config_with_ca_file(Path::new(&path)).map_err(|err| {
                let why = match &err {
                    e2b_client::Error::Config { message, .. } => message.clone(),
                    other => other.to_string(),
                };
                bad("caFile", why)
            })?;
            options = options.with_tls_config(tls);
        }
        let connection = options
            .resolve_with(&env)
            .map_err(|err| connection_error(&ctx.id, &err))?;
        if !connection.has_api_key() && env("E2B_ACCESS_TOKEN").is_none_or(|t| t.is_empty()) {
            return Err(bad(
                "apiKey",
                "no API key: set apiKey in the manifest or E2B_API_KEY in dsh's environment"
                    .to_owned(),
            ));
        }

        Ok(OwnerConfig {
            acquisition,
            cwd,
            timeout: Duration::from_millis(timeout_ms),
            keep_alive: raw.keep_alive.unwrap_or(true),
            on_dispose: raw.on_dispose.unwrap_or_default(),
            connection,
        })
    }

    /// The owner's private directory: [`RUNTIME_ROOT`], whatever the cwd.
    pub fn runtime_root(&self) -> String {
        RUNTIME_ROOT.to_owned()
    }
}

/// The owner's private directory in the sandbox, one per sandbox: an owner
/// connecting to a sandbox sweeps it of what owners killed a day or more
/// ago left.
pub use dsh_supervisor_client::RUNTIME_ROOT;

/// Every problem of `raw` that needs no environment, each with its field
/// path: the owner's `check_config` (all of them, for `dsh check`) and the
/// first one at creation.
pub fn field_problems(raw: &RawConfig) -> Vec<FieldError> {
    let mut problems = Vec::new();
    if let Err(why) = normalize_cwd(raw.cwd.as_deref().unwrap_or(DEFAULT_CWD)) {
        problems.push(FieldError::new("cwd", why));
    }
    if raw.ca_file.as_deref() == Some("") {
        problems.push(FieldError::new("caFile", "is empty"));
    }
    match raw.timeout_ms {
        Some(0) => problems.push(FieldError::new("timeoutMs", "must be positive")),
        Some(ms) if ms > MAX_TIMEOUT_MS => problems.push(FieldError::new(
            "timeoutMs",
            format!("{ms} is more than {MAX_TIMEOUT_MS} (the API counts whole seconds in 32 bits)"),
        )),
        _ => {}
    }
    match &raw.sandbox_id {
        Some(None) => problems.push(FieldError::new(
            "sandboxId",
            "has no value; give the sandbox's id, or remove it to create a sandbox",
        )),
        Some(Some(sandbox_id)) => {
            for (field, given) in [
                ("template", raw.template.is_some()),
                ("metadata", raw.metadata.is_some()),
            ] {
                if given {
                    problems.push(FieldError::new(
                        field,
                        "applies only to a created sandbox; remove it or sandboxId",
                    ));
                }
            }
            if sandbox_id.is_empty() {
                problems.push(FieldError::new("sandboxId", "is empty"));
            }
        }
        None => {
            if raw.template.as_ref().is_some_and(|t| t.trim().is_empty()) {
                problems.push(FieldError::new("template", "is empty"));
            }
            for reserved in [OWNER_METADATA_KEY, ENTRY_METADATA_KEY] {
                if raw
                    .metadata
                    .as_ref()
                    .is_some_and(|m| m.contains_key(reserved))
                {
                    problems.push(FieldError::new(
                        format!("metadata.{reserved}"),
                        "is reserved for dsh's own tag",
                    ));
                }
            }
        }
    }
    problems
}

/// `cwd` as an absolute POSIX path without `.`, `..`, repeated or
/// trailing `/`; refuses anything else with the reason.
fn normalize_cwd(cwd: &str) -> std::result::Result<String, String> {
    if !cwd.starts_with('/') {
        return Err(format!(
            "must be an absolute POSIX path (starting with '/'), got {cwd:?}"
        ));
    }
    if cwd.contains('\0') {
        return Err(format!("{cwd:?} contains a NUL byte"));
    }
    let components: Vec<&str> = cwd.split('/').filter(|part| !part.is_empty()).collect();
    if components.iter().any(|part| *part == "." || *part == "..") {
        return Err(format!(
            "{cwd:?} has '.' or '..' components; give the directory itself"
        ));
    }
    let normalised = format!("/{}", components.join("/"));
    let private = normalised
        .strip_prefix(RUNTIME_ROOT)
        .is_some_and(|rest| rest.is_empty() || rest.starts_with('/'));
    if private {
        return Err(format!(
            "{cwd:?} is dsh's private directory, not a working directory"
        ));
    }
    Ok(normalised)
}

/// A connection setting error, named by the config field or the variable it
/// came from. The message never contains a secret (e2b-client never quotes
/// one).
fn connection_error(entry: &str, err: &e2b_client::Error) -> Error {
    let e2b_client::Error::Config {
        setting, message, ..
    } = err
    else {
        return Error::config(format!("config: {err}")).with_subject(entry.to_owned());
    };
    let source = match *setting {
        "api_key" => "config.apiKey".to_owned(),
        "api_url" => "config.apiUrl".to_owned(),
        "sandbox_url" => "config.sandboxUrl".to_owned(),
        "domain" => "config.domain".to_owned(),
        variable => {
            let field = match variable {
                "E2B_API_KEY" => "apiKey",
                "E2B_API_URL" => "apiUrl",
                "E2B_SANDBOX_URL" => "sandboxUrl",
                "E2B_DOMAIN" => "domain",
                _ => "",
            };
            if field.is_empty() {
                variable.to_owned()
            } else {
                format!("{variable} (used because config.{field} is not set)")
            }
        }
    };
    Error::config(format!("{source}: {message}")).with_subject(entry.to_owned())
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use dsh_plugin_api::{ErrorKind, Injected};
    use serde_json::json;

    use super::*;

    const KEY: &str = "e2b_0123456789abcdef";

    fn ctx(config: serde_json::Value) -> CreateContext {
        CreateContext {
            id: "owner".into(),
            config,
            services: Injected::default(),
        }
    }

    fn env(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> + use<> {
        let map: HashMap<String, String> = pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        move |name| map.get(name).cloned()
    }

    fn parse(config: serde_json::Value, vars: &[(&str, &str)]) -> Result<OwnerConfig> {
        OwnerConfig::from_context(&ctx(config), env(vars))
    }

    fn config_error(config: serde_json::Value, vars: &[(&str, &str)]) -> Error {
        let err = parse(config, vars).expect_err("a config error");
        assert_eq!(err.kind(), ErrorKind::Config, "{err}");
        assert_eq!(err.subject(), Some("owner"), "{err}");
        err
    }

    #[test]
    fn defaults_follow_the_design() {
        let config = parse(json!(null), &[("E2B_API_KEY", KEY)]).unwrap();
        assert_eq!(config.cwd, DEFAULT_CWD);
        assert_eq!(config.runtime_root(), "/var/lib/dsh-e2b");
        assert_eq!(config.timeout, Duration::from_secs(300));
        assert_eq!(config.on_dispose, OnDispose::Kill);
        let Acquisition::Create { template, metadata } = &config.acquisition else {
            panic!("creates by default");
        };
        assert_eq!(template, "base");
        assert_eq!(metadata[OWNER_METADATA_KEY], OWNER_METADATA_VALUE);
        assert_eq!(metadata[ENTRY_METADATA_KEY], "owner");
        assert!(config.connection.has_api_key());
        assert_eq!(
            config.connection.api_url().to_string(),
            "https://api.e2b.app/"
        );
    }

    #[test]
    fn every_key_is_read() {
        let config = parse(
            json!({
                "apiKey": KEY,
                "template": "python",
                "cwd": "//srv//work/",
                "timeoutMs": 1500,
                "onDispose": "pause",
                "apiUrl": "http://127.0.0.1:3000",
                "sandboxUrl": "http://127.0.0.1:49983",
                "domain": "example.test",
                "metadata": {"team": "a"}
            }),
            &[],
        )
        .unwrap();
        assert_eq!(config.cwd, "/srv/work");
        assert_eq!(config.timeout, Duration::from_millis(1500));
        assert_eq!(config.on_dispose, OnDispose::Pause);
        assert_eq!(
            config.connection.api_url().to_string(),
            "http://127.0.0.1:3000/"
        );
        assert_eq!(
            config.connection.sandbox_url().unwrap().to_string(),
            "http://127.0.0.1:49983/"
        );
        assert_eq!(config.connection.domain(), "example.test");
        let Acquisition::Create { template, metadata } = &config.acquisition else {
            panic!("creates");
        };
        assert_eq!(template, "python");
        assert_eq!(metadata["team"], "a");

        let connect = parse(
            json!({"sandboxId": "abc123", "onDispose": "leave"}),
            &[("E2B_API_KEY", KEY)],
        )
        .unwrap();
        assert_eq!(
            connect.acquisition,
            Acquisition::Connect {
                sandbox_id: "abc123".into()
            }
        );
        assert_eq!(connect.on_dispose, OnDispose::Leave);
    }

    #[test]
    fn a_ca_file_that_cannot_be_read_is_named() {
        let err = config_error(
            json!({"caFile": "/nonexistent/dsh-ca.pem"}),
            &[("E2B_API_KEY", KEY)],
        );
        let text = err.to_string();
        assert!(
            text.contains("config.caFile") && text.contains("/nonexistent/dsh-ca.pem"),
            "{text}"
        );
    }

    #[test]
    fn the_config_wins_over_the_environment() {
        let config = parse(
            json!({"apiUrl": "http://10.0.0.1:1"}),
            &[
                ("E2B_API_KEY", KEY),
                ("E2B_API_URL", "http://10.0.0.2:2"),
                ("E2B_SANDBOX_URL", "http://10.0.0.3:3"),
            ],
        )
        .unwrap();
        assert_eq!(
            config.connection.api_url().to_string(),
            "http://10.0.0.1:1/"
        );
        assert_eq!(
            config.connection.sandbox_url().unwrap().to_string(),
            "http://10.0.0.3:3/"
        );
    }

    #[test]
    fn bad_values_name_their_field() {
        let vars = [("E2B_API_KEY", KEY)];
        let cases = [
            (
                json!({"cwd": "work"}),
                "config.cwd: must be an absolute POSIX path",
            ),
            (
                json!({"cwd": ""}),
                "config.cwd: must be an absolute POSIX path",
            ),
            (
                json!({"cwd": "/a/../b"}),
                "config.cwd: \"/a/../b\" has '.' or '..'",
            ),
            (
                json!({"cwd": "/a/./b"}),
                "config.cwd: \"/a/./b\" has '.' or '..'",
            ),
            (
                json!({"cwd": "/a\u{0}b"}),
                "config.cwd: \"/a\\0b\" contains a NUL",
            ),
            (
                json!({"cwd": "/var/lib/dsh-e2b/"}),
                "config.cwd: \"/var/lib/dsh-e2b/\" is dsh's private",
            ),
            (
                json!({"cwd": "/var/lib//dsh-e2b/x"}),
                "config.cwd: \"/var/lib//dsh-e2b/x\" is dsh's private",
            ),
            (json!({"cwd": 7}), "config.cwd: invalid type: integer `7`"),
            (
                json!({"timeoutMs": 0}),
                "config.timeoutMs: must be positive",
            ),
            (json!({"timeoutMs": -5}), "config.timeoutMs: invalid value"),
            (
                json!({"timeoutMs": 9_999_999_999_999u64}),
                "config.timeoutMs: 9999999999999 is more",
            ),
            (
                json!({"onDispose": "explode"}),
                "config.onDispose: unknown variant `explode`",
            ),
            (json!({"template": " "}), "config.template: is empty"),
            (json!({"sandboxId": ""}), "config.sandboxId: is empty"),
            (json!({"sandboxId": null}), "config.sandboxId: has no value"),
            (
                json!({"sandboxId": "abc", "template": "base"}),
                "config.template: applies only to a created sandbox",
            ),
            (
                json!({"sandboxId": "abc", "metadata": {}}),
                "config.metadata: applies only to a created sandbox",
            ),
            (
                json!({"metadata": {"dsh-owner": "me"}}),
                "config.metadata.dsh-owner: is reserved",
            ),
            (
                json!({"metadata": {"n": 1}}),
                "config.metadata.n: invalid type",
            ),
            (
                json!({"apiUrl": "ftp://x"}),
                "config.apiUrl: \"ftp://x\": scheme \"ftp\"",
            ),
            (
                json!({"sandboxUrl": "not a url"}),
                "config.sandboxUrl: \"not a url\" is not a URL",
            ),
            (
                json!({"domain": ".bad"}),
                "config.domain: \".bad\" is not a host name",
            ),
            (
                json!({"workdir": "/x"}),
                "config.workdir: unknown field `workdir`, expected one of `apiKey`",
            ),
        ];
        for (config, expected) in cases {
            let err = config_error(config.clone(), &vars);
            assert!(
                err.message().starts_with(expected),
                "{config}: expected {expected:?}, got {:?}",
                err.message()
            );
        }
    }

    #[test]
    fn missing_and_malformed_keys_are_config_errors_that_never_quote_the_key() {
        let err = config_error(json!(null), &[]);
        assert!(
            err.message().starts_with("config.apiKey: no API key"),
            "{err}"
        );
        let secret = "sk-live-0000-SECRET";
        let err = config_error(json!({"apiKey": secret}), &[]);
        assert!(
            err.message()
                .starts_with("config.apiKey: malformed API key"),
            "{err}"
        );
        assert!(!err.to_string().contains(secret), "{err}");
        let err = config_error(json!(null), &[("E2B_API_KEY", secret)]);
        assert!(
            err.message()
                .starts_with("E2B_API_KEY (used because config.apiKey is not set): malformed"),
            "{err}"
        );
        assert!(!err.to_string().contains(secret), "{err}");
        let err = config_error(
            json!(null),
            &[("E2B_API_URL", "nope"), ("E2B_API_KEY", KEY)],
        );
        assert!(
            err.message()
                .starts_with("E2B_API_URL (used because config.apiUrl"),
            "{err}"
        );
        let err = config_error(json!(null), &[("E2B_DEBUG", "TRUE"), ("E2B_API_KEY", KEY)]);
        assert!(
            err.message().starts_with("E2B_DEBUG=true is not supported"),
            "{err}"
        );
    }

    #[test]
    fn debug_output_redacts_the_key() {
        let config = parse(json!({"apiKey": KEY}), &[]).unwrap();
        let text = format!("{config:?}");
        assert!(!text.contains(KEY), "{text}");
    }

    #[test]
    fn the_runtime_root_does_not_depend_on_the_cwd() {
        let config = parse(json!({"cwd": "///"}), &[("E2B_API_KEY", KEY)]).unwrap();
        assert_eq!(config.cwd, "/");
        assert_eq!(config.runtime_root(), RUNTIME_ROOT);
        assert_eq!(normalize_cwd("///").unwrap(), "/");
    }
}
