//! E2B's API where E2B serves it: with `--tls --domain D`, requests on the front for
//! `api.D` go to the API's own router (the same one its port serves), so a client given only
//! `E2B_DOMAIN` — as against E2B's cloud — reaches both the API and the sandboxes.

use std::pin::Pin;
use std::task::{Context, Poll};

use axum::Router;
use bytes::Bytes;
use http_body_util::BodyExt;
use hyper::body::{Body, Frame, Incoming};
use tokio::sync::mpsc;
use tower::ServiceExt;

use super::proxy::FrontBody;

/// Frames of an answer between the router's body and the client's.
const RELAYED_FRAMES: usize = 4;

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// An answer's frames as the task relays them.
struct Relayed(mpsc::Receiver<Result<Frame<Bytes>, BoxError>>);

impl Body for Relayed {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        self.0.poll_recv(cx)
    }
}

/// The scheme a request reached the front with, as the API sees it.
pub const FORWARDED_PROTO: &str = "x-forwarded-proto";

/// The API's host name and router.
#[derive(Clone)]
pub struct ApiHost {
    host: String,
    router: Router,
}

impl ApiHost {
    /// The API at `api.<domain>`.
    pub fn new(domain: &str, router: Router) -> ApiHost {
        ApiHost {
            host: format!("api.{domain}"),
            router,
        }
    }

    /// Whether `request` names the API's host (its `Host` header, else its URI's authority;
    /// any port).
    pub fn serves<B>(&self, request: &http::Request<B>) -> bool {
        let host = request
            .headers()
            .get(http::header::HOST)
            .and_then(|host| host.to_str().ok())
            .or_else(|| request.uri().authority().map(|a| a.as_str()));
        host.map(|host| host.rsplit_once(':').map_or(host, |(name, _)| name))
            .is_some_and(|name| name.eq_ignore_ascii_case(&self.host))
    }

    /// The API's answer to `request`, which came over TLS or not (`X-Forwarded-Proto`, so
    /// that the URLs the API hands out name the scheme the client used). The answer streams
    /// (a volume's file may be large) through a task and a small channel: the front's bodies
    /// are `Sync`, the router's are not.
    pub async fn call(
        &self,
        mut request: http::Request<Incoming>,
        tls: bool,
    ) -> http::Response<FrontBody> {
        request.headers_mut().insert(
            FORWARDED_PROTO,
            http::HeaderValue::from_static(if tls { "https" } else { "http" }),
        );
        // HTTP/2 names the host in the URI only; the API reads `Host`.
        if !request.headers().contains_key(http::header::HOST)
            && let Some(host) = request
                .uri()
                .authority()
                .and_then(|a| http::HeaderValue::from_str(a.as_str()).ok())
        {
            request.headers_mut().insert(http::header::HOST, host);
        }
        let response = match self
            .router
            .clone()
            .oneshot(request.map(axum::body::Body::new))
            .await
        {
            Ok(response) => response,
            Err(never) => match never {},
        };
        let (parts, body) = response.into_parts();
        let (frames, relayed) = mpsc::channel(RELAYED_FRAMES);
        // Ends with the body, or when the client is gone (the channel closed).
        tokio::spawn(async move {
            let mut body = body;
            while let Some(frame) = body.frame().await {
                let frame = frame.map_err(|err| Box::new(err) as BoxError);
                let failed = frame.is_err();
                if frames.send(frame).await.is_err() || failed {
                    break;
                }
            }
        });
        let body = Relayed(relayed).boxed();
        http::Response::from_parts(parts, body)
    }
}
