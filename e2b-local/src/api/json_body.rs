//! Strict JSON request bodies: a size limit answered with 413, and malformed JSON, unknown or
//! mistyped fields answered with 400 (`e2b_local_api::json_body`) — each as the API's JSON error
//! naming the operation.

use super::error::ApiError;
use axum::body::Body;
use http::StatusCode;
use http_body_util::{BodyExt, LengthLimitError, Limited};

pub use e2b_local_api::json_body::{parse, parse_optional};

/// Largest control-plane request body accepted (create bodies are a few KiB at most).
pub const MAX_BODY_BYTES: usize = 1 << 20;

/// Reads the whole body (chunked or not) up to [`MAX_BODY_BYTES`].
pub async fn read_body(op: &str, body: Body) -> Result<bytes::Bytes, ApiError> {
    match Limited::new(body, MAX_BODY_BYTES).collect().await {
        Ok(collected) => Ok(collected.to_bytes()),
        Err(err) if err.downcast_ref::<LengthLimitError>().is_some() => Err(ApiError::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            format!("{op}: request body exceeds {MAX_BODY_BYTES} bytes"),
        )),
        Err(err) => Err(ApiError::bad_request(format!(
            "{op}: reading request body: {err}"
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn oversized_bodies_are_413() {
        let body = Body::from(vec![b' '; MAX_BODY_BYTES + 1]);
        let err = read_body("create sandbox", body).await.unwrap_err();
        assert_eq!(err.status, StatusCode::PAYLOAD_TOO_LARGE);
        assert!(err.message.starts_with("create sandbox: "));
    }
}
