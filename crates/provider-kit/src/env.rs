//! The environment boundary every subprocess provider draws between its
//! world's ambient environment and the commands it starts: a name is
//! removed when, compared case-insensitively (ASCII), it starts with
//! `DSH_` or contains `KEY`, `SECRET` or `TOKEN`.
//!
//! Case-insensitive matching is deliberate — `github_token` and `Api_Key`
//! carry credentials as surely as their upper-case spellings — and the
//! over-match it brings (`MONKEY`, `KEYBOARD_LAYOUT`) is accepted: the
//! boundary errs towards removing, and a caller restores anything it needs
//! through the spec's explicit `env`, which always wins.

/// The search path used when neither the spec nor the ambient environment
/// sets `PATH` (the value `confstr(_CS_PATH)` gives on glibc).
pub const DEFAULT_PATH: &str = "/usr/local/bin:/usr/bin:/bin";

/// Whether an ambient variable named `name` (its bytes: names need not be
/// UTF-8) is removed at the boundary.
pub fn is_scrubbed(name: &[u8]) -> bool {
    let upper = name.to_ascii_uppercase();
    upper.starts_with(b"DSH_")
        || [&b"KEY"[..], b"SECRET", b"TOKEN"]
            .iter()
            .any(|needle| upper.windows(needle.len()).any(|w| w == *needle))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_scrub_rule_is_case_insensitive() {
        for name in [
            "DSH_PLUGIN_PATH",
            "dsh_anything",
            "E2B_API_KEY",
            "api_key",
            "GITHUB_TOKEN",
            "github_Token",
            "AWS_SECRET_ACCESS_KEY",
            "client_secret",
            "MONKEY",
        ] {
            assert!(is_scrubbed(name.as_bytes()), "{name}");
        }
        for name in ["PATH", "HOME", "DSHELL", "LANG", "TERM", "TOKE", "KE"] {
            assert!(!is_scrubbed(name.as_bytes()), "{name}");
        }
        assert!(is_scrubbed(b"\xff_token"));
        assert!(!is_scrubbed(b"\xff"));
    }
}
