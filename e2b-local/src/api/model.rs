//! JSON bodies of the control plane (docs/e2b-protocol.md §2.3), field names exactly as the SDKs
//! use them: the request bodies and their checks are the `e2b-local-api` crate's (re-exported
//! here); the responses are built here.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::timefmt::{rfc3339, unix_seconds};

pub use e2b_local_api::model::*;

/// Response of create and connect.
#[derive(Debug, Serialize)]
pub struct SandboxBody {
    #[serde(rename = "templateID")]
    pub template_id: String,
    #[serde(rename = "sandboxID")]
    pub sandbox_id: String,
    #[serde(rename = "clientID")]
    pub client_id: String,
    #[serde(rename = "envdVersion")]
    pub envd_version: &'static str,
    #[serde(rename = "envdAccessToken", skip_serializing_if = "Option::is_none")]
    pub envd_access_token: Option<String>,
    #[serde(rename = "trafficAccessToken")]
    pub traffic_access_token: Option<String>,
    pub domain: Option<String>,
}

#[derive(Debug, Clone, Copy, Serialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum StateName {
    Running,
    Paused,
}

#[derive(Debug, Serialize)]
pub struct Lifecycle {
    #[serde(rename = "autoResume")]
    pub auto_resume: bool,
    #[serde(rename = "onTimeout")]
    pub on_timeout: &'static str,
}

/// `SandboxNetworkConfig` as info reports it.
#[derive(Debug, Serialize)]
pub struct NetworkBody {
    #[serde(rename = "allowOut", skip_serializing_if = "Vec::is_empty")]
    pub allow_out: Vec<String>,
    #[serde(rename = "denyOut", skip_serializing_if = "Vec::is_empty")]
    pub deny_out: Vec<String>,
}

/// `SandboxDetail` (info) and `ListedSandbox` (list) share this shape.
#[derive(Debug, Serialize)]
pub struct SandboxDetailBody {
    #[serde(rename = "templateID")]
    pub template_id: String,
    #[serde(rename = "sandboxID")]
    pub sandbox_id: String,
    #[serde(rename = "clientID")]
    pub client_id: String,
    #[serde(rename = "startedAt")]
    pub started_at: String,
    #[serde(rename = "endAt")]
    pub end_at: String,
    #[serde(rename = "cpuCount")]
    pub cpu_count: u32,
    #[serde(rename = "memoryMB")]
    pub memory_mb: u64,
    #[serde(rename = "diskSizeMB")]
    pub disk_size_mb: u64,
    pub state: StateName,
    #[serde(rename = "envdVersion")]
    pub envd_version: &'static str,
    #[serde(rename = "envdAccessToken", skip_serializing_if = "Option::is_none")]
    pub envd_access_token: Option<String>,
    #[serde(rename = "allowInternetAccess")]
    pub allow_internet_access: Option<bool>,
    /// The egress lists as last set; absent when neither was ever set.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub network: Option<NetworkBody>,
    pub domain: Option<String>,
    pub metadata: BTreeMap<String, String>,
    pub lifecycle: Lifecycle,
    #[serde(rename = "volumeMounts")]
    pub volume_mounts: Vec<VolumeMount>,
    /// What a finished pause kept: `full` (memory and files) or `filesystem`; absent while
    /// running.
    #[serde(rename = "pauseMode", skip_serializing_if = "Option::is_none")]
    pub pause_mode: Option<&'static str>,
}

/// One `SandboxMetric` sample.
#[derive(Debug, Serialize)]
pub struct MetricBody {
    pub timestamp: String,
    #[serde(rename = "timestampUnix")]
    pub timestamp_unix: i64,
    #[serde(rename = "cpuCount")]
    pub cpu_count: u32,
    #[serde(rename = "cpuUsedPct")]
    pub cpu_used_pct: f64,
    #[serde(rename = "memUsed")]
    pub mem_used: u64,
    #[serde(rename = "memTotal")]
    pub mem_total: u64,
    #[serde(rename = "memCache")]
    pub mem_cache: u64,
    #[serde(rename = "diskUsed")]
    pub disk_used: u64,
    #[serde(rename = "diskTotal")]
    pub disk_total: u64,
}

impl MetricBody {
    /// `sample` as the API reports it (CPU to two decimals).
    pub fn of(sample: &crate::world::metrics::Sample) -> MetricBody {
        MetricBody {
            timestamp: rfc3339(sample.at),
            timestamp_unix: unix_seconds(sample.at),
            cpu_count: sample.cpu_count,
            cpu_used_pct: (sample.cpu_used_pct * 100.0).round() / 100.0,
            mem_used: sample.mem_used,
            mem_total: sample.mem_total,
            mem_cache: sample.mem_cache,
            disk_used: sample.disk_used,
            disk_total: sample.disk_total,
        }
    }
}
