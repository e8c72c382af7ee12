//! Random identifiers handed out by the server: sandbox ids, API keys, envd access tokens, and
//! the UUIDs of template builds and world boots.

use rand::Rng;
use rand::distr::Alphanumeric;

const ID_ALPHABET: &[u8] = b"abcdefghijklmnopqrstuvwxyz0123456789";

/// Length of a sandbox id (E2B's ids are 20 lower-case alphanumerics).
pub const SANDBOX_ID_LEN: usize = 20;

/// A fresh sandbox id: 20 characters of `[a-z0-9]`, the alphabet E2B's edge proxy accepts.
pub fn sandbox_id() -> String {
    let mut rng = rand::rng();
    (0..SANDBOX_ID_LEN)
        .map(|_| ID_ALPHABET[rng.random_range(0..ID_ALPHABET.len())] as char)
        .collect()
}

/// Whether `id` is a syntactically valid sandbox id (`^[a-z0-9]+$`, at most 64 bytes).
pub fn is_valid_sandbox_id(id: &str) -> bool {
    !id.is_empty() && id.len() <= 64 && id.bytes().all(|b| ID_ALPHABET.contains(&b))
}

/// A fresh API key in the format both SDKs validate client-side: `e2b_` + 40 hex digits.
pub fn api_key() -> String {
    let mut rng = rand::rng();
    let mut key = String::from("e2b_");
    for _ in 0..40 {
        key.push(char::from_digit(rng.random_range(0..16), 16).expect("digit below 16"));
    }
    key
}

/// A random version-4 (variant 1) UUID in lowercase hex groups 8-4-4-4-12, as E2B's build ids
/// and the kernel's boot ids are written.
pub fn uuid_v4() -> String {
    let mut bytes: [u8; 16] = rand::random();
    bytes[6] = (bytes[6] & 0x0f) | 0x40;
    bytes[8] = (bytes[8] & 0x3f) | 0x80;
    let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    format!(
        "{}-{}-{}-{}-{}",
        &hex[..8],
        &hex[8..12],
        &hex[12..16],
        &hex[16..20],
        &hex[20..]
    )
}

/// Whether `key` matches `^e2b_[0-9a-f]+$`, the shape the SDKs insist on before sending it.
pub fn is_valid_api_key(key: &str) -> bool {
    key.strip_prefix("e2b_").is_some_and(|hex| {
        !hex.is_empty()
            && hex
                .bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
    })
}

/// A fresh envd access token: 32 mixed-case alphanumerics, like E2B's.
pub fn access_token() -> String {
    rand::rng()
        .sample_iter(&Alphanumeric)
        .take(32)
        .map(char::from)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uuids_are_version_4() {
        let id = uuid_v4();
        let parts: Vec<&str> = id.split('-').collect();
        assert_eq!(
            parts.iter().map(|p| p.len()).collect::<Vec<_>>(),
            [8, 4, 4, 4, 12]
        );
        assert!(parts[2].starts_with('4'));
        assert!("89ab".contains(&parts[3][..1]));
        assert!(
            id.bytes()
                .all(|b| b == b'-' || b.is_ascii_hexdigit() && !b.is_ascii_uppercase())
        );
        assert_ne!(uuid_v4(), id);
    }

    #[test]
    fn sandbox_ids_are_lowercase_alphanumeric_and_distinct() {
        let a = sandbox_id();
        let b = sandbox_id();
        assert_eq!(a.len(), SANDBOX_ID_LEN);
        assert!(is_valid_sandbox_id(&a), "{a}");
        assert_ne!(a, b);
    }

    #[test]
    fn sandbox_id_validation_rejects_other_shapes() {
        assert!(!is_valid_sandbox_id(""));
        assert!(!is_valid_sandbox_id("ABC"));
        assert!(!is_valid_sandbox_id("a-b"));
        assert!(!is_valid_sandbox_id(&"a".repeat(65)));
    }

    #[test]
    fn api_keys_have_the_sdk_shape() {
        let key = api_key();
        assert!(is_valid_api_key(&key), "{key}");
        assert!(!is_valid_api_key("e2b_"));
        assert!(!is_valid_api_key("e2b_XYZ"));
        assert!(!is_valid_api_key("abc"));
    }

    #[test]
    fn access_tokens_are_32_alphanumerics() {
        let token = access_token();
        assert_eq!(token.len(), 32);
        assert!(token.bytes().all(|b| b.is_ascii_alphanumeric()));
    }
}
