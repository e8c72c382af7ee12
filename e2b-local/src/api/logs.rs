//! `GET /sandboxes/{id}/logs` (v1, deprecated; what the E2B CLI reads) and
//! `GET /v2/sandboxes/{id}/logs`: the sandbox log its envd keeps (process starts, ends and start
//! failures, envd's own start; `e2b_local_envd` `sandbox_log.rs` writes the lines), filtered and
//! paged as the API's spec says. Lines that do not parse are skipped.

use std::collections::BTreeMap;
use std::time::{Duration, UNIX_EPOCH};

use axum::Json;
use axum::extract::{Path, RawQuery, State};
use serde::{Deserialize, Serialize};

use super::ApiState;
use super::error::ApiError;
use super::list_query::{query_pairs, unknown_parameter};
use crate::timefmt::rfc3339;

/// Entries per page when the caller sets no `limit`, and v2's largest.
const MAX_ENTRIES: usize = 1000;
/// The longest v2 `search`.
const MAX_SEARCH: usize = 256;

/// One line of the sandbox log, as envd writes it.
#[derive(Debug, Deserialize)]
struct Stored {
    #[serde(rename = "timestampMs")]
    timestamp_ms: u64,
    level: Level,
    logger: String,
    message: String,
    #[serde(default)]
    fields: BTreeMap<String, String>,
}

/// E2B's log levels, least to most severe.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
enum Level {
    Debug,
    Info,
    Warn,
    Error,
}

/// `SandboxLogEntry`.
#[derive(Debug, Serialize)]
struct Entry {
    timestamp: String,
    level: Level,
    message: String,
    fields: BTreeMap<String, String>,
}

/// v1's `SandboxLog`: the entry as one JSON line (with `logger`, which the CLI reads).
#[derive(Debug, Serialize)]
struct RawLine {
    timestamp: String,
    line: String,
}

#[derive(Debug, Serialize)]
pub struct LogsV1 {
    logs: Vec<RawLine>,
    #[serde(rename = "logEntries")]
    log_entries: Vec<Entry>,
}

#[derive(Debug, Serialize)]
pub struct LogsV2 {
    logs: Vec<Entry>,
}

impl Stored {
    fn entry(&self) -> Entry {
        Entry {
            timestamp: rfc3339(UNIX_EPOCH + Duration::from_millis(self.timestamp_ms)),
            level: self.level,
            message: self.message.clone(),
            fields: self.fields.clone(),
        }
    }
}

/// The sandbox's log, oldest first; 404 for a sandbox the registry does not know.
async fn read(state: &ApiState, op: &str, id: &str) -> Result<Vec<Stored>, ApiError> {
    let sandbox = state
        .registry
        .get(id)
        .ok_or_else(|| ApiError::sandbox_not_found(op, id))?;
    let path = sandbox.world.log();
    let text = tokio::task::spawn_blocking(move || match std::fs::read(&path) {
        Ok(bytes) => Ok(bytes),
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => Ok(Vec::new()),
        Err(err) => Err(err),
    })
    .await
    .map_err(|e| ApiError::internal(format!("{op} {id}: {e}")))?
    .map_err(|e| ApiError::internal(format!("{op} {id}: read the sandbox log: {e}")))?;
    Ok(text
        .split(|&b| b == b'\n')
        .filter_map(|line| serde_json::from_slice(line).ok())
        .collect())
}

fn number<T: std::str::FromStr>(op: &str, key: &str, value: &str) -> Result<T, ApiError> {
    value.parse().map_err(|_| {
        ApiError::bad_request(format!(
            "{op}: invalid {key} {value:?}: expected a non-negative integer"
        ))
    })
}

/// `GET /sandboxes/{id}/logs?start=<ms>&limit=<n>`: entries at or after `start`, oldest first.
pub async fn logs_v1(
    State(state): State<ApiState>,
    Path(id): Path<String>,
    RawQuery(raw): RawQuery,
) -> Result<Json<LogsV1>, ApiError> {
    let op = "sandbox logs";
    let (mut start, mut limit) = (0u64, MAX_ENTRIES);
    for (key, value) in query_pairs(op, raw.as_deref())? {
        match key.as_str() {
            "start" => start = number(op, &key, &value)?,
            "limit" => limit = number(op, &key, &value)?,
            _ => return Err(unknown_parameter(op, &key)),
        }
    }
    let stored = read(&state, op, &id).await?;
    let kept: Vec<&Stored> = stored
        .iter()
        .filter(|s| s.timestamp_ms >= start)
        .take(limit)
        .collect();
    Ok(Json(LogsV1 {
        logs: kept
            .iter()
            .map(|s| RawLine {
                timestamp: rfc3339(UNIX_EPOCH + Duration::from_millis(s.timestamp_ms)),
                line: serde_json::json!({
                    "level": s.level,
                    "logger": s.logger,
                    "message": s.message,
                    "fields": s.fields,
                })
                .to_string(),
            })
            .collect(),
        log_entries: kept.iter().map(|s| s.entry()).collect(),
    }))
}

/// `GET /v2/sandboxes/{id}/logs?cursor=<ms>&limit=<n>&direction=forward|backward&level=<min>&search=<text>`:
/// forward, the entries at or after `cursor` (default: the first), oldest first; backward, those
/// at or before it (default: now), newest first; at least `level`, with `search` in the message.
pub async fn logs_v2(
    State(state): State<ApiState>,
    Path(id): Path<String>,
    RawQuery(raw): RawQuery,
) -> Result<Json<LogsV2>, ApiError> {
    let op = "sandbox logs";
    let mut cursor: Option<u64> = None;
    let mut limit = MAX_ENTRIES;
    let mut backward = false;
    let mut level = Level::Debug;
    let mut search = String::new();
    for (key, value) in query_pairs(op, raw.as_deref())? {
        match key.as_str() {
            "cursor" => cursor = Some(number(op, &key, &value)?),
            "limit" => {
                limit = number(op, &key, &value)?;
                if limit > MAX_ENTRIES {
                    return Err(ApiError::bad_request(format!(
                        "{op}: invalid limit {value:?}: at most {MAX_ENTRIES}"
                    )));
                }
            }
            "direction" => {
                backward = match value.as_str() {
                    "forward" => false,
                    "backward" => true,
                    other => {
                        return Err(ApiError::bad_request(format!(
                            "{op}: invalid direction {other:?}: expected forward or backward"
                        )));
                    }
                }
            }
            "level" => {
                level = serde_json::from_value(serde_json::Value::String(value.clone())).map_err(
                    |_| {
                        ApiError::bad_request(format!(
                            "{op}: invalid level {value:?}: expected debug, info, warn or error"
                        ))
                    },
                )?;
            }
            "search" => {
                if value.chars().count() > MAX_SEARCH {
                    return Err(ApiError::bad_request(format!(
                        "{op}: search is longer than {MAX_SEARCH} characters"
                    )));
                }
                search = value;
            }
            _ => return Err(unknown_parameter(op, &key)),
        }
    }
    let stored = read(&state, op, &id).await?;
    let in_range: Box<dyn Iterator<Item = &Stored>> = if backward {
        let cursor = cursor.unwrap_or(u64::MAX);
        Box::new(
            stored
                .iter()
                .rev()
                .filter(move |s| s.timestamp_ms <= cursor),
        )
    } else {
        let cursor = cursor.unwrap_or(0);
        Box::new(stored.iter().filter(move |s| s.timestamp_ms >= cursor))
    };
    let logs = in_range
        .filter(|s| s.level >= level && s.message.contains(&search))
        .take(limit)
        .map(Stored::entry)
        .collect();
    Ok(Json(LogsV2 { logs }))
}
