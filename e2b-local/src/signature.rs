//! envd's `/files` URL signatures (docs/e2b-protocol.md §7.2), used by the front to find the
//! sandbox a signed URL belongs to when it arrives without routing headers (§9.13).

use base64::Engine;
use base64::engine::general_purpose::STANDARD_NO_PAD;
use sha2::{Digest, Sha256};

/// The operation a `/files` signature authorises: `read` for GET, `write` for POST.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FileOp {
    Read,
    Write,
}

impl FileOp {
    fn as_str(self) -> &'static str {
        match self {
            FileOp::Read => "read",
            FileOp::Write => "write",
        }
    }
}

/// `v1_` + unpadded standard base64 of SHA-256 over `<path>:<op>:<username>:<token>[:<expiration>]`.
/// `path` and `username` are the decoded query values; `username` is empty when none was given.
pub fn file_signature(
    path: &str,
    op: FileOp,
    username: &str,
    token: &str,
    expiration: Option<i64>,
) -> String {
    let mut text = format!("{path}:{}:{username}:{token}", op.as_str());
    if let Some(expiration) = expiration {
        text.push(':');
        text.push_str(&expiration.to_string());
    }
    format!(
        "v1_{}",
        STANDARD_NO_PAD.encode(Sha256::digest(text.as_bytes()))
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matches_the_sdk_reference_value() {
        let sig = file_signature(
            "hello.txt",
            FileOp::Read,
            "user",
            "0tQG31xiMp0IOQfaz9dcwi72L1CPo8e0",
            None,
        );
        assert_eq!(sig, "v1_gUtH/s9YCJWgCizjfUxuWfhFE4QSydOWEIIvfLwDr6E");
    }

    #[test]
    fn expiration_and_operation_change_the_signature() {
        let plain = file_signature("a", FileOp::Read, "", "t", None);
        assert_ne!(plain, file_signature("a", FileOp::Read, "", "t", Some(1)));
        assert_ne!(plain, file_signature("a", FileOp::Write, "", "t", None));
    }
}
