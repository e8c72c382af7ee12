//! [`SandboxTransport`]: the one place that knows where a sandbox's envd is
//! and which credentials it needs.

use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use connectrpc::ConnectError;
use connectrpc::client::{BoxFuture, ClientBody, ClientTransport};
use http::header::{HOST, HeaderName, HeaderValue, USER_AGENT};
use http::uri::{Authority, PathAndQuery, Scheme};
use http::{Request, Response, Uri};

use crate::classify::into_connect_error;
use crate::config::ConnectionConfig;
use crate::error::{Context, Error, Result};
use crate::http_stack::HttpStack;
use crate::routing::{ENVD_PORT, envd_base_url, envd_direct_url, validate_sandbox_id};
use crate::secret::Secret;
use crate::signing::{FileOperation, signature};
use crate::urlenc;

/// `E2b-Sandbox-Id`: which sandbox the edge proxy routes to.
pub const SANDBOX_ID_HEADER: HeaderName = HeaderName::from_static("e2b-sandbox-id");
/// `E2b-Sandbox-Port`: which port of it (always envd's).
pub const SANDBOX_PORT_HEADER: HeaderName = HeaderName::from_static("e2b-sandbox-port");
/// `X-Access-Token`: envd's access token of a secured sandbox.
pub const ACCESS_TOKEN_HEADER: HeaderName = HeaderName::from_static("x-access-token");

/// Where one sandbox's envd lives and how to authenticate to it: the
/// inputs of a [`SandboxTransport`].
#[derive(Debug, Clone)]
pub struct SandboxRoute {
    /// The sandbox id.
    pub sandbox_id: String,
    /// The `domain` of the create/connect response, if any.
    pub domain: Option<String>,
    /// The `envdAccessToken` of the create/connect response, if any.
    pub access_token: Option<Secret>,
}

/// A [`ClientTransport`] for one sandbox's envd; cheap to clone (clones
/// share the HTTP pools).
///
/// It takes requests whose URI is a path only (`/process.Process/Start`,
/// `/files?path=…`), puts them on the envd base URL (docs/e2b-protocol.md §1.2)
/// and adds what every envd request needs: `E2b-Sandbox-Id`,
/// `E2b-Sandbox-Port: 49983`, `X-Access-Token` when the sandbox has one, and
/// `User-Agent` unless the request set one. It is the only component that
/// holds credentials or routing: a request that arrives with a scheme or
/// host is refused (it would carry the token elsewhere), and caller-set
/// `Host`, `X-Access-Token` and routing headers are replaced.
///
/// Runs on whichever tokio runtime polls the returned future; dropping that
/// future aborts the request.
pub struct SandboxTransport<H = HttpStack> {
    inner: Arc<Inner<H>>,
}

impl<H> Clone for SandboxTransport<H> {
    fn clone(&self) -> Self {
        SandboxTransport {
            inner: Arc::clone(&self.inner),
        }
    }
}

struct Inner<H> {
    http: H,
    scheme: Scheme,
    authority: Authority,
    /// Path prefix of the base URL without a trailing slash ("" usually).
    prefix: String,
    base: Uri,
    direct: Uri,
    sandbox_id: String,
    sandbox_id_value: HeaderValue,
    access_token: Option<Secret>,
    access_token_value: Option<HeaderValue>,
    user_agent: HeaderValue,
}

impl<H> std::fmt::Debug for SandboxTransport<H> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SandboxTransport")
            .field("sandbox_id", &self.inner.sandbox_id)
            .field("base", &self.inner.base)
            .field("secured", &self.inner.access_token.is_some())
            .finish_non_exhaustive()
    }
}

impl<H: ClientTransport> SandboxTransport<H> {
    /// A transport for `route`'s envd over `http`, with the URL rules and
    /// `User-Agent` of `config`.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] when the sandbox id, domain or token cannot
    /// go into a URL or header.
    pub fn new(http: H, config: &ConnectionConfig, route: SandboxRoute) -> Result<Self> {
        let context = || Context::new("route to sandbox", route.sandbox_id.clone());
        validate_sandbox_id("route to sandbox", &route.sandbox_id)?;
        let base = envd_base_url(config, &route.sandbox_id, route.domain.as_deref())?;
        let direct = envd_direct_url(config, &route.sandbox_id, route.domain.as_deref())?;
        let parts = base.clone().into_parts();
        let (Some(scheme), Some(authority)) = (parts.scheme, parts.authority) else {
            return Err(Error::invalid_argument(
                context(),
                format!("envd base URL {base} is not absolute"),
            ));
        };
        let prefix = base.path().trim_end_matches('/').to_owned();
        let access_token_value = match &route.access_token {
            Some(token) => {
                let mut value = HeaderValue::from_str(token.expose()).map_err(|_| {
                    Error::invalid_argument(
                        context(),
                        "the envd access token is not a valid header value",
                    )
                })?;
                value.set_sensitive(true);
                Some(value)
            }
            None => None,
        };
        let sandbox_id_value = HeaderValue::from_str(&route.sandbox_id)
            .expect("validated sandbox ids are header-safe");
        Ok(SandboxTransport {
            inner: Arc::new(Inner {
                http,
                scheme,
                authority,
                prefix,
                base,
                direct,
                sandbox_id: route.sandbox_id,
                sandbox_id_value,
                access_token: route.access_token,
                access_token_value,
                user_agent: config.user_agent.clone(),
            }),
        })
    }

    /// The sandbox this transport reaches.
    pub fn sandbox_id(&self) -> &str {
        &self.inner.sandbox_id
    }

    /// The envd base URL requests are sent to.
    pub fn base_url(&self) -> &Uri {
        &self.inner.base
    }

    /// Whether the sandbox is secured (has an envd access token).
    pub fn is_secured(&self) -> bool {
        self.inner.access_token.is_some()
    }

    /// A URL a plain HTTP client (no routing headers, no token) can use to
    /// read or write one file: `<direct base>/files?path=…[&username=…]`,
    /// signed when the sandbox is secured (docs/e2b-protocol.md §7.2),
    /// optionally expiring at `expires_at`.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for an empty path or an expiry before the
    /// Unix epoch.
    pub fn file_url(
        &self,
        path: &str,
        operation: FileOperation,
        user: Option<&str>,
        expires_at: Option<SystemTime>,
    ) -> Result<String> {
        let context = || Context::new("sign file URL", path);
        if path.is_empty() {
            return Err(Error::invalid_argument(context(), "the path is empty"));
        }
        let expiration = match expires_at {
            Some(at) => Some(
                at.duration_since(UNIX_EPOCH)
                    .map_err(|_| Error::invalid_argument(context(), "expiry before 1970"))?
                    .as_secs(),
            ),
            None => None,
        };
        let mut pairs: Vec<(&str, String)> = vec![("path", path.to_owned())];
        if let Some(user) = user {
            pairs.push(("username", user.to_owned()));
        }
        if let Some(token) = &self.inner.access_token {
            let signed = signature(
                path,
                operation,
                user.unwrap_or(""),
                token.expose(),
                expiration,
            );
            pairs.push(("signature", signed));
            if let Some(expiration) = expiration {
                pairs.push(("signature_expiration", expiration.to_string()));
            }
        }
        let query = urlenc::query(pairs.iter().map(|(k, v)| (*k, v.as_str())));
        let base = self.inner.direct.to_string();
        Ok(format!("{}/files?{query}", base.trim_end_matches('/')))
    }

    /// Puts a path-only request onto the envd base URL and adds the routing,
    /// auth and agent headers.
    fn prepare(&self, request: Request<ClientBody>) -> Result<Request<ClientBody>, ConnectError> {
        let inner = &*self.inner;
        let (mut parts, body) = request.into_parts();
        if parts.uri.scheme().is_some() || parts.uri.authority().is_some() {
            return Err(ConnectError::invalid_argument(format!(
                "SandboxTransport takes path-only request URIs, got {}",
                parts.uri
            )));
        }
        let path_and_query = parts
            .uri
            .path_and_query()
            .map(PathAndQuery::as_str)
            .unwrap_or("/");
        if !path_and_query.starts_with('/') {
            return Err(ConnectError::invalid_argument(format!(
                "request path {path_and_query:?} must start with '/'"
            )));
        }
        let full_path: PathAndQuery = if inner.prefix.is_empty() {
            path_and_query
                .parse()
                .map_err(|e| ConnectError::invalid_argument(format!("bad request path: {e}")))?
        } else {
            format!("{}{path_and_query}", inner.prefix)
                .parse()
                .map_err(|e| ConnectError::invalid_argument(format!("bad request path: {e}")))?
        };
        parts.uri = Uri::from_parts({
            let mut uri = http::uri::Parts::default();
            uri.scheme = Some(inner.scheme.clone());
            uri.authority = Some(inner.authority.clone());
            uri.path_and_query = Some(full_path);
            uri
        })
        .map_err(|e| ConnectError::invalid_argument(format!("bad request URI: {e}")))?;

        let headers = &mut parts.headers;
        headers.remove(HOST);
        headers.insert(SANDBOX_ID_HEADER, inner.sandbox_id_value.clone());
        headers.insert(SANDBOX_PORT_HEADER, HeaderValue::from(ENVD_PORT));
        match &inner.access_token_value {
            Some(token) => {
                headers.insert(ACCESS_TOKEN_HEADER, token.clone());
            }
            None => {
                headers.remove(ACCESS_TOKEN_HEADER);
            }
        }
        if !headers.contains_key(USER_AGENT) {
            headers.insert(USER_AGENT, inner.user_agent.clone());
        }
        Ok(Request::from_parts(parts, body))
    }
}

impl<H: ClientTransport> ClientTransport for SandboxTransport<H> {
    type ResponseBody = H::ResponseBody;
    type Error = ConnectError;

    fn send(
        &self,
        request: Request<ClientBody>,
    ) -> BoxFuture<'static, Result<Response<Self::ResponseBody>, Self::Error>> {
        let request = match self.prepare(request) {
            Ok(request) => request,
            Err(err) => return Box::pin(async move { Err(err) }),
        };
        tracing::debug!(
            sandbox_id = %self.inner.sandbox_id,
            method = %request.method(),
            path = %request.uri().path(),
            "envd request"
        );
        let send = self.inner.http.send(request);
        Box::pin(async move {
            send.await
                .map_err(|e| into_connect_error(e, "envd request failed"))
        })
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use bytes::Bytes;
    use http_body_util::Full;

    use super::*;
    use crate::config::ConnectionOptions;

    /// Records the requests it is given and answers 200 with an empty body.
    #[derive(Clone, Default)]
    struct Recorder(Arc<Mutex<Vec<http::request::Parts>>>);

    impl ClientTransport for Recorder {
        type ResponseBody = Full<Bytes>;
        type Error = ConnectError;
        fn send(
            &self,
            request: Request<ClientBody>,
        ) -> BoxFuture<'static, Result<Response<Full<Bytes>>, ConnectError>> {
            self.0.lock().unwrap().push(request.into_parts().0);
            Box::pin(async { Ok(Response::new(Full::new(Bytes::new()))) })
        }
    }

    fn config(sandbox_url: Option<&str>) -> ConnectionConfig {
        let mut options = ConnectionOptions::default().with_user_agent("test-agent/1");
        if let Some(url) = sandbox_url {
            options = options.with_sandbox_url(url);
        }
        options.resolve_with(|_| None).unwrap()
    }

    fn route(token: Option<&str>) -> SandboxRoute {
        SandboxRoute {
            sandbox_id: "sbx123".into(),
            domain: None,
            access_token: token.map(Secret::from),
        }
    }

    fn request(uri: &str) -> Request<ClientBody> {
        Request::builder()
            .method("POST")
            .uri(uri)
            .header(HOST, "evil.example")
            .header(ACCESS_TOKEN_HEADER, "forged")
            .header(SANDBOX_ID_HEADER, "someone-else")
            .body(connectrpc::client::full_body(Bytes::new()))
            .unwrap()
    }

    #[tokio::test]
    async fn rewrites_onto_the_base_url_and_adds_headers() {
        let recorder = Recorder::default();
        let transport = SandboxTransport::new(
            recorder.clone(),
            &config(Some("http://127.0.0.1:9000/prefix/")),
            route(Some("tok-1")),
        )
        .unwrap();
        transport
            .send(request("/process.Process/Start"))
            .await
            .unwrap();
        let seen = recorder.0.lock().unwrap().pop().unwrap();
        assert_eq!(
            seen.uri.to_string(),
            "http://127.0.0.1:9000/prefix/process.Process/Start"
        );
        assert_eq!(seen.headers[SANDBOX_ID_HEADER], "sbx123");
        assert_eq!(seen.headers[SANDBOX_PORT_HEADER], "49983");
        assert_eq!(seen.headers[ACCESS_TOKEN_HEADER], "tok-1");
        assert!(seen.headers[ACCESS_TOKEN_HEADER].is_sensitive());
        assert_eq!(seen.headers[USER_AGENT], "test-agent/1");
        assert!(seen.headers.get(HOST).is_none());
        assert_eq!(seen.headers.get_all(SANDBOX_ID_HEADER).iter().count(), 1);
    }

    #[tokio::test]
    async fn keeps_the_query_and_drops_forged_tokens_without_a_token() {
        let recorder = Recorder::default();
        let transport =
            SandboxTransport::new(recorder.clone(), &config(None), route(None)).unwrap();
        assert_eq!(transport.base_url().to_string(), "https://sandbox.e2b.app/");
        let mut req = request("/files?path=%2Fhome%2Fuser%2Fa&username=root");
        req.headers_mut()
            .insert(USER_AGENT, HeaderValue::from_static("caller/2"));
        transport.send(req).await.unwrap();
        let seen = recorder.0.lock().unwrap().pop().unwrap();
        assert_eq!(
            seen.uri.to_string(),
            "https://sandbox.e2b.app/files?path=%2Fhome%2Fuser%2Fa&username=root"
        );
        assert!(seen.headers.get(ACCESS_TOKEN_HEADER).is_none());
        assert_eq!(seen.headers[USER_AGENT], "caller/2");
    }

    #[tokio::test]
    async fn absolute_request_uris_are_refused() {
        let recorder = Recorder::default();
        let transport =
            SandboxTransport::new(recorder.clone(), &config(None), route(Some("t"))).unwrap();
        let err = transport
            .send(request("http://attacker.example/steal"))
            .await
            .unwrap_err();
        assert_eq!(err.code, connectrpc::ErrorCode::InvalidArgument);
        assert!(recorder.0.lock().unwrap().is_empty(), "nothing may be sent");
    }

    #[test]
    fn bad_routes_are_rejected() {
        let err = SandboxTransport::new(
            Recorder::default(),
            &config(None),
            SandboxRoute {
                sandbox_id: "a/b".into(),
                domain: None,
                access_token: None,
            },
        )
        .unwrap_err();
        assert!(matches!(err, Error::InvalidArgument { .. }));
        let err = SandboxTransport::new(
            Recorder::default(),
            &config(None),
            route(Some("bad\ntoken")),
        )
        .unwrap_err();
        assert!(matches!(err, Error::InvalidArgument { .. }));
        assert!(!err.to_string().contains("bad\ntoken"));
    }

    #[test]
    fn debug_output_hides_the_token() {
        let transport = SandboxTransport::new(
            Recorder::default(),
            &config(None),
            route(Some("tok-secret")),
        )
        .unwrap();
        let text = format!("{transport:?}");
        assert!(!text.contains("tok-secret"), "{text}");
        assert!(text.contains("secured: true"), "{text}");
    }

    #[test]
    fn file_urls_are_signed_for_secured_sandboxes() {
        let secured = SandboxTransport::new(
            Recorder::default(),
            &config(Some("http://127.0.0.1:9000")),
            SandboxRoute {
                sandbox_id: "sbx".into(),
                domain: None,
                access_token: Some(Secret::from("0tQG31xiMp0IOQfaz9dcwi72L1CPo8e0")),
            },
        )
        .unwrap();
        let url = secured
            .file_url("hello.txt", FileOperation::Read, Some("user"), None)
            .unwrap();
        assert_eq!(
            url,
            "http://127.0.0.1:9000/files?path=hello.txt&username=user&signature=v1_gUtH%2Fs9YCJWgCizjfUxuWfhFE4QSydOWEIIvfLwDr6E"
        );
        let expiring = secured
            .file_url(
                "a b",
                FileOperation::Write,
                None,
                Some(UNIX_EPOCH + std::time::Duration::from_secs(1_700_000_000)),
            )
            .unwrap();
        assert!(expiring.contains("path=a%20b&signature=v1_"), "{expiring}");
        assert!(
            expiring.ends_with("&signature_expiration=1700000000"),
            "{expiring}"
        );

        let open = SandboxTransport::new(Recorder::default(), &config(None), route(None)).unwrap();
        assert_eq!(
            open.file_url("/x", FileOperation::Read, None, None)
                .unwrap(),
            "https://49983-sbx123.e2b.app/files?path=%2Fx"
        );
        assert!(matches!(
            open.file_url("", FileOperation::Read, None, None),
            Err(Error::InvalidArgument { .. })
        ));
    }
}
