//! Request dispatch: CORS open to `*` (preflights answered before anything else), the
//! access-token check, Connect RPCs to connectrpc, everything else to the plain HTTP routes.

use std::sync::Arc;

use connectrpc::{ConnectRpcService, Limits, Router};
use http::{HeaderValue, Method, Request, Response, StatusCode, header};
use http_body_util::BodyExt;
use hyper::body::Incoming;
use tower::Service as _;

use crate::auth::{UNAUTHORIZED_MESSAGE, header_token_matches, is_token_exempt};
use crate::filesystem::FilesystemService;
use crate::http::response::{Body, BoxError, json_error, status};
use crate::process::ProcessService;
use crate::rpc_context::UserInterceptor;
use crate::state::Daemon;

/// Per-request dispatch over the shared daemon state.
#[derive(Clone)]
pub(crate) struct App {
    daemon: Arc<Daemon>,
    connect: ConnectRpcService<Router>,
}

const RPC_PREFIXES: [&str; 2] = ["/process.Process/", "/filesystem.Filesystem/"];

/// Response headers exposed to browsers (Connect's, plus the ones envd adds).
const EXPOSED_HEADERS: &str = "Grpc-Status, Grpc-Message, Grpc-Status-Details-Bin, Connect-Content-Encoding, Connect-Accept-Encoding, Location, Cache-Control, X-Content-Type-Options";

impl App {
    pub(crate) fn new(daemon: Arc<Daemon>) -> Self {
        let router = Router::new()
            .add_service(Arc::new(ProcessService {
                daemon: Arc::clone(&daemon),
            }))
            .add_service(Arc::new(FilesystemService {
                daemon: Arc::clone(&daemon),
            }));
        let max = daemon.options.max_message_size;
        let connect = ConnectRpcService::new(router)
            .with_limits(
                Limits::default()
                    .with_max_message_size(max)
                    .with_max_request_body_size(max.saturating_add(5)),
            )
            .with_interceptor(UserInterceptor {
                daemon: Arc::clone(&daemon),
            });
        Self { daemon, connect }
    }

    /// Answers one request; never fails (errors are responses).
    pub(crate) async fn handle(&self, mut request: Request<Incoming>) -> Response<Body> {
        let origin = request.headers().contains_key(header::ORIGIN);
        let mut response = if request.method() == Method::OPTIONS
            && origin
            && request
                .headers()
                .contains_key(header::ACCESS_CONTROL_REQUEST_METHOD)
        {
            preflight(&request)
        } else if let Some(denied) = self.check_token(&request) {
            denied
        } else if RPC_PREFIXES
            .iter()
            .any(|prefix| request.uri().path().starts_with(prefix))
        {
            // envd treats a zero timeout as "none"; connectrpc would expire the call at once.
            if request
                .headers()
                .get("connect-timeout-ms")
                .is_some_and(|value| value.as_bytes().iter().all(|b| *b == b'0'))
            {
                request.headers_mut().remove("connect-timeout-ms");
            }
            let mut connect = self.connect.clone();
            match connect.call(request).await {
                Ok(response) => response.map(|body| {
                    body.map_err(|never| -> BoxError { match never {} })
                        .boxed_unsync()
                }),
                Err(never) => match never {},
            }
        } else {
            crate::http::route(&self.daemon, request).await
        };
        if origin {
            let headers = response.headers_mut();
            headers.insert(
                header::ACCESS_CONTROL_ALLOW_ORIGIN,
                HeaderValue::from_static("*"),
            );
            headers.insert(
                header::ACCESS_CONTROL_EXPOSE_HEADERS,
                HeaderValue::from_static(EXPOSED_HEADERS),
            );
            headers.append(header::VARY, HeaderValue::from_static("Origin"));
        }
        response
    }

    /// The 401 for a request that needs the access token and lacks it.
    fn check_token(&self, request: &Request<Incoming>) -> Option<Response<Body>> {
        let token = self.daemon.access_token()?;
        if is_token_exempt(request.method(), request.uri().path())
            || header_token_matches(request.headers(), &token)
        {
            return None;
        }
        Some(json_error(StatusCode::UNAUTHORIZED, UNAUTHORIZED_MESSAGE))
    }
}

/// A CORS preflight answer: any origin, envd's methods, the requested headers.
fn preflight(request: &Request<Incoming>) -> Response<Body> {
    let mut response = status(StatusCode::NO_CONTENT);
    let headers = response.headers_mut();
    headers.insert(
        header::ACCESS_CONTROL_ALLOW_METHODS,
        HeaderValue::from_static("HEAD, GET, POST, PUT, PATCH, DELETE"),
    );
    if let Some(requested) = request
        .headers()
        .get(header::ACCESS_CONTROL_REQUEST_HEADERS)
    {
        headers.insert(header::ACCESS_CONTROL_ALLOW_HEADERS, requested.clone());
    }
    headers.insert(
        header::ACCESS_CONTROL_MAX_AGE,
        HeaderValue::from_static("7200"),
    );
    headers.append(
        header::VARY,
        HeaderValue::from_static("Access-Control-Request-Method"),
    );
    headers.append(
        header::VARY,
        HeaderValue::from_static("Access-Control-Request-Headers"),
    );
    response
}
