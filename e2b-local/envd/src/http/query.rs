//! Query strings parsed as Go's `url.ParseQuery` does: `&`-separated `key=value` pairs,
//! percent-decoded with `+` as space; the first value of a repeated key wins.

use std::collections::HashMap;

/// The decoded query parameters (first value of each key).
#[derive(Debug, Default)]
pub(crate) struct Query {
    params: HashMap<String, String>,
}

fn decode(text: &str) -> Result<String, String> {
    let spaced = text.replace('+', " ");
    let bytes = spaced.as_bytes();
    // Reject malformed escapes (`%zz`, a trailing `%`) as Go does.
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let valid = bytes.len() >= i + 3
                && bytes[i + 1].is_ascii_hexdigit()
                && bytes[i + 2].is_ascii_hexdigit();
            if !valid {
                return Err(format!("invalid URL escape in {text:?}"));
            }
            i += 3;
        } else {
            i += 1;
        }
    }
    percent_encoding::percent_decode_str(&spaced)
        .decode_utf8()
        .map(|decoded| decoded.into_owned())
        .map_err(|_| format!("query value {text:?} is not valid UTF-8"))
}

impl Query {
    /// Parses `raw` (without the leading `?`).
    pub(crate) fn parse(raw: Option<&str>) -> Result<Self, String> {
        let mut params = HashMap::new();
        for pair in raw.unwrap_or("").split('&') {
            if pair.is_empty() {
                continue;
            }
            let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
            let key = decode(key)?;
            let value = decode(value)?;
            params.entry(key).or_insert(value);
        }
        Ok(Self { params })
    }

    /// The value of `key`, if present (possibly empty).
    pub(crate) fn get(&self, key: &str) -> Option<&str> {
        self.params.get(key).map(String::as_str)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decodes_like_go() {
        let query = Query::parse(Some("path=%2Ftmp%2Fa+b.txt&username=&path=second&x")).unwrap();
        assert_eq!(query.get("path"), Some("/tmp/a b.txt"));
        assert_eq!(query.get("username"), Some(""));
        assert_eq!(query.get("x"), Some(""));
        assert_eq!(query.get("missing"), None);
        assert!(Query::parse(Some("path=%zz")).is_err());
        assert!(Query::parse(Some("path=%")).is_err());
    }
}
