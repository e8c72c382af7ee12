//! Conditional and range requests on `GET /files`, as Go's `http.ServeContent` evaluates them for
//! a response with a `Last-Modified` date and no `ETag` (the daemon sets none, like envd).

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use http::{HeaderMap, Method};

/// What the preconditions decide.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Decision {
    /// Serve the content; `range` is the `Range` header still in force.
    Serve { range: Option<String> },
    /// 304 Not Modified.
    NotModified,
    /// 412 Precondition Failed.
    PreconditionFailed,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Cond {
    None,
    True,
    False,
}

fn header<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    headers
        .get(name)
        .and_then(|value| value.to_str().ok())
        .filter(|value| !value.is_empty())
}

fn truncate_to_seconds(time: SystemTime) -> SystemTime {
    let secs = time.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs());
    UNIX_EPOCH + Duration::from_secs(secs)
}

/// Evaluates `If-Match`, `If-Unmodified-Since`, `If-None-Match`, `If-Modified-Since` and
/// `If-Range` against `modified`.
pub(crate) fn evaluate(
    method: &Method,
    headers: &HeaderMap,
    modified: Option<SystemTime>,
) -> Decision {
    let modified = modified.map(truncate_to_seconds);
    let get_or_head = method == Method::GET || method == Method::HEAD;

    let mut cond = match header(headers, "if-match") {
        None => Cond::None,
        // Without an ETag only "*" can match.
        Some(value) if value.trim() == "*" => Cond::True,
        Some(_) => Cond::False,
    };
    if cond == Cond::None {
        cond = match (header(headers, "if-unmodified-since"), modified) {
            (Some(value), Some(modified)) => match httpdate::parse_http_date(value) {
                Ok(since) if modified <= since => Cond::True,
                Ok(_) => Cond::False,
                Err(_) => Cond::None,
            },
            _ => Cond::None,
        };
    }
    if cond == Cond::False {
        return Decision::PreconditionFailed;
    }

    let none_match = match header(headers, "if-none-match") {
        None => Cond::None,
        Some(value) if value.trim_start().starts_with('*') => Cond::False,
        Some(_) => Cond::True,
    };
    match none_match {
        Cond::False => {
            return if get_or_head {
                Decision::NotModified
            } else {
                Decision::PreconditionFailed
            };
        }
        Cond::None if get_or_head => {
            if let (Some(value), Some(modified)) = (header(headers, "if-modified-since"), modified)
                && let Ok(since) = httpdate::parse_http_date(value)
                && modified <= since
            {
                return Decision::NotModified;
            }
        }
        _ => {}
    }

    let mut range = header(headers, "range").map(str::to_owned);
    if range.is_some()
        && get_or_head
        && let Some(if_range) = header(headers, "if-range")
    {
        let holds = if if_range.starts_with('"') || if_range.starts_with("W/") {
            false
        } else {
            match (modified, httpdate::parse_http_date(if_range)) {
                (Some(modified), Ok(date)) => modified == date,
                _ => false,
            }
        };
        if !holds {
            range = None;
        }
    }
    Decision::Serve { range }
}

/// One satisfiable byte range.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ByteRange {
    pub start: u64,
    pub length: u64,
}

impl ByteRange {
    /// The `Content-Range` value for this range of a `size`-byte file.
    pub(crate) fn content_range(&self, size: u64) -> String {
        format!(
            "bytes {}-{}/{size}",
            self.start,
            self.start + self.length - 1
        )
    }
}

/// Why a `Range` header cannot be served (HTTP 416).
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub(crate) enum RangeError {
    #[error("invalid range")]
    Invalid,
    #[error("invalid range: failed to overlap")]
    NoOverlap,
}

/// Go's `parseRange`: the satisfiable ranges of `spec` for a `size`-byte file.
pub(crate) fn parse(spec: &str, size: u64) -> Result<Vec<ByteRange>, RangeError> {
    let Some(list) = spec.strip_prefix("bytes=") else {
        return Err(RangeError::Invalid);
    };
    let parse_number = |text: &str| text.parse::<u64>().map_err(|_| RangeError::Invalid);
    let mut ranges = Vec::new();
    let mut no_overlap = false;
    for part in list.split(',') {
        let part = part.trim();
        if part.is_empty() {
            continue;
        }
        let (start, end) = part.split_once('-').ok_or(RangeError::Invalid)?;
        let (start, end) = (start.trim(), end.trim());
        if start.is_empty() {
            if end.is_empty() || end.starts_with('-') {
                return Err(RangeError::Invalid);
            }
            let suffix = parse_number(end)?.min(size);
            ranges.push(ByteRange {
                start: size - suffix,
                length: suffix,
            });
            continue;
        }
        let start = parse_number(start)?;
        if start >= size {
            no_overlap = true;
            continue;
        }
        let length = if end.is_empty() {
            size - start
        } else {
            let end = parse_number(end)?;
            if start > end {
                return Err(RangeError::Invalid);
            }
            end.min(size - 1) - start + 1
        };
        ranges.push(ByteRange { start, length });
    }
    if no_overlap && ranges.is_empty() {
        return Err(RangeError::NoOverlap);
    }
    Ok(ranges)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_like_go() {
        let r = |start, length| ByteRange { start, length };
        assert_eq!(parse("bytes=0-4", 10), Ok(vec![r(0, 5)]));
        assert_eq!(parse("bytes=5-", 10), Ok(vec![r(5, 5)]));
        assert_eq!(parse("bytes=-3", 10), Ok(vec![r(7, 3)]));
        assert_eq!(parse("bytes=-30", 10), Ok(vec![r(0, 10)]));
        assert_eq!(parse("bytes=8-100", 10), Ok(vec![r(8, 2)]));
        assert_eq!(parse("bytes=0-0,2-3", 10), Ok(vec![r(0, 1), r(2, 2)]));
        assert_eq!(parse("bytes=20-", 10), Err(RangeError::NoOverlap));
        assert_eq!(parse("bytes=5-2", 10), Err(RangeError::Invalid));
        assert_eq!(parse("items=0-1", 10), Err(RangeError::Invalid));
        assert_eq!(r(2, 3).content_range(10), "bytes 2-4/10");
    }

    #[test]
    fn conditionals() {
        let modified = UNIX_EPOCH + Duration::from_secs(1_700_000_000);
        let date = httpdate::fmt_http_date(modified);
        let earlier = httpdate::fmt_http_date(modified - Duration::from_secs(60));
        let mut headers = HeaderMap::new();
        assert_eq!(
            evaluate(&Method::GET, &headers, Some(modified)),
            Decision::Serve { range: None }
        );
        headers.insert("if-modified-since", date.parse().unwrap());
        assert_eq!(
            evaluate(&Method::GET, &headers, Some(modified)),
            Decision::NotModified
        );
        headers.insert("if-modified-since", earlier.parse().unwrap());
        headers.insert("range", "bytes=0-1".parse().unwrap());
        assert_eq!(
            evaluate(&Method::GET, &headers, Some(modified)),
            Decision::Serve {
                range: Some("bytes=0-1".to_owned())
            }
        );
        headers.insert("if-range", earlier.parse().unwrap());
        assert_eq!(
            evaluate(&Method::GET, &headers, Some(modified)),
            Decision::Serve { range: None }
        );
        let mut headers = HeaderMap::new();
        headers.insert("if-unmodified-since", earlier.parse().unwrap());
        assert_eq!(
            evaluate(&Method::GET, &headers, Some(modified)),
            Decision::PreconditionFailed
        );
        let mut headers = HeaderMap::new();
        headers.insert("if-none-match", "*".parse().unwrap());
        assert_eq!(
            evaluate(&Method::GET, &headers, Some(modified)),
            Decision::NotModified
        );
    }
}
