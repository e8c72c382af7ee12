//! `/files` URL signatures (docs/e2b-protocol.md §7.2), which let a plain HTTP
//! client read or write one file of a secured sandbox without the access
//! token.

use base64::Engine;
use sha2::{Digest, Sha256};

/// Which `/files` operation a signature allows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FileOperation {
    /// `GET /files` (download).
    Read,
    /// `POST /files` (upload).
    Write,
}

impl FileOperation {
    fn as_str(self) -> &'static str {
        match self {
            FileOperation::Read => "read",
            FileOperation::Write => "write",
        }
    }
}

/// `"v1_" + base64(sha256("<path>:<op>:<user>:<token>[:<expiration>]"))`,
/// standard alphabet without padding. `path` is the query value as the
/// server decodes it; `user` is empty when none is given.
pub(crate) fn signature(
    path: &str,
    operation: FileOperation,
    user: &str,
    token: &str,
    expiration_unix: Option<u64>,
) -> String {
    let mut input = format!("{path}:{}:{user}:{token}", operation.as_str());
    if let Some(expiration) = expiration_unix {
        input.push(':');
        input.push_str(&expiration.to_string());
    }
    let digest = Sha256::digest(input.as_bytes());
    format!(
        "v1_{}",
        base64::engine::general_purpose::STANDARD_NO_PAD.encode(digest)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matches_the_sdk_reference_value() {
        assert_eq!(
            signature(
                "hello.txt",
                FileOperation::Read,
                "user",
                "0tQG31xiMp0IOQfaz9dcwi72L1CPo8e0",
                None
            ),
            "v1_gUtH/s9YCJWgCizjfUxuWfhFE4QSydOWEIIvfLwDr6E"
        );
    }

    #[test]
    fn expiration_and_operation_change_the_signature() {
        let base = signature("a", FileOperation::Read, "", "t", None);
        assert_ne!(base, signature("a", FileOperation::Write, "", "t", None));
        assert_ne!(base, signature("a", FileOperation::Read, "", "t", Some(10)));
        assert!(!base.ends_with('='));
    }
}
