//! The `X-API-KEY` check: every control-plane route needs the key the server was started with.

use axum::extract::{Request, State};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use http::StatusCode;

use super::ApiState;
use super::error::ApiError;

/// Middleware answering 401 (JSON, `code: 401`) when `X-API-KEY` is missing or wrong.
pub async fn require_api_key(
    State(state): State<ApiState>,
    request: Request,
    next: Next,
) -> Response {
    let given = request.headers().get("x-api-key").map(|v| v.as_bytes());
    match given {
        Some(key) if constant_time_eq(key, state.api_key.as_bytes()) => next.run(request).await,
        Some(_) => {
            ApiError::new(StatusCode::UNAUTHORIZED, "invalid API key (X-API-KEY)").into_response()
        }
        None => ApiError::new(
            StatusCode::UNAUTHORIZED,
            "missing API key: send it in the X-API-KEY header",
        )
        .into_response(),
    }
}

/// Compares without an early exit on the first differing byte.
pub(crate) fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

#[cfg(test)]
mod tests {
    use super::constant_time_eq;

    #[test]
    fn compares_exactly() {
        assert!(constant_time_eq(b"e2b_ab", b"e2b_ab"));
        assert!(!constant_time_eq(b"e2b_ab", b"e2b_ac"));
        assert!(!constant_time_eq(b"e2b_ab", b"e2b_a"));
    }
}
