//! Header lists as they cross the owner boundary (`Vec<(name, value)>`,
//! order and repeats kept) to and from `http::HeaderMap`.

use http::header::{CONTENT_LENGTH, HOST};
use http::{HeaderMap, HeaderName, HeaderValue};

use e2b_client::{ACCESS_TOKEN_HEADER, SANDBOX_ID_HEADER, SANDBOX_PORT_HEADER};

/// Headers only the owner may set: routing and credentials (the contract of
/// `DaemonRequest::headers`).
fn owner_only(name: &HeaderName) -> bool {
    [
        HOST,
        SANDBOX_ID_HEADER,
        SANDBOX_PORT_HEADER,
        ACCESS_TOKEN_HEADER,
    ]
    .contains(name)
}

/// A header list as it crosses the boundary.
pub(crate) type HeaderList = Vec<(String, Vec<u8>)>;

/// `map` as a list, in the map's order (repeated names stay repeated).
pub(crate) fn to_list(map: &HeaderMap) -> HeaderList {
    map.iter()
        .map(|(name, value)| (name.as_str().to_owned(), value.as_bytes().to_vec()))
        .collect()
}

/// The list of a request the owner received, validated: every name and
/// value must be valid HTTP, owner-only headers are refused, and a
/// `Content-Length` must be a decimal number (it is returned too, as the
/// body's exact length).
pub(crate) fn request_from_list(list: HeaderList) -> Result<(HeaderMap, Option<u64>), String> {
    let mut map = HeaderMap::with_capacity(list.len());
    let mut content_length = None;
    for (name, value) in list {
        let header = HeaderName::from_bytes(name.as_bytes())
            .map_err(|_| format!("header name {name:?} is not valid HTTP"))?;
        if owner_only(&header) {
            return Err(format!(
                "header {header} is set by the owner (routing and credentials) and must not be sent"
            ));
        }
        let value = HeaderValue::from_bytes(&value)
            .map_err(|_| format!("the value of header {header} is not valid HTTP"))?;
        if header == CONTENT_LENGTH {
            let length = value
                .to_str()
                .ok()
                .and_then(|text| text.trim().parse::<u64>().ok())
                .ok_or_else(|| format!("Content-Length {value:?} is not a number"))?;
            if content_length.is_some_and(|seen| seen != length) {
                return Err("two different Content-Length headers".to_owned());
            }
            content_length = Some(length);
        }
        map.append(header, value);
    }
    Ok((map, content_length))
}

/// The list of a response relayed by the owner, as a map; the exact body
/// length when `Content-Length` is a number.
pub(crate) fn response_from_list(list: HeaderList) -> Result<(HeaderMap, Option<u64>), String> {
    let mut map = HeaderMap::with_capacity(list.len());
    for (name, value) in list {
        let header = HeaderName::from_bytes(name.as_bytes())
            .map_err(|_| format!("response header name {name:?} is not valid HTTP"))?;
        let value = HeaderValue::from_bytes(&value)
            .map_err(|_| format!("the value of response header {header} is not valid HTTP"))?;
        map.append(header, value);
    }
    let length = map
        .get(CONTENT_LENGTH)
        .and_then(|value| value.to_str().ok())
        .and_then(|text| text.trim().parse::<u64>().ok());
    Ok((map, length))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn list(pairs: &[(&str, &[u8])]) -> HeaderList {
        pairs
            .iter()
            .map(|(name, value)| ((*name).to_owned(), value.to_vec()))
            .collect()
    }

    #[test]
    fn round_trips_keep_order_and_repeats() {
        let original = list(&[
            ("content-type", b"application/proto"),
            ("x-metadata-a", b"1"),
            ("x-metadata-a", b"2"),
        ]);
        let (map, length) = request_from_list(original.clone()).unwrap();
        assert_eq!(length, None);
        assert_eq!(to_list(&map), original);
    }

    #[test]
    fn owner_only_headers_are_refused() {
        for name in [
            "host",
            "E2b-Sandbox-Id",
            "e2b-sandbox-port",
            "x-access-token",
        ] {
            let err = request_from_list(list(&[(name, b"x")])).unwrap_err();
            assert!(err.contains("set by the owner"), "{name}: {err}");
        }
    }

    #[test]
    fn malformed_headers_are_refused_by_name() {
        let err = request_from_list(list(&[("bad name", b"x")])).unwrap_err();
        assert!(err.contains("\"bad name\""), "{err}");
        let err = request_from_list(list(&[("x-a", b"line\nbreak")])).unwrap_err();
        assert!(err.contains("x-a"), "{err}");
        let err = request_from_list(list(&[("content-length", b"ten")])).unwrap_err();
        assert!(err.contains("not a number"), "{err}");
        let err = request_from_list(list(&[("content-length", b"1"), ("content-length", b"2")]))
            .unwrap_err();
        assert!(err.contains("two different"), "{err}");
    }

    #[test]
    fn content_length_is_returned() {
        let (_, length) = request_from_list(list(&[("content-length", b"42")])).unwrap();
        assert_eq!(length, Some(42));
        let (_, length) = response_from_list(list(&[("content-length", b"7")])).unwrap();
        assert_eq!(length, Some(7));
        let err = response_from_list(list(&[("x", b"\r")])).unwrap_err();
        assert!(err.contains("response header x"), "{err}");
    }
}
