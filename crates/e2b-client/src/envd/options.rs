//! Per-call options for envd calls.

use std::time::Duration;

/// The `Keepalive-Ping-Interval` the official SDKs send on streams.
pub const DEFAULT_KEEPALIVE_INTERVAL: Duration = Duration::from_secs(50);

/// A bound that is either the client's default, a given duration, or none.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) enum Bound {
    /// The `Envd`'s request timeout.
    #[default]
    Default,
    /// This duration.
    Limit(Duration),
    /// No bound at all.
    Unlimited,
}

impl Bound {
    pub(crate) fn resolve(self, default: Option<Duration>) -> Option<Duration> {
        match self {
            Bound::Default => default,
            Bound::Limit(limit) => Some(limit),
            Bound::Unlimited => None,
        }
    }
}

/// Options of a unary envd call or a `/files` transfer.
///
/// - `user`: the Linux user the call acts as (HTTP Basic `user:` on RPCs,
///   `username=` on `/files`). Unset: envd's default user. Only calls that
///   act as a user accept it (`Stat`, `ListDir`, `MakeDir`, `Move`,
///   `Remove`, `CreateWatcher`, `/files`); the others reject it.
/// - `timeout`: bound on the whole call (sent as `Connect-Timeout-Ms` on
///   RPCs, enforced locally too). Default: the `Envd`'s request timeout.
///   For `/files` downloads it bounds the wait for the response head, not
///   the body.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CallOptions {
    pub(crate) user: Option<String>,
    pub(crate) timeout: Bound,
}

impl CallOptions {
    /// Acts as `user`.
    #[must_use]
    pub fn user(mut self, user: impl Into<String>) -> Self {
        self.user = Some(user.into());
        self
    }

    /// Bounds the call by `timeout`.
    #[must_use]
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = Bound::Limit(timeout);
        self
    }

    /// Removes any bound on the call.
    #[must_use]
    pub fn no_timeout(mut self) -> Self {
        self.timeout = Bound::Unlimited;
        self
    }
}

/// Options of a server-streaming call (`Start`, `Connect`, `WatchDir`).
///
/// - `user`: as in [`CallOptions`]; accepted by `Start` and `WatchDir`,
///   rejected by `Connect`.
/// - `timeout`: `Connect-Timeout-Ms`, the bound on the whole stream. On
///   `Start` envd also kills the process when it passes. Default: none
///   (unlike the JS SDK's 60 s, which kills background processes).
/// - `keepalive_interval`: `Keepalive-Ping-Interval`, how often envd sends a
///   keepalive on an idle stream (keepalives are consumed, never yielded).
///   Default 50 s.
/// - `handshake_timeout`: bound on the wait for the stream's first event.
///   Default: the `Envd`'s request timeout.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StreamOptions {
    pub(crate) user: Option<String>,
    pub(crate) timeout: Option<Duration>,
    pub(crate) keepalive_interval: Option<Duration>,
    pub(crate) handshake_timeout: Bound,
}

impl Default for StreamOptions {
    fn default() -> Self {
        StreamOptions {
            user: None,
            timeout: None,
            keepalive_interval: Some(DEFAULT_KEEPALIVE_INTERVAL),
            handshake_timeout: Bound::Default,
        }
    }
}

impl StreamOptions {
    /// Acts as `user`.
    #[must_use]
    pub fn user(mut self, user: impl Into<String>) -> Self {
        self.user = Some(user.into());
        self
    }

    /// Bounds the whole stream (`Connect-Timeout-Ms`).
    #[must_use]
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = Some(timeout);
        self
    }

    /// Sets the keepalive interval; `None` omits the header (envd then uses
    /// its own default, 90 s).
    #[must_use]
    pub fn keepalive_interval(mut self, interval: Option<Duration>) -> Self {
        self.keepalive_interval = interval;
        self
    }

    /// Bounds the wait for the first event.
    #[must_use]
    pub fn handshake_timeout(mut self, timeout: Duration) -> Self {
        self.handshake_timeout = Bound::Limit(timeout);
        self
    }

    /// Waits for the first event without a bound.
    #[must_use]
    pub fn no_handshake_timeout(mut self) -> Self {
        self.handshake_timeout = Bound::Unlimited;
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bounds_resolve_against_the_default() {
        let default = Some(Duration::from_secs(60));
        assert_eq!(Bound::Default.resolve(default), default);
        assert_eq!(
            Bound::Limit(Duration::from_secs(1)).resolve(default),
            Some(Duration::from_secs(1))
        );
        assert_eq!(Bound::Unlimited.resolve(default), None);
        assert_eq!(
            CallOptions::default().no_timeout().timeout,
            Bound::Unlimited
        );
    }

    #[test]
    fn stream_defaults_match_the_sdk_headers_but_not_its_lifetime_limit() {
        let options = StreamOptions::default();
        assert_eq!(options.keepalive_interval, Some(Duration::from_secs(50)));
        assert_eq!(options.timeout, None);
        assert_eq!(options.user, None);
    }
}
