//! The control plane: E2B's REST API for sandbox lifecycle (docs/e2b-protocol.md §2), served by
//! axum.

pub mod auth;
pub mod error;
pub mod idempotency;
pub mod json_body;
pub mod list_query;
mod logs;
mod metrics;
pub mod model;
mod sandboxes;
mod snapshots;
mod templates;
mod volumes;

use std::sync::Arc;

use axum::Router;
use axum::middleware;
use axum::routing::{delete, get, post, put};
use http::StatusCode;

use crate::registry::Registry;
use error::ApiError;

/// Shared state of every API handler.
#[derive(Clone)]
pub struct ApiState {
    pub registry: Arc<Registry>,
    pub api_key: Arc<str>,
    /// The `Idempotency-Key`s of creates.
    pub idempotency: Arc<idempotency::Idempotency>,
}

/// All control-plane routes behind the API-key check, plus an unauthenticated `GET /health`.
/// Unknown paths answer 404 and wrong methods 405, both as JSON errors.
pub fn router(state: ApiState) -> Router {
    let authed = Router::new()
        .route(
            "/sandboxes",
            post(sandboxes::create_v1).get(sandboxes::list_v1),
        )
        .route(
            "/v2/sandboxes",
            post(sandboxes::create_v2).get(sandboxes::list_v2),
        )
        .route(
            "/sandboxes/{id}",
            get(sandboxes::info).delete(sandboxes::kill),
        )
        .route("/sandboxes/{id}/connect", post(sandboxes::connect_v1))
        .route("/v2/sandboxes/{id}/connect", post(sandboxes::connect_v2))
        .route("/sandboxes/{id}/resume", post(sandboxes::resume))
        .route("/sandboxes/{id}/pause", post(sandboxes::pause))
        .route("/sandboxes/{id}/timeout", post(sandboxes::set_timeout))
        .route("/sandboxes/{id}/network", put(sandboxes::update_network))
        .route("/sandboxes/{id}/refreshes", post(sandboxes::refresh))
        .route("/sandboxes/{id}/metrics", get(sandboxes::metrics))
        .route("/sandboxes/metrics", get(metrics::sandboxes))
        .route("/sandboxes/{id}/snapshots", post(snapshots::create))
        .route("/sandboxes/{id}/fork", post(snapshots::fork))
        .route("/snapshots", get(snapshots::list))
        .route("/templates/{template}", delete(templates::delete))
        .route("/v3/templates", post(templates::request))
        .route(
            "/templates/{template}/files/{hash}",
            get(templates::file_upload),
        )
        .route(
            "/v2/templates/{template}/builds/{build}",
            post(templates::start_build),
        )
        .route(
            "/templates/{template}/builds/{build}/status",
            get(templates::status),
        )
        .route("/templates/aliases/{name}", get(templates::alias))
        .route(
            "/templates/tags",
            post(templates::assign_tags).delete(templates::remove_tags),
        )
        .route("/templates/{template}/tags", get(templates::tags))
        .route("/teams/{team}/metrics", get(metrics::team))
        .route("/teams/{team}/metrics/max", get(metrics::team_max))
        .route("/sandboxes/{id}/logs", get(logs::logs_v1))
        .route("/v2/sandboxes/{id}/logs", get(logs::logs_v2))
        .route("/volumes", post(volumes::create).get(volumes::list))
        .route("/volumes/{id}", get(volumes::info).delete(volumes::destroy))
        .route_layer(middleware::from_fn_with_state(
            state.clone(),
            auth::require_api_key,
        ));
    // The content API checks each volume's own token instead of the API key.
    let volume_content = Router::new()
        .route(
            "/volumecontent/{id}/dir",
            get(volumes::list_dir).post(volumes::make_dir),
        )
        .route(
            "/volumecontent/{id}/path",
            get(volumes::stat)
                .patch(volumes::update_metadata)
                .delete(volumes::remove),
        )
        .route(
            "/volumecontent/{id}/file",
            get(volumes::read_file).put(volumes::write_file),
        );
    // Archives of template `COPY` steps come with the token of the URL handed out instead.
    let template_uploads = Router::new().route("/template-uploads/{hash}", put(templates::upload));
    Router::new()
        .route("/health", get(|| async { StatusCode::OK }))
        .merge(authed)
        .merge(volume_content)
        .merge(template_uploads)
        .fallback(|uri: http::Uri| async move {
            ApiError::new(
                StatusCode::NOT_FOUND,
                format!("{}: no such API route", uri.path()),
            )
        })
        .method_not_allowed_fallback(|method: http::Method, uri: http::Uri| async move {
            ApiError::new(
                StatusCode::METHOD_NOT_ALLOWED,
                format!("{method} {}: method not allowed", uri.path()),
            )
        })
        .with_state(state)
}
