//! Response bodies and envd's JSON error shape `{"code": <status>, "message": "…"}`.

use bytes::Bytes;
use http::{HeaderValue, Response, StatusCode, header};
use http_body_util::combinators::UnsyncBoxBody;
use http_body_util::{BodyExt, Empty, Full};

/// The error type every response body is erased to.
pub(crate) type BoxError = Box<dyn std::error::Error + Send + Sync>;
/// The body type of every response the daemon sends.
pub(crate) type Body = UnsyncBoxBody<Bytes, BoxError>;

/// A complete in-memory body.
pub(crate) fn full(bytes: impl Into<Bytes>) -> Body {
    Full::new(bytes.into())
        .map_err(|never| match never {})
        .boxed_unsync()
}

/// An empty body.
pub(crate) fn empty() -> Body {
    Empty::new().map_err(|never| match never {}).boxed_unsync()
}

/// An error body of `content_type` with `nosniff`, newline-terminated as Go writes errors.
fn error_response(
    status: StatusCode,
    content_type: &'static str,
    mut text: String,
) -> Response<Body> {
    text.push('\n');
    let mut response = Response::new(full(text));
    *response.status_mut() = status;
    let headers = response.headers_mut();
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    response
}

/// `{"code":<status>,"message":<message>}` with envd's headers (`application/json; charset=utf-8`
/// and `nosniff`).
pub(crate) fn json_error(status: StatusCode, message: impl AsRef<str>) -> Response<Body> {
    let body = serde_json::json!({ "code": status.as_u16(), "message": message.as_ref() });
    error_response(status, "application/json; charset=utf-8", body.to_string())
}

/// A plain-text error, as Go's `http.Error` writes it (used where envd defers to `net/http`).
pub(crate) fn text_error(status: StatusCode, message: &str) -> Response<Body> {
    error_response(status, "text/plain; charset=utf-8", message.to_owned())
}

/// A JSON body with the given status.
pub(crate) fn json(status: StatusCode, value: &impl serde::Serialize) -> Response<Body> {
    let text = serde_json::to_vec(value).unwrap_or_else(|err| {
        format!("{{\"code\":500,\"message\":\"encoding response: {err}\"}}").into_bytes()
    });
    let mut response = Response::new(full(text));
    *response.status_mut() = status;
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    response
}

/// A bodiless response with the given status.
pub(crate) fn status(status: StatusCode) -> Response<Body> {
    let mut response = Response::new(empty());
    *response.status_mut() = status;
    response
}
