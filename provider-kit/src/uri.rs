//! `file:` URIs for canonical paths (RFC 8089 over RFC 3986), as
//! `ResolvedPath::uri` carries them.

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

/// `file://` + the percent-encoded absolute path (empty authority). Takes
/// the path's bytes, so a path that is not UTF-8 is encoded losslessly too.
pub fn file_uri(path: &[u8]) -> String {
    let mut uri = String::with_capacity(7 + path.len());
    uri.push_str("file://");
    uri.extend(percent_encoding::percent_encode(path, ENCODED));
    uri
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decode(uri: &str) -> Vec<u8> {
        let path = uri.strip_prefix("file://").expect("file scheme");
        percent_encoding::percent_decode_str(path).collect()
    }

    #[test]
    fn plain_paths_stay_readable() {
        assert_eq!(
            file_uri(b"/home/user/a-b_c.rs"),
            "file:///home/user/a-b_c.rs"
        );
        assert_eq!(file_uri(b"/"), "file:///");
    }

    #[test]
    fn special_characters_are_encoded_and_round_trip() {
        let path = "/w/new\nline/ü ñ 日本/100% #1?.txt";
        let uri = file_uri(path.as_bytes());
        assert_eq!(
            uri,
            "file:///w/new%0Aline/%C3%BC%20%C3%B1%20%E6%97%A5%E6%9C%AC/100%25%20%231%3F.txt"
        );
        assert_eq!(decode(&uri), path.as_bytes());
        let raw = b"/w/\xff";
        assert_eq!(file_uri(raw), "file:///w/%FF");
        assert_eq!(decode(&file_uri(raw)), raw);
    }
}
