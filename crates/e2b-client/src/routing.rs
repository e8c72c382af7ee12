//! Where a sandbox's envd is reached (docs/e2b-protocol.md §1.2), and the
//! checks on the sandbox ids that go into URLs and headers.

use http::Uri;

use crate::config::ConnectionConfig;
use crate::error::{Context, Error, Result};

/// The port envd listens on inside every sandbox.
pub const ENVD_PORT: u16 = 49983;

/// Domains whose edge serves the shared `sandbox.<domain>` host, routing by
/// the `E2b-Sandbox-Id`/`E2b-Sandbox-Port` headers.
pub const SHARED_HOST_DOMAINS: [&str; 4] = ["e2b.app", "e2b.dev", "e2b.pro", "e2b-staging.dev"];

/// The envd base URL for RPCs and `/files`, first rule that applies:
///
/// 1. the configured `sandbox_url`;
/// 2. debug mode: `http://localhost:49983`;
/// 3. a domain in [`SHARED_HOST_DOMAINS`]: `https://sandbox.<domain>`;
/// 4. otherwise `https://49983-<id>.<domain>`.
///
/// `sandbox_domain` is the `domain` of the create/connect response; the
/// configured domain is used when it is absent.
///
/// # Errors
/// [`Error::InvalidArgument`] for a sandbox id or domain that cannot be part
/// of a URL.
pub fn envd_base_url(
    config: &ConnectionConfig,
    sandbox_id: &str,
    sandbox_domain: Option<&str>,
) -> Result<Uri> {
    validate_sandbox_id("route to sandbox", sandbox_id)?;
    if let Some(url) = configured_base(config) {
        return Ok(url);
    }
    let domain = effective_domain(config, sandbox_domain)?;
    if SHARED_HOST_DOMAINS.contains(&domain) {
        return build(sandbox_id, &format!("https://sandbox.{domain}"));
    }
    build(
        sandbox_id,
        &format!("https://{ENVD_PORT}-{sandbox_id}.{domain}"),
    )
}

/// The "direct" envd base URL used for shareable `/files` URLs: like
/// [`envd_base_url`] but never the shared host (a plain HTTP client fetching
/// such a URL sends no routing headers).
///
/// # Errors
/// As [`envd_base_url`].
pub fn envd_direct_url(
    config: &ConnectionConfig,
    sandbox_id: &str,
    sandbox_domain: Option<&str>,
) -> Result<Uri> {
    validate_sandbox_id("route to sandbox", sandbox_id)?;
    if let Some(url) = configured_base(config) {
        return Ok(url);
    }
    let domain = effective_domain(config, sandbox_domain)?;
    build(
        sandbox_id,
        &format!("https://{ENVD_PORT}-{sandbox_id}.{domain}"),
    )
}

/// The host serving `port` of a sandbox: `localhost:<port>` in debug mode,
/// else `<port>-<id>.<domain>`.
///
/// # Errors
/// As [`envd_base_url`].
pub fn sandbox_host(
    config: &ConnectionConfig,
    sandbox_id: &str,
    sandbox_domain: Option<&str>,
    port: u16,
) -> Result<String> {
    validate_sandbox_id("route to sandbox", sandbox_id)?;
    if config.debug {
        return Ok(format!("localhost:{port}"));
    }
    let domain = effective_domain(config, sandbox_domain)?;
    Ok(format!("{port}-{sandbox_id}.{domain}"))
}

/// Rules 1 and 2: the configured `sandbox_url`, else debug localhost.
fn configured_base(config: &ConnectionConfig) -> Option<Uri> {
    match &config.sandbox_url {
        Some(url) => Some(url.clone()),
        None if config.debug => Some(Uri::from_static("http://localhost:49983")),
        None => None,
    }
}

fn effective_domain<'a>(
    config: &'a ConnectionConfig,
    sandbox_domain: Option<&'a str>,
) -> Result<&'a str> {
    match sandbox_domain.filter(|d| !d.is_empty()) {
        Some(domain) => {
            let valid = !domain.starts_with('.')
                && !domain.ends_with('.')
                && domain
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'.');
            if valid {
                Ok(domain)
            } else {
                Err(Error::invalid_argument(
                    Context::new("route to sandbox domain", domain),
                    "the sandbox domain is not a host name",
                ))
            }
        }
        None => Ok(&config.domain),
    }
}

fn build(sandbox_id: &str, url: &str) -> Result<Uri> {
    url.parse().map_err(|e| {
        Error::invalid_argument(
            Context::new("route to sandbox", sandbox_id),
            format!("cannot form envd URL {url:?}: {e}"),
        )
    })
}

/// A sandbox id goes into URL paths, host names and headers, so it must be
/// non-empty ASCII letters, digits, `-` or `_` (E2B ids are `[a-z0-9]+`;
/// debug mode uses `debug_sandbox_id`).
///
/// # Errors
/// [`Error::InvalidArgument`] naming `op` and the id.
pub fn validate_sandbox_id(op: &'static str, sandbox_id: &str) -> Result<()> {
    let valid = !sandbox_id.is_empty()
        && sandbox_id.len() <= 128
        && sandbox_id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_');
    if valid {
        Ok(())
    } else {
        Err(Error::invalid_argument(
            Context::new(op, format!("{sandbox_id:?}")),
            "a sandbox id is 1-128 ASCII letters, digits, '-' or '_'",
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::ConnectionOptions;

    fn config(pairs: &[(&str, &str)]) -> ConnectionConfig {
        let pairs: Vec<(String, String)> = pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        ConnectionOptions::default()
            .resolve_with(move |name| {
                pairs
                    .iter()
                    .find(|(k, _)| k == name)
                    .map(|(_, v)| v.clone())
            })
            .unwrap()
    }

    #[test]
    fn sandbox_url_wins_over_everything() {
        let c = config(&[
            ("E2B_SANDBOX_URL", "http://127.0.0.1:5000"),
            ("E2B_DEBUG", "true"),
        ]);
        assert_eq!(
            envd_base_url(&c, "abc", Some("e2b.app"))
                .unwrap()
                .to_string(),
            "http://127.0.0.1:5000/"
        );
        assert_eq!(
            envd_direct_url(&c, "abc", None).unwrap().to_string(),
            "http://127.0.0.1:5000/"
        );
    }

    #[test]
    fn debug_uses_localhost() {
        let c = config(&[("E2B_DEBUG", "true")]);
        assert_eq!(
            envd_base_url(&c, "debug_sandbox_id", None)
                .unwrap()
                .to_string(),
            "http://localhost:49983/"
        );
        assert_eq!(
            sandbox_host(&c, "abc", None, 8080).unwrap(),
            "localhost:8080"
        );
    }

    #[test]
    fn known_domains_use_the_shared_host() {
        let c = config(&[]);
        for domain in SHARED_HOST_DOMAINS {
            assert_eq!(
                envd_base_url(&c, "abc123", Some(domain))
                    .unwrap()
                    .to_string(),
                format!("https://sandbox.{domain}/")
            );
            // The direct variant never uses the shared host.
            assert_eq!(
                envd_direct_url(&c, "abc123", Some(domain))
                    .unwrap()
                    .to_string(),
                format!("https://49983-abc123.{domain}/")
            );
        }
    }

    #[test]
    fn other_domains_use_the_per_sandbox_host() {
        let c = config(&[("E2B_DOMAIN", "example.test")]);
        assert_eq!(
            envd_base_url(&c, "abc123", None).unwrap().to_string(),
            "https://49983-abc123.example.test/"
        );
        // The response's domain wins over the configured one.
        assert_eq!(
            envd_base_url(&c, "abc123", Some("e2b.dev"))
                .unwrap()
                .to_string(),
            "https://sandbox.e2b.dev/"
        );
        assert_eq!(
            sandbox_host(&c, "abc123", Some("other.test"), 3000).unwrap(),
            "3000-abc123.other.test"
        );
    }

    #[test]
    fn bad_ids_and_domains_are_rejected() {
        let c = config(&[]);
        for id in ["", "a/b", "a b", "a.b", "../x", "x?y", "é"] {
            let err = envd_base_url(&c, id, None).unwrap_err();
            assert!(
                matches!(err, Error::InvalidArgument { .. }),
                "{id:?}: {err:?}"
            );
        }
        let err = envd_base_url(&c, "abc", Some("evil.test/path")).unwrap_err();
        assert!(matches!(err, Error::InvalidArgument { .. }), "{err:?}");
    }
}
