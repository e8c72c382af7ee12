//! Handlers of the `/sandboxes` routes.

use std::sync::Arc;
use std::time::Duration;

use axum::Json;
use axum::body::Body;
use axum::extract::{Path, RawQuery, State};
use axum::response::{IntoResponse, Response};
use http::{HeaderMap, HeaderValue, StatusCode};

use super::ApiState;
use super::error::ApiError;
use super::idempotency::Claim;
use super::json_body::{parse, parse_optional, read_body};
use super::list_query::{PageCursor, parse_list_query, unknown_parameter};
use super::model::{
    ConnectSandbox, DEFAULT_TIMEOUT_SECS, Lifecycle, MetricBody, NetworkBody, NetworkUpdate,
    NewSandbox, PauseSandbox, Refresh, ResumeSandbox, SandboxBody, SandboxDetailBody, SetTimeout,
    StateName, V2_DEFAULT_TIMEOUT_SECS, VolumeMount, check_timeout, egress_of,
};
use crate::registry::{Connected, CreateSpec, Phase, Sandbox, VolumeMounted};
use crate::templates::BASE_TEMPLATE;
use crate::timefmt::{rfc3339, unix_seconds};

type ApiResult<T> = Result<T, ApiError>;

/// `POST /sandboxes` (JS SDK): `secure` decides whether envd requires an access token; a
/// missing `timeout` is 15 s.
pub async fn create_v1(
    State(state): State<ApiState>,
    headers: HeaderMap,
    body: Body,
) -> ApiResult<Response> {
    create(state, &headers, body, false, DEFAULT_TIMEOUT_SECS).await
}

/// `POST /v2/sandboxes` (the newest SDKs): every v2 sandbox is secured; a missing `timeout`
/// is 300 s.
pub async fn create_v2(
    State(state): State<ApiState>,
    headers: HeaderMap,
    body: Body,
) -> ApiResult<Response> {
    create(state, &headers, body, true, V2_DEFAULT_TIMEOUT_SECS).await
}

/// Create; a request with an `Idempotency-Key` creates at most once (`idempotency.rs`).
/// `default_timeout`: the lifetime, in seconds, when the request sets none.
async fn create(
    state: ApiState,
    headers: &HeaderMap,
    body: Body,
    always_secure: bool,
    default_timeout: u32,
) -> ApiResult<Response> {
    let op = "create sandbox";
    let raw = read_body(op, body).await?;
    let request: NewSandbox = parse(op, &raw)?;
    let egress = request.validate(op)?;
    let creating = match headers.get("idempotency-key") {
        None => None,
        Some(key) => {
            let key = key.to_str().map_err(|_| {
                ApiError::bad_request(format!("{op}: Idempotency-Key is not ASCII"))
            })?;
            match state.idempotency.claim(op, key, &raw)? {
                Claim::Replay(answer) => {
                    return Ok((StatusCode::CREATED, Json(answer)).into_response());
                }
                Claim::Create(creating) => Some(creating),
            }
        }
    };
    // A snapshot's id or name as the template: the sandbox starts with its files; a built
    // template's id or name (with a tag or not): its build's files, user, workdir and start;
    // `base`: the base world. Anything else is unknown: 404, as E2B answers, rather than a
    // base sandbox the caller did not ask for.
    let (template_id, files_from, start) = match state.registry.snapshots.find(&request.template_id)
    {
        Some(snapshot) => (request.template_id, Some(snapshot.dir.clone()), None),
        None => match state.registry.templates.resolve(&request.template_id) {
            Some(resolved) => (
                resolved.template_id,
                Some(resolved.files),
                Some(resolved.start),
            ),
            None if state
                .registry
                .templates
                .find(template_name(&request.template_id))
                .is_some() =>
            {
                return Err(ApiError::bad_request(format!(
                    "{op}: template {:?} has no ready build of that tag",
                    request.template_id
                )));
            }
            None if request.template_id == BASE_TEMPLATE => (request.template_id, None, None),
            None => {
                return Err(ApiError::new(
                    StatusCode::NOT_FOUND,
                    format!("{op}: template '{}' not found", request.template_id),
                ));
            }
        },
    };
    let volume_mounts = request
        .volume_mounts
        .unwrap_or_default()
        .into_iter()
        .map(|mount| {
            let lease = state.registry.volumes.lease(&mount.name).ok_or_else(|| {
                ApiError::bad_request(format!(
                    "{op}: volumeMounts: no volume named {:?}",
                    mount.name
                ))
            })?;
            Ok(VolumeMounted {
                lease,
                path: mount.path,
            })
        })
        .collect::<ApiResult<Vec<_>>>()?;
    let spec = CreateSpec {
        files_from,
        volume_mounts,
        start,
        template_id,
        timeout: Duration::from_secs(request.timeout.unwrap_or(default_timeout).into()),
        metadata: request.metadata.unwrap_or_default(),
        env_vars: request.env_vars.unwrap_or_default(),
        secure: always_secure || request.secure.unwrap_or(false),
        auto_pause: request.auto_pause.unwrap_or(false),
        auto_pause_memory: request.auto_pause_memory.unwrap_or(true),
        auto_resume: request.auto_resume.is_some_and(|a| a.enabled),
        egress,
        mask_request_host: request
            .network
            .as_ref()
            .and_then(|network| network.mask_request_host.clone()),
        private_traffic: request
            .network
            .as_ref()
            .is_some_and(|network| network.allow_public_traffic == Some(false)),
    };
    // The outcome is recorded for the key even if this client leaves before it.
    let registry = state.registry.clone();
    let answer = tokio::spawn(async move {
        let sandbox = registry.create(spec).await?;
        let answer = serde_json::to_value(sandbox_body(&sandbox))
            .map_err(|e| ApiError::internal(format!("create sandbox: {e}")))?;
        if let Some(creating) = creating {
            creating.created(answer.clone());
        }
        Ok::<_, ApiError>(answer)
    })
    .await
    .map_err(|e| ApiError::internal(format!("{op}: task failed: {e}")))??;
    Ok((StatusCode::CREATED, Json(answer)).into_response())
}

/// A `templateID` without its `:tag`.
fn template_name(template: &str) -> &str {
    template.rsplit_once(':').map_or(template, |(name, _)| name)
}

/// `POST /sandboxes/{id}/connect`: `timeout` is required.
pub async fn connect_v1(
    state: State<ApiState>,
    id: Path<String>,
    body: Body,
) -> ApiResult<Response> {
    connect(state, id, body, None).await
}

/// `POST /v2/sandboxes/{id}/connect`: `timeout` defaults to 300 s.
pub async fn connect_v2(
    state: State<ApiState>,
    id: Path<String>,
    body: Body,
) -> ApiResult<Response> {
    connect(state, id, body, Some(V2_DEFAULT_TIMEOUT_SECS)).await
}

/// Connect (v1 and v2): 200 if running, 201 if resumed.
async fn connect(
    State(state): State<ApiState>,
    Path(id): Path<String>,
    body: Body,
    default_timeout: Option<u32>,
) -> ApiResult<Response> {
    let op = "connect sandbox";
    let request: ConnectSandbox = parse(op, &read_body(op, body).await?)?;
    let timeout = request.timeout.or(default_timeout).ok_or_else(|| {
        ApiError::new(
            StatusCode::BAD_REQUEST,
            format!("{op} {id}: missing field `timeout`"),
        )
    })?;
    check_timeout(op, timeout)?;
    let memory = request.memory.unwrap_or(true);
    let (sandbox, how) = state
        .registry
        .connect(&id, Duration::from_secs(timeout.into()), memory)
        .await?;
    let status = match how {
        Connected::WasRunning => StatusCode::OK,
        Connected::Resumed => StatusCode::CREATED,
    };
    Ok((status, Json(sandbox_body(&sandbox))).into_response())
}

/// `POST /sandboxes/{id}/resume` (deprecated): resumes a paused sandbox (201); 409 if running.
pub async fn resume(
    State(state): State<ApiState>,
    Path(id): Path<String>,
    body: Body,
) -> ApiResult<Response> {
    let op = "resume sandbox";
    let request: Option<ResumeSandbox> = parse_optional(op, &read_body(op, body).await?)?;
    let timeout = request
        .as_ref()
        .and_then(|r| r.timeout)
        .unwrap_or(DEFAULT_TIMEOUT_SECS);
    check_timeout(op, timeout)?;
    let sandbox = state
        .registry
        .get(&id)
        .ok_or_else(|| ApiError::sandbox_not_found(op, &id))?;
    if matches!(sandbox.phase(), Phase::Running { .. }) {
        return Err(ApiError::new(
            StatusCode::CONFLICT,
            format!("{op} {id}: sandbox is already running"),
        ));
    }
    let memory = request.as_ref().and_then(|r| r.memory).unwrap_or(true);
    let (sandbox, _) = state
        .registry
        .connect(&id, Duration::from_secs(timeout.into()), memory)
        .await?;
    if let Some(auto_pause) = request.as_ref().and_then(|r| r.auto_pause) {
        sandbox.set_auto_pause(auto_pause);
    }
    Ok((StatusCode::CREATED, Json(sandbox_body(&sandbox))).into_response())
}

/// `DELETE /sandboxes/{id}`: 204 once every process is dead and the overlay deleted.
pub async fn kill(State(state): State<ApiState>, Path(id): Path<String>) -> ApiResult<StatusCode> {
    state.registry.kill(&id).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// `POST /sandboxes/{id}/pause`: 204; 409 if already paused. The optional body is checked.
pub async fn pause(
    State(state): State<ApiState>,
    Path(id): Path<String>,
    body: Body,
) -> ApiResult<StatusCode> {
    let op = "pause sandbox";
    let options: Option<PauseSandbox> = parse_optional(op, &read_body(op, body).await?)?;
    let memory = options.and_then(|o| o.memory).unwrap_or(true);
    state.registry.pause(&id, memory).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// `POST /sandboxes/{id}/timeout`: `endAt = now + timeout`.
pub async fn set_timeout(
    State(state): State<ApiState>,
    Path(id): Path<String>,
    body: Body,
) -> ApiResult<StatusCode> {
    let op = "set sandbox timeout";
    let request: SetTimeout = parse(op, &read_body(op, body).await?)?;
    check_timeout(op, request.timeout)?;
    state
        .registry
        .set_timeout(&id, Duration::from_secs(request.timeout.into()))
        .await?;
    Ok(StatusCode::NO_CONTENT)
}

/// `POST /sandboxes/{id}/refreshes`: keeps the sandbox alive for `duration` more seconds
/// (default 60), never shortening it.
pub async fn refresh(
    State(state): State<ApiState>,
    Path(id): Path<String>,
    body: Body,
) -> ApiResult<StatusCode> {
    let op = "refresh sandbox";
    let request: Option<Refresh> = parse_optional(op, &read_body(op, body).await?)?;
    let duration = request.and_then(|r| r.duration).unwrap_or(60);
    check_timeout(op, duration)?;
    let sandbox = state
        .registry
        .get(&id)
        .ok_or_else(|| ApiError::sandbox_not_found(op, &id))?;
    if !matches!(sandbox.phase(), Phase::Running { .. }) {
        return Err(ApiError::new(
            StatusCode::CONFLICT,
            format!("{op} {id}: sandbox is paused"),
        ));
    }
    state
        .registry
        .connect(&id, Duration::from_secs(duration.into()), true)
        .await?;
    Ok(StatusCode::NO_CONTENT)
}

/// `GET /sandboxes/{id}`: `SandboxDetail`.
pub async fn info(
    State(state): State<ApiState>,
    Path(id): Path<String>,
) -> ApiResult<Json<SandboxDetailBody>> {
    let sandbox = state
        .registry
        .get(&id)
        .ok_or_else(|| ApiError::sandbox_not_found("get sandbox", &id))?;
    detail_body(&state, &sandbox)
        .map(Json)
        .ok_or_else(|| ApiError::sandbox_not_found("get sandbox", &id))
}

/// `GET /sandboxes/{id}/metrics[?start=&end=]`: the sandbox's current sample, if its time (in
/// unix seconds, the range's precision) is inside the range, both ends included; else none.
/// e2b-local keeps no history, so a range that ended before now has no points.
pub async fn metrics(
    State(state): State<ApiState>,
    Path(id): Path<String>,
    RawQuery(query): RawQuery,
) -> ApiResult<Json<Vec<MetricBody>>> {
    let op = "get sandbox metrics";
    let (mut start, mut end) = (i64::MIN, i64::MAX);
    for pair in query
        .as_deref()
        .unwrap_or("")
        .split('&')
        .filter(|p| !p.is_empty())
    {
        let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
        let bound = match key {
            "start" => &mut start,
            "end" => &mut end,
            other => return Err(unknown_parameter(&format!("{op} {id}"), other)),
        };
        *bound = value.parse::<i64>().map_err(|_| {
            ApiError::bad_request(format!(
                "{op} {id}: {key} must be unix seconds, got {value:?}"
            ))
        })?;
    }
    let sandbox = state
        .registry
        .get(&id)
        .ok_or_else(|| ApiError::sandbox_not_found(op, &id))?;
    let sample = sandbox
        .world
        .sample(&state.registry.host)
        .await
        .map_err(|e| ApiError::internal(e.to_string()))?;
    let inside = (start..=end).contains(&unix_seconds(sample.at));
    Ok(Json(
        inside
            .then(|| MetricBody::of(&sample))
            .into_iter()
            .collect(),
    ))
}

/// `GET /v2/sandboxes`: running and paused by default, paginated with `x-next-token`.
pub async fn list_v2(
    State(state): State<ApiState>,
    RawQuery(query): RawQuery,
) -> ApiResult<Response> {
    list(state, query, &[StateName::Running, StateName::Paused]).await
}

/// `GET /sandboxes` (v1): running sandboxes.
pub async fn list_v1(
    State(state): State<ApiState>,
    RawQuery(query): RawQuery,
) -> ApiResult<Response> {
    list(state, query, &[StateName::Running]).await
}

async fn list(
    state: ApiState,
    query: Option<String>,
    default_states: &[StateName],
) -> ApiResult<Response> {
    let query = parse_list_query("list sandboxes", query.as_deref(), default_states)?;
    let mut matching: Vec<(PageCursor, SandboxDetailBody)> = state
        .registry
        .all()
        .into_iter()
        .filter(|s| {
            query
                .metadata
                .iter()
                .all(|(k, v)| s.metadata.get(k) == Some(v))
        })
        .filter(|s| query.template.as_ref().is_none_or(|t| &s.template_id == t))
        .filter(|s| {
            // At the millisecond precision `startedAt` is reported with, so a listed
            // `startedAt` passed back as a bound includes its own sandbox.
            let ms = |nanos: u128| nanos / 1_000_000;
            let started = ms(s.started_unix_nanos());
            query.started_after.is_none_or(|after| started >= ms(after))
                && query
                    .started_before
                    .is_none_or(|before| started <= ms(before))
        })
        .filter_map(|s| {
            let body = detail_body(&state, &s)?;
            query.states.contains(&body.state).then(|| {
                (
                    PageCursor {
                        started_unix_nanos: s.started_unix_nanos(),
                        sandbox_id: s.id.clone(),
                    },
                    body,
                )
            })
        })
        .filter(|(cursor, _)| {
            query.after.as_ref().is_none_or(|after| {
                if query.descending {
                    cursor < after
                } else {
                    cursor > after
                }
            })
        })
        .collect();
    matching.sort_by(|a, b| {
        if query.descending {
            b.0.cmp(&a.0)
        } else {
            a.0.cmp(&b.0)
        }
    });
    let more = matching.len() > query.limit;
    matching.truncate(query.limit);
    let next = more
        .then(|| matching.last().map(|(cursor, _)| cursor.token()))
        .flatten();
    let items: Vec<SandboxDetailBody> = matching.into_iter().map(|(_, body)| body).collect();
    let mut response = Json(items).into_response();
    if let Some(token) = next {
        response.headers_mut().insert(
            "x-next-token",
            HeaderValue::from_str(&token).expect("token is base64url"),
        );
    }
    Ok(response)
}

pub(super) fn sandbox_body(sandbox: &Sandbox) -> SandboxBody {
    SandboxBody {
        template_id: sandbox.template_id.clone(),
        sandbox_id: sandbox.id.clone(),
        client_id: CLIENT_ID.to_owned(),
        envd_version: e2b_local_envd::ENVD_VERSION,
        envd_access_token: sandbox.access_token.clone(),
        traffic_access_token: sandbox.traffic_access_token.clone(),
        domain: None,
    }
}

/// `clientID` is deprecated but required by the Python SDK; e2b-local has a single "client".
const CLIENT_ID: &str = "e2b-local";

/// The detail view, or `None` if the sandbox died meanwhile.
fn detail_body(state: &ApiState, sandbox: &Arc<Sandbox>) -> Option<SandboxDetailBody> {
    let (state_name, pause_mode) = match sandbox.phase() {
        Phase::Running { .. } => (StateName::Running, None),
        Phase::Paused { memory: true, .. } => (StateName::Paused, Some("full")),
        Phase::Paused { memory: false, .. } => (StateName::Paused, Some("filesystem")),
        Phase::Dead => return None,
    };
    let host = &state.registry.host;
    let egress = sandbox.world.egress();
    Some(SandboxDetailBody {
        template_id: sandbox.template_id.clone(),
        sandbox_id: sandbox.id.clone(),
        client_id: CLIENT_ID.to_owned(),
        started_at: rfc3339(sandbox.started_at),
        end_at: rfc3339(sandbox.end_at()),
        cpu_count: host.cpu_count,
        memory_mb: host.memory_mb(),
        disk_size_mb: host.disk_size_mb(),
        state: state_name,
        envd_version: e2b_local_envd::ENVD_VERSION,
        envd_access_token: sandbox.access_token.clone(),
        allow_internet_access: Some(egress.internet),
        network: (!egress.allow_out.is_empty() || !egress.deny_out.is_empty()).then(|| {
            NetworkBody {
                allow_out: egress.allow_out.clone(),
                deny_out: egress.deny_out.clone(),
            }
        }),
        domain: None,
        metadata: sandbox.metadata.clone(),
        lifecycle: Lifecycle {
            auto_resume: sandbox.auto_resume,
            on_timeout: if sandbox.auto_pause() {
                "pause"
            } else {
                "kill"
            },
        },
        volume_mounts: volume_mounts_of(sandbox),
        pause_mode,
    })
}

/// The `volumeMounts` a sandbox was created with.
fn volume_mounts_of(sandbox: &Sandbox) -> Vec<VolumeMount> {
    sandbox
        .volume_mounts
        .iter()
        .map(|m| VolumeMount {
            name: m.lease.volume().name.clone(),
            path: m.path.clone(),
        })
        .collect()
}

/// `PUT /sandboxes/{id}/network`: replaces the sandbox's egress rules (running, paused or
/// rebooting) — 204; what e2b-local cannot enforce is 400 and changes nothing.
pub async fn update_network(
    State(state): State<ApiState>,
    Path(id): Path<String>,
    body: Body,
) -> ApiResult<StatusCode> {
    let op = "update sandbox network";
    let update: NetworkUpdate = parse(op, &read_body(op, body).await?)?;
    let egress = egress_of(
        op,
        update.allow_internet_access,
        update.allow_out,
        update.deny_out,
        update.rules.as_ref(),
        update.egress_proxy.as_ref(),
    )?;
    state.registry.update_network(&id, egress).await?;
    Ok(StatusCode::NO_CONTENT)
}
