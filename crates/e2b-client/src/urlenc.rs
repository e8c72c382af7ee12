//! Percent-encoding for query strings and path segments.

use percent_encoding::{AsciiSet, NON_ALPHANUMERIC, utf8_percent_encode};

/// Everything but RFC 3986 unreserved characters (`A-Z a-z 0-9 - . _ ~`):
/// safe in any query value or path segment, and decoded identically by Go's
/// `url.ParseQuery` and every other form parser.
const COMPONENT: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'.')
    .remove(b'_')
    .remove(b'~');

/// Encodes one query value or path segment.
pub(crate) fn component(value: &str) -> String {
    utf8_percent_encode(value, COMPONENT).to_string()
}

/// Builds `k1=v1&k2=v2` from pairs, encoding keys and values.
pub(crate) fn query<'a>(pairs: impl IntoIterator<Item = (&'a str, &'a str)>) -> String {
    let mut out = String::new();
    for (key, value) in pairs {
        if !out.is_empty() {
            out.push('&');
        }
        out.push_str(&component(key));
        out.push('=');
        out.push_str(&component(value));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reserved_and_non_ascii_characters_are_encoded() {
        assert_eq!(component("a b/c?d=e&f"), "a%20b%2Fc%3Fd%3De%26f");
        assert_eq!(component("~user/.x_y-z"), "~user%2F.x_y-z");
        assert_eq!(component("é\n%"), "%C3%A9%0A%25");
    }

    #[test]
    fn query_joins_pairs() {
        assert_eq!(
            query([("path", "/a b"), ("username", "root")]),
            "path=%2Fa%20b&username=root"
        );
        assert_eq!(query([]), "");
    }
}
