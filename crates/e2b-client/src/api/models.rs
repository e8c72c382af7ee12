//! The control plane's JSON bodies (docs/e2b-protocol.md §2.3), field names
//! exact.
//!
//! Requests serialise only what is set. Responses require the fields the
//! API must send (a missing one is an error naming it) and ignore unknown
//! fields, so newer servers keep working.

use std::collections::BTreeMap;
use std::fmt;
use std::time::Duration;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::error::{Context, Error, Result};
use crate::secret::Secret;

/// Sandbox lifetime the SDKs ask for when none is given (the v1 create's own
/// default is only 15 s; the v2 create's is 300 s).
pub const DEFAULT_SANDBOX_TIMEOUT: Duration = Duration::from_secs(300);

/// A timeout on the wire: whole seconds, rounded up as the SDKs do
/// (`ceil(ms / 1000)`), at most `i32::MAX`.
pub(crate) fn timeout_seconds(context: &Context, timeout: Duration) -> Result<u32> {
    let seconds = timeout.as_millis().div_ceil(1000);
    u32::try_from(seconds)
        .ok()
        .filter(|s| i32::try_from(*s).is_ok())
        .ok_or_else(|| {
            Error::invalid_argument(
                context.clone(),
                format!("timeout of {seconds} s exceeds the API's 32-bit limit"),
            )
        })
}

fn serialize_seconds<S: Serializer>(value: &Option<Duration>, s: S) -> Result<S::Ok, S::Error> {
    match value {
        Some(d) => s.serialize_u64(u64::try_from(d.as_millis().div_ceil(1000)).unwrap_or(u64::MAX)),
        None => s.serialize_none(),
    }
}

/// Body of `POST /sandboxes`. Build with [`NewSandbox::new`] and the
/// setters; defaults follow the SDKs: 300 s timeout, secure (envd access
/// token), internet access allowed, no auto-pause.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct NewSandbox {
    #[serde(rename = "templateID")]
    template_id: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    metadata: Option<BTreeMap<String, String>>,
    #[serde(rename = "envVars", skip_serializing_if = "Option::is_none")]
    env_vars: Option<BTreeMap<String, String>>,
    #[serde(
        serialize_with = "serialize_seconds",
        skip_serializing_if = "Option::is_none"
    )]
    timeout: Option<Duration>,
    #[serde(skip_serializing_if = "Option::is_none")]
    secure: Option<bool>,
    #[serde(
        rename = "allow_internet_access",
        skip_serializing_if = "Option::is_none"
    )]
    allow_internet_access: Option<bool>,
    #[serde(rename = "autoPause", skip_serializing_if = "Option::is_none")]
    auto_pause: Option<bool>,
    #[serde(rename = "autoResume", skip_serializing_if = "Option::is_none")]
    auto_resume: Option<AutoResume>,
    #[serde(skip_serializing_if = "Option::is_none")]
    mcp: Option<serde_json::Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    network: Option<NetworkConfig>,
    #[serde(rename = "volumeMounts", skip_serializing_if = "Option::is_none")]
    volume_mounts: Option<Vec<VolumeMount>>,
}

/// `autoResume` of a new sandbox.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct AutoResume {
    /// Whether traffic to a paused sandbox resumes it.
    pub enabled: bool,
}

/// Egress and ingress settings of a new sandbox (`SandboxNetworkConfig`).
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct NetworkConfig {
    /// Allowed outbound destinations.
    #[serde(rename = "allowOut", skip_serializing_if = "Option::is_none")]
    pub allow_out: Option<Vec<String>>,
    /// Denied outbound destinations.
    #[serde(rename = "denyOut", skip_serializing_if = "Option::is_none")]
    pub deny_out: Option<Vec<String>>,
    /// Whether public traffic may reach the sandbox's ports.
    #[serde(rename = "allowPublicTraffic", skip_serializing_if = "Option::is_none")]
    pub allow_public_traffic: Option<bool>,
    /// Host header masking for inbound requests.
    #[serde(rename = "maskRequestHost", skip_serializing_if = "Option::is_none")]
    pub mask_request_host: Option<String>,
    /// Per-host transformation rules, passed through as given.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rules: Option<serde_json::Value>,
}

/// A volume mounted into a sandbox.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct VolumeMount {
    /// The volume's name.
    pub name: String,
    /// Where it is mounted.
    pub path: String,
}

impl NewSandbox {
    /// A sandbox from `template` (e.g. `"base"`) with the SDK defaults.
    pub fn new(template: impl Into<String>) -> Self {
        NewSandbox {
            template_id: template.into(),
            metadata: None,
            env_vars: None,
            timeout: Some(DEFAULT_SANDBOX_TIMEOUT),
            secure: Some(true),
            allow_internet_access: Some(true),
            auto_pause: Some(false),
            auto_resume: None,
            mcp: None,
            network: None,
            volume_mounts: None,
        }
    }

    /// The template id.
    pub fn template(&self) -> &str {
        &self.template_id
    }

    /// Adds a metadata entry (shown by list and usable as a list filter).
    #[must_use]
    pub fn metadata(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.metadata
            .get_or_insert_with(BTreeMap::new)
            .insert(key.into(), value.into());
        self
    }

    /// Adds an environment variable every process in the sandbox sees.
    #[must_use]
    pub fn env(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        self.env_vars
            .get_or_insert_with(BTreeMap::new)
            .insert(name.into(), value.into());
        self
    }

    /// Lifetime before the sandbox is killed (or paused with auto-pause);
    /// sent in whole seconds, rounded up.
    #[must_use]
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = Some(timeout);
        self
    }

    /// Whether envd requires an access token (and `/files` URLs a signature).
    #[must_use]
    pub fn secure(mut self, secure: bool) -> Self {
        self.secure = Some(secure);
        self
    }

    /// Whether the sandbox may reach the internet.
    #[must_use]
    pub fn allow_internet_access(mut self, allow: bool) -> Self {
        self.allow_internet_access = Some(allow);
        self
    }

    /// Pause instead of kill when the timeout expires.
    #[must_use]
    pub fn auto_pause(mut self, auto_pause: bool) -> Self {
        self.auto_pause = Some(auto_pause);
        self
    }

    /// Resume a paused sandbox on incoming traffic.
    #[must_use]
    pub fn auto_resume(mut self, enabled: bool) -> Self {
        self.auto_resume = Some(AutoResume { enabled });
        self
    }

    /// MCP configuration, passed through as given.
    #[must_use]
    pub fn mcp(mut self, mcp: serde_json::Value) -> Self {
        self.mcp = Some(mcp);
        self
    }

    /// Network settings.
    #[must_use]
    pub fn network(mut self, network: NetworkConfig) -> Self {
        self.network = Some(network);
        self
    }

    /// Adds a volume mount.
    #[must_use]
    pub fn volume_mount(mut self, name: impl Into<String>, path: impl Into<String>) -> Self {
        self.volume_mounts
            .get_or_insert_with(Vec::new)
            .push(VolumeMount {
                name: name.into(),
                path: path.into(),
            });
        self
    }

    pub(crate) fn validate(&self, context: &Context) -> Result<()> {
        if self.template_id.trim().is_empty() {
            return Err(Error::invalid_argument(
                context.clone(),
                "the template id is empty",
            ));
        }
        if let Some(timeout) = self.timeout {
            timeout_seconds(context, timeout)?;
        }
        if let Some(envs) = &self.env_vars {
            for name in envs.keys() {
                if name.is_empty() || name.contains(['=', '\0']) {
                    return Err(Error::invalid_argument(
                        context.clone(),
                        format!(
                            "environment variable name {name:?} is empty or contains '=' or NUL"
                        ),
                    ));
                }
            }
        }
        Ok(())
    }
}

/// Body of `POST /sandboxes/{id}/connect` and `/timeout`.
#[derive(Debug, Serialize)]
pub(crate) struct TimeoutBody {
    pub timeout: u32,
}

fn semver<'de, D: Deserializer<'de>>(d: D) -> Result<semver::Version, D::Error> {
    let text = String::deserialize(d)?;
    semver::Version::parse(&text)
        .map_err(|e| serde::de::Error::custom(format!("envdVersion {text:?} is not semver: {e}")))
}

/// The `Sandbox` response of create and connect.
#[derive(Debug, Clone, Deserialize)]
pub struct SandboxInfo {
    /// The template it was created from.
    #[serde(rename = "templateID")]
    pub template_id: String,
    /// Its id.
    #[serde(rename = "sandboxID")]
    pub sandbox_id: String,
    /// The template's alias, if any.
    #[serde(default)]
    pub alias: Option<String>,
    /// Deprecated, but required by the API schema.
    #[serde(rename = "clientID")]
    pub client_id: String,
    /// envd's version inside the sandbox.
    #[serde(rename = "envdVersion", deserialize_with = "semver")]
    pub envd_version: semver::Version,
    /// envd's access token, for secured sandboxes.
    #[serde(rename = "envdAccessToken", default)]
    pub envd_access_token: Option<Secret>,
    /// Token for the sandbox's public ports, if restricted.
    #[serde(rename = "trafficAccessToken", default)]
    pub traffic_access_token: Option<Secret>,
    /// The domain its envd is served under, if not the configured one.
    #[serde(default)]
    pub domain: Option<String>,
}

/// Whether a sandbox runs or is paused; states this client does not know
/// are kept as text.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum SandboxState {
    /// Running.
    Running,
    /// Paused (resumable with connect).
    Paused,
    /// A state this client does not know.
    Other(String),
}

impl SandboxState {
    /// The wire name.
    pub fn as_str(&self) -> &str {
        match self {
            SandboxState::Running => "running",
            SandboxState::Paused => "paused",
            SandboxState::Other(other) => other,
        }
    }
}

impl fmt::Display for SandboxState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for SandboxState {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = String::deserialize(d)?;
        Ok(match text.as_str() {
            "running" => SandboxState::Running,
            "paused" => SandboxState::Paused,
            _ => SandboxState::Other(text),
        })
    }
}

impl Serialize for SandboxState {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

/// What happens when a sandbox's timeout expires.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct Lifecycle {
    /// Whether traffic resumes it when paused.
    #[serde(rename = "autoResume", default)]
    pub auto_resume: Option<bool>,
    /// `"kill"` or `"pause"`.
    #[serde(rename = "onTimeout", default)]
    pub on_timeout: Option<String>,
}

/// `SandboxDetail` (`GET /sandboxes/{id}`) and `ListedSandbox` (list); the
/// fields only the detail carries are `None` in list results.
#[derive(Debug, Clone, Deserialize)]
pub struct SandboxDetail {
    /// The template it was created from.
    #[serde(rename = "templateID")]
    pub template_id: String,
    /// The template's alias, if any.
    #[serde(default)]
    pub alias: Option<String>,
    /// Its id.
    #[serde(rename = "sandboxID")]
    pub sandbox_id: String,
    /// Deprecated, but required by the API schema.
    #[serde(rename = "clientID")]
    pub client_id: String,
    /// When it started.
    #[serde(rename = "startedAt")]
    pub started_at: jiff::Timestamp,
    /// When it will be killed (or paused).
    #[serde(rename = "endAt")]
    pub end_at: jiff::Timestamp,
    /// CPU count.
    #[serde(rename = "cpuCount")]
    pub cpu_count: u32,
    /// Memory in MiB.
    #[serde(rename = "memoryMB")]
    pub memory_mb: u64,
    /// Disk size in MiB.
    #[serde(rename = "diskSizeMB")]
    pub disk_size_mb: u64,
    /// Running or paused.
    pub state: SandboxState,
    /// envd's version inside the sandbox.
    #[serde(rename = "envdVersion", deserialize_with = "semver")]
    pub envd_version: semver::Version,
    /// envd's access token (detail only).
    #[serde(rename = "envdAccessToken", default)]
    pub envd_access_token: Option<Secret>,
    /// Whether it may reach the internet (detail only).
    #[serde(rename = "allowInternetAccess", default)]
    pub allow_internet_access: Option<bool>,
    /// The domain its envd is served under (detail only).
    #[serde(default)]
    pub domain: Option<String>,
    /// Its metadata.
    #[serde(default)]
    pub metadata: Option<BTreeMap<String, String>>,
    /// Network settings, as the API reports them (detail only).
    #[serde(default)]
    pub network: Option<serde_json::Value>,
    /// Timeout behaviour (detail only).
    #[serde(default)]
    pub lifecycle: Option<Lifecycle>,
    /// Mounted volumes.
    #[serde(rename = "volumeMounts", default)]
    pub volume_mounts: Option<Vec<VolumeMount>>,
}

/// One resource-usage sample (`SandboxMetric`).
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct SandboxMetric {
    /// Sample time (deprecated in favour of `timestamp_unix`).
    pub timestamp: jiff::Timestamp,
    /// Sample time in Unix seconds.
    #[serde(rename = "timestampUnix")]
    pub timestamp_unix: i64,
    /// CPU count.
    #[serde(rename = "cpuCount")]
    pub cpu_count: u32,
    /// CPU use in percent.
    #[serde(rename = "cpuUsedPct")]
    pub cpu_used_pct: f64,
    /// Memory used, bytes.
    #[serde(rename = "memUsed")]
    pub mem_used: u64,
    /// Memory total, bytes.
    #[serde(rename = "memTotal")]
    pub mem_total: u64,
    /// Page cache, bytes.
    #[serde(rename = "memCache")]
    pub mem_cache: u64,
    /// Disk used, bytes.
    #[serde(rename = "diskUsed")]
    pub disk_used: u64,
    /// Disk total, bytes.
    #[serde(rename = "diskTotal")]
    pub disk_total: u64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn new_sandbox_serialises_the_sdk_body() {
        let body = NewSandbox::new("base")
            .metadata("k", "v")
            .env("FOO", "bar")
            .timeout(Duration::from_millis(119_001))
            .auto_resume(false);
        let json = serde_json::to_value(&body).unwrap();
        assert_eq!(
            json,
            serde_json::json!({
                "templateID": "base",
                "metadata": {"k": "v"},
                "envVars": {"FOO": "bar"},
                "timeout": 120,
                "secure": true,
                "allow_internet_access": true,
                "autoPause": false,
                "autoResume": {"enabled": false}
            })
        );
    }

    #[test]
    fn optional_extras_use_exact_names() {
        let body = NewSandbox::new("base")
            .mcp(serde_json::json!({"x": 1}))
            .network(NetworkConfig {
                allow_out: Some(vec!["1.1.1.1".into()]),
                allow_public_traffic: Some(false),
                ..Default::default()
            })
            .volume_mount("vol", "/mnt/vol");
        let json = serde_json::to_value(&body).unwrap();
        assert_eq!(json["mcp"], serde_json::json!({"x": 1}));
        assert_eq!(
            json["network"],
            serde_json::json!({"allowOut": ["1.1.1.1"], "allowPublicTraffic": false})
        );
        assert_eq!(
            json["volumeMounts"],
            serde_json::json!([{"name": "vol", "path": "/mnt/vol"}])
        );
    }

    #[test]
    fn new_sandbox_validation() {
        let context = Context::new("create sandbox", "x");
        assert!(NewSandbox::new(" ").validate(&context).is_err());
        assert!(
            NewSandbox::new("base")
                .env("A=B", "1")
                .validate(&context)
                .is_err()
        );
        assert!(
            NewSandbox::new("base")
                .timeout(Duration::from_secs(u64::from(u32::MAX)))
                .validate(&context)
                .is_err()
        );
        NewSandbox::new("base").validate(&context).unwrap();
    }

    #[test]
    fn timeouts_round_up_to_seconds() {
        let context = Context::new("set timeout", "x");
        assert_eq!(
            timeout_seconds(&context, Duration::from_millis(1)).unwrap(),
            1
        );
        assert_eq!(
            timeout_seconds(&context, Duration::from_millis(5000)).unwrap(),
            5
        );
        assert_eq!(timeout_seconds(&context, Duration::ZERO).unwrap(), 0);
        assert!(timeout_seconds(&context, Duration::from_secs(1 << 31)).is_err());
    }

    #[test]
    fn sandbox_info_parses_and_tolerates_unknown_fields() {
        let info: SandboxInfo = serde_json::from_str(
            r#"{"templateID":"base","sandboxID":"abc","clientID":"c","envdVersion":"0.6.13",
                "envdAccessToken":"tok","domain":null,"somethingNew":[1,2]}"#,
        )
        .unwrap();
        assert_eq!(info.sandbox_id, "abc");
        assert_eq!(info.envd_version, semver::Version::new(0, 6, 13));
        assert_eq!(info.envd_access_token.as_ref().unwrap().expose(), "tok");
        assert!(info.domain.is_none());
        assert!(
            !format!("{info:?}").contains("tok\""),
            "token must not print"
        );
    }

    #[test]
    fn sandbox_info_is_strict_about_required_fields_and_semver() {
        let missing = serde_json::from_str::<SandboxInfo>(
            r#"{"templateID":"base","sandboxID":"abc","envdVersion":"0.6.13"}"#,
        )
        .unwrap_err();
        assert!(missing.to_string().contains("clientID"), "{missing}");
        let garbage = serde_json::from_str::<SandboxInfo>(
            r#"{"templateID":"base","sandboxID":"abc","clientID":"c","envdVersion":"latest"}"#,
        )
        .unwrap_err();
        assert!(garbage.to_string().contains("not semver"), "{garbage}");
    }

    #[test]
    fn sandbox_detail_parses_times_states_and_lifecycle() {
        let detail: SandboxDetail = serde_json::from_str(
            r#"{"templateID":"base","sandboxID":"abc","clientID":"c",
                "startedAt":"2024-01-01T00:00:00Z","endAt":"2024-01-01T00:05:00.123Z",
                "cpuCount":2,"memoryMB":512,"diskSizeMB":1024,"state":"paused",
                "envdVersion":"0.6.13","metadata":{"k":"v"},
                "lifecycle":{"autoResume":false,"onTimeout":"pause"}}"#,
        )
        .unwrap();
        assert_eq!(detail.state, SandboxState::Paused);
        assert_eq!(
            detail.end_at.as_millisecond() - detail.started_at.as_millisecond(),
            300_123
        );
        assert_eq!(
            detail.lifecycle.unwrap().on_timeout.as_deref(),
            Some("pause")
        );
        let odd: SandboxState = serde_json::from_str(r#""snapshotting""#).unwrap();
        assert_eq!(odd, SandboxState::Other("snapshotting".into()));
        assert_eq!(
            serde_json::to_string(&SandboxState::Running).unwrap(),
            r#""running""#
        );
    }

    #[test]
    fn metrics_parse() {
        let metrics: Vec<SandboxMetric> = serde_json::from_str(
            r#"[{"timestamp":"2024-01-01T00:00:00Z","timestampUnix":1704067200,"cpuCount":2,
                 "cpuUsedPct":12.5,"memUsed":1,"memTotal":2,"memCache":3,"diskUsed":4,"diskTotal":5}]"#,
        )
        .unwrap();
        assert_eq!(metrics[0].timestamp_unix, 1_704_067_200);
        assert_eq!(metrics[0].cpu_used_pct, 12.5);
    }
}
