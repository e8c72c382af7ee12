//! The control plane's request bodies (docs/e2b-protocol.md §2.3), field names exactly as the SDKs
//! use them, and the checks serde cannot make. Request types reject unknown fields; `mcp` and
//! `iam` are accepted as opaque JSON objects (e2b-local has no MCP gateway or workload
//! identity); `network` is typed ([`NetworkConfig`]) and what e2b-local cannot do with it is
//! refused.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::egress::Egress;
use crate::error::ApiError;

/// Longest sandbox lifetime a request may ask for (30 days), in seconds.
pub const MAX_TIMEOUT_SECS: u32 = 30 * 24 * 3600;
/// Lifetime when a v1 create (`POST /sandboxes`) or a resume omits `timeout` (the v1
/// schemas' default).
pub const DEFAULT_TIMEOUT_SECS: u32 = 15;

/// Lifetime when a v2 create or connect omits `timeout` (the default of the v2 schemas,
/// `NewSandboxV2` and `ConnectSandboxV2`): the newest SDKs leave `timeout` out unless the
/// caller sets one, and their sandboxes live 5 minutes, as E2B documents.
pub const V2_DEFAULT_TIMEOUT_SECS: u32 = 300;

/// `POST /sandboxes` (v1, JS 2.29.1) and `POST /v2/sandboxes` (Python 2.63) bodies.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NewSandbox {
    #[serde(rename = "templateID")]
    pub template_id: String,
    pub timeout: Option<u32>,
    #[serde(rename = "autoPause")]
    pub auto_pause: Option<bool>,
    #[serde(rename = "autoPauseMemory")]
    pub auto_pause_memory: Option<bool>,
    #[serde(rename = "autoResume")]
    pub auto_resume: Option<AutoResume>,
    /// v1 only; v2 sandboxes are always secured (PyPI 2.63: "every sandbox secures envd access").
    pub secure: Option<bool>,
    pub allow_internet_access: Option<bool>,
    pub network: Option<NetworkConfig>,
    pub metadata: Option<BTreeMap<String, String>>,
    #[serde(rename = "envVars")]
    pub env_vars: Option<BTreeMap<String, String>>,
    pub mcp: Option<serde_json::Map<String, serde_json::Value>>,
    pub iam: Option<serde_json::Map<String, serde_json::Value>>,
    #[serde(rename = "volumeMounts")]
    pub volume_mounts: Option<Vec<VolumeMount>>,
}

/// A create's `network` (`SandboxNetworkConfig`).
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NetworkConfig {
    #[serde(rename = "allowOut")]
    pub allow_out: Option<Vec<String>>,
    #[serde(rename = "denyOut")]
    pub deny_out: Option<Vec<String>>,
    #[serde(rename = "allowPublicTraffic")]
    pub allow_public_traffic: Option<bool>,
    #[serde(rename = "maskRequestHost")]
    pub mask_request_host: Option<String>,
    #[serde(rename = "httpsPorts")]
    pub https_ports: Option<Vec<u16>>,
    pub rules: Option<serde_json::Map<String, serde_json::Value>>,
    #[serde(rename = "egressProxy")]
    pub egress_proxy: Option<serde_json::Value>,
}

/// `PUT /sandboxes/{id}/network`: the whole egress configuration, replaced.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NetworkUpdate {
    #[serde(rename = "allowOut")]
    pub allow_out: Option<Vec<String>>,
    #[serde(rename = "denyOut")]
    pub deny_out: Option<Vec<String>>,
    pub rules: Option<serde_json::Map<String, serde_json::Value>>,
    #[serde(rename = "egressProxy")]
    pub egress_proxy: Option<serde_json::Value>,
    pub allow_internet_access: Option<bool>,
}

/// The egress rules of `allow_internet_access` (default true) and the allow/deny lists, refusing
/// what e2b-local cannot enforce: domain names, per-domain `rules`, an `egressProxy`.
pub fn egress_of(
    op: &str,
    allow_internet_access: Option<bool>,
    allow_out: Option<Vec<String>>,
    deny_out: Option<Vec<String>>,
    rules: Option<&serde_json::Map<String, serde_json::Value>>,
    egress_proxy: Option<&serde_json::Value>,
) -> Result<Egress, ApiError> {
    if rules.is_some_and(|r| !r.is_empty()) {
        return Err(unsupported(
            op,
            "network.rules (per-domain request transforms)",
        ));
    }
    if egress_proxy.is_some_and(|p| !p.is_null()) {
        return Err(unsupported(op, "network.egressProxy"));
    }
    Egress::new(
        allow_internet_access.unwrap_or(true),
        allow_out.unwrap_or_default(),
        deny_out.unwrap_or_default(),
    )
    .map_err(|e| ApiError::bad_request(format!("{op}: network.{e}")))
}

fn unsupported(op: &str, what: &str) -> ApiError {
    ApiError::bad_request(format!("{op}: {what} is not supported by e2b-local"))
}

impl NetworkConfig {
    /// Refuses what the front cannot honour: HTTPS ports; and a masked Host that is no header
    /// value.
    fn check(&self, op: &str) -> Result<(), ApiError> {
        if let Some(mask) = &self.mask_request_host
            && (mask.is_empty() || http::HeaderValue::from_str(mask).is_err())
        {
            return Err(ApiError::bad_request(format!(
                "{op}: network.maskRequestHost {mask:?} is not a host"
            )));
        }
        if self.https_ports.as_ref().is_some_and(|p| !p.is_empty()) {
            return Err(unsupported(op, "network.httpsPorts"));
        }
        Ok(())
    }
}

#[derive(Debug, Clone, Copy, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct AutoResume {
    pub enabled: bool,
}

#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct VolumeMount {
    pub name: String,
    pub path: String,
}

/// Whether `template` is a template name or id as E2B spells them (`base`, `team/name:tag`):
/// 1-128 characters of `[A-Za-z0-9-_./:]`, whose `/`-separated parts are non-empty and do not
/// start with `.` — so no `..`, `.`, leading `/` or hidden name can reach a path built from it.
pub fn is_valid_template_id(template: &str) -> bool {
    !template.is_empty()
        && template.len() <= 128
        && template
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-_./:".contains(&b))
        && template
            .split('/')
            .all(|part| !part.is_empty() && !part.starts_with('.'))
}

impl NewSandbox {
    /// The sandbox's egress rules (`allow_internet_access` and `network`).
    fn egress(&self, op: &str) -> Result<Egress, ApiError> {
        let network = self.network.as_ref();
        egress_of(
            op,
            self.allow_internet_access,
            network.and_then(|n| n.allow_out.clone()),
            network.and_then(|n| n.deny_out.clone()),
            network.and_then(|n| n.rules.as_ref()),
            network.and_then(|n| n.egress_proxy.as_ref()),
        )
    }

    /// Checks what serde cannot — a usable template name, the timeout range, env var names,
    /// volume mounts, network settings — and returns the egress rules (`allow_internet_access`
    /// and `network`).
    pub fn validate(&self, op: &str) -> Result<Egress, ApiError> {
        let template = &self.template_id;
        if !is_valid_template_id(template) {
            return Err(ApiError::bad_request(format!(
                "{op}: invalid templateID {template:?}: expected 1-128 characters of \
                 [A-Za-z0-9-_./:] in `/`-separated names that do not start with `.`"
            )));
        }
        if let Some(timeout) = self.timeout {
            check_timeout(op, timeout)?;
        }
        if self.auto_resume.as_ref().is_some_and(|a| a.enabled)
            && self.auto_pause_memory == Some(false)
        {
            // What the SDKs refuse too: a files-only pause needs an explicit connect to reboot.
            return Err(ApiError::bad_request(format!(
                "{op}: autoResume needs a pause that keeps memory (autoPauseMemory is false)"
            )));
        }
        check_volume_mounts(op, self.volume_mounts.as_deref().unwrap_or_default())?;
        if let Some(network) = &self.network {
            network.check(op)?;
        }
        for (name, value) in self.env_vars.iter().flatten() {
            if name.is_empty() || name.contains('=') || name.contains('\0') {
                return Err(ApiError::bad_request(format!(
                    "{op}: invalid envVars name {name:?}: must be non-empty without '=' or NUL"
                )));
            }
            if value.contains('\0') {
                return Err(ApiError::bad_request(format!(
                    "{op}: envVars value of {name:?} contains NUL"
                )));
            }
        }
        self.egress(op)
    }
}

/// The most volumes one sandbox mounts.
pub const MAX_VOLUME_MOUNTS: usize = 32;

/// Where a volume cannot be mounted: the world's own kernel and device trees.
const RESERVED_MOUNT_PATHS: [&str; 3] = ["/proc", "/sys", "/dev"];

/// Checks `volumeMounts`: valid volume names; absolute, normalized paths (no `.`, `..`, empty
/// or trailing parts), not `/` nor in `/proc`, `/sys` or `/dev`, each used once.
fn check_volume_mounts(op: &str, mounts: &[VolumeMount]) -> Result<(), ApiError> {
    if mounts.len() > MAX_VOLUME_MOUNTS {
        return Err(ApiError::bad_request(format!(
            "{op}: at most {MAX_VOLUME_MOUNTS} volumeMounts, got {}",
            mounts.len()
        )));
    }
    let mut seen = std::collections::BTreeSet::new();
    for mount in mounts {
        let (name, path) = (&mount.name, &mount.path);
        if !crate::volume::is_valid_name(name) {
            return Err(ApiError::bad_request(format!(
                "{op}: volumeMounts: invalid volume name {name:?}"
            )));
        }
        let normalized = path.len() <= 4096
            && path != "/"
            && crate::volume::normalize(path).is_ok_and(|n| n == *path);
        if !normalized {
            return Err(ApiError::bad_request(format!(
                "{op}: volumeMounts: invalid path {path:?}: expected an absolute path other than \
                 / without empty, `.` or `..` parts"
            )));
        }
        if RESERVED_MOUNT_PATHS
            .iter()
            .any(|r| path == r || path.starts_with(&format!("{r}/")))
        {
            return Err(ApiError::bad_request(format!(
                "{op}: volumeMounts: {path} is inside /proc, /sys or /dev"
            )));
        }
        if !seen.insert(path.as_str()) {
            return Err(ApiError::bad_request(format!(
                "{op}: volumeMounts: two volumes at {path}"
            )));
        }
    }
    Ok(())
}

/// Rejects lifetimes longer than [`MAX_TIMEOUT_SECS`].
pub fn check_timeout(op: &str, timeout: u32) -> Result<(), ApiError> {
    if timeout > MAX_TIMEOUT_SECS {
        return Err(ApiError::bad_request(format!(
            "{op}: timeout {timeout}s exceeds the maximum of {MAX_TIMEOUT_SECS}s"
        )));
    }
    Ok(())
}

/// `POST /sandboxes/{id}/connect` and `/v2/…/connect`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ConnectSandbox {
    /// Required by v1; optional in v2, where it defaults to [`V2_DEFAULT_TIMEOUT_SECS`]
    /// (PyPI `e2b` 2.63 leaves it out of `Sandbox.connect(id)`).
    pub timeout: Option<u32>,
    /// v2: `false` reboots a paused sandbox over its files even if its memory was kept
    /// (`onResume: reboot`); default true. A no-op for a running sandbox.
    pub memory: Option<bool>,
}

/// `POST /sandboxes/{id}/resume` (deprecated resume endpoint).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ResumeSandbox {
    pub timeout: Option<u32>,
    #[serde(rename = "autoPause")]
    pub auto_pause: Option<bool>,
    /// As connect's `memory`.
    pub memory: Option<bool>,
}

/// `POST /sandboxes/{id}/snapshots`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CreateSnapshot {
    pub name: Option<String>,
    /// e2b-local's snapshots keep files only: `false` or absent (E2B's default is `true`, which
    /// the SDKs leave out unless asked) are taken as that; an explicit `true` is refused.
    pub memory: Option<bool>,
}

/// `POST /sandboxes/{id}/fork`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ForkSandbox {
    /// The forks' lifetime in seconds (default 15, as the API's spec).
    pub timeout: Option<u32>,
    /// How many (1 to 20; default 1).
    pub count: Option<u32>,
}

/// `POST /sandboxes/{id}/timeout`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SetTimeout {
    pub timeout: u32,
}

/// `POST /sandboxes/{id}/refreshes`: extends the lifetime by `duration` seconds.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Refresh {
    pub duration: Option<u32>,
}

/// Optional body of `POST /sandboxes/{id}/pause` (the newest SDKs send one, 2.29.1 none).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PauseSandbox {
    /// `false`: keep only the files (every process ends; resuming reboots); default true.
    pub memory: Option<bool>,
    /// e2b-local's envd answers or the world is gone, so there is no unhealthy guest to refuse.
    #[serde(rename = "requireHealthyGuest")]
    pub require_healthy_guest: Option<bool>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::json_body::parse;

    #[test]
    fn accepts_the_js_create_body() {
        let body =
            br#"{"templateID":"base","metadata":{"k":"v"},"envVars":{"FOO":"bar"},"timeout":120,
 "secure":true,"allow_internet_access":true,"autoPause":false,"autoResume":{"enabled":false}}"#;
        let new: NewSandbox = parse("create sandbox", body).unwrap();
        new.validate("create sandbox").unwrap();
        assert_eq!(new.timeout, Some(120));
        assert_eq!(new.secure, Some(true));
    }

    #[test]
    fn accepts_the_python_v2_create_body() {
        let body = br#"{"templateID":"base","timeout":300,"autoPause":false,"autoPauseMemory":true,"metadata":{},"envVars":{}}"#;
        let new: NewSandbox = parse("create sandbox", body).unwrap();
        new.validate("create sandbox").unwrap();
    }

    #[test]
    fn rejects_bad_create_bodies_with_named_errors() {
        let cases: &[(&[u8], &str)] = &[
            (br#"{"timeout":1}"#, "missing field `templateID`"),
            (
                br#"{"templateID":"base","bogus":1}"#,
                "unknown field `bogus`",
            ),
            (br#"{"templateID":"base","timeout":"1"}"#, "invalid type"),
            (br#"{"templateID":"base","timeout":-1}"#, "invalid value"),
            (
                br#"{"templateID":"base","metadata":{"k":1}}"#,
                "invalid type",
            ),
        ];
        for (body, needle) in cases {
            let err = parse::<NewSandbox>("create sandbox", body).unwrap_err();
            assert!(
                err.message.contains(needle),
                "{}: {}",
                String::from_utf8_lossy(body),
                err.message
            );
        }
    }

    #[test]
    fn validation_names_the_bad_value() {
        let bad = |json: &[u8]| {
            parse::<NewSandbox>("create", json)
                .unwrap()
                .validate("create")
                .unwrap_err()
                .message
        };
        assert!(bad(br#"{"templateID":""}"#).contains("invalid templateID"));
        assert!(bad(br#"{"templateID":"a b"}"#).contains("invalid templateID"));
        for template in [
            "../../etc",
            "..",
            ".",
            "/etc",
            "a//b",
            "a/../b",
            "base/.hidden",
        ] {
            let body = format!(r#"{{"templateID":"{template}"}}"#);
            assert!(
                bad(body.as_bytes()).contains("invalid templateID"),
                "{template} was accepted"
            );
        }
        for template in ["base", "team/name:v1.2", "rki5dems9wqfm4r03t7g", "a.b"] {
            assert!(is_valid_template_id(template), "{template} was refused");
        }
        assert!(
            bad(br#"{"templateID":"base","timeout":99999999}"#).contains("exceeds the maximum")
        );
        assert!(
            bad(br#"{"templateID":"base","envVars":{"A=B":"x"}}"#).contains("invalid envVars name")
        );
        for (mounts, says) in [
            (r#"[{"name":"v x","path":"/v"}]"#, "invalid volume name"),
            (r#"[{"name":"v","path":"v"}]"#, "invalid path"),
            (r#"[{"name":"v","path":"/"}]"#, "invalid path"),
            (r#"[{"name":"v","path":"/a/../etc"}]"#, "invalid path"),
            (r#"[{"name":"v","path":"/a/"}]"#, "invalid path"),
            (r#"[{"name":"v","path":"/proc/x"}]"#, "inside /proc"),
            (r#"[{"name":"v","path":"/dev"}]"#, "inside /proc"),
            (
                r#"[{"name":"v","path":"/a"},{"name":"w","path":"/a"}]"#,
                "two volumes",
            ),
        ] {
            let body = format!(r#"{{"templateID":"base","volumeMounts":{mounts}}}"#);
            assert!(bad(body.as_bytes()).contains(says), "{mounts}");
        }
        // What e2b-local cannot enforce in `network` is refused, each naming itself.
        for (network, says) in [
            (
                r#"{"maskRequestHost":"x\nexample"}"#,
                "maskRequestHost \"x\\nexample\" is not a host",
            ),
            (r#"{"maskRequestHost":""}"#, "is not a host"),
            (r#"{"httpsPorts":[8443]}"#, "httpsPorts is not supported"),
            (r#"{"rules":{"api.example.com":[{}]}}"#, "network.rules"),
            (
                r#"{"egressProxy":{"address":"p:1080"}}"#,
                "egressProxy is not supported",
            ),
            (r#"{"allowOut":["example.com"]}"#, "egress proxy"),
            (r#"{"denyOut":["10.0.0.0/33"]}"#, "not an IP address"),
        ] {
            let body = format!(r#"{{"templateID":"base","network":{network}}}"#);
            assert!(
                bad(body.as_bytes()).contains(says),
                "{network}: {}",
                bad(body.as_bytes())
            );
        }
        let fine: NewSandbox = serde_json::from_str(
            r#"{"templateID":"base","volumeMounts":[{"name":"v","path":"/mnt/data"}]}"#,
        )
        .unwrap();
        fine.validate("create").unwrap();
    }
}
