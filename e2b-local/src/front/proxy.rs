//! Forwarding one request to a sandbox's envd and its response back, streaming both bodies.

use std::error::Error as StdError;

use bytes::Bytes;
use http::header::{self, HeaderMap, HeaderName, HeaderValue};
use http::{Request, Response, StatusCode, Version};
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use serde::Serialize;

use super::route::{ENVD_PORT, Unroutable};
use crate::registry::Sandbox;

/// Body type of every front response.
pub type FrontBody = BoxBody<Bytes, Box<dyn StdError + Send + Sync>>;

/// Headers that describe one hop's connection, not the message (RFC 9110 §7.6.1).
const HOP_BY_HOP: [HeaderName; 8] = [
    header::CONNECTION,
    HeaderName::from_static("keep-alive"),
    header::PROXY_AUTHENTICATE,
    header::PROXY_AUTHORIZATION,
    header::TE,
    header::TRAILER,
    header::TRANSFER_ENCODING,
    header::UPGRADE,
];

/// Sends `request` to `sandbox`'s envd over its Unix socket (h2c, whatever the client spoke) and returns envd's response with its body still streaming. If envd cannot be reached
/// (the world died meanwhile) the answer is the 502 not-found JSON.
pub async fn forward(sandbox: &Sandbox, request: Request<Incoming>) -> Response<FrontBody> {
    // A request that cannot be readdressed is refused before any connection is made.
    let (mut parts, body) = request.into_parts();
    if !readdress(&mut parts, "http://envd", Some("envd")) {
        return error_response(
            StatusCode::BAD_REQUEST,
            &sandbox.id,
            "invalid request target",
        );
    }
    parts.version = Version::HTTP_2;
    match sandbox
        .upstream
        .send(Request::from_parts(parts, body))
        .await
    {
        Ok(response) => relayed(response),
        Err(err) if reset_by_us(&err) => {
            // The client's request body failed (it went away mid-request, e.g. killed): the
            // stream to envd was reset on its behalf, and nobody is left to answer.
            tracing::debug!(sandbox = %sandbox.id, "request abandoned by its client: {err:?}");
            error_response(
                StatusCode::BAD_REQUEST,
                &sandbox.id,
                "the request body ended abnormally",
            )
        }
        Err(err) => {
            tracing::warn!(sandbox = %sandbox.id, "envd unreachable: {err:?}");
            unroutable(&Unroutable {
                sandbox_id: sandbox.id.clone(),
                message: "The sandbox was not found".to_owned(),
            })
        }
    }
}

/// Whether `err` is an HTTP/2 stream reset this side initiated — what the client does when the
/// request body it forwards fails — rather than envd's or the connection's failure.
fn reset_by_us(err: &(dyn StdError + 'static)) -> bool {
    let mut source = Some(err);
    while let Some(err) = source {
        if let Some(h2) = err.downcast_ref::<h2::Error>() {
            return h2.is_reset() && !h2.is_remote();
        }
        source = err.source();
    }
    false
}

fn strip_hop_by_hop(headers: &mut HeaderMap) {
    // Headers named in `Connection` are hop-by-hop too.
    let listed: Vec<HeaderName> = headers
        .get_all(header::CONNECTION)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .filter_map(|name| HeaderName::from_bytes(name.trim().as_bytes()).ok())
        .collect();
    for name in HOP_BY_HOP.iter().chain(&listed) {
        headers.remove(name);
    }
}

#[derive(Serialize)]
struct ProxyError<'a> {
    #[serde(rename = "sandboxId")]
    sandbox_id: &'a str,
    message: &'a str,
    code: u16,
}

/// Sends `request` to the server listening on `port` inside `sandbox` (HTTP/1.1 on a fresh
/// connection into its network namespace, whatever the client spoke; the client's `Host` kept)
/// and returns its response, bodies streaming both ways. Nothing listening there: E2B's 502
/// "port is not open", which the SDKs recognise.
///
/// An HTTP/1.1 upgrade (a WebSocket) is relayed: the `Upgrade` request goes through, and once
/// the server answers 101 the two connections are joined byte for byte until either ends.
pub async fn forward_to_port(
    sandbox: &Sandbox,
    port: u16,
    mut request: Request<Incoming>,
) -> Response<FrontBody> {
    let upgrade = request.headers().get(header::UPGRADE).cloned();
    let client_side = upgrade.is_some().then(|| hyper::upgrade::on(&mut request));
    // A request that cannot be readdressed is refused before any connection is made.
    let (mut parts, body) = request.into_parts();
    if !readdress(&mut parts, "", None) {
        return error_response(
            StatusCode::BAD_REQUEST,
            &sandbox.id,
            "invalid request target",
        );
    }
    // The proxy's credential ([`traffic_refused`]), not the server's business.
    parts.headers.remove(TRAFFIC_TOKEN);
    // `network.maskRequestHost`: the server in the sandbox sees the mask, `${PORT}` its port.
    if let Some(value) = sandbox
        .mask_request_host
        .as_ref()
        .and_then(|mask| HeaderValue::from_str(&mask.replace("${PORT}", &port.to_string())).ok())
    {
        parts.headers.insert(header::HOST, value);
    }
    let stream = match sandbox.world.connect_port(port).await {
        Ok(stream) => stream,
        Err(err) => {
            tracing::debug!(sandbox = %sandbox.id, port, "connect: {err}");
            return error_response(
                StatusCode::BAD_GATEWAY,
                &sandbox.id,
                &format!("The sandbox is running but port is not open ({port})"),
            );
        }
    };
    parts.version = Version::HTTP_11;
    if let Some(upgrade) = &upgrade {
        parts.headers.insert(header::UPGRADE, upgrade.clone());
        parts
            .headers
            .insert(header::CONNECTION, HeaderValue::from_static("upgrade"));
    }
    // Header names in Title-Case, as E2B's proxy (Go) writes them: a server that reports them
    // as received (Python's `http.server`) sees `Host`, not `host`.
    let (mut sender, connection) = match hyper::client::conn::http1::Builder::new()
        .title_case_headers(true)
        .handshake(hyper_util::rt::TokioIo::new(stream))
        .await
    {
        Ok(pair) => pair,
        Err(err) => {
            return error_response(
                StatusCode::BAD_GATEWAY,
                &sandbox.id,
                &format!("port {port}: {err}"),
            );
        }
    };
    let id = sandbox.id.clone();
    tokio::spawn(async move {
        if let Err(err) = connection.with_upgrades().await {
            tracing::debug!(sandbox = %id, port, "connection to the sandbox's server: {err}");
        }
    });
    match sender.send_request(Request::from_parts(parts, body)).await {
        Ok(mut response) if response.status() == StatusCode::SWITCHING_PROTOCOLS => {
            let Some(client_side) = client_side else {
                return relayed(response);
            };
            let server_side = hyper::upgrade::on(&mut response);
            let (id, kept) = (sandbox.id.clone(), response.headers().clone());
            tokio::spawn(async move {
                match tokio::try_join!(client_side, server_side) {
                    Ok((client, server)) => {
                        let mut client = hyper_util::rt::TokioIo::new(client);
                        let mut server = hyper_util::rt::TokioIo::new(server);
                        let _ = tokio::io::copy_bidirectional(&mut client, &mut server).await;
                    }
                    Err(err) => tracing::debug!(sandbox = %id, port, "upgrade: {err}"),
                }
            });
            let mut response = relayed(response);
            // 101 needs the very headers a hop drops.
            for name in [header::UPGRADE, header::CONNECTION] {
                if let Some(value) = kept.get(&name) {
                    response.headers_mut().insert(name, value.clone());
                }
            }
            response
        }
        Ok(response) => relayed(response),
        Err(err) => error_response(
            StatusCode::BAD_GATEWAY,
            &sandbox.id,
            &format!("port {port}: the sandbox's server did not answer: {err}"),
        ),
    }
}

/// Makes a client's request one for the next hop: hop-by-hop headers dropped, a `Host` kept
/// (from the request's authority, as h2 sends it, else `fallback_host`), the target
/// `<prefix><path and query>`. False if that target is not a valid URI.
fn readdress(parts: &mut http::request::Parts, prefix: &str, fallback_host: Option<&str>) -> bool {
    let authority = parts.uri.authority().map(|a| a.to_string());
    strip_hop_by_hop(&mut parts.headers);
    if !parts.headers.contains_key(header::HOST)
        && let Some(value) = authority
            .as_deref()
            .or(fallback_host)
            .and_then(|host| HeaderValue::from_str(host).ok())
    {
        parts.headers.insert(header::HOST, value);
    }
    let path = parts.uri.path_and_query().map_or("/", |p| p.as_str());
    match format!("{prefix}{path}").parse() {
        Ok(uri) => {
            parts.uri = uri;
            true
        }
        Err(_) => false,
    }
}

/// The header a private sandbox's traffic carries its token in.
const TRAFFIC_TOKEN: &str = "e2b-traffic-access-token";

/// `network.allowPublicTraffic: false`: the 403 of a request to one of the sandbox's ports
/// (not envd's) without its traffic access token; `None` when it may pass. Checked before the
/// request resumes a paused sandbox; the comparison takes the same time wherever they differ.
pub fn traffic_refused(
    sandbox: &Sandbox,
    port: u16,
    headers: &HeaderMap,
) -> Option<Response<FrontBody>> {
    let token = sandbox.traffic_access_token.as_ref()?;
    if port == ENVD_PORT {
        return None;
    }
    let given = headers.get(TRAFFIC_TOKEN).map(HeaderValue::as_bytes);
    let matches = given.is_some_and(|given| {
        given.len() == token.len()
            && given
                .iter()
                .zip(token.as_bytes())
                .fold(0u8, |diff, (a, b)| diff | (a ^ b))
                == 0
    });
    (!matches).then(|| {
        error_response(
            StatusCode::FORBIDDEN,
            &sandbox.id,
            "The sandbox's traffic needs its traffic access token (e2b-traffic-access-token)",
        )
    })
}

/// An upstream response as the front's, its body still streaming.
fn relayed(response: Response<Incoming>) -> Response<FrontBody> {
    let (mut parts, body) = response.into_parts();
    strip_hop_by_hop(&mut parts.headers);
    Response::from_parts(
        parts,
        body.map_err(|e| Box::new(e) as Box<dyn StdError + Send + Sync>)
            .boxed(),
    )
}

/// The edge proxy's answer for an unknown, paused or dead sandbox: 502 + JSON with `code: 502`.
pub fn unroutable(err: &Unroutable) -> Response<FrontBody> {
    error_response(StatusCode::BAD_GATEWAY, &err.sandbox_id, &err.message)
}

fn error_response(status: StatusCode, sandbox_id: &str, message: &str) -> Response<FrontBody> {
    let body = serde_json::to_vec(&ProxyError {
        sandbox_id,
        message,
        code: status.as_u16(),
    })
    .expect("plain struct serialises");
    Response::builder()
        .status(status)
        .header(header::CONTENT_TYPE, "application/json; charset=utf-8")
        .body(
            Full::new(Bytes::from(body))
                .map_err(|never| match never {})
                .boxed(),
        )
        .expect("static response parts are valid")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strips_hop_by_hop_and_connection_listed_headers() {
        let mut headers = HeaderMap::new();
        headers.insert(
            header::CONNECTION,
            HeaderValue::from_static("keep-alive, x-hop"),
        );
        headers.insert("x-hop", HeaderValue::from_static("1"));
        headers.insert(
            header::TRANSFER_ENCODING,
            HeaderValue::from_static("chunked"),
        );
        headers.insert("connect-timeout-ms", HeaderValue::from_static("5"));
        strip_hop_by_hop(&mut headers);
        assert_eq!(headers.len(), 1);
        assert!(headers.contains_key("connect-timeout-ms"));
    }

    #[tokio::test]
    async fn unroutable_is_502_json_with_numeric_code() {
        let response = unroutable(&Unroutable {
            sandbox_id: "abc".into(),
            message: "The sandbox was not found".into(),
        });
        assert_eq!(response.status(), StatusCode::BAD_GATEWAY);
        let body = response.into_body().collect().await.unwrap().to_bytes();
        let json: serde_json::Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(
            json,
            serde_json::json!({"sandboxId": "abc", "message": "The sandbox was not found", "code": 502})
        );
    }
}
