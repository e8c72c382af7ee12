//! [`Api`]: the control-plane REST client (docs/e2b-protocol.md §2): create,
//! connect, kill, pause, timeout, info, list and metrics.

mod list;
mod models;

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use connectrpc::client::ClientTransport;
use http::header::{ACCEPT, AUTHORIZATION, CONTENT_TYPE, USER_AGENT};
use http::{HeaderMap, HeaderName, HeaderValue, Method, Request, StatusCode};
use serde::de::DeserializeOwned;

pub use list::{ListQuery, SandboxPage, SandboxPager};
pub use models::{
    AutoResume, DEFAULT_SANDBOX_TIMEOUT, Lifecycle, NetworkConfig, NewSandbox, SandboxDetail,
    SandboxInfo, SandboxMetric, SandboxState, VolumeMount,
};

use crate::body::{CollectError, collect_limited};
use crate::classify::{self, Surface};
use crate::config::ConnectionConfig;
use crate::error::{Context, Error, Result};
use crate::http_stack::HttpStack;
use crate::routing::validate_sandbox_id;
use crate::transport::{SandboxRoute, SandboxTransport};
use models::{TimeoutBody, timeout_seconds};

/// Largest API response accepted.
const RESPONSE_LIMIT: usize = 16 * 1024 * 1024;

const API_KEY_HEADER: HeaderName = HeaderName::from_static("x-api-key");
const NEXT_TOKEN_HEADER: HeaderName = HeaderName::from_static("x-next-token");

/// The result of connecting to a sandbox.
#[derive(Debug, Clone)]
pub struct Connected {
    /// The sandbox, as create returns it.
    pub info: SandboxInfo,
    /// True when it was paused and connect resumed it (HTTP 201), false when
    /// it was running (200).
    pub resumed: bool,
}

/// The control-plane client; cheap to clone (clones share the HTTP stack).
///
/// Every call is bounded by the configured request timeout (send and
/// response body together) and runs on the tokio runtime that polls it.
/// Dropping a call's future aborts the request; the server may still have
/// acted on it (e.g. a sandbox may have been created; a dropped create can
/// leave a sandbox behind that only `list` will show).
#[derive(Clone)]
pub struct Api {
    inner: Arc<Inner>,
}

struct Inner {
    http: HttpStack,
    config: ConnectionConfig,
    auth: HeaderMap,
}

impl std::fmt::Debug for Api {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Api")
            .field("api_url", &self.inner.config.api_url)
            .field("has_api_key", &self.inner.config.has_api_key())
            .finish_non_exhaustive()
    }
}

impl Api {
    /// A client for `config`, with a new HTTP stack built from its settings.
    pub fn new(config: ConnectionConfig) -> Self {
        let http = HttpStack::new(config.plain_http, config.tls.clone());
        Api::with_http(config, http)
    }

    /// A client for `config` sharing an existing HTTP stack.
    pub fn with_http(config: ConnectionConfig, http: HttpStack) -> Self {
        let mut auth = HeaderMap::new();
        if let Some(key) = &config.api_key {
            let mut value =
                HeaderValue::from_str(key.expose()).expect("validated API keys are header-safe");
            value.set_sensitive(true);
            auth.insert(API_KEY_HEADER, value);
        }
        if let Some(token) = &config.access_token {
            let mut value = HeaderValue::from_str(&format!("Bearer {}", token.expose()))
                .expect("access tokens are checked to be header-safe when resolved");
            value.set_sensitive(true);
            auth.insert(AUTHORIZATION, value);
        }
        Api {
            inner: Arc::new(Inner { http, config, auth }),
        }
    }

    /// A client configured from the environment alone.
    ///
    /// # Errors
    /// [`Error::Config`] for a malformed variable.
    pub fn from_env() -> Result<Self> {
        Ok(Api::new(ConnectionConfig::from_env()?))
    }

    /// The settings in use.
    pub fn config(&self) -> &ConnectionConfig {
        &self.inner.config
    }

    /// The shared HTTP stack.
    pub fn http(&self) -> &HttpStack {
        &self.inner.http
    }

    /// A transport to the envd of `info`'s sandbox on this client's HTTP
    /// stack, with its access token.
    ///
    /// # Errors
    /// As [`SandboxTransport::new`].
    pub fn sandbox_transport(&self, info: &SandboxInfo) -> Result<SandboxTransport> {
        SandboxTransport::new(
            self.inner.http.clone(),
            &self.inner.config,
            SandboxRoute {
                sandbox_id: info.sandbox_id.clone(),
                domain: info.domain.clone(),
                access_token: info.envd_access_token.clone(),
            },
        )
    }

    /// Creates a sandbox (`POST /sandboxes`).
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for a malformed request (nothing is sent);
    /// [`Error::Authentication`] for a missing or rejected key;
    /// [`Error::Http`] for an unknown template (the API's 400/404);
    /// [`Error::Protocol`] for a response without the required fields or
    /// with a non-semver `envdVersion`.
    pub async fn create_sandbox(&self, request: &NewSandbox) -> Result<SandboxInfo> {
        let context = Context::new("create sandbox from template", request.template());
        request.validate(&context)?;
        let body = serde_json::to_vec(request)
            .map_err(|e| Error::invalid_argument(context.clone(), e.to_string()))?;
        let response = self
            .call(
                &context,
                Method::POST,
                "/sandboxes".to_owned(),
                Some(body),
                None,
            )
            .await?;
        let info: SandboxInfo = decode(&context, &response.body)?;
        tracing::debug!(sandbox_id = %info.sandbox_id, envd_version = %info.envd_version, "sandbox created");
        Ok(info)
    }

    /// Connects to a sandbox (`POST /sandboxes/{id}/connect`), resuming it
    /// when paused; its lifetime is extended to at least `timeout` from now,
    /// never shortened.
    ///
    /// # Errors
    /// [`Error::SandboxNotFound`] when it does not exist.
    pub async fn connect_sandbox(&self, sandbox_id: &str, timeout: Duration) -> Result<Connected> {
        let context = Context::new("connect to sandbox", sandbox_id);
        validate_sandbox_id("connect to sandbox", sandbox_id)?;
        let body = TimeoutBody {
            timeout: timeout_seconds(&context, timeout)?,
        };
        let body = serde_json::to_vec(&body)
            .map_err(|e| Error::invalid_argument(context.clone(), e.to_string()))?;
        let response = self
            .call(
                &context,
                Method::POST,
                format!("/sandboxes/{sandbox_id}/connect"),
                Some(body),
                Some(sandbox_id),
            )
            .await?;
        Ok(Connected {
            info: decode(&context, &response.body)?,
            resumed: response.status == StatusCode::CREATED,
        })
    }

    /// Kills a sandbox (`DELETE /sandboxes/{id}`).
    ///
    /// # Errors
    /// [`Error::SandboxNotFound`] when it does not exist (already gone).
    pub async fn kill_sandbox(&self, sandbox_id: &str) -> Result<()> {
        let context = Context::new("kill sandbox", sandbox_id);
        validate_sandbox_id("kill sandbox", sandbox_id)?;
        self.call(
            &context,
            Method::DELETE,
            format!("/sandboxes/{sandbox_id}"),
            None,
            Some(sandbox_id),
        )
        .await?;
        Ok(())
    }

    /// Pauses a sandbox (`POST /sandboxes/{id}/pause`, no body).
    ///
    /// # Errors
    /// [`Error::Conflict`] when it is already paused;
    /// [`Error::SandboxNotFound`] when it does not exist.
    pub async fn pause_sandbox(&self, sandbox_id: &str) -> Result<()> {
        let context = Context::new("pause sandbox", sandbox_id);
        validate_sandbox_id("pause sandbox", sandbox_id)?;
        self.call(
            &context,
            Method::POST,
            format!("/sandboxes/{sandbox_id}/pause"),
            None,
            Some(sandbox_id),
        )
        .await?;
        Ok(())
    }

    /// Sets a sandbox's remaining lifetime to `timeout` from now
    /// (`POST /sandboxes/{id}/timeout`; may shorten it).
    ///
    /// # Errors
    /// [`Error::SandboxNotFound`] when it does not exist.
    pub async fn set_sandbox_timeout(&self, sandbox_id: &str, timeout: Duration) -> Result<()> {
        let context = Context::new("set timeout of sandbox", sandbox_id);
        validate_sandbox_id("set timeout of sandbox", sandbox_id)?;
        let body = TimeoutBody {
            timeout: timeout_seconds(&context, timeout)?,
        };
        let body = serde_json::to_vec(&body)
            .map_err(|e| Error::invalid_argument(context.clone(), e.to_string()))?;
        self.call(
            &context,
            Method::POST,
            format!("/sandboxes/{sandbox_id}/timeout"),
            Some(body),
            Some(sandbox_id),
        )
        .await?;
        Ok(())
    }

    /// A sandbox's details (`GET /sandboxes/{id}`).
    ///
    /// # Errors
    /// [`Error::SandboxNotFound`] when it does not exist.
    pub async fn sandbox_info(&self, sandbox_id: &str) -> Result<SandboxDetail> {
        let context = Context::new("get info of sandbox", sandbox_id);
        validate_sandbox_id("get info of sandbox", sandbox_id)?;
        let response = self
            .call(
                &context,
                Method::GET,
                format!("/sandboxes/{sandbox_id}"),
                None,
                Some(sandbox_id),
            )
            .await?;
        decode(&context, &response.body)
    }

    /// A sandbox's resource-usage samples (`GET /sandboxes/{id}/metrics`).
    ///
    /// # Errors
    /// [`Error::SandboxNotFound`] when it does not exist.
    pub async fn sandbox_metrics(&self, sandbox_id: &str) -> Result<Vec<SandboxMetric>> {
        let context = Context::new("get metrics of sandbox", sandbox_id);
        validate_sandbox_id("get metrics of sandbox", sandbox_id)?;
        let response = self
            .call(
                &context,
                Method::GET,
                format!("/sandboxes/{sandbox_id}/metrics"),
                None,
                Some(sandbox_id),
            )
            .await?;
        decode(&context, &response.body)
    }

    /// One page of sandboxes matching `query` (`GET /v2/sandboxes`);
    /// `next_token` is the previous page's.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for a bad query (nothing is sent).
    pub async fn list_sandboxes_page(
        &self,
        query: &ListQuery,
        next_token: Option<&str>,
    ) -> Result<SandboxPage> {
        let context = Context::new("list sandboxes", "");
        query.validate(&context)?;
        let query_string = query.to_query(next_token);
        let path = if query_string.is_empty() {
            "/v2/sandboxes".to_owned()
        } else {
            format!("/v2/sandboxes?{query_string}")
        };
        let response = self.call(&context, Method::GET, path, None, None).await?;
        let next_token = response
            .headers
            .get(NEXT_TOKEN_HEADER)
            .and_then(|v| v.to_str().ok())
            .filter(|v| !v.is_empty())
            .map(str::to_owned);
        Ok(SandboxPage {
            sandboxes: decode(&context, &response.body)?,
            next_token,
        })
    }

    /// A page iterator over the sandboxes matching `query`.
    pub fn list_sandboxes(&self, query: ListQuery) -> SandboxPager {
        SandboxPager::new(self.clone(), query)
    }

    /// Sends one API request and returns a 2xx response; anything else is
    /// classified. Bounded by the request timeout end to end.
    async fn call(
        &self,
        context: &Context,
        method: Method,
        path_and_query: String,
        body: Option<Vec<u8>>,
        sandbox_id: Option<&str>,
    ) -> Result<ApiResponse> {
        let inner = &*self.inner;
        if inner.auth.is_empty() {
            return Err(Error::Authentication {
                context: context.clone(),
                message: "no API key configured (set E2B_API_KEY or pass api_key)".to_owned(),
            });
        }
        let base = inner.config.api_url.to_string();
        let url = format!("{}{path_and_query}", base.trim_end_matches('/'));
        let mut request = Request::builder()
            .method(method.clone())
            .uri(&url)
            .header(USER_AGENT, inner.config.user_agent.clone())
            .header(ACCEPT, "application/json");
        if body.is_some() {
            request = request.header(CONTENT_TYPE, "application/json");
        }
        let mut request = request
            .body(connectrpc::client::full_body(
                body.map(Bytes::from).unwrap_or_default(),
            ))
            .map_err(|e| {
                Error::invalid_argument(
                    context.clone(),
                    format!("cannot form request to {url}: {e}"),
                )
            })?;
        request.headers_mut().extend(inner.auth.clone());
        tracing::debug!(%method, path = %path_and_query.split('?').next().unwrap_or(""), "API request");

        let exchange = async {
            let response = inner.http.send(request).await.map_err(|e| {
                classify::from_send_error(context.clone(), sandbox_id.unwrap_or(""), &e)
            })?;
            let (parts, body) = response.into_parts();
            let body = collect_limited(body, RESPONSE_LIMIT)
                .await
                .map_err(|e| match e {
                    CollectError::TooLarge(limit) => Error::protocol(
                        context.clone(),
                        format!("the response exceeds {limit} bytes"),
                    ),
                    CollectError::Read(message) => Error::Transport {
                        context: context.clone(),
                        message: format!("the response body broke off: {message}"),
                        source: None,
                    },
                })?;
            Ok::<_, Error>(ApiResponse {
                status: parts.status,
                headers: parts.headers,
                body,
            })
        };
        let response = match inner.config.request_timeout {
            Some(limit) => tokio::time::timeout(limit, exchange).await.map_err(|_| {
                Error::timeout(
                    context.clone(),
                    format!("no complete response within {} ms", limit.as_millis()),
                )
            })??,
            None => exchange.await?,
        };
        if !response.status.is_success() {
            return Err(classify::from_http_status(
                context.clone(),
                Surface::Api { sandbox_id },
                response.status,
                &response.body,
            ));
        }
        Ok(response)
    }
}

struct ApiResponse {
    status: StatusCode,
    headers: HeaderMap,
    body: Bytes,
}

fn decode<T: DeserializeOwned>(context: &Context, body: &[u8]) -> Result<T> {
    serde_json::from_slice(body)
        .map_err(|e| Error::protocol(context.clone(), format!("malformed response: {e}")))
}
