//! Query of `GET /v2/sandboxes` (and v1 `GET /sandboxes`): `state`, `metadata`, `template`,
//! `startedAfter`/`startedBefore` (RFC 3339, inclusive), `order` (newest first unless `asc`, as the
//! API's spec and the newest SDKs have it), `limit`, `nextToken`, with the metadata filter's triple
//! encoding (docs/e2b-protocol.md §2.2): the
//! framework decodes the query once, then the whole `metadata` string is decoded, then each key and
//! value.

use std::collections::BTreeMap;

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use percent_encoding::percent_decode_str;

use super::error::ApiError;
use super::model::StateName;

/// Page size when the caller sets no `limit`, and the largest one allowed.
pub const MAX_LIMIT: usize = 100;

/// A parsed list request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListQuery {
    pub states: Vec<StateName>,
    pub metadata: BTreeMap<String, String>,
    pub template: Option<String>,
    pub limit: usize,
    pub after: Option<PageCursor>,
    /// Newest first (the default, `order=desc`); oldest first with `order=asc`.
    pub descending: bool,
    /// Only sandboxes started at or after / at or before these instants (Unix nanoseconds).
    pub started_after: Option<u128>,
    pub started_before: Option<u128>,
}

/// Position after which the next page starts: the sort key of the last item already returned.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct PageCursor {
    pub started_unix_nanos: u128,
    pub sandbox_id: String,
}

impl PageCursor {
    /// The opaque `x-next-token` value for this cursor.
    pub fn token(&self) -> String {
        URL_SAFE_NO_PAD.encode(format!("{}:{}", self.started_unix_nanos, self.sandbox_id))
    }

    fn parse(op: &str, token: &str) -> Result<Self, ApiError> {
        let bad = || ApiError::bad_request(format!("{op}: invalid nextToken {token:?}"));
        let raw = URL_SAFE_NO_PAD.decode(token).map_err(|_| bad())?;
        let raw = String::from_utf8(raw).map_err(|_| bad())?;
        let (nanos, id) = raw.split_once(':').ok_or_else(bad)?;
        let started_unix_nanos = nanos.parse().map_err(|_| bad())?;
        if !crate::ids::is_valid_sandbox_id(id) {
            return Err(bad());
        }
        Ok(Self {
            started_unix_nanos,
            sandbox_id: id.to_owned(),
        })
    }
}

/// Parses a raw (still percent-encoded) query string. `default_states` applies when `state` is
/// absent: running and paused for v2, running only for v1.
pub fn parse_list_query(
    op: &str,
    raw: Option<&str>,
    default_states: &[StateName],
) -> Result<ListQuery, ApiError> {
    let mut query = ListQuery {
        states: default_states.to_vec(),
        metadata: BTreeMap::new(),
        template: None,
        limit: MAX_LIMIT,
        after: None,
        descending: true,
        started_after: None,
        started_before: None,
    };
    for (key, value) in query_pairs(op, raw)? {
        match key.as_str() {
            "state" => query.states = parse_states(op, &value)?,
            "metadata" => query.metadata = parse_metadata(op, &value)?,
            "limit" => query.limit = parse_limit(op, &value)?,
            "nextToken" => {
                if !value.is_empty() {
                    query.after = Some(PageCursor::parse(op, &value)?);
                }
            }
            "template" => query.template = Some(value).filter(|t| !t.is_empty()),
            "startedAfter" => query.started_after = Some(parse_instant(op, &key, &value)?),
            "startedBefore" => query.started_before = Some(parse_instant(op, &key, &value)?),
            "order" => {
                query.descending = match value.as_str() {
                    "asc" => false,
                    "desc" => true,
                    other => {
                        return Err(ApiError::bad_request(format!(
                            "{op}: invalid order {other:?}: expected asc or desc"
                        )));
                    }
                }
            }
            other => return Err(unknown_parameter(op, other)),
        }
    }
    Ok(query)
}

/// An RFC 3339 instant (`2026-01-02T03:04:05.123Z`, or with an offset, as Python's
/// `isoformat()` sends it) as Unix nanoseconds; instants before 1970 count as 0.
fn parse_instant(op: &str, key: &str, value: &str) -> Result<u128, ApiError> {
    let instant: jiff::Timestamp = value.parse().map_err(|_| {
        ApiError::bad_request(format!(
            "{op}: invalid {key} {value:?}: expected an RFC 3339 date-time"
        ))
    })?;
    Ok(u128::try_from(instant.as_nanosecond()).unwrap_or(0))
}

/// The 400 for a query parameter an endpoint does not take (`op` names the operation).
pub(super) fn unknown_parameter(op: &str, key: &str) -> ApiError {
    ApiError::bad_request(format!("{op}: unknown query parameter {key:?}"))
}

/// The decoded `key=value` pairs of a raw query string, in order.
pub(super) fn query_pairs(op: &str, raw: Option<&str>) -> Result<Vec<(String, String)>, ApiError> {
    raw.unwrap_or("")
        .split('&')
        .filter(|pair| !pair.is_empty())
        .map(|pair| {
            let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
            Ok((form_decode(op, key)?, form_decode(op, value)?))
        })
        .collect()
}

/// `application/x-www-form-urlencoded` decoding of one query component (`+` is a space).
fn form_decode(op: &str, raw: &str) -> Result<String, ApiError> {
    percent_decode(op, &raw.replace('+', " "))
}

fn percent_decode(op: &str, raw: &str) -> Result<String, ApiError> {
    percent_decode_str(raw)
        .decode_utf8()
        .map(|s| s.into_owned())
        .map_err(|_| {
            ApiError::bad_request(format!(
                "{op}: query value {raw:?} is not UTF-8 once decoded"
            ))
        })
}

fn parse_states(op: &str, value: &str) -> Result<Vec<StateName>, ApiError> {
    let mut states = Vec::new();
    for state in value.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        let state = match state {
            "running" => StateName::Running,
            "paused" => StateName::Paused,
            other => {
                return Err(ApiError::bad_request(format!(
                    "{op}: invalid state {other:?}: expected running or paused"
                )));
            }
        };
        if !states.contains(&state) {
            states.push(state);
        }
    }
    if states.is_empty() {
        return Err(ApiError::bad_request(format!(
            "{op}: state filter is empty"
        )));
    }
    Ok(states)
}

/// `k=v&k2=v2` after the first decode; decoded once more as a whole, then each key and value.
fn parse_metadata(op: &str, value: &str) -> Result<BTreeMap<String, String>, ApiError> {
    let whole = percent_decode(op, value)?;
    let mut filter = BTreeMap::new();
    for pair in whole.split('&').filter(|p| !p.is_empty()) {
        let Some((key, val)) = pair.split_once('=') else {
            return Err(ApiError::bad_request(format!(
                "{op}: invalid metadata filter {pair:?}: expected key=value"
            )));
        };
        let key = percent_decode(op, key)?;
        if key.is_empty() {
            return Err(ApiError::bad_request(format!(
                "{op}: metadata filter has an empty key"
            )));
        }
        filter.insert(key, percent_decode(op, val)?);
    }
    Ok(filter)
}

/// A page size: 1 to [`MAX_LIMIT`].
pub(super) fn parse_limit(op: &str, value: &str) -> Result<usize, ApiError> {
    match value.parse::<usize>() {
        Ok(limit) if (1..=MAX_LIMIT).contains(&limit) => Ok(limit),
        _ => Err(ApiError::bad_request(format!(
            "{op}: invalid limit {value:?}: expected an integer from 1 to {MAX_LIMIT}"
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const BOTH: &[StateName] = &[StateName::Running, StateName::Paused];

    #[test]
    fn decodes_the_sdk_triple_encoded_metadata() {
        // What JS 2.29.1 sends for {k: "v w", "a&b": "c=d"} (verified shape for the first pair).
        let q = parse_list_query(
            "list",
            Some("metadata=k%3Dv%252520w%26a%252526b%3Dc%25253Dd"),
            BOTH,
        )
        .unwrap();
        assert_eq!(q.metadata.get("k").map(String::as_str), Some("v w"));
        assert_eq!(q.metadata.get("a&b").map(String::as_str), Some("c=d"));
    }

    #[test]
    fn parses_state_limit_and_token() {
        let cursor = PageCursor {
            started_unix_nanos: 42,
            sandbox_id: "abc123".into(),
        };
        let raw = format!("state=paused&limit=5&nextToken={}", cursor.token());
        let q = parse_list_query("list", Some(&raw), BOTH).unwrap();
        assert_eq!(q.states, vec![StateName::Paused]);
        assert_eq!(q.limit, 5);
        assert_eq!(q.after, Some(cursor));
        let q = parse_list_query("list", None, BOTH).unwrap();
        assert_eq!(q.states, BOTH.to_vec());
        assert_eq!(q.limit, MAX_LIMIT);
        assert!(q.descending, "newest first unless asked otherwise");
        assert!(
            !parse_list_query("list", Some("order=asc"), BOTH)
                .unwrap()
                .descending
        );
        // JS's toISOString() and Python's isoformat() with a local offset (`+` encoded).
        let q = parse_list_query(
            "list",
            Some("startedAfter=2026-01-02T03%3A04%3A05.123Z&startedBefore=2026-01-02T05%3A04%3A05.5%2B02%3A00"),
            BOTH,
        )
        .unwrap();
        let nanos = 1_767_323_045_123_000_000u128;
        assert_eq!(q.started_after, Some(nanos));
        assert_eq!(q.started_before, Some(nanos + 377_000_000));
        let q = parse_list_query(
            "list",
            Some("state=running%2Cpaused"),
            &[StateName::Running],
        )
        .unwrap();
        assert_eq!(q.states, BOTH.to_vec());
    }

    #[test]
    fn rejects_bad_queries_with_named_errors() {
        for (raw, needle) in [
            ("state=frozen", "invalid state"),
            ("state=", "state filter is empty"),
            ("limit=0", "invalid limit"),
            ("limit=101", "invalid limit"),
            ("limit=x", "invalid limit"),
            ("nextToken=!!", "invalid nextToken"),
            ("metadata=novalue", "invalid metadata filter"),
            ("metadata=%3Dv", "empty key"),
            ("bogus=1", "unknown query parameter"),
            ("order=up", "invalid order"),
            ("startedAfter=yesterday", "invalid startedAfter"),
            (
                "startedBefore=2026-13-01T00:00:00Z",
                "invalid startedBefore",
            ),
            ("metadata=%FF", "not UTF-8"),
        ] {
            let err = parse_list_query("list sandboxes", Some(raw), BOTH).unwrap_err();
            assert!(
                err.message.starts_with("list sandboxes: "),
                "{raw}: {}",
                err.message
            );
            assert!(err.message.contains(needle), "{raw}: {}", err.message);
        }
    }
}
