//! `file:` URIs for canonical paths (RFC 8089 over RFC 3986).

use percent_encoding::{AsciiSet, NON_ALPHANUMERIC};

/// Bytes encoded in a URI path: everything except RFC 3986 `pchar`
/// (unreserved, sub-delims, `:` and `@`) and the `/` separator. So `%`,
/// `#`, `?`, space, controls such as newline and every non-ASCII byte are
/// percent-encoded, and any path round-trips through a URI decoder.
const ENCODED: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'.')
    .remove(b'_')
    .remove(b'~')
    .remove(b'!')
    .remove(b'$')
    .remove(b'&')
    .remove(b'\'')
    .remove(b'(')
    .remove(b')')
    .remove(b'*')
    .remove(b'+')
    .remove(b',')
    .remove(b';')
    .remove(b'=')
    .remove(b':')
    .remove(b'@')
    .remove(b'/');

/// `file://` + the percent-encoded absolute path (empty authority).
pub(crate) fn file_uri(path: &str) -> String {
    format!(
        "file://{}",
        percent_encoding::utf8_percent_encode(path, ENCODED)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_paths_stay_readable_and_special_ones_round_trip() {
        assert_eq!(
            file_uri("/home/user/a-b_c.rs"),
            "file:///home/user/a-b_c.rs"
        );
        assert_eq!(file_uri("/"), "file:///");
        let path = "/w/new\nline/ü 日本/100% #1?.txt";
        let uri = file_uri(path);
        assert_eq!(
            uri,
            "file:///w/new%0Aline/%C3%BC%20%E6%97%A5%E6%9C%AC/100%25%20%231%3F.txt"
        );
        let decoded: Vec<u8> =
            percent_encoding::percent_decode_str(uri.strip_prefix("file://").unwrap()).collect();
        assert_eq!(decoded, path.as_bytes());
    }
}
