//! `file:` URIs for canonical paths (RFC 8089 over RFC 3986).

use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use percent_encoding::{AsciiSet, NON_ALPHANUMERIC};

/// Bytes kept literally in a URI path: RFC 3986 `pchar` (unreserved,
/// sub-delims, `:` and `@`) plus the `/` separator. Everything else — `%`,
/// `#`, `?`, space, controls such as newline, and every non-ASCII byte — is
/// percent-encoded, so any path round-trips through a URI decoder.
const PATH_ENCODE: &AsciiSet = &NON_ALPHANUMERIC
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
pub(crate) fn file_uri(path: &Path) -> String {
    let bytes = path.as_os_str().as_bytes();
    let mut uri = String::with_capacity(7 + bytes.len());
    uri.push_str("file://");
    for part in percent_encoding::percent_encode(bytes, PATH_ENCODE) {
        uri.push_str(part);
    }
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
            file_uri(Path::new("/home/user/a-b_c.rs")),
            "file:///home/user/a-b_c.rs"
        );
        assert_eq!(file_uri(Path::new("/")), "file:///");
    }

    #[test]
    fn special_characters_are_encoded_and_round_trip() {
        let path = "/w/new\nline/ü ñ 日本/100% #1?.txt";
        let uri = file_uri(Path::new(path));
        assert_eq!(
            uri,
            "file:///w/new%0Aline/%C3%BC%20%C3%B1%20%E6%97%A5%E6%9C%AC/100%25%20%231%3F.txt"
        );
        assert_eq!(decode(&uri), path.as_bytes());
    }
}
