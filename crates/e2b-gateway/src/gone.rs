//! How "the sandbox is gone" crosses the owner boundary, both ways.
//!
//! The owner reports a gone sandbox as an [`ErrorKind::Unavailable`] error
//! (the `Owner::envd` contract); every other failure of a gateway call
//! has another kind. The adapter side turns that error back into exactly
//! what the edge proxy answers for a missing sandbox — HTTP 502 with
//! `{"sandboxId","message","code":502}` — so `e2b_client::Envd` classifies
//! it itself, as [`e2b_client::Error::SandboxNotFound`]: the
//! recognition of a missing sandbox stays in `e2b-client`, in one place.

use dsh_plugin_api::{Error, ErrorKind};
use http::{Response, StatusCode};

use crate::bodies::RelayedBody;

/// The owner's error for a call that found the sandbox gone: `Unavailable`,
/// about the sandbox, naming the call.
pub(crate) fn gone_error(sandbox_id: &str, call: &str, reason: &str) -> Error {
    Error::unavailable(format!("{call}: sandbox {sandbox_id} is gone: {reason}"))
        .with_subject(sandbox_id.to_owned())
}

/// Whether an owner's error reports the sandbox gone.
pub(crate) fn is_gone(err: &Error) -> bool {
    err.kind() == ErrorKind::Unavailable
}

/// The edge proxy's answer for a missing sandbox, carrying the owner's
/// message.
pub(crate) fn edge_answer(sandbox_id: &str, err: &Error) -> Response<RelayedBody> {
    let body = serde_json::json!({
        "sandboxId": sandbox_id,
        "message": err.message(),
        "code": 502,
    });
    let mut response = Response::new(RelayedBody::full(body.to_string().into_bytes()));
    *response.status_mut() = StatusCode::BAD_GATEWAY;
    response.headers_mut().insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static("application/json"),
    );
    response
}

#[cfg(test)]
mod tests {
    use http_body_util::BodyExt;

    use super::*;

    #[tokio::test]
    async fn the_edge_answer_carries_the_sandbox_and_the_message() {
        let err = gone_error("sbx1", "envd POST /filesystem.Filesystem/Stat", "edge 502");
        assert!(is_gone(&err));
        assert_eq!(err.subject(), Some("sbx1"));
        let response = edge_answer("sbx1", &err);
        assert_eq!(response.status(), StatusCode::BAD_GATEWAY);
        let body = response.into_body().collect().await.unwrap().to_bytes();
        let json: serde_json::Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(json["sandboxId"], "sbx1");
        assert_eq!(json["code"], 502);
        assert_eq!(
            json["message"],
            "envd POST /filesystem.Filesystem/Stat: sandbox sbx1 is gone: edge 502"
        );
        assert!(!is_gone(&Error::io("reset")));
    }
}
