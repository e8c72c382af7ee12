//! Volumes (`crate::volumes`): the control routes behind the API key — `POST`/`GET /volumes`,
//! `GET`/`DELETE /volumes/{volumeID}` — and the content API the SDKs' `Volume` reaches with the
//! volume's own token (`Authorization: Bearer <token>`), at `E2B_VOLUME_API_URL` (this same
//! port): `/volumecontent/{volumeID}/dir|path|file` (`crate::volume_content`).

use std::sync::Arc;

use axum::Json;
use axum::body::Body;
use axum::extract::{FromRequestParts, Path, RawQuery, State};
use axum::response::{IntoResponse, Response};
use futures::StreamExt;
use http::request::Parts;
use http::{StatusCode, header};
use serde::{Deserialize, Serialize};
use tokio::io::AsyncWriteExt;

use super::ApiState;
use super::error::ApiError;
use super::json_body::{parse, parse_optional, read_body};
use super::list_query::{query_pairs, unknown_parameter};
use crate::volume_content::{self as content, Metadata};
use crate::volumes::{Volume, VolumeError, is_valid_name};

/// The deepest listing one request may ask for.
const MAX_DEPTH: u32 = 64;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NewVolume {
    name: String,
}

/// `VolumeAndToken`.
#[derive(Debug, Serialize)]
struct VolumeBody {
    #[serde(rename = "volumeID")]
    volume_id: String,
    name: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    token: Option<String>,
}

impl VolumeBody {
    fn of(volume: &Volume, with_token: bool) -> VolumeBody {
        VolumeBody {
            volume_id: volume.id.clone(),
            name: volume.name.clone(),
            token: with_token.then(|| volume.token.clone()),
        }
    }
}

fn volume_error(op: &str, err: VolumeError) -> ApiError {
    let status = match err {
        VolumeError::NameTaken(_) | VolumeError::InUse(..) => StatusCode::CONFLICT,
        VolumeError::Io(_) => StatusCode::INTERNAL_SERVER_ERROR,
    };
    ApiError::new(status, format!("{op}: {err}"))
}

fn not_found(op: &str, id: &str) -> ApiError {
    ApiError::new(
        StatusCode::NOT_FOUND,
        format!("{op}: volume {id} not found"),
    )
}

/// `POST /volumes` (`{"name"}`): 201 with the new volume and its content token; 409 if the
/// name is taken.
pub async fn create(State(state): State<ApiState>, body: Body) -> Result<Response, ApiError> {
    let op = "create volume";
    let request: NewVolume = parse(op, &read_body(op, body).await?)?;
    if !is_valid_name(&request.name) {
        return Err(ApiError::bad_request(format!(
            "{op}: invalid name {:?}: expected 1 to {} of [A-Za-z0-9_-]",
            request.name,
            crate::volumes::MAX_NAME_LEN
        )));
    }
    let volumes = state.registry.volumes.clone();
    let volume = tokio::task::spawn_blocking(move || volumes.create(&request.name))
        .await
        .map_err(|e| ApiError::internal(format!("{op}: {e}")))?
        .map_err(|e| volume_error(op, e))?;
    Ok((StatusCode::CREATED, Json(VolumeBody::of(&volume, true))).into_response())
}

/// `GET /volumes`: every volume (id and name).
pub async fn list(State(state): State<ApiState>, RawQuery(raw): RawQuery) -> ApiResult<Response> {
    let op = "list volumes";
    if let Some((key, _)) = query_pairs(op, raw.as_deref())?.first() {
        return Err(unknown_parameter(op, key));
    }
    let bodies: Vec<VolumeBody> = state
        .registry
        .volumes
        .list()
        .iter()
        .map(|v| VolumeBody::of(v, false))
        .collect();
    Ok(Json(bodies).into_response())
}

type ApiResult<T> = Result<T, ApiError>;

/// `GET /volumes/{volumeID}`: the volume with its content token.
pub async fn info(State(state): State<ApiState>, Path(id): Path<String>) -> ApiResult<Response> {
    let volume = state
        .registry
        .volumes
        .get(&id)
        .ok_or_else(|| not_found("get volume", &id))?;
    Ok(Json(VolumeBody::of(&volume, true)).into_response())
}

/// `DELETE /volumes/{volumeID}`: 204 once the volume and its files are gone; 404 if there is
/// none; 409 while a sandbox mounts it.
pub async fn destroy(
    State(state): State<ApiState>,
    Path(id): Path<String>,
) -> ApiResult<StatusCode> {
    let op = "delete volume";
    let volumes = state.registry.volumes.clone();
    let target = id.clone();
    let removed = tokio::task::spawn_blocking(move || volumes.destroy(&target))
        .await
        .map_err(|e| ApiError::internal(format!("{op}: {e}")))?
        .map_err(|e| volume_error(op, e))?;
    if removed {
        Ok(StatusCode::NO_CONTENT)
    } else {
        Err(not_found(op, &id))
    }
}

/// A content request's query: its path, and what else the operation takes.
#[derive(Debug, Default)]
struct ContentQuery {
    path: String,
    depth: Option<u32>,
    force: bool,
    recursive: Option<bool>,
    meta: Metadata,
}

/// Parses `raw`, refusing parameters outside `allowed` (besides `path`, which is required).
fn content_query(op: &str, raw: Option<&str>, allowed: &[&str]) -> ApiResult<ContentQuery> {
    let mut query = ContentQuery::default();
    let mut path = None;
    for (key, value) in query_pairs(op, raw)? {
        if key != "path" && !allowed.contains(&key.as_str()) {
            return Err(unknown_parameter(op, &key));
        }
        let number = |max: u32| {
            value
                .parse::<u32>()
                .ok()
                .filter(|n| *n <= max)
                .ok_or_else(|| {
                    ApiError::bad_request(format!(
                        "{op}: invalid {key} {value:?}: expected 0 to {max}"
                    ))
                })
        };
        let flag = || {
            value.parse::<bool>().map_err(|_| {
                ApiError::bad_request(format!("{op}: invalid {key} {value:?}: expected a boolean"))
            })
        };
        match key.as_str() {
            "path" => path = Some(normalize(op, &value)?),
            "depth" => query.depth = Some(number(MAX_DEPTH)?).filter(|d| *d > 0),
            "uid" => query.meta.uid = Some(number(u32::MAX)?),
            "gid" => query.meta.gid = Some(number(u32::MAX)?),
            "mode" => query.meta.mode = Some(number(0o7777)?),
            "force" => query.force = flag()?,
            "recursive" => query.recursive = Some(flag()?),
            _ => unreachable!("checked against `allowed`"),
        }
    }
    query.path = path.ok_or_else(|| ApiError::bad_request(format!("{op}: path is required")))?;
    Ok(query)
}

fn normalize(op: &str, path: &str) -> ApiResult<String> {
    content::normalize(path).map_err(|e| ApiError::bad_request(format!("{op}: {e}")))
}

/// The API error for a failed file operation on `path`.
fn io_error(op: &str, path: &str, err: &std::io::Error) -> ApiError {
    use std::io::ErrorKind::*;
    let status = match err.kind() {
        NotFound => StatusCode::NOT_FOUND,
        AlreadyExists | DirectoryNotEmpty => StatusCode::CONFLICT,
        PermissionDenied => StatusCode::FORBIDDEN,
        InvalidInput | NotADirectory | IsADirectory | InvalidFilename => StatusCode::BAD_REQUEST,
        StorageFull => StatusCode::INSUFFICIENT_STORAGE,
        _ => StatusCode::INTERNAL_SERVER_ERROR,
    };
    ApiError::new(status, format!("{op} {path}: {err}"))
}

/// What a content request brings: the volume id in its path, its bearer token, its raw query.
pub struct ContentParts {
    id: String,
    token: Option<String>,
    query: Option<String>,
}

impl<S: Send + Sync> FromRequestParts<S> for ContentParts {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        let Path(id) = Path::<String>::from_request_parts(parts, state)
            .await
            .map_err(|e| ApiError::bad_request(format!("volume content: {e}")))?;
        Ok(ContentParts {
            id,
            token: parts
                .headers
                .get(header::AUTHORIZATION)
                .and_then(|v| v.to_str().ok())
                .and_then(|v| v.strip_prefix("Bearer "))
                .map(str::to_owned),
            query: parts.uri.query().map(str::to_owned),
        })
    }
}

/// A content request: its volume (whose token it carries) and its query.
struct ContentRequest {
    op: &'static str,
    volume: Arc<Volume>,
    query: ContentQuery,
}

impl ContentRequest {
    /// Checks the bearer token against volume `id`'s and parses the query, refusing parameters
    /// outside `allowed` (see [`content_query`]).
    fn new(
        state: &ApiState,
        op: &'static str,
        parts: ContentParts,
        allowed: &[&str],
    ) -> ApiResult<ContentRequest> {
        let volume = state
            .registry
            .volumes
            .get(&parts.id)
            .ok_or_else(|| not_found(op, &parts.id))?;
        if parts
            .token
            .as_deref()
            .is_none_or(|t| !super::auth::constant_time_eq(t.as_bytes(), volume.token.as_bytes()))
        {
            return Err(ApiError::new(
                StatusCode::UNAUTHORIZED,
                format!("{op}: missing or wrong volume token (Authorization: Bearer <token>)"),
            ));
        }
        let query = content_query(op, parts.query.as_deref(), allowed)?;
        Ok(ContentRequest { op, volume, query })
    }

    /// Runs `f` on the request's path, confined to the volume's files
    /// (`volume_content::confined`).
    async fn run<T: Send + 'static>(
        &self,
        f: impl FnOnce(&str) -> std::io::Result<T> + Send + 'static,
    ) -> ApiResult<T> {
        let path = self.query.path.clone();
        content::confined(self.volume.data(), move || f(&path))
            .await
            .map_err(|e| self.error(&e))
    }

    fn error(&self, err: &std::io::Error) -> ApiError {
        io_error(self.op, &self.query.path, err)
    }
}

/// `GET /volumecontent/{id}/dir?path&depth`: the entries under a directory (depth 1 default).
pub async fn list_dir(State(state): State<ApiState>, parts: ContentParts) -> ApiResult<Response> {
    let op = "list volume directory";
    let request = ContentRequest::new(&state, op, parts, &["depth"])?;
    let depth = request.query.depth.unwrap_or(1);
    let entries = request.run(move |path| content::list(path, depth)).await?;
    Ok(Json(entries).into_response())
}

/// `POST /volumecontent/{id}/dir?path&uid&gid&mode&force`: 201 with the new directory.
pub async fn make_dir(State(state): State<ApiState>, parts: ContentParts) -> ApiResult<Response> {
    let op = "make volume directory";
    let request = ContentRequest::new(&state, op, parts, &OWNED)?;
    let (force, meta) = (request.query.force, request.query.meta);
    let made = request
        .run(move |path| content::make_dir(path, force, meta))
        .await?;
    Ok((StatusCode::CREATED, Json(made)).into_response())
}

/// What a request that creates something may set.
const OWNED: [&str; 4] = ["uid", "gid", "mode", "force"];

/// `GET /volumecontent/{id}/path?path`: one entry.
pub async fn stat(State(state): State<ApiState>, parts: ContentParts) -> ApiResult<Response> {
    let request = ContentRequest::new(&state, "stat volume path", parts, &[])?;
    Ok(Json(request.run(content::stat).await?).into_response())
}

/// `PATCH /volumecontent/{id}/path?path` (`{"uid"?, "gid"?, "mode"?}`): the entry after.
pub async fn update_metadata(
    State(state): State<ApiState>,
    parts: ContentParts,
    body: Body,
) -> ApiResult<Response> {
    let op = "update volume path metadata";
    let request = ContentRequest::new(&state, op, parts, &[])?;
    let meta: Metadata = parse_optional(op, &read_body(op, body).await?)?.unwrap_or_default();
    if meta.mode.is_some_and(|m| m > 0o7777) {
        return Err(ApiError::bad_request(format!(
            "{op}: invalid mode: expected at most 0o7777"
        )));
    }
    let entry = request
        .run(move |path| content::set_metadata(path, meta))
        .await?;
    Ok(Json(entry).into_response())
}

/// `DELETE /volumecontent/{id}/path?path[&recursive]`: 204. A directory goes with its contents
/// unless `recursive=false` (the 2.51 SDK sends no `recursive`; newer ones send `true`).
pub async fn remove(State(state): State<ApiState>, parts: ContentParts) -> ApiResult<StatusCode> {
    let op = "remove volume path";
    let request = ContentRequest::new(&state, op, parts, &["recursive"])?;
    let recursive = request.query.recursive.unwrap_or(true);
    request
        .run(move |path| content::remove(path, recursive))
        .await?;
    Ok(StatusCode::NO_CONTENT)
}

/// `GET /volumecontent/{id}/file?path`: the file's bytes, streamed.
pub async fn read_file(State(state): State<ApiState>, parts: ContentParts) -> ApiResult<Response> {
    let request = ContentRequest::new(&state, "read volume file", parts, &[])?;
    let file = request.run(content::open_file).await?;
    let length = file.metadata().map_err(|e| request.error(&e))?.len();
    let stream =
        tokio_util::io::ReaderStream::with_capacity(tokio::fs::File::from_std(file), 1 << 16);
    Ok((
        [
            (header::CONTENT_TYPE, "application/octet-stream".to_owned()),
            (header::CONTENT_LENGTH, length.to_string()),
        ],
        Body::from_stream(stream),
    )
        .into_response())
}

/// `PUT /volumecontent/{id}/file?path&uid&gid&mode&force` (the bytes as the body): 201 with
/// the file. The bytes go to a hidden file beside the destination, renamed into place only once
/// complete, so a client that leaves midway changes nothing.
pub async fn write_file(
    State(state): State<ApiState>,
    parts: ContentParts,
    body: Body,
) -> ApiResult<Response> {
    let op = "write volume file";
    let request = ContentRequest::new(&state, op, parts, &OWNED)?;
    let (force, meta) = (request.query.force, request.query.meta);
    let upload = request
        .run(move |path| content::begin_upload(path, force))
        .await?;
    // Removes the staged file unless the upload reached `commit` (also when this future is
    // dropped: a client that left).
    let mut staged = StagedGuard(Some((request.volume.data(), upload.staged().to_owned())));
    let mut file =
        tokio::fs::File::from_std(upload.file.try_clone().map_err(|e| request.error(&e))?);
    let mut stream = body.into_data_stream();
    while let Some(chunk) = stream.next().await {
        let chunk = chunk.map_err(|e| {
            ApiError::bad_request(format!(
                "{op} {}: reading the body: {e}",
                request.query.path
            ))
        })?;
        file.write_all(&chunk)
            .await
            .map_err(|e| request.error(&e))?;
    }
    file.flush().await.map_err(|e| request.error(&e))?;
    drop(file);
    // From here `commit` owns the staged file (it removes it if it fails).
    staged.0 = None;
    let written = request
        .run(move |_| content::commit(upload, force, meta))
        .await?;
    Ok((StatusCode::CREATED, Json(written)).into_response())
}

/// A staged upload (volume root, staged path) to remove when dropped, unless taken.
struct StagedGuard(Option<(std::path::PathBuf, String)>);

impl Drop for StagedGuard {
    fn drop(&mut self) {
        if let Some((root, staged)) = self.0.take() {
            content::abandon(root, staged);
        }
    }
}
