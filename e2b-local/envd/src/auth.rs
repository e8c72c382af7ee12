//! Access-token checks (docs/e2b-protocol.md §7.2): the `X-Access-Token` header, signed `/files`
//! URLs, and the Basic-auth user name carried by RPCs (§3.1).

use base64::Engine as _;
use http::HeaderMap;
use sha2::{Digest, Sha256};

/// The header carrying the sandbox access token.
pub(crate) const ACCESS_TOKEN_HEADER: &str = "x-access-token";

/// The message envd answers a request without the right token with.
pub(crate) const UNAUTHORIZED_MESSAGE: &str =
    "unauthorized access, please provide a valid access token or method signing if supported";

/// Which `/files` operation a signature authorises.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Operation {
    Read,
    Write,
}

impl Operation {
    fn as_str(self) -> &'static str {
        match self {
            Operation::Read => "read",
            Operation::Write => "write",
        }
    }
}

/// Routes that never need the access token (method and exact path).
pub(crate) fn is_token_exempt(method: &http::Method, path: &str) -> bool {
    matches!(
        (method.as_str(), path),
        ("GET", "/health") | ("GET", "/files") | ("POST", "/files") | ("POST", "/init")
    )
}

/// Constant-time string equality, so a wrong token cannot be guessed byte by byte.
pub(crate) fn tokens_equal(expected: &str, given: &str) -> bool {
    let (a, b) = (expected.as_bytes(), given.as_bytes());
    if a.len() != b.len() {
        return false;
    }
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// True if the request carries `token` in `X-Access-Token`.
pub(crate) fn header_token_matches(headers: &HeaderMap, token: &str) -> bool {
    headers
        .get(ACCESS_TOKEN_HEADER)
        .and_then(|value| value.to_str().ok())
        .is_some_and(|given| tokens_equal(token, given))
}

/// envd's signature: `"v1_" + base64(sha256("<path>:<op>:<user>:<token>[:<exp>]"))`, standard
/// alphabet without padding.
pub(crate) fn signature(
    path: &str,
    operation: Operation,
    username: &str,
    token: &str,
    expiration: Option<i64>,
) -> String {
    let mut text = format!("{path}:{}:{username}:{token}", operation.as_str());
    if let Some(expiration) = expiration {
        text.push(':');
        text.push_str(&expiration.to_string());
    }
    let digest = Sha256::digest(text.as_bytes());
    format!(
        "v1_{}",
        base64::engine::general_purpose::STANDARD_NO_PAD.encode(digest)
    )
}

/// The signing-related query parameters of a `/files` request, raw as sent.
#[derive(Debug, Default, Clone)]
pub(crate) struct SigningParams<'a> {
    pub path: &'a str,
    pub username: Option<&'a str>,
    pub signature: Option<&'a str>,
    /// `signature_expiration`, already parsed as unix seconds.
    pub expiration: Option<i64>,
}

/// Checks a `/files` request against `token` (when the sandbox has one): a matching
/// `X-Access-Token` passes, a mismatching one fails, otherwise the signature must match and not
/// be expired. The error is the message envd answers with HTTP 401.
pub(crate) fn validate_signing(
    token: Option<&str>,
    headers: &HeaderMap,
    params: &SigningParams<'_>,
    operation: Operation,
    now_unix: i64,
) -> Result<(), String> {
    let Some(token) = token else {
        return Ok(());
    };
    if let Some(given) = headers.get(ACCESS_TOKEN_HEADER) {
        let given = given.to_str().unwrap_or("");
        if !given.is_empty() {
            return if tokens_equal(token, given) {
                Ok(())
            } else {
                Err("access token present in header but does not match".to_owned())
            };
        }
    }
    let Some(given_signature) = params.signature else {
        return Err("missing signature query parameter".to_owned());
    };
    let expiration = params.expiration;
    let expected = signature(
        params.path,
        operation,
        params.username.unwrap_or(""),
        token,
        expiration,
    );
    if !tokens_equal(&expected, given_signature) {
        return Err("invalid signature".to_owned());
    }
    if let Some(expiration) = expiration
        && expiration < now_unix
    {
        return Err("signature is already expired".to_owned());
    }
    Ok(())
}

/// The user name of an `Authorization: Basic base64(user:)` header. `Ok(None)` when there is no
/// Basic header; an `Err` when one is present but unreadable.
pub(crate) fn basic_auth_user(headers: &HeaderMap) -> Result<Option<String>, String> {
    let Some(value) = headers.get(http::header::AUTHORIZATION) else {
        return Ok(None);
    };
    let Ok(value) = value.to_str() else {
        return Err("authorization header is not valid ASCII".to_owned());
    };
    let Some((scheme, encoded)) = value.trim().split_once(' ') else {
        return Ok(None);
    };
    if !scheme.eq_ignore_ascii_case("basic") {
        return Ok(None);
    }
    let decoded = base64::engine::general_purpose::STANDARD
        .decode(encoded.trim())
        .map_err(|err| format!("malformed basic authorization: {err}"))?;
    let decoded = String::from_utf8(decoded)
        .map_err(|_| "malformed basic authorization: not UTF-8".to_owned())?;
    let user = decoded
        .split_once(':')
        .map_or(decoded.as_str(), |(user, _)| user);
    Ok(Some(user.to_owned()))
}

#[cfg(test)]
mod tests {
    use super::*;

    const TOKEN: &str = "0tQG31xiMp0IOQfaz9dcwi72L1CPo8e0";

    #[test]
    fn signature_matches_the_sdk_reference_value() {
        assert_eq!(
            signature("hello.txt", Operation::Read, "user", TOKEN, None),
            "v1_gUtH/s9YCJWgCizjfUxuWfhFE4QSydOWEIIvfLwDr6E"
        );
    }

    #[test]
    fn signing_rules() {
        let headers = HeaderMap::new();
        let good = signature("a", Operation::Write, "", TOKEN, Some(2000));
        let params = SigningParams {
            path: "a",
            username: None,
            signature: Some(&good),
            expiration: Some(2000),
        };
        assert!(validate_signing(Some(TOKEN), &headers, &params, Operation::Write, 1000).is_ok());
        assert_eq!(
            validate_signing(Some(TOKEN), &headers, &params, Operation::Write, 3000).unwrap_err(),
            "signature is already expired"
        );
        assert_eq!(
            validate_signing(Some(TOKEN), &headers, &params, Operation::Read, 1000).unwrap_err(),
            "invalid signature"
        );
        let mut wrong_header = HeaderMap::new();
        wrong_header.insert(ACCESS_TOKEN_HEADER, "nope".parse().unwrap());
        assert!(
            validate_signing(Some(TOKEN), &wrong_header, &params, Operation::Write, 1000)
                .unwrap_err()
                .contains("does not match")
        );
        let mut right_header = HeaderMap::new();
        right_header.insert(ACCESS_TOKEN_HEADER, TOKEN.parse().unwrap());
        let unsigned = SigningParams {
            path: "a",
            ..Default::default()
        };
        assert!(
            validate_signing(Some(TOKEN), &right_header, &unsigned, Operation::Read, 0).is_ok()
        );
        assert_eq!(
            validate_signing(Some(TOKEN), &headers, &unsigned, Operation::Read, 0).unwrap_err(),
            "missing signature query parameter"
        );
        assert!(validate_signing(None, &headers, &unsigned, Operation::Read, 0).is_ok());
    }

    #[test]
    fn basic_auth_user_names() {
        let mut headers = HeaderMap::new();
        assert_eq!(basic_auth_user(&headers), Ok(None));
        headers.insert(
            http::header::AUTHORIZATION,
            "Basic cm9vdDo=".parse().unwrap(),
        );
        assert_eq!(basic_auth_user(&headers), Ok(Some("root".to_owned())));
        headers.insert(http::header::AUTHORIZATION, "Basic !!!".parse().unwrap());
        assert!(basic_auth_user(&headers).is_err());
        headers.insert(http::header::AUTHORIZATION, "Bearer x".parse().unwrap());
        assert_eq!(basic_auth_user(&headers), Ok(None));
    }
}
