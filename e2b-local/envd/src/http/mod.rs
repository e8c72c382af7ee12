//! envd's plain HTTP routes (docs/e2b-protocol.md §7): `/files` (GET and POST), `/health`, `/envs`,
//! `/metrics` and `/init`. Every error body is `{"code": <status>, "message": "…"}`.

mod content_type;
mod download;
mod encoding;
mod init;
mod query;
mod ranges;
pub(crate) mod response;
mod upload;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use http::{HeaderValue, Method, Request, Response, StatusCode, header};
use hyper::body::Incoming;

use crate::auth::{Operation, SigningParams, validate_signing};
use crate::metrics;
use crate::state::{Daemon, UserError};
use crate::users::User;
use query::Query;
use response::{Body, json, json_error, status};

/// Answers a non-RPC request (the access token was already checked where required).
pub(crate) async fn route(daemon: &Arc<Daemon>, request: Request<Incoming>) -> Response<Body> {
    let path = request.uri().path().to_owned();
    match (request.method().clone(), path.as_str()) {
        (Method::GET, "/health") => no_store(status(StatusCode::NO_CONTENT)),
        (Method::GET, "/envs") => {
            let envs: BTreeMap<String, String> = daemon
                .settings()
                .env_vars
                .all()
                .map(|(name, value)| (name.to_owned(), value.to_owned()))
                .collect();
            no_store(json(StatusCode::OK, &envs))
        }
        (Method::GET, "/metrics") => match metrics::collect(&daemon.cpu) {
            Ok(metrics) => no_store(json(StatusCode::OK, &metrics)),
            Err(err) => json_error(
                StatusCode::INTERNAL_SERVER_ERROR,
                format!("collecting metrics: {err}"),
            ),
        },
        (Method::POST, "/init") => init::post_init(daemon, request).await,
        (Method::GET, "/files") => download::get_files(daemon, request).await,
        (Method::POST, "/files") => upload::post_files(daemon, request).await,
        (method, "/health" | "/envs" | "/metrics" | "/init" | "/files") => {
            let allow = match path.as_str() {
                "/init" => "POST",
                "/files" => "GET, POST",
                _ => "GET",
            };
            let mut response = json_error(
                StatusCode::METHOD_NOT_ALLOWED,
                format!("method {method} not allowed on {path}"),
            );
            response
                .headers_mut()
                .insert(header::ALLOW, HeaderValue::from_static(allow));
            response
        }
        (method, _) => json_error(
            StatusCode::NOT_FOUND,
            format!("no route for {method} {path}"),
        ),
    }
}

fn no_store(mut response: Response<Body>) -> Response<Body> {
    response
        .headers_mut()
        .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    response
}

/// What every `/files` request starts with (docs/e2b-protocol.md §7.1–7.3): the query, the
/// signature or token check, and the acting user (`username`, else the default user).
pub(crate) struct FilesRequest {
    pub query: Query,
    pub user: User,
}

impl FilesRequest {
    /// The raw `path` parameter (empty when absent).
    pub(crate) fn path(&self) -> &str {
        self.query.get("path").unwrap_or("")
    }
}

pub(crate) fn files_prologue<B>(
    daemon: &Daemon,
    request: &Request<B>,
    operation: Operation,
) -> Result<FilesRequest, Box<Response<Body>>> {
    let reject = |status, message: String| Box::new(json_error(status, message));
    let query = Query::parse(request.uri().query())
        .map_err(|err| reject(StatusCode::BAD_REQUEST, format!("invalid query: {err}")))?;
    let expiration = match query.get("signature_expiration") {
        None => None,
        Some(raw) => Some(raw.parse::<i64>().map_err(|_| {
            reject(
                StatusCode::BAD_REQUEST,
                format!(
                    "invalid format for parameter signature_expiration: {raw:?} is not unix seconds"
                ),
            )
        })?),
    };
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |elapsed| elapsed.as_secs() as i64);
    let token = daemon.access_token();
    validate_signing(
        token.as_deref(),
        request.headers(),
        &SigningParams {
            path: query.get("path").unwrap_or(""),
            username: query.get("username"),
            signature: query.get("signature"),
            expiration,
        },
        operation,
        now,
    )
    .map_err(|message| reject(StatusCode::UNAUTHORIZED, message))?;
    let user = daemon
        .resolve_user(query.get("username"))
        .map_err(|(name, err)| match err {
            UserError::Unspecified => {
                reject(StatusCode::BAD_REQUEST, "username not provided".to_owned())
            }
            UserError::Lookup(err) => reject(
                StatusCode::UNAUTHORIZED,
                format!("error looking up user '{name}': {err}"),
            ),
        })?;
    Ok(FilesRequest { query, user })
}
