//! Templates (`crate::templates`, built by `crate::template_build`): the endpoints the SDKs'
//! `Template` builder calls — `POST /v3/templates`, `GET /templates/{id}/files/{hash}` and the
//! upload URL it hands out, `POST /v2/templates/{id}/builds/{build}`,
//! `GET /templates/{id}/builds/{build}/status`, `GET /templates/aliases/{name}`,
//! `POST|DELETE /templates/tags`, `GET /templates/{id}/tags`; and `DELETE /templates/{id}` for
//! templates and snapshots alike. Names arrive percent-encoded as one path segment
//! (`team%2Fapp%3Av1`); axum decodes them.

use axum::Json;
use axum::body::Body;
use axum::extract::{Path, RawQuery, State};
use axum::response::{IntoResponse, Response};
use futures::StreamExt;
use http::{HeaderMap, StatusCode};
use serde::{Deserialize, Serialize};
use tokio::io::AsyncWriteExt;

use super::ApiState;
use super::error::ApiError;
use super::json_body::{parse, read_body};
use super::list_query::{MAX_LIMIT, parse_limit, query_pairs, unknown_parameter};
use crate::template_build::{self, BuildRequest};
use crate::templates::{BASE_TEMPLATE, Build, BuildStatus, LogEntry, Refusal};
use crate::timefmt::rfc3339;

type ApiResult<T> = Result<T, ApiError>;

fn refused(op: &str, refusal: Refusal) -> ApiError {
    match refusal {
        Refusal::BadRequest(m) => ApiError::bad_request(format!("{op}: {m}")),
        Refusal::NotFound(m) => ApiError::new(StatusCode::NOT_FOUND, format!("{op}: {m}")),
        Refusal::Conflict(m) => ApiError::new(StatusCode::CONFLICT, format!("{op}: {m}")),
    }
}

fn not_found(op: &str, what: &str) -> ApiError {
    ApiError::new(StatusCode::NOT_FOUND, format!("{op}: no such {what}"))
}

/// `POST /v3/templates`'s body. CPU, memory and disk are accepted and not enforced (e2b-local's
/// worlds share the host's).
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct RequestBuild {
    name: Option<String>,
    /// The deprecated spelling of `name`.
    alias: Option<String>,
    #[serde(default)]
    tags: Vec<String>,
    #[serde(rename = "teamID")]
    _team_id: Option<String>,
    #[serde(rename = "cpuCount")]
    _cpu_count: Option<u32>,
    #[serde(rename = "memoryMB")]
    _memory_mb: Option<u32>,
    #[serde(rename = "minFreeDiskMb")]
    _min_free_disk_mb: Option<u32>,
}

#[derive(Debug, Serialize)]
struct Requested {
    #[serde(rename = "templateID")]
    template_id: String,
    #[serde(rename = "buildID")]
    build_id: String,
    public: bool,
    names: Vec<String>,
    tags: Vec<String>,
    aliases: Vec<String>,
}

/// `POST /v3/templates` (`{"name": "[team/]name[:tag]", "tags"?}`): 202 with the template and a
/// new build of it, waiting for its steps.
pub async fn request(State(state): State<ApiState>, body: Body) -> ApiResult<Response> {
    let op = "request template build";
    let request: RequestBuild = parse(op, &read_body(op, body).await?)?;
    let name = request
        .name
        .or(request.alias)
        .ok_or_else(|| ApiError::bad_request(format!("{op}: a name is required")))?;
    let requested = state
        .registry
        .templates
        .request(&name, &request.tags)
        .map_err(|r| refused(op, r))?;
    let body = Requested {
        template_id: requested.template_id,
        build_id: requested.build.id.clone(),
        public: false,
        aliases: requested.names.clone(),
        names: requested.names,
        tags: requested.build.tags.clone(),
    };
    Ok((StatusCode::ACCEPTED, Json(body)).into_response())
}

#[derive(Debug, Serialize)]
struct FileUpload {
    present: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    url: Option<String>,
}

fn check_hash(op: &str, hash: &str) -> ApiResult<()> {
    if hash.len() == 64 && hash.bytes().all(|b| b.is_ascii_hexdigit()) {
        Ok(())
    } else {
        Err(ApiError::bad_request(format!(
            "{op}: invalid files hash {hash:?}: expected 64 hex digits"
        )))
    }
}

/// `GET /templates/{id}/files/{hash}`: 201 with whether the archive of a `COPY` step is already
/// here, and the URL to `PUT` it to (on this API's host, as the client reached it).
pub async fn file_upload(
    State(state): State<ApiState>,
    Path((template, hash)): Path<(String, String)>,
    headers: HeaderMap,
) -> ApiResult<Response> {
    let op = "get template files upload link";
    check_hash(op, &hash)?;
    state
        .registry
        .templates
        .find(&template)
        .ok_or_else(|| not_found(op, &format!("template {template:?}")))?;
    let hash = hash.to_ascii_lowercase();
    let host = headers
        .get(http::header::HOST)
        .and_then(|h| h.to_str().ok())
        .ok_or_else(|| ApiError::bad_request(format!("{op}: the request has no Host")))?;
    let present = tokio::fs::try_exists(state.registry.templates.upload(&hash))
        .await
        .map_err(|e| ApiError::internal(format!("{op}: {e}")))?;
    // Through the front over TLS (the API at `api.<domain>`), the client's scheme is https.
    let scheme = match headers
        .get(crate::front::api_host::FORWARDED_PROTO)
        .map(http::HeaderValue::as_bytes)
    {
        Some(b"https") => "https",
        _ => "http",
    };
    let url = format!(
        "{scheme}://{host}/template-uploads/{hash}?token={}",
        state.registry.templates.upload_token
    );
    let body = FileUpload {
        present,
        url: Some(url),
    };
    Ok((StatusCode::CREATED, Json(body)).into_response())
}

/// `PUT /template-uploads/{hash}?token=…` (the archive as the body; no API key: the token of
/// the URL handed out instead): 200 once stored. Staged beside the others and renamed into
/// place when complete, so a client that leaves midway stores nothing and two uploads of one
/// hash (the JS SDK uploads concurrently) leave one whole archive.
pub async fn upload(
    State(state): State<ApiState>,
    Path(hash): Path<String>,
    RawQuery(raw): RawQuery,
    body: Body,
) -> ApiResult<StatusCode> {
    let op = "upload template files";
    check_hash(op, &hash)?;
    let mut token = None;
    for (key, value) in query_pairs(op, raw.as_deref())? {
        match key.as_str() {
            "token" => token = Some(value),
            other => return Err(unknown_parameter(op, other)),
        }
    }
    let expected = state.registry.templates.upload_token.as_bytes();
    if token.is_none_or(|t| !super::auth::constant_time_eq(t.as_bytes(), expected)) {
        return Err(ApiError::new(
            StatusCode::UNAUTHORIZED,
            format!("{op}: missing or wrong upload token"),
        ));
    }
    let failed = |e: std::io::Error| ApiError::internal(format!("{op} {hash}: {e}"));
    let templates = &state.registry.templates;
    let staged = tempfile::Builder::new()
        .suffix(".partial")
        .tempfile_in(templates.uploads())
        .map_err(failed)?;
    let mut file = tokio::fs::File::from_std(staged.as_file().try_clone().map_err(failed)?);
    let mut stream = body.into_data_stream();
    while let Some(chunk) = stream.next().await {
        let chunk = chunk
            .map_err(|e| ApiError::bad_request(format!("{op} {hash}: reading the body: {e}")))?;
        file.write_all(&chunk).await.map_err(failed)?;
    }
    file.flush().await.map_err(failed)?;
    drop(file);
    staged
        .persist(templates.upload(&hash.to_ascii_lowercase()))
        .map_err(|e| failed(e.error))?;
    Ok(StatusCode::OK)
}

/// `POST /v2/templates/{id}/builds/{build}` (the steps): 202 once checked; the build runs on.
/// A build started already is 409; a malformed step is 400 and the build stays waiting.
pub async fn start_build(
    State(state): State<ApiState>,
    Path((template, build_id)): Path<(String, String)>,
    body: Body,
) -> ApiResult<StatusCode> {
    let op = "start template build";
    let request: BuildRequest = parse(op, &read_body(op, body).await?)?;
    let build = find_build(&state, op, &template, &build_id)?;
    let plan = template_build::plan(&state.registry, request)
        .map_err(|e| ApiError::bad_request(format!("{op} {build_id}: {e}")))?;
    if build.state().status != BuildStatus::Waiting {
        return Err(ApiError::new(
            StatusCode::CONFLICT,
            format!("{op} {build_id}: the build was started already"),
        ));
    }
    template_build::spawn(state.registry.clone(), build, plan);
    Ok(StatusCode::ACCEPTED)
}

fn find_build(
    state: &ApiState,
    op: &str,
    template: &str,
    build_id: &str,
) -> ApiResult<std::sync::Arc<Build>> {
    state
        .registry
        .templates
        .build(template, build_id)
        .ok_or_else(|| not_found(op, &format!("build {build_id} of template {template:?}")))
}

#[derive(Debug, Serialize)]
struct LogEntryBody {
    timestamp: String,
    level: crate::templates::Level,
    message: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    step: Option<String>,
}

impl LogEntryBody {
    fn of(entry: &LogEntry) -> LogEntryBody {
        LogEntryBody {
            timestamp: rfc3339(entry.at),
            level: entry.level,
            message: entry.message.clone(),
            step: entry.step.clone(),
        }
    }
}

#[derive(Debug, Serialize)]
struct ReasonBody {
    message: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    step: Option<String>,
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct StatusBody {
    #[serde(rename = "templateID")]
    template_id: String,
    #[serde(rename = "buildID")]
    build_id: String,
    status: BuildStatus,
    /// Always empty (the V1 build path's plain lines), as E2B's.
    logs: Vec<String>,
    log_entries: Vec<LogEntryBody>,
    #[serde(skip_serializing_if = "Option::is_none")]
    reason: Option<ReasonBody>,
}

/// `GET /templates/{id}/builds/{build}/status?logsOffset&limit&level`: the status and the log
/// entries from `logsOffset` on (at most `limit`, 100 by default), of `level` or above.
pub async fn status(
    State(state): State<ApiState>,
    Path((template, build_id)): Path<(String, String)>,
    RawQuery(raw): RawQuery,
) -> ApiResult<Response> {
    let op = "get template build status";
    let (mut offset, mut limit, mut level) = (0usize, MAX_LIMIT, None);
    for (key, value) in query_pairs(op, raw.as_deref())? {
        match key.as_str() {
            "logsOffset" => {
                offset = value.parse().map_err(|_| {
                    ApiError::bad_request(format!("{op}: invalid logsOffset {value:?}"))
                })?;
            }
            "limit" => limit = parse_limit(op, &value)?,
            "level" => level = Some(parse_level(op, &value)?),
            other => return Err(unknown_parameter(op, other)),
        }
    }
    let build = find_build(&state, op, &template, &build_id)?;
    let state = build.state();
    let body = StatusBody {
        template_id: build.template_id.clone(),
        build_id: build.id.clone(),
        status: state.status,
        logs: Vec::new(),
        log_entries: state
            .log
            .iter()
            .filter(|e| level.is_none_or(|l| rank(e.level) >= l))
            .skip(offset)
            .take(limit)
            .map(LogEntryBody::of)
            .collect(),
        reason: state.failure.as_ref().map(|f| ReasonBody {
            message: f.message.clone(),
            step: f.step.clone(),
        }),
    };
    Ok(Json(body).into_response())
}

fn rank(level: crate::templates::Level) -> u8 {
    match level {
        crate::templates::Level::Info => 1,
        crate::templates::Level::Warn => 2,
        crate::templates::Level::Error => 3,
    }
}

fn parse_level(op: &str, value: &str) -> ApiResult<u8> {
    match value {
        "debug" => Ok(0),
        "info" => Ok(1),
        "warn" => Ok(2),
        "error" => Ok(3),
        _ => Err(ApiError::bad_request(format!(
            "{op}: invalid level {value:?}: expected debug, info, warn or error"
        ))),
    }
}

#[derive(Debug, Serialize)]
struct AliasBody {
    #[serde(rename = "templateID")]
    template_id: String,
    public: bool,
}

/// `GET /templates/aliases/{name}`: 200 with the template of that name (or id), else 404.
/// `base`, which every sandbox may start from, is public (as E2B's own `base` is).
pub async fn alias(State(state): State<ApiState>, Path(name): Path<String>) -> ApiResult<Response> {
    let op = "get template by alias";
    let body = match state.registry.templates.find(&name) {
        Some(template_id) => AliasBody {
            template_id,
            public: false,
        },
        None if name == BASE_TEMPLATE => AliasBody {
            template_id: BASE_TEMPLATE.to_owned(),
            public: true,
        },
        None => return Err(not_found(op, &format!("template {name:?}"))),
    };
    Ok(Json(body).into_response())
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct AssignTags {
    target: String,
    tags: Vec<String>,
}

#[derive(Debug, Serialize)]
struct Assigned {
    tags: Vec<String>,
    #[serde(rename = "buildID")]
    build_id: String,
}

/// `POST /templates/tags` (`{"target": "name[:tag]", "tags": […]}`): 201 once the build the
/// target names carries the tags too.
pub async fn assign_tags(State(state): State<ApiState>, body: Body) -> ApiResult<Response> {
    let op = "assign template tags";
    let request: AssignTags = parse(op, &read_body(op, body).await?)?;
    let build_id = state
        .registry
        .templates
        .assign_tags(&request.target, &request.tags)
        .map_err(|r| refused(op, r))?;
    let body = Assigned {
        tags: request.tags,
        build_id,
    };
    Ok((StatusCode::CREATED, Json(body)).into_response())
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RemoveTags {
    name: String,
    tags: Vec<String>,
}

/// `DELETE /templates/tags` (`{"name", "tags"}`): 204 once the template has none of them.
pub async fn remove_tags(State(state): State<ApiState>, body: Body) -> ApiResult<StatusCode> {
    let op = "remove template tags";
    let request: RemoveTags = parse(op, &read_body(op, body).await?)?;
    state
        .registry
        .templates
        .remove_tags(&request.name, &request.tags)
        .map_err(|r| refused(op, r))?;
    Ok(StatusCode::NO_CONTENT)
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct TagBody {
    tag: String,
    #[serde(rename = "buildID")]
    build_id: String,
    created_at: String,
}

/// `GET /templates/{id}/tags`: the template's tags, by name.
pub async fn tags(State(state): State<ApiState>, Path(name): Path<String>) -> ApiResult<Response> {
    let op = "list template tags";
    let tags = state
        .registry
        .templates
        .tags(&name)
        .ok_or_else(|| not_found(op, &format!("template {name:?}")))?;
    let body: Vec<TagBody> = tags
        .into_iter()
        .map(|(tag, build_id, created)| TagBody {
            tag,
            build_id,
            created_at: rfc3339(created),
        })
        .collect();
    Ok(Json(body).into_response())
}

/// `DELETE /templates/{id}`: 204 once the snapshot or template (its builds, running ones
/// cancelled) is gone; 404 if there is neither.
pub async fn delete(
    State(state): State<ApiState>,
    Path(template): Path<String>,
) -> ApiResult<StatusCode> {
    let op = "delete template";
    let registry = state.registry.clone();
    let id = template.clone();
    let removed = tokio::task::spawn_blocking(move || {
        Ok::<_, std::io::Error>(registry.snapshots.remove(&id)? || registry.templates.delete(&id)?)
    })
    .await
    .map_err(|e| ApiError::internal(format!("{op} {template}: {e}")))?
    .map_err(|e| ApiError::internal(format!("{op} {template}: {e}")))?;
    if removed {
        Ok(StatusCode::NO_CONTENT)
    } else {
        Err(not_found(op, &format!("template {template:?}")))
    }
}
