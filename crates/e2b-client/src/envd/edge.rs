//! A transport wrapper that recognises the edge proxy's answers before
//! connectrpc parses them as Connect responses.
//!
//! connectrpc maps HTTP 502 and 429 to `unavailable` and loses the status;
//! here a 502 becomes an `unavailable` error carrying an
//! [`EdgeRejection`](crate::classify::EdgeRejection) marker (the sandbox is
//! not running) and a 429 becomes `resource_exhausted`. Works for any inner
//! transport, since it only reads the response.

use std::fmt::Display;

use connectrpc::ConnectError;
use connectrpc::client::{BoxFuture, ClientBody, ClientTransport};
use http::{Request, Response, StatusCode};
use http_body::Body;

use crate::body::error_body_prefix;
use crate::classify::{
    ERROR_BODY_LIMIT, EdgeRejection, ErrorBody, body_message, into_connect_error,
};

/// Wraps an envd transport; see the module docs.
#[derive(Clone)]
pub(crate) struct EdgeGuard<T> {
    inner: T,
}

impl<T> EdgeGuard<T> {
    pub(crate) fn new(inner: T) -> Self {
        EdgeGuard { inner }
    }

    pub(crate) fn inner(&self) -> &T {
        &self.inner
    }
}

impl<T> ClientTransport for EdgeGuard<T>
where
    T: ClientTransport,
    <T::ResponseBody as Body>::Error: Display,
{
    type ResponseBody = T::ResponseBody;
    type Error = ConnectError;

    fn send(
        &self,
        request: Request<ClientBody>,
    ) -> BoxFuture<'static, Result<Response<Self::ResponseBody>, Self::Error>> {
        let send = self.inner.send(request);
        Box::pin(async move {
            let response = send
                .await
                .map_err(|e| into_connect_error(e, "envd request failed"))?;
            match response.status() {
                StatusCode::BAD_GATEWAY => {
                    let body = error_body_prefix(response.into_body(), ERROR_BODY_LIMIT).await;
                    let rejection = EdgeRejection::from_body(&body);
                    Err(ConnectError::unavailable(rejection.message.clone()).with_source(rejection))
                }
                StatusCode::TOO_MANY_REQUESTS => {
                    let body = error_body_prefix(response.into_body(), ERROR_BODY_LIMIT).await;
                    let message = ErrorBody::parse(&body)
                        .message
                        .unwrap_or_else(|| body_message(&body, "too many requests"));
                    Err(ConnectError::resource_exhausted(message))
                }
                _ => Ok(response),
            }
        })
    }
}
