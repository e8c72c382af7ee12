//! The adapter side: [`OwnerTransport`], a `connectrpc` transport that
//! sends through an injected `e2b` owner, and [`envd_client`], the typed
//! envd client over it.

use std::sync::Arc;

use connectrpc::ConnectError;
use connectrpc::client::{BoxFuture, ClientBody, ClientTransport};
use dsh_plugin_api::ErrorKind;
use dsh_plugin_api::owner::{DaemonRequest, Owner, SandboxInfo};
use e2b_client::{Envd, EnvdOptions};
use http::uri::PathAndQuery;
use http::{Request, Response, StatusCode};
use http_body::Body;

use crate::bodies::{RelayedBody, RelayedBodyError, client_body_stream};
use crate::gone::{edge_answer, is_gone};
use crate::headers;

/// A [`ClientTransport`] over an injected `e2b` owner: every request goes
/// to `Owner::envd`, which adds routing and credentials and sends it
/// through the owner's one connection pool. Cheap to clone.
///
/// Requests must carry path-only URIs (what `e2b_client::Envd` builds).
/// Bodies stream both ways, one chunk in flight; a request body with a
/// known length crosses with its `Content-Length`. Failures:
/// - the owner's `Unavailable` (the sandbox is gone) comes back as the edge
///   proxy's 502 answer, which `Envd` classifies as
///   [`e2b_client::Error::SandboxNotFound`] (`is_sandbox_gone()`);
/// - the owner's `InvalidInput` is Connect `invalid_argument`;
/// - any other owner error is a transport failure (`Envd` reports
///   [`e2b_client::Error::Transport`], `is_unavailable()`), with the owner's
///   error as its source;
/// - a response body the owner ends with an error ends the `Envd` stream or
///   download with a transport failure.
///
/// Runs on the runtime that polls it (the adapter's); the owner runs its
/// part on its own runtime. Dropping a future or a response body aborts the
/// request in the owner.
#[derive(Clone)]
pub struct OwnerTransport {
    owner: Arc<dyn Owner>,
    sandbox_id: Arc<str>,
}

impl std::fmt::Debug for OwnerTransport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OwnerTransport")
            .field("sandbox_id", &self.sandbox_id)
            .finish_non_exhaustive()
    }
}

impl OwnerTransport {
    /// A transport through `owner`.
    pub fn new(owner: Arc<dyn Owner>) -> Self {
        let sandbox_id = Arc::from(owner.info().sandbox_id);
        OwnerTransport { owner, sandbox_id }
    }

    /// The owner requests go through.
    pub fn owner(&self) -> &Arc<dyn Owner> {
        &self.owner
    }

    /// The sandbox the owner holds.
    pub fn sandbox_id(&self) -> &str {
        &self.sandbox_id
    }
}

/// The typed envd client of the owner's sandbox: [`envd_options`] for its
/// identity, sending through [`OwnerTransport`].
pub fn envd_client(owner: Arc<dyn Owner>) -> Envd<OwnerTransport> {
    let options = envd_options(&owner.info());
    Envd::new(OwnerTransport::new(owner), options)
}

/// The [`EnvdOptions`] for a sandbox as the owner describes it: its id for
/// messages, binary protobuf, the default request timeout, and — for envd
/// older than 0.4.0, or a version that does not parse — `user` as the
/// default user, since such envd has none of its own.
pub fn envd_options(info: &SandboxInfo) -> EnvdOptions {
    let mut options = EnvdOptions::new(info.sandbox_id.clone());
    let version = semver::Version::parse(&info.daemon_version).ok();
    options.default_user = EnvdOptions::default_user_for(version.as_ref());
    options
}

impl ClientTransport for OwnerTransport {
    type ResponseBody = RelayedBody;
    type Error = ConnectError;

    fn send(
        &self,
        request: Request<ClientBody>,
    ) -> BoxFuture<'static, Result<Response<RelayedBody>, ConnectError>> {
        let owner = Arc::clone(&self.owner);
        let sandbox_id = Arc::clone(&self.sandbox_id);
        Box::pin(async move {
            let request = to_envd_request(request)?;
            match owner.daemon(request).await {
                Ok(response) => {
                    let status = StatusCode::from_u16(response.status).map_err(|_| {
                        ConnectError::internal(format!(
                            "the e2b owner relayed an invalid HTTP status {}",
                            response.status
                        ))
                    })?;
                    let (headers, length) = headers::response_from_list(response.headers)
                        .map_err(ConnectError::internal)?;
                    let mut relayed = Response::new(RelayedBody::new(response.body, length));
                    *relayed.status_mut() = status;
                    *relayed.headers_mut() = headers;
                    Ok(relayed)
                }
                Err(err) if is_gone(&err) => Ok(edge_answer(&sandbox_id, &err)),
                Err(err) if err.kind() == ErrorKind::InvalidInput => {
                    Err(ConnectError::invalid_argument(err.to_string()))
                }
                Err(err) => Err(ConnectError::unavailable_from_transport(
                    "envd request through the e2b owner failed",
                    RelayedBodyError(err),
                )),
            }
        })
    }
}

/// The owner's request for an outgoing HTTP request: method, path and
/// query, headers (with `Content-Length` when the body's length is known),
/// and the body as a stream.
fn to_envd_request(request: Request<ClientBody>) -> Result<DaemonRequest, ConnectError> {
    let (parts, body) = request.into_parts();
    if parts.uri.scheme().is_some() || parts.uri.authority().is_some() {
        return Err(ConnectError::invalid_argument(format!(
            "OwnerTransport takes path-only request URIs, got {}",
            parts.uri
        )));
    }
    let path_and_query = parts
        .uri
        .path_and_query()
        .map(PathAndQuery::as_str)
        .unwrap_or("/")
        .to_owned();
    let mut header_list = headers::to_list(&parts.headers);
    if !parts.headers.contains_key(http::header::CONTENT_LENGTH)
        && let Some(length) = body.size_hint().exact()
    {
        header_list.push((
            http::header::CONTENT_LENGTH.as_str().to_owned(),
            length.to_string().into_bytes(),
        ));
    }
    Ok(DaemonRequest {
        method: parts.method.as_str().to_owned(),
        path_and_query,
        headers: header_list,
        body: client_body_stream(body),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn info(version: &str) -> SandboxInfo {
        SandboxInfo {
            sandbox_id: "sbx".into(),
            template_id: "base".into(),
            daemon_version: version.into(),
            cwd: "/home/user/workspace".into(),
            runtime_root: "/home/user/workspace/.dsh-e2b".into(),
        }
    }

    #[test]
    fn old_or_unparsable_envd_versions_get_the_legacy_default_user() {
        assert_eq!(envd_options(&info("0.6.13")).default_user, None);
        assert_eq!(envd_options(&info("0.4.0")).default_user, None);
        assert_eq!(
            envd_options(&info("0.3.9")).default_user.as_deref(),
            Some("user")
        );
        assert_eq!(
            envd_options(&info("not-semver")).default_user.as_deref(),
            Some("user")
        );
        assert_eq!(envd_options(&info("0.6.13")).sandbox_id, "sbx");
    }

    #[test]
    fn requests_keep_path_headers_and_known_lengths() {
        let request = Request::builder()
            .method("POST")
            .uri("/filesystem.Filesystem/Stat")
            .header("content-type", "application/proto")
            .body(connectrpc::client::full_body(bytes::Bytes::from_static(
                b"abc",
            )))
            .unwrap();
        let envd = to_envd_request(request).unwrap();
        assert_eq!(envd.method, "POST");
        assert_eq!(envd.path_and_query, "/filesystem.Filesystem/Stat");
        assert_eq!(
            envd.headers,
            vec![
                ("content-type".to_owned(), b"application/proto".to_vec()),
                ("content-length".to_owned(), b"3".to_vec()),
            ]
        );
    }

    #[test]
    fn absolute_uris_are_refused() {
        let request = Request::builder()
            .uri("http://elsewhere.example/files")
            .body(connectrpc::client::full_body(bytes::Bytes::new()))
            .unwrap();
        let err = to_envd_request(request).expect_err("refused");
        assert_eq!(err.code, connectrpc::ErrorCode::InvalidArgument);
    }
}
