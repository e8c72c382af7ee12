//! Strict JSON request bodies: malformed JSON, unknown or mistyped fields answered with 400 as
//! the API's error naming the operation. (Reading a body within its size limit is the server's:
//! e2b-local's `api::json_body::read_body`.)

use serde::de::DeserializeOwned;

use crate::error::ApiError;

/// Parses `bytes` as `T`; an empty body is an error (use [`parse_optional`] where it is not).
pub fn parse<T: DeserializeOwned>(op: &str, bytes: &[u8]) -> Result<T, ApiError> {
    if bytes.iter().all(u8::is_ascii_whitespace) {
        return Err(ApiError::bad_request(format!(
            "{op}: request body is empty, expected a JSON object"
        )));
    }
    serde_json::from_slice(bytes)
        .map_err(|err| ApiError::bad_request(format!("{op}: invalid JSON body: {err}")))
}

/// Like [`parse`], but an empty body yields `None` (e.g. `POST …/pause`, which JS sends bare).
pub fn parse_optional<T: DeserializeOwned>(op: &str, bytes: &[u8]) -> Result<Option<T>, ApiError> {
    if bytes.iter().all(u8::is_ascii_whitespace) {
        return Ok(None);
    }
    parse(op, bytes).map(Some)
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::StatusCode;
    use serde::Deserialize;

    #[derive(Debug, Deserialize)]
    #[serde(deny_unknown_fields)]
    struct Probe {
        #[allow(
            dead_code,
            reason = "only deserialised: the test checks what parsing accepts"
        )]
        timeout: u32,
    }

    #[test]
    fn malformed_unknown_and_mistyped_bodies_are_400_naming_the_operation() {
        for body in [
            &b"{"[..],
            b"{\"timeout\":1,\"x\":2}",
            b"{\"timeout\":\"1\"}",
            b"[]",
            b"",
            b"  ",
        ] {
            let err = parse::<Probe>("set timeout", body).unwrap_err();
            assert_eq!(err.status, StatusCode::BAD_REQUEST, "{body:?}");
            assert!(err.message.starts_with("set timeout: "), "{}", err.message);
        }
        let unknown = parse::<Probe>("op", b"{\"timeout\":1,\"x\":2}").unwrap_err();
        assert!(
            unknown.message.contains("unknown field `x`"),
            "{}",
            unknown.message
        );
    }

    #[test]
    fn optional_bodies_accept_empty() {
        assert!(parse_optional::<Probe>("op", b"").unwrap().is_none());
        assert!(
            parse_optional::<Probe>("op", b"{\"timeout\":3}")
                .unwrap()
                .is_some()
        );
    }
}
