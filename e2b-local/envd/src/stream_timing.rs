//! Timing of server streams: the keepalive cadence (`Keepalive-Ping-Interval` seconds, 90 s when
//! the header is missing, unparsable or not positive; docs/e2b-protocol.md §5.4) and the request
//! deadline.

use std::time::Duration;

use http::HeaderMap;
use tokio::time::Instant;

/// envd's interval when the client asks for none.
pub(crate) const DEFAULT_INTERVAL: Duration = Duration::from_secs(90);
/// Longer intervals are clamped to this (a day), so deadlines stay representable.
pub(crate) const MAX_INTERVAL: Duration = Duration::from_secs(24 * 60 * 60);

/// Completes at `deadline`, or never when there is none.
pub(crate) async fn expired(deadline: Option<Instant>) {
    match deadline {
        Some(deadline) => tokio::time::sleep_until(deadline).await,
        None => std::future::pending().await,
    }
}

/// The keepalive interval a stream request asks for.
pub(crate) fn keepalive_interval(headers: &HeaderMap) -> Duration {
    headers
        .get("keepalive-ping-interval")
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.trim().parse::<u64>().ok())
        .filter(|seconds| *seconds > 0)
        .map_or(DEFAULT_INTERVAL, |seconds| {
            Duration::from_secs(seconds).min(MAX_INTERVAL)
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_seconds_and_falls_back() {
        let mut headers = HeaderMap::new();
        assert_eq!(keepalive_interval(&headers), DEFAULT_INTERVAL);
        headers.insert("keepalive-ping-interval", "50".parse().unwrap());
        assert_eq!(keepalive_interval(&headers), Duration::from_secs(50));
        headers.insert("keepalive-ping-interval", "0".parse().unwrap());
        assert_eq!(keepalive_interval(&headers), DEFAULT_INTERVAL);
        headers.insert(
            "keepalive-ping-interval",
            "18446744073709551615".parse().unwrap(),
        );
        assert_eq!(keepalive_interval(&headers), MAX_INTERVAL);
        headers.insert("keepalive-ping-interval", "soon".parse().unwrap());
        assert_eq!(keepalive_interval(&headers), DEFAULT_INTERVAL);
    }
}
