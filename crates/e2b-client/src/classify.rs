//! Turning wire failures into [`Error`]s.
//!
//! Everything here works from what a response carries (status, body, the
//! Connect error) so that an `Envd` over any transport classifies the same
//! way. The rules are docs/e2b-protocol.md §2.4 (API), §4.3 (Connect codes) and
//! §7.1 (`/files` statuses), plus the edge proxy's 502 for a missing sandbox
//! (§1.2).

use std::fmt;

use connectrpc::{ConnectError, ErrorCode};
use serde::Deserialize;

use crate::error::{Context, Error};

/// How many bytes of an error body are kept for the message.
pub(crate) const ERROR_BODY_LIMIT: usize = 64 * 1024;

/// How many characters of a non-JSON error body go into a message.
const MESSAGE_PREFIX_CHARS: usize = 512;

/// Marker carried as the source of the `unavailable` [`ConnectError`] that
/// [`crate::envd`] produces when the edge proxy answers an envd call with
/// HTTP 502: "this sandbox is not running". Recognised by [`from_connect`].
#[derive(Debug, Clone)]
pub(crate) struct EdgeRejection {
    /// The sandbox id the proxy named, if its body carried one.
    pub sandbox_id: Option<String>,
    /// The proxy's message.
    pub message: String,
}

impl fmt::Display for EdgeRejection {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "edge proxy answered 502: {}", self.message)
    }
}

impl std::error::Error for EdgeRejection {}

impl EdgeRejection {
    /// Reads the proxy's JSON body
    /// (`{"sandboxId":…,"message":"The sandbox was not found","code":502}`),
    /// tolerating anything else.
    pub(crate) fn from_body(body: &[u8]) -> Self {
        #[derive(Deserialize)]
        struct ProxyBody {
            #[serde(rename = "sandboxId")]
            sandbox_id: Option<String>,
            message: Option<String>,
        }
        match serde_json::from_slice::<ProxyBody>(body) {
            Ok(parsed) => EdgeRejection {
                sandbox_id: parsed.sandbox_id.filter(|id| !id.is_empty()),
                message: parsed
                    .message
                    .unwrap_or_else(|| "the sandbox was not found".to_owned()),
            },
            Err(_) => EdgeRejection {
                sandbox_id: None,
                message: body_message(body, "the sandbox was not found"),
            },
        }
    }
}

/// Where a Connect error surfaced, which decides how `unavailable` reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Stage {
    /// A unary (or client-streaming) call, or a server stream after its first
    /// event.
    Call,
    /// A `Start`/`Connect`/`WatchDir` stream before its first event: envd
    /// being unavailable there means the sandbox is not running (the JS SDK
    /// raises `SandboxNotFoundError` in exactly this case).
    Handshake,
}

/// Classifies a Connect error from an envd call.
pub(crate) fn from_connect(
    context: Context,
    sandbox_id: &str,
    err: &ConnectError,
    stage: Stage,
) -> Error {
    let message = err.message.clone().unwrap_or_default();
    if let Some(rejection) = find_in_chain::<EdgeRejection>(err) {
        return Error::SandboxNotFound {
            context,
            sandbox_id: rejection
                .sandbox_id
                .clone()
                .unwrap_or_else(|| sandbox_id.to_owned()),
            message: rejection.message.clone(),
        };
    }
    match err.code {
        ErrorCode::Unauthenticated => Error::Authentication { context, message },
        ErrorCode::InvalidArgument => Error::InvalidArgument { context, message },
        ErrorCode::DeadlineExceeded => Error::Timeout { context, message },
        ErrorCode::NotFound => Error::NotFound { context, message },
        ErrorCode::AlreadyExists => Error::AlreadyExists { context, message },
        ErrorCode::PermissionDenied => Error::PermissionDenied { context, message },
        ErrorCode::ResourceExhausted => Error::RateLimited { context, message },
        // A failure below the Connect layer: the transport keeps its cause as
        // the source (connection refused, reset, TLS, DNS).
        ErrorCode::Unavailable if err.source_arc().is_some() => Error::Transport {
            context,
            message,
            source: err.source_arc(),
        },
        ErrorCode::Unavailable if stage == Stage::Handshake => Error::SandboxNotFound {
            context,
            sandbox_id: sandbox_id.to_owned(),
            message: if message.is_empty() {
                "envd unavailable before the stream started; the sandbox is probably not running"
                    .to_owned()
            } else {
                message
            },
        },
        // connectrpc reports a response body that broke off mid-read (the
        // sandbox died, a proxy reset the stream) as `internal` with this
        // prefix; it is a lost connection, not a server bug.
        ErrorCode::Internal if message.starts_with("failed to read response body") => {
            Error::Transport {
                context,
                message,
                source: err.source_arc(),
            }
        }
        code => Error::Rpc {
            context,
            code,
            message,
        },
    }
}

/// Classifies a failure reported by a transport's `send` (before any
/// response): a [`ConnectError`] anywhere in the chain is classified as
/// such, anything else is a transport failure.
pub(crate) fn from_send_error(
    context: Context,
    sandbox_id: &str,
    err: &(dyn std::error::Error + 'static),
) -> Error {
    let mut link: Option<&(dyn std::error::Error + 'static)> = Some(err);
    while let Some(current) = link {
        if let Some(connect) = current.downcast_ref::<ConnectError>() {
            return from_connect(context, sandbox_id, connect, Stage::Call);
        }
        link = current.source();
    }
    Error::Transport {
        context,
        message: err.to_string(),
        source: None,
    }
}

/// Keeps a `ConnectError` found in the chain (so its code survives), else
/// wraps the failure as a transport-level `unavailable` with the cause as
/// its source, as connectrpc itself does.
pub(crate) fn into_connect_error<E>(err: E, context: &str) -> ConnectError
where
    E: std::error::Error + Send + Sync + 'static,
{
    let mut link: Option<&(dyn std::error::Error + 'static)> = Some(&err);
    while let Some(current) = link {
        if let Some(found) = current.downcast_ref::<ConnectError>() {
            return found.clone();
        }
        link = current.source();
    }
    ConnectError::unavailable_from_transport(context, err)
}

/// Which HTTP surface a status came from; the surfaces differ in what 404
/// and 502 mean.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Surface<'a> {
    /// The control-plane API. `sandbox_id` is set for endpoints that address
    /// one sandbox, where a 404 with `"code": 404` in the body means the
    /// sandbox does not exist.
    Api { sandbox_id: Option<&'a str> },
    /// envd's plain HTTP routes (`/files`, `/health`) behind the edge proxy.
    Envd { sandbox_id: &'a str },
}

/// Classifies a non-success HTTP status with its (bounded) body.
pub(crate) fn from_http_status(
    context: Context,
    surface: Surface<'_>,
    status: http::StatusCode,
    body: &[u8],
) -> Error {
    let parsed = ErrorBody::parse(body);
    let message = parsed
        .message
        .clone()
        .unwrap_or_else(|| body_message(body, status.canonical_reason().unwrap_or("")));
    match (status.as_u16(), surface) {
        (401, _) => Error::Authentication { context, message },
        (429, _) => Error::RateLimited { context, message },
        (
            404,
            Surface::Api {
                sandbox_id: Some(id),
            },
        ) if parsed.code == Some(404) => Error::SandboxNotFound {
            context,
            sandbox_id: id.to_owned(),
            message,
        },
        (409, Surface::Api { .. }) => Error::Conflict { context, message },
        (502, Surface::Envd { sandbox_id }) => {
            let rejection = EdgeRejection::from_body(body);
            Error::SandboxNotFound {
                context,
                sandbox_id: rejection
                    .sandbox_id
                    .unwrap_or_else(|| sandbox_id.to_owned()),
                message: rejection.message,
            }
        }
        (400, Surface::Envd { .. }) => Error::InvalidArgument { context, message },
        (403, _) => Error::PermissionDenied { context, message },
        (404, Surface::Envd { .. }) => Error::NotFound { context, message },
        (507, Surface::Envd { .. }) => Error::NotEnoughSpace { context, message },
        (status, _) => Error::Http {
            context,
            status,
            message,
        },
    }
}

/// The `{"code": <int>, "message": "…"}` error body of the API and envd's
/// HTTP routes; both fields optional so foreign bodies still parse.
#[derive(Debug, Default, Deserialize)]
pub(crate) struct ErrorBody {
    #[serde(default, deserialize_with = "lenient_code")]
    pub code: Option<i64>,
    #[serde(default)]
    pub message: Option<String>,
}

impl ErrorBody {
    pub(crate) fn parse(body: &[u8]) -> Self {
        serde_json::from_slice(body).unwrap_or_default()
    }
}

/// Accepts a numeric code (the documented shape) and ignores anything else
/// (a Connect string code, null) instead of failing the whole body.
fn lenient_code<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<i64>, D::Error> {
    let value = serde_json::Value::deserialize(d)?;
    Ok(value.as_i64())
}

/// A readable message from a non-JSON body: its first characters, or
/// `fallback` when it is empty or not text.
pub(crate) fn body_message(body: &[u8], fallback: &str) -> String {
    match std::str::from_utf8(body) {
        Ok(text) if !text.trim().is_empty() => {
            let text = text.trim();
            match text.char_indices().nth(MESSAGE_PREFIX_CHARS) {
                Some((cut, _)) => format!("{}…", &text[..cut]),
                None => text.to_owned(),
            }
        }
        _ => fallback.to_owned(),
    }
}

fn find_in_chain<T: std::error::Error + 'static>(err: &ConnectError) -> Option<&T> {
    let mut link: Option<&(dyn std::error::Error + 'static)> = std::error::Error::source(err);
    while let Some(current) = link {
        if let Some(found) = current.downcast_ref::<T>() {
            return Some(found);
        }
        link = current.source();
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ctx() -> Context {
        Context::new("stat", "/home/user/x")
    }

    #[test]
    fn connect_codes_map_to_variants() {
        let cases = [
            (ErrorCode::Unauthenticated, "Authentication"),
            (ErrorCode::InvalidArgument, "InvalidArgument"),
            (ErrorCode::DeadlineExceeded, "Timeout"),
            (ErrorCode::NotFound, "NotFound"),
            (ErrorCode::AlreadyExists, "AlreadyExists"),
            (ErrorCode::PermissionDenied, "PermissionDenied"),
            (ErrorCode::ResourceExhausted, "RateLimited"),
            (ErrorCode::Internal, "Rpc"),
            (ErrorCode::FailedPrecondition, "Rpc"),
            (ErrorCode::Unavailable, "Rpc"),
            (ErrorCode::Unknown, "Rpc"),
        ];
        for (code, expected) in cases {
            let err = from_connect(ctx(), "sbx", &ConnectError::new(code, "m"), Stage::Call);
            let name = format!("{err:?}");
            assert!(
                name.starts_with(expected),
                "{code:?} should map to {expected}, got {name}"
            );
        }
    }

    #[test]
    fn unavailable_before_first_event_is_sandbox_not_found() {
        let err = from_connect(
            ctx(),
            "sbx1",
            &ConnectError::unavailable("HTTP error 503"),
            Stage::Handshake,
        );
        match err {
            Error::SandboxNotFound { sandbox_id, .. } => assert_eq!(sandbox_id, "sbx1"),
            other => panic!("expected SandboxNotFound, got {other:?}"),
        }
    }

    #[test]
    fn unavailable_with_a_source_is_transport_even_in_handshake() {
        let refused = std::io::Error::from(std::io::ErrorKind::ConnectionRefused);
        let err = ConnectError::unavailable_from_transport("request failed", refused);
        let classified = from_connect(ctx(), "sbx", &err, Stage::Handshake);
        assert!(
            matches!(classified, Error::Transport { .. }),
            "{classified:?}"
        );
        assert!(classified.is_unavailable());
        assert!(std::error::Error::source(&classified).is_some());
    }

    #[test]
    fn edge_rejection_marker_is_sandbox_not_found_with_proxy_id() {
        let body = br#"{"sandboxId":"abc123","message":"The sandbox was not found","code":502}"#;
        let err = ConnectError::unavailable("sandbox not running")
            .with_source(EdgeRejection::from_body(body));
        match from_connect(ctx(), "fallback", &err, Stage::Call) {
            Error::SandboxNotFound {
                sandbox_id,
                message,
                ..
            } => {
                assert_eq!(sandbox_id, "abc123");
                assert_eq!(message, "The sandbox was not found");
            }
            other => panic!("expected SandboxNotFound, got {other:?}"),
        }
    }

    #[test]
    fn broken_body_is_transport() {
        let err = ConnectError::internal("failed to read response body: connection reset");
        assert!(matches!(
            from_connect(ctx(), "s", &err, Stage::Call),
            Error::Transport { .. }
        ));
    }

    #[test]
    fn send_error_chain_is_searched_for_a_connect_error() {
        #[derive(Debug)]
        struct Wrapper(ConnectError);
        impl fmt::Display for Wrapper {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("wrapped")
            }
        }
        impl std::error::Error for Wrapper {
            fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
                Some(&self.0)
            }
        }
        let err = Wrapper(ConnectError::not_found("gone"));
        assert!(matches!(
            from_send_error(ctx(), "s", &err),
            Error::NotFound { .. }
        ));
        let plain = std::io::Error::other("boom");
        assert!(matches!(
            from_send_error(ctx(), "s", &plain),
            Error::Transport { .. }
        ));
    }

    #[test]
    fn files_statuses_follow_the_sdk_mapping() {
        let surface = Surface::Envd { sandbox_id: "sbx" };
        let json = |code: u16| format!(r#"{{"code":{code},"message":"msg {code}"}}"#);
        let check = |status: u16, expected: &str| {
            let err = from_http_status(
                ctx(),
                surface,
                http::StatusCode::from_u16(status).unwrap(),
                json(status).as_bytes(),
            );
            let name = format!("{err:?}");
            assert!(name.starts_with(expected), "{status} -> {name}");
            if !matches!(err, Error::SandboxNotFound { .. }) {
                assert!(err.to_string().contains(&format!("msg {status}")), "{err}");
            }
        };
        check(400, "InvalidArgument");
        check(401, "Authentication");
        check(403, "PermissionDenied");
        check(404, "NotFound");
        check(429, "RateLimited");
        check(502, "SandboxNotFound");
        check(507, "NotEnoughSpace");
        check(500, "Http");
        check(406, "Http");
    }

    #[test]
    fn api_404_needs_code_in_body_to_mean_sandbox_not_found() {
        let surface = Surface::Api {
            sandbox_id: Some("abc"),
        };
        let with_code = from_http_status(
            ctx(),
            surface,
            http::StatusCode::NOT_FOUND,
            br#"{"code":404,"message":"sandbox \"abc\" not found"}"#,
        );
        assert!(with_code.is_sandbox_gone(), "{with_code:?}");

        let without_code = from_http_status(
            ctx(),
            surface,
            http::StatusCode::NOT_FOUND,
            b"404 page not found",
        );
        match without_code {
            Error::Http {
                status, message, ..
            } => {
                assert_eq!(status, 404);
                assert_eq!(message, "404 page not found");
            }
            other => panic!("expected Http, got {other:?}"),
        }

        let list_404 = from_http_status(
            ctx(),
            Surface::Api { sandbox_id: None },
            http::StatusCode::NOT_FOUND,
            br#"{"code":404,"message":"nope"}"#,
        );
        assert!(matches!(list_404, Error::Http { status: 404, .. }));
    }

    #[test]
    fn api_statuses() {
        let surface = Surface::Api {
            sandbox_id: Some("abc"),
        };
        let status = |s: u16| http::StatusCode::from_u16(s).unwrap();
        assert!(matches!(
            from_http_status(ctx(), surface, status(401), b"{}"),
            Error::Authentication { .. }
        ));
        assert!(matches!(
            from_http_status(ctx(), surface, status(429), b""),
            Error::RateLimited { .. }
        ));
        assert!(matches!(
            from_http_status(
                ctx(),
                surface,
                status(409),
                br#"{"code":409,"message":"paused"}"#
            ),
            Error::Conflict { .. }
        ));
        // A 502 from the API is just an HTTP error, not a missing sandbox.
        assert!(matches!(
            from_http_status(ctx(), surface, status(502), b"bad gateway"),
            Error::Http { status: 502, .. }
        ));
    }

    #[test]
    fn error_body_tolerates_foreign_shapes() {
        assert_eq!(ErrorBody::parse(br#"{"code":"not_found"}"#).code, None);
        assert_eq!(ErrorBody::parse(b"not json").message, None);
        assert_eq!(
            ErrorBody::parse(br#"{"code":404,"message":"x","extra":1}"#).code,
            Some(404)
        );
    }

    #[test]
    fn long_bodies_are_cut_and_binary_bodies_fall_back() {
        let long = "x".repeat(2000);
        let msg = body_message(long.as_bytes(), "fb");
        assert_eq!(msg.chars().count(), MESSAGE_PREFIX_CHARS + 1);
        assert_eq!(body_message(&[0xff, 0xfe], "fallback"), "fallback");
        assert_eq!(body_message(b"   ", "fallback"), "fallback");
    }
}
