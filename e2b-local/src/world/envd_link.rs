//! The server's own envd client of a world: the e2b-client [`Envd`] over the world's Unix
//! socket, for the work e2b-local does inside sandboxes itself (template builds, a template's
//! start command). No front, no credentials: the socket is reachable only by the server.

use std::path::PathBuf;

use connectrpc::client::{BoxFuture, ClientBody, ClientTransport};
use e2b_client::{Envd, EnvdOptions};
use http::{Request, Response, Uri};
use hyper::body::Incoming;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;

use crate::front::upstream::UnixConnector;

/// A connectrpc transport to one world's envd (h2c over its socket). Requests carry path-only
/// URIs, as [`Envd`] builds them. Cheap to clone.
#[derive(Clone)]
pub struct EnvdLink {
    client: Client<UnixConnector, ClientBody>,
    /// A secure sandbox's envd token, sent with every request.
    access_token: Option<http::HeaderValue>,
}

impl EnvdLink {
    /// The link to the envd serving on `socket`, of a sandbox secured with `access_token`.
    pub fn new(socket: PathBuf, access_token: Option<&str>) -> EnvdLink {
        EnvdLink {
            client: Client::builder(TokioExecutor::new())
                .http2_only(true)
                .build(UnixConnector::new(socket)),
            access_token: access_token.and_then(|t| http::HeaderValue::from_str(t).ok()),
        }
    }

    /// An envd client of the world `sandbox_id` whose socket this is; calls without a user act
    /// as envd's default user.
    pub fn envd(self, sandbox_id: &str) -> Envd<EnvdLink> {
        Envd::new(self, EnvdOptions::new(sandbox_id))
    }
}

impl ClientTransport for EnvdLink {
    type ResponseBody = Incoming;
    type Error = hyper_util::client::legacy::Error;

    fn send(
        &self,
        mut request: Request<ClientBody>,
    ) -> BoxFuture<'static, Result<Response<Incoming>, Self::Error>> {
        // hyper's pooled client wants an absolute URI; the host part is never looked up.
        let path = request
            .uri()
            .path_and_query()
            .map_or("/", |p| p.as_str())
            .to_owned();
        *request.uri_mut() = Uri::try_from(format!("http://envd{path}"))
            .expect("a path-only URI stays valid under an authority");
        if let Some(token) = &self.access_token {
            request
                .headers_mut()
                .insert(e2b_client::ACCESS_TOKEN_HEADER, token.clone());
        }
        let client = self.client.clone();
        Box::pin(async move { client.request(request).await })
    }
}
