//! Connection settings, resolved from explicit options and the environment
//! exactly as the official SDKs do (docs/e2b-protocol.md §1.1).
//!
//! | option | environment | default |
//! |---|---|---|
//! | `api_key` | `E2B_API_KEY` | none; must match `^e2b_[0-9a-f]+$` when present |
//! | `access_token` | `E2B_ACCESS_TOKEN` | none |
//! | `domain` | `E2B_DOMAIN` | `e2b.app` |
//! | `api_url` | `E2B_API_URL` | `https://api.<domain>`, or `http://localhost:3000` in debug |
//! | `sandbox_url` | `E2B_SANDBOX_URL` | none (envd URL derived per sandbox) |
//! | `debug` | `E2B_DEBUG` | on only when the value lowercased is exactly `true` |
//! | `request_timeout` | — | 60 s |
//!
//! An explicit option always wins over the environment; an empty environment
//! variable counts as unset (as in the SDKs).

use std::sync::Arc;
use std::time::Duration;

use http::Uri;

use crate::error::{Error, Result};
use crate::http_stack::PlainHttp;
use crate::secret::Secret;

/// Domain used when neither `domain` nor `E2B_DOMAIN` is set.
pub const DEFAULT_DOMAIN: &str = "e2b.app";
/// Per-request timeout used when none is configured.
pub const DEFAULT_REQUEST_TIMEOUT: Duration = Duration::from_secs(60);
/// API base URL in debug mode.
pub const DEBUG_API_URL: &str = "http://localhost:3000";
/// The `User-Agent` this crate sends unless told otherwise.
pub const DEFAULT_USER_AGENT: &str = concat!("e2b-client-rust/", env!("CARGO_PKG_VERSION"));

const OP: &str = "resolve connection settings";

/// How Connect messages are encoded on the wire.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum WireFormat {
    /// Binary protobuf (`application/proto`, `application/connect+proto`):
    /// raw bytes, no base64. The default.
    #[default]
    Proto,
    /// Protobuf JSON (`application/json`, `application/connect+json`), what
    /// the official SDKs send.
    Json,
}

/// Explicit settings; every `None` falls back to the environment, then to
/// the default. Build with [`ConnectionOptions::default`] and the `with_*`
/// methods, then [`ConnectionOptions::resolve`].
#[derive(Clone, Default)]
pub struct ConnectionOptions {
    api_key: Option<String>,
    access_token: Option<String>,
    domain: Option<String>,
    api_url: Option<String>,
    sandbox_url: Option<String>,
    debug: Option<bool>,
    request_timeout: Option<Option<Duration>>,
    wire_format: Option<WireFormat>,
    plain_http: Option<PlainHttp>,
    tls: Option<Arc<rustls::ClientConfig>>,
    user_agent: Option<String>,
}

impl std::fmt::Debug for ConnectionOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ConnectionOptions")
            .field("api_key", &self.api_key.as_ref().map(|_| "<redacted>"))
            .field(
                "access_token",
                &self.access_token.as_ref().map(|_| "<redacted>"),
            )
            .field("domain", &self.domain)
            .field("api_url", &self.api_url)
            .field("sandbox_url", &self.sandbox_url)
            .field("debug", &self.debug)
            .field("request_timeout", &self.request_timeout)
            .field("wire_format", &self.wire_format)
            .field("plain_http", &self.plain_http)
            .field("custom_tls", &self.tls.is_some())
            .field("user_agent", &self.user_agent)
            .finish()
    }
}

impl ConnectionOptions {
    /// The API key (`X-API-KEY`); overrides `E2B_API_KEY`.
    #[must_use]
    pub fn with_api_key(mut self, key: impl Into<String>) -> Self {
        self.api_key = Some(key.into());
        self
    }

    /// A bearer token for the API (legacy); overrides `E2B_ACCESS_TOKEN`.
    #[must_use]
    pub fn with_access_token(mut self, token: impl Into<String>) -> Self {
        self.access_token = Some(token.into());
        self
    }

    /// The E2B domain; overrides `E2B_DOMAIN`.
    #[must_use]
    pub fn with_domain(mut self, domain: impl Into<String>) -> Self {
        self.domain = Some(domain.into());
        self
    }

    /// The API base URL; overrides `E2B_API_URL`.
    #[must_use]
    pub fn with_api_url(mut self, url: impl Into<String>) -> Self {
        self.api_url = Some(url.into());
        self
    }

    /// One envd base URL for every sandbox (routing by header); overrides
    /// `E2B_SANDBOX_URL`.
    #[must_use]
    pub fn with_sandbox_url(mut self, url: impl Into<String>) -> Self {
        self.sandbox_url = Some(url.into());
        self
    }

    /// Debug mode (local envd on `localhost:49983`, API on
    /// `localhost:3000`); overrides `E2B_DEBUG`.
    #[must_use]
    pub fn with_debug(mut self, debug: bool) -> Self {
        self.debug = Some(debug);
        self
    }

    /// Bound on each API call and unary envd call, and on the handshake of a
    /// stream (until its first event). `None` disables it.
    #[must_use]
    pub fn with_request_timeout(mut self, timeout: Option<Duration>) -> Self {
        self.request_timeout = Some(timeout);
        self
    }

    /// Connect encoding for envd calls (default [`WireFormat::Proto`]).
    #[must_use]
    pub fn with_wire_format(mut self, format: WireFormat) -> Self {
        self.wire_format = Some(format);
        self
    }

    /// HTTP version for plain `http://` URLs (default HTTP/1.1).
    #[must_use]
    pub fn with_plain_http(mut self, plain: PlainHttp) -> Self {
        self.plain_http = Some(plain);
        self
    }

    /// A custom TLS configuration (e.g. extra roots) for `https://` URLs;
    /// its ALPN list is replaced with `h2, http/1.1`. Default:
    /// [`crate::default_tls_config`] (the system's roots, `SSL_CERT_FILE` /
    /// `SSL_CERT_DIR`, Mozilla's); [`crate::tls_config_with_ca_file`] adds a
    /// CA file to them.
    #[must_use]
    pub fn with_tls_config(mut self, tls: Arc<rustls::ClientConfig>) -> Self {
        self.tls = Some(tls);
        self
    }

    /// The `User-Agent` sent to the API and envd.
    #[must_use]
    pub fn with_user_agent(mut self, user_agent: impl Into<String>) -> Self {
        self.user_agent = Some(user_agent.into());
        self
    }

    /// Resolves against the process environment.
    ///
    /// # Errors
    /// [`Error::Config`] naming the option or variable that is malformed.
    pub fn resolve(self) -> Result<ConnectionConfig> {
        self.resolve_with(|name| std::env::var(name).ok())
    }

    /// Resolves against `env` instead of the process environment (for tests
    /// and embedders that keep their own environment).
    ///
    /// # Errors
    /// As [`ConnectionOptions::resolve`].
    pub fn resolve_with(self, env: impl Fn(&str) -> Option<String>) -> Result<ConnectionConfig> {
        // An explicit option names itself in errors; a value from the
        // environment names the variable.
        let pick = |explicit: Option<String>,
                    option: &'static str,
                    var: &'static str|
         -> Option<(String, &'static str)> {
            match explicit {
                Some(value) => Some((value, option)),
                None => env(var).filter(|v| !v.is_empty()).map(|v| (v, var)),
            }
        };

        let api_key = match pick(self.api_key, "api_key", "E2B_API_KEY") {
            Some((key, setting)) => {
                validate_api_key(&key, setting)?;
                Some(Secret::new(key))
            }
            None => None,
        };
        let access_token = match pick(self.access_token, "access_token", "E2B_ACCESS_TOKEN") {
            Some((token, setting)) => {
                if http::HeaderValue::from_str(&format!("Bearer {token}")).is_err() {
                    return Err(Error::Config {
                        op: OP,
                        setting,
                        message: "the access token contains characters a header cannot carry"
                            .to_owned(),
                    });
                }
                Some(Secret::new(token))
            }
            None => None,
        };
        let debug = match self.debug {
            Some(debug) => debug,
            None => env("E2B_DEBUG").is_some_and(|v| v.to_lowercase() == "true"),
        };
        let domain = match pick(self.domain, "domain", "E2B_DOMAIN") {
            Some((domain, setting)) => {
                validate_domain(&domain, setting)?;
                domain
            }
            None => DEFAULT_DOMAIN.to_owned(),
        };
        let api_url = match pick(self.api_url, "api_url", "E2B_API_URL") {
            Some((url, setting)) => parse_base_url(&url, setting)?,
            None if debug => parse_base_url(DEBUG_API_URL, "api_url")?,
            None => parse_base_url(&format!("https://api.{domain}"), "domain")?,
        };
        let sandbox_url = match pick(self.sandbox_url, "sandbox_url", "E2B_SANDBOX_URL") {
            Some((url, setting)) => Some(parse_base_url(&url, setting)?),
            None => None,
        };
        let user_agent = self
            .user_agent
            .unwrap_or_else(|| DEFAULT_USER_AGENT.to_owned());
        let user_agent = http::HeaderValue::from_str(&user_agent).map_err(|_| Error::Config {
            op: OP,
            setting: "user_agent",
            message: "not a valid header value (control characters?)".to_owned(),
        })?;

        Ok(ConnectionConfig {
            api_key,
            access_token,
            domain,
            api_url,
            sandbox_url,
            debug,
            request_timeout: self
                .request_timeout
                .unwrap_or(Some(DEFAULT_REQUEST_TIMEOUT)),
            wire_format: self.wire_format.unwrap_or_default(),
            plain_http: self.plain_http.unwrap_or_default(),
            tls: self.tls,
            user_agent,
        })
    }
}

/// Resolved, validated settings. Cheap to clone; `Debug` redacts secrets.
#[derive(Clone, Debug)]
pub struct ConnectionConfig {
    pub(crate) api_key: Option<Secret>,
    pub(crate) access_token: Option<Secret>,
    pub(crate) domain: String,
    pub(crate) api_url: Uri,
    pub(crate) sandbox_url: Option<Uri>,
    pub(crate) debug: bool,
    pub(crate) request_timeout: Option<Duration>,
    pub(crate) wire_format: WireFormat,
    pub(crate) plain_http: PlainHttp,
    pub(crate) tls: Option<Arc<rustls::ClientConfig>>,
    pub(crate) user_agent: http::HeaderValue,
}

impl ConnectionConfig {
    /// Settings from the environment alone (`ConnectionOptions::default().resolve()`).
    ///
    /// # Errors
    /// [`Error::Config`] for a malformed variable.
    pub fn from_env() -> Result<Self> {
        ConnectionOptions::default().resolve()
    }

    /// The E2B domain.
    pub fn domain(&self) -> &str {
        &self.domain
    }

    /// The API base URL.
    pub fn api_url(&self) -> &Uri {
        &self.api_url
    }

    /// The envd URL shared by all sandboxes, if one is configured.
    pub fn sandbox_url(&self) -> Option<&Uri> {
        self.sandbox_url.as_ref()
    }

    /// Whether debug mode is on.
    pub fn debug(&self) -> bool {
        self.debug
    }

    /// Whether an API key is configured (the key itself is never exposed).
    pub fn has_api_key(&self) -> bool {
        self.api_key.is_some()
    }

    /// The per-request timeout, if any.
    pub fn request_timeout(&self) -> Option<Duration> {
        self.request_timeout
    }

    /// The Connect wire format for envd calls.
    pub fn wire_format(&self) -> WireFormat {
        self.wire_format
    }

    /// The HTTP version used for plain `http://` URLs.
    pub fn plain_http(&self) -> PlainHttp {
        self.plain_http
    }
}

/// Checks the SDKs' key format, `^e2b_[0-9a-f]+$`. The key is never quoted
/// back in the error.
fn validate_api_key(key: &str, setting: &'static str) -> Result<()> {
    let valid = key.strip_prefix("e2b_").is_some_and(|hex| {
        !hex.is_empty() && hex.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
    });
    if valid {
        Ok(())
    } else {
        Err(Error::Config {
            op: OP,
            setting,
            message: format!(
                "malformed API key ({} characters): expected \"e2b_\" followed by lowercase hex digits",
                key.chars().count()
            ),
        })
    }
}

/// A domain must be usable as a host name suffix.
fn validate_domain(domain: &str, setting: &'static str) -> Result<()> {
    let valid = !domain.starts_with('.')
        && !domain.ends_with('.')
        && domain
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'.')
        && domain.parse::<http::uri::Authority>().is_ok();
    if valid {
        Ok(())
    } else {
        Err(Error::Config {
            op: OP,
            setting,
            message: format!("{domain:?} is not a host name"),
        })
    }
}

/// Parses an absolute `http://` or `https://` base URL without query or
/// fragment; a trailing slash is dropped.
pub(crate) fn parse_base_url(url: &str, setting: &'static str) -> Result<Uri> {
    let bad = |message: String| Error::Config {
        op: OP,
        setting,
        message,
    };
    let uri: Uri = url
        .parse()
        .map_err(|e| bad(format!("{url:?} is not a URL: {e}")))?;
    match uri.scheme_str() {
        Some("http") | Some("https") => {}
        Some(other) => {
            return Err(bad(format!(
                "{url:?}: scheme {other:?} is not supported (use http or https)"
            )));
        }
        None => return Err(bad(format!("{url:?} is not an absolute http(s) URL"))),
    }
    if uri.authority().is_none_or(|a| a.host().is_empty()) {
        return Err(bad(format!("{url:?} has no host")));
    }
    if uri.query().is_some() || url.contains('#') {
        return Err(bad(format!("{url:?} must not carry a query or fragment")));
    }
    let path = uri.path().trim_end_matches('/').to_owned();
    let mut parts = uri.into_parts();
    parts.path_and_query = Some(
        (if path.is_empty() { "/" } else { path.as_str() })
            .parse()
            .map_err(|e| bad(format!("{url:?}: {e}")))?,
    );
    Uri::from_parts(parts).map_err(|e| bad(format!("{url:?}: {e}")))
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;

    fn env(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let map: HashMap<String, String> = pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        move |name| map.get(name).cloned()
    }

    #[test]
    fn defaults_without_environment() {
        let config = ConnectionOptions::default().resolve_with(env(&[])).unwrap();
        assert_eq!(config.domain(), "e2b.app");
        assert_eq!(config.api_url().to_string(), "https://api.e2b.app/");
        assert!(config.sandbox_url().is_none());
        assert!(!config.debug());
        assert!(!config.has_api_key());
        assert_eq!(config.request_timeout(), Some(Duration::from_secs(60)));
        assert_eq!(config.wire_format(), WireFormat::Proto);
        assert_eq!(config.plain_http(), PlainHttp::Http1);
    }

    #[test]
    fn environment_is_read() {
        let config = ConnectionOptions::default()
            .resolve_with(env(&[
                ("E2B_API_KEY", "e2b_0123abcdef"),
                ("E2B_DOMAIN", "example.test"),
                ("E2B_SANDBOX_URL", "http://127.0.0.1:49983/"),
                ("E2B_ACCESS_TOKEN", "tok"),
            ]))
            .unwrap();
        assert!(config.has_api_key());
        assert_eq!(config.domain(), "example.test");
        assert_eq!(config.api_url().to_string(), "https://api.example.test/");
        assert_eq!(
            config.sandbox_url().unwrap().to_string(),
            "http://127.0.0.1:49983/"
        );
        assert_eq!(config.access_token.as_ref().unwrap().expose(), "tok");
    }

    #[test]
    fn explicit_options_override_environment() {
        let config = ConnectionOptions::default()
            .with_api_key("e2b_ff")
            .with_domain("override.test")
            .with_api_url("http://127.0.0.1:3000/base/")
            .with_debug(false)
            .resolve_with(env(&[
                ("E2B_API_KEY", "not-a-key"),
                ("E2B_DOMAIN", "env.test"),
                ("E2B_API_URL", "http://env:1"),
                ("E2B_DEBUG", "true"),
            ]))
            .unwrap();
        assert_eq!(config.api_key.as_ref().unwrap().expose(), "e2b_ff");
        assert_eq!(config.domain(), "override.test");
        assert_eq!(config.api_url().to_string(), "http://127.0.0.1:3000/base");
        assert!(!config.debug());
    }

    #[test]
    fn debug_is_exactly_true_lowercased() {
        for (value, expected) in [
            ("true", true),
            ("TRUE", true),
            ("True", true),
            ("1", false),
            ("yes", false),
            (" true", false),
            ("", false),
        ] {
            let config = ConnectionOptions::default()
                .resolve_with(env(&[("E2B_DEBUG", value)]))
                .unwrap();
            assert_eq!(config.debug(), expected, "E2B_DEBUG={value:?}");
        }
    }

    #[test]
    fn debug_moves_the_api_to_localhost_unless_api_url_is_set() {
        let config = ConnectionOptions::default()
            .resolve_with(env(&[("E2B_DEBUG", "true")]))
            .unwrap();
        assert_eq!(config.api_url().to_string(), "http://localhost:3000/");
        let config = ConnectionOptions::default()
            .resolve_with(env(&[("E2B_DEBUG", "true"), ("E2B_API_URL", "http://x:1")]))
            .unwrap();
        assert_eq!(config.api_url().to_string(), "http://x:1/");
    }

    #[test]
    fn malformed_api_key_is_rejected_without_echoing_it() {
        for bad in [
            "e2b_",
            "e2b_XYZ",
            "E2B_abc",
            "sk_123",
            "e2b_12 34",
            "e2b_abcG",
        ] {
            let err = ConnectionOptions::default()
                .resolve_with(env(&[("E2B_API_KEY", bad)]))
                .unwrap_err();
            match &err {
                Error::Config { setting, .. } => assert_eq!(*setting, "E2B_API_KEY"),
                other => panic!("expected Config, got {other:?}"),
            }
            let text = err.to_string();
            assert!(text.contains("E2B_API_KEY"), "{text}");
            if bad.len() > 4 {
                assert!(!text.contains(bad), "error leaks the key: {text}");
            }
        }
        let err = ConnectionOptions::default()
            .with_api_key("nope")
            .resolve_with(env(&[]))
            .unwrap_err();
        assert!(matches!(
            err,
            Error::Config {
                setting: "api_key",
                ..
            }
        ));
    }

    #[test]
    fn an_access_token_that_cannot_be_a_header_is_rejected() {
        let err = ConnectionOptions::default()
            .resolve_with(env(&[("E2B_ACCESS_TOKEN", "line\nbreak")]))
            .unwrap_err();
        assert!(
            matches!(
                err,
                Error::Config {
                    setting: "E2B_ACCESS_TOKEN",
                    ..
                }
            ),
            "{err:?}"
        );
        assert!(!err.to_string().contains("line"), "{err}");
    }

    #[test]
    fn empty_environment_values_count_as_unset() {
        let config = ConnectionOptions::default()
            .resolve_with(env(&[("E2B_API_KEY", ""), ("E2B_DOMAIN", "")]))
            .unwrap();
        assert!(!config.has_api_key());
        assert_eq!(config.domain(), DEFAULT_DOMAIN);
    }

    #[test]
    fn malformed_urls_and_domains_are_rejected() {
        let cases: [(&str, &str); 6] = [
            ("E2B_API_URL", "localhost:3000"),
            ("E2B_API_URL", "ftp://x"),
            ("E2B_API_URL", "http://x/?q=1"),
            ("E2B_SANDBOX_URL", "not a url"),
            ("E2B_DOMAIN", "bad domain"),
            ("E2B_DOMAIN", "a/b"),
        ];
        for (var, value) in cases {
            let err = ConnectionOptions::default()
                .resolve_with(env(&[(var, value)]))
                .unwrap_err();
            match err {
                Error::Config { setting, .. } => assert_eq!(setting, var, "{value}"),
                other => panic!("{var}={value}: expected Config, got {other:?}"),
            }
        }
    }

    #[test]
    fn debug_output_redacts_credentials() {
        let options = ConnectionOptions::default()
            .with_api_key("e2b_abc")
            .with_access_token("secret-token");
        let text = format!("{options:?}");
        assert!(
            !text.contains("e2b_abc") && !text.contains("secret-token"),
            "{text}"
        );
        let config = options.resolve_with(env(&[])).unwrap();
        let text = format!("{config:?}");
        assert!(
            !text.contains("e2b_abc") && !text.contains("secret-token"),
            "{text}"
        );
    }

    #[test]
    fn request_timeout_can_be_disabled() {
        let config = ConnectionOptions::default()
            .with_request_timeout(None)
            .resolve_with(env(&[]))
            .unwrap();
        assert_eq!(config.request_timeout(), None);
    }
}
