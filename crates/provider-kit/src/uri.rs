//! `file:` URIs for absolute paths (RFC 8089 over RFC 3986), both ways: as
//! `ResolvedPath::uri` carries them, and as the LSP client sends and reads
//! them. One codec, so that every crate agrees on what a path's URI is.
//!
//! A URI is compared by the path it decodes to, never as a string: peers
//! escape differently (clangd 14 answers with `:` unescaped for a document
//! it was sent as `%3A`), and all of those spellings name the same file.

use std::fmt;

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
/// [`file_path`] gives the bytes back.
pub fn file_uri(path: &[u8]) -> String {
    let mut uri = String::with_capacity(7 + path.len());
    uri.push_str("file://");
    uri.extend(percent_encoding::percent_encode(path, ENCODED));
    uri
}

/// The absolute path a `file:` URI names, percent-decoded: the bytes
/// [`file_uri`] encoded, whichever characters the URI's writer chose to
/// escape (`%3A` or `:`, `%28` or `(`, either case of hex digit). The
/// scheme is matched without case; the authority must be empty or
/// `localhost` (`file:/p` without one is accepted too). A URI of another
/// scheme or host, one naming a relative path, one with a query or fragment
/// (an unescaped `?` or `#`: no file path has one) or with a `%` not
/// followed by two hex digits is an error quoting it.
pub fn file_path(uri: &str) -> Result<Vec<u8>, UriError> {
    let error = |reason| UriError {
        uri: uri.to_owned(),
        reason,
    };
    let rest = uri
        .get(..5)
        .filter(|scheme| scheme.eq_ignore_ascii_case("file:"))
        .map(|_| &uri[5..])
        .ok_or_else(|| error(Reason::NotFile))?;
    let path = match rest.strip_prefix("//") {
        Some(after) => {
            let (authority, path) = after.split_at(after.find('/').unwrap_or(after.len()));
            if !authority.is_empty() && !authority.eq_ignore_ascii_case("localhost") {
                return Err(error(Reason::Host(authority.to_owned())));
            }
            path
        }
        None => rest,
    };
    if !path.starts_with('/') {
        return Err(error(Reason::Relative));
    }
    if path.contains(['?', '#']) {
        return Err(error(Reason::QueryOrFragment));
    }
    let bytes = path.as_bytes();
    let mut decoded = Vec::with_capacity(bytes.len());
    let mut at = 0;
    while at < bytes.len() {
        if bytes[at] == b'%' {
            let byte = path
                .get(at + 1..at + 3)
                .filter(|hex| hex.bytes().all(|b| b.is_ascii_hexdigit()))
                .and_then(|hex| u8::from_str_radix(hex, 16).ok())
                .ok_or_else(|| error(Reason::BadEscape(at)))?;
            decoded.push(byte);
            at += 3;
        } else {
            decoded.push(bytes[at]);
            at += 1;
        }
    }
    Ok(decoded)
}

/// Why a URI names no local file path ([`file_path`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UriError {
    uri: String,
    reason: Reason,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Reason {
    NotFile,
    Host(String),
    Relative,
    QueryOrFragment,
    /// At this byte offset of the URI's path.
    BadEscape(usize),
}

impl fmt::Display for UriError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?} ", self.uri)?;
        match &self.reason {
            Reason::NotFile => write!(f, "is not a file: URI"),
            Reason::Host(host) => write!(f, "names a file on host {host:?}, not this one"),
            Reason::Relative => write!(f, "names no absolute path"),
            Reason::QueryOrFragment => {
                write!(f, "has a query or fragment (an unescaped '?' or '#')")
            }
            Reason::BadEscape(at) => write!(
                f,
                "has a '%' not followed by two hex digits (path byte {at})"
            ),
        }
    }
}

impl std::error::Error for UriError {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_paths_stay_readable() {
        assert_eq!(
            file_uri(b"/home/user/a-b_c.rs"),
            "file:///home/user/a-b_c.rs"
        );
        assert_eq!(file_uri(b"/"), "file:///");
        assert_eq!(file_uri(b"/a:b/c@d+e(f)"), "file:///a:b/c@d+e(f)");
    }

    #[test]
    fn special_characters_are_encoded_and_round_trip() {
        let path = "/w/new\nline/ü ñ 日本/100% #1?.txt";
        let uri = file_uri(path.as_bytes());
        assert_eq!(
            uri,
            "file:///w/new%0Aline/%C3%BC%20%C3%B1%20%E6%97%A5%E6%9C%AC/100%25%20%231%3F.txt"
        );
        assert_eq!(file_path(&uri).unwrap(), path.as_bytes());
        let raw = b"/w/\xff";
        assert_eq!(file_uri(raw), "file:///w/%FF");
        assert_eq!(file_path(&file_uri(raw)).unwrap(), raw);
    }

    #[test]
    fn every_spelling_of_a_path_decodes_to_it() {
        for uri in [
            "file:///a:b/c@d+e(f)/%3F%23",
            "file:///a%3Ab/c%40d%2Be%28f%29/%3f%23",
            "FILE://localhost/a%3ab/c%40d+e(f)/%3F%23",
            "file:/a:b/c@d+e(f)/%3F%23",
        ] {
            assert_eq!(file_path(uri).unwrap(), b"/a:b/c@d+e(f)/?#", "{uri}");
        }
        // Decoded once: an escaped '%' stays a '%'.
        assert_eq!(file_path("file:///a%253A").unwrap(), b"/a%3A");
    }

    #[test]
    fn uris_naming_no_local_path_are_refused_with_the_uri() {
        for (uri, says) in [
            ("untitled:Untitled-1", "is not a file: URI"),
            ("file://server/share/a", "on host \"server\""),
            ("file:a/b", "names no absolute path"),
            ("file://", "names no absolute path"),
            ("file:///a?b", "query or fragment"),
            ("file:///a#b", "query or fragment"),
            ("file:///a%2", "path byte 2"),
            ("file:///a%zz", "path byte 2"),
        ] {
            let err = file_path(uri).unwrap_err().to_string();
            assert!(err.starts_with(&format!("{uri:?} ")), "{err}");
            assert!(err.contains(says), "{uri}: {err}");
        }
    }
}
