//! Snapshots and forks (`crate::snapshots`: the files only): `POST /sandboxes/{id}/snapshots`,
//! `GET /snapshots`, `POST /sandboxes/{id}/fork`; a snapshot is deleted as a template
//! (`super::templates::delete`).

use std::sync::Arc;
use std::time::Duration;

use axum::Json;
use axum::body::Body;
use axum::extract::{Path, RawQuery, State};
use axum::response::{IntoResponse, Response};
use http::{HeaderValue, StatusCode};
use serde::Serialize;

use super::ApiState;
use super::error::ApiError;
use super::json_body::{parse_optional, read_body};
use super::list_query::{MAX_LIMIT, parse_limit, query_pairs, unknown_parameter};
use super::model::{CreateSnapshot, ForkSandbox, check_timeout};
use super::sandboxes::sandbox_body;
use crate::snapshots::Snapshot;

/// The forks' lifetime when the request sets none (the API spec's default).
const FORK_TIMEOUT_SECS: u32 = 15;
/// The most forks of one request (what the Python SDK checks too).
const MAX_FORKS: u32 = 20;

#[derive(Debug, Serialize)]
pub struct SnapshotBody {
    #[serde(rename = "snapshotID")]
    snapshot_id: String,
    names: Vec<String>,
}

impl SnapshotBody {
    fn of(snapshot: &Snapshot) -> SnapshotBody {
        SnapshotBody {
            snapshot_id: snapshot.id.clone(),
            names: vec![snapshot.id.clone()],
        }
    }
}

/// `POST /sandboxes/{id}/snapshots` (`{"name"?}`): 201 with the snapshot; the sandbox runs on.
pub async fn create(
    State(state): State<ApiState>,
    Path(id): Path<String>,
    body: Body,
) -> Result<Response, ApiError> {
    let op = "snapshot sandbox";
    let request: Option<CreateSnapshot> = parse_optional(op, &read_body(op, body).await?)?;
    if request.as_ref().and_then(|r| r.memory) == Some(true) {
        return Err(ApiError::bad_request(format!(
            "{op} {id}: memory snapshots are not supported by e2b-local (its snapshots keep the \
             files only; processes are not checkpointed): ask for a filesystem snapshot \
             (memory: false, Python mode=\"filesystem\")"
        )));
    }
    let name = request.and_then(|r| r.name).filter(|n| !n.is_empty());
    if let Some(name) = &name
        && !crate::api::model::is_valid_template_id(name)
    {
        return Err(ApiError::bad_request(format!(
            "{op} {id}: invalid name {name:?}: expected a template name"
        )));
    }
    let snapshot = state.registry.snapshot(&id, name).await?;
    Ok((StatusCode::CREATED, Json(SnapshotBody::of(&snapshot))).into_response())
}

/// `GET /snapshots?sandboxID&name&limit&nextToken`: oldest first, paged with `x-next-token`.
pub async fn list(
    State(state): State<ApiState>,
    RawQuery(raw): RawQuery,
) -> Result<Response, ApiError> {
    let op = "list snapshots";
    let (mut sandbox, mut name, mut limit, mut after) = (None, None, MAX_LIMIT, None);
    for (key, value) in query_pairs(op, raw.as_deref())? {
        match key.as_str() {
            "sandboxID" => sandbox = Some(value),
            "name" => name = Some(value),
            "limit" => limit = parse_limit(op, &value)?,
            "nextToken" => after = Some(value).filter(|t| !t.is_empty()),
            other => return Err(unknown_parameter(op, other)),
        }
    }
    let all = state
        .registry
        .snapshots
        .list(sandbox.as_deref(), name.as_deref());
    let start = match &after {
        None => 0,
        Some(token) => {
            all.iter().position(|s| &s.id == token).ok_or_else(|| {
                ApiError::bad_request(format!("{op}: invalid nextToken {token:?}"))
            })? + 1
        }
    };
    let page: Vec<&Arc<Snapshot>> = all.iter().skip(start).take(limit).collect();
    let next = (start + page.len() < all.len())
        .then(|| page.last().map(|s| s.id.clone()))
        .flatten();
    let bodies: Vec<SnapshotBody> = page.iter().map(|s| SnapshotBody::of(s)).collect();
    let mut response = Json(bodies).into_response();
    if let Some(token) = next
        && let Ok(value) = HeaderValue::from_str(&token)
    {
        response.headers_mut().insert("x-next-token", value);
    }
    Ok(response)
}

/// One fork's outcome.
#[derive(Debug, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum ForkResult {
    Sandbox(super::model::SandboxBody),
    Error(ForkError),
}

#[derive(Debug, Serialize)]
pub struct ForkError {
    code: u16,
    message: String,
}

/// `POST /sandboxes/{id}/fork` (`{"timeout"?, "count"?}`): 201 with one outcome per fork, each
/// a new sandbox starting with the source's files (its processes are not copied), its
/// template, metadata, environment and security.
pub async fn fork(
    State(state): State<ApiState>,
    Path(id): Path<String>,
    body: Body,
) -> Result<Response, ApiError> {
    let op = "fork sandbox";
    let request: Option<ForkSandbox> = parse_optional(op, &read_body(op, body).await?)?;
    let timeout = request
        .as_ref()
        .and_then(|r| r.timeout)
        .unwrap_or(FORK_TIMEOUT_SECS);
    check_timeout(op, timeout)?;
    let count = request.as_ref().and_then(|r| r.count).unwrap_or(1);
    if !(1..=MAX_FORKS).contains(&count) {
        return Err(ApiError::bad_request(format!(
            "{op} {id}: count must be 1 to {MAX_FORKS}, got {count}"
        )));
    }
    let forks = state
        .registry
        .fork(&id, count as usize, Duration::from_secs(timeout.into()))
        .await?;
    let results: Vec<ForkResult> = forks
        .into_iter()
        .map(|fork| match fork {
            Ok(sandbox) => ForkResult::Sandbox(sandbox_body(&sandbox)),
            Err(err) => ForkResult::Error(ForkError {
                code: err.status.as_u16(),
                message: err.message,
            }),
        })
        .collect();
    Ok((StatusCode::CREATED, Json(results)).into_response())
}
