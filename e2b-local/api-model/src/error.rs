//! Control-plane errors: every failure is a JSON `{"code": <status>, "message": "…"}` body whose
//! numeric `code` equals the HTTP status (the JS SDK recognises not-found by that field). The
//! `axum` feature makes an [`ApiError`] an axum response (what e2b-local's handlers return).

use http::StatusCode;

/// An API failure: the HTTP status and a message naming the operation and its subject.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiError {
    pub status: StatusCode,
    pub message: String,
    /// The API's machine-readable `error_code`, where the spec names one.
    pub error_code: Option<&'static str>,
}

#[cfg(feature = "axum")]
#[derive(serde::Serialize)]
struct ErrorBody<'a> {
    code: u16,
    message: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    error_code: Option<&'static str>,
}

impl ApiError {
    pub fn new(status: StatusCode, message: impl Into<String>) -> Self {
        Self {
            status,
            message: message.into(),
            error_code: None,
        }
    }

    /// The same error, with the API's `error_code`.
    pub fn with_error_code(mut self, error_code: &'static str) -> Self {
        self.error_code = Some(error_code);
        self
    }

    pub fn bad_request(message: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, message)
    }

    /// 404 for an id the registry does not know (never existed, killed or expired).
    pub fn sandbox_not_found(op: &str, id: &str) -> Self {
        Self::new(
            StatusCode::NOT_FOUND,
            format!("{op} {id}: sandbox not found"),
        )
    }

    pub fn internal(message: impl Into<String>) -> Self {
        Self::new(StatusCode::INTERNAL_SERVER_ERROR, message)
    }
}

impl std::fmt::Display for ApiError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.status.as_u16(), self.message)
    }
}

impl std::error::Error for ApiError {}

#[cfg(feature = "axum")]
impl axum::response::IntoResponse for ApiError {
    fn into_response(self) -> axum::response::Response {
        let body = ErrorBody {
            code: self.status.as_u16(),
            message: &self.message,
            error_code: self.error_code,
        };
        let mut response = (self.status, axum::Json(body)).into_response();
        if self.status == StatusCode::PAYLOAD_TOO_LARGE {
            // The rest of the body stays unread, so the connection cannot be reused: say so,
            // or a pooling client sends its next request into a closing connection.
            response.headers_mut().insert(
                http::header::CONNECTION,
                http::HeaderValue::from_static("close"),
            );
        }
        response
    }
}
