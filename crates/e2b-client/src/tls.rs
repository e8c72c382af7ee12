//! What `https://` trusts, as the official SDKs do: the system's certificate store — or, when
//! `SSL_CERT_FILE` / `SSL_CERT_DIR` are set, the certificates there instead, as OpenSSL (and so
//! Python) reads them — plus Mozilla's roots (webpki-roots), and optionally one more CA file a
//! caller names ([`tls_config_with_ca_file`]), e.g. a self-hosted E2B's or a corporate proxy's.
//! The ring provider is chosen explicitly rather than rustls's process-wide default, which is
//! ambiguous (a panic) in any build where some other crate also enables rustls's aws-lc-rs.

use std::path::Path;
use std::sync::{Arc, OnceLock};

use rustls::RootCertStore;

use crate::error::{Error, Result};

/// The default configuration: Mozilla's roots and the system's (or `SSL_CERT_FILE`'s /
/// `SSL_CERT_DIR`'s). Read once per process — the system's store is a ~200 KB file to parse, and
/// Debian's certificate directory besides, ~2.7 ms in all here — and shared;
/// [`HttpStack`](crate::HttpStack) asks for it at its first `https://` request. A store entry
/// that cannot be read or parsed is skipped with a warning, as the SDKs' runtimes skip it.
pub fn default_tls_config() -> Arc<rustls::ClientConfig> {
    static CONFIG: OnceLock<Arc<rustls::ClientConfig>> = OnceLock::new();
    CONFIG
        .get_or_init(|| client_config(default_roots()))
        .clone()
}

/// [`default_tls_config`]'s roots plus every certificate in the PEM file `path`.
///
/// # Errors
/// [`Error::Config`] (setting `ca_file`) naming the file when it cannot be read, is not PEM, or
/// holds no certificate a root can be made of.
pub fn tls_config_with_ca_file(path: &Path) -> Result<Arc<rustls::ClientConfig>> {
    let bad = |message: String| Error::Config {
        op: "load the CA file",
        setting: "ca_file",
        message,
    };
    let loaded = rustls_native_certs::load_certs_from_paths(Some(path), None);
    if let Some(err) = loaded.errors.first() {
        return Err(bad(format!("{}: {err}", path.display())));
    }
    if loaded.certs.is_empty() {
        return Err(bad(format!(
            "{}: no PEM certificate in it (expected -----BEGIN CERTIFICATE----- blocks)",
            path.display()
        )));
    }
    let mut roots = default_roots();
    for cert in loaded.certs {
        roots.add(cert).map_err(|err| {
            bad(format!(
                "{}: not a usable CA certificate: {err}",
                path.display()
            ))
        })?;
    }
    Ok(client_config(roots))
}

fn default_roots() -> RootCertStore {
    let mut roots = RootCertStore {
        roots: webpki_roots::TLS_SERVER_ROOTS.to_vec(),
    };
    let native = rustls_native_certs::load_native_certs();
    for err in &native.errors {
        tracing::warn!("TLS roots: skipped part of the system's certificate store: {err}");
    }
    let (_, unusable) = roots.add_parsable_certificates(native.certs);
    if unusable > 0 {
        tracing::warn!(
            "TLS roots: skipped {unusable} unusable certificate(s) of the system's store"
        );
    }
    roots
}

fn client_config(roots: RootCertStore) -> Arc<rustls::ClientConfig> {
    let builder = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .expect("ring supports the default TLS versions");
    Arc::new(builder.with_root_certificates(roots).with_no_client_auth())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_ca_file_is_named() {
        let err = tls_config_with_ca_file(Path::new("/nonexistent/ca.pem")).unwrap_err();
        let text = err.to_string();
        assert!(
            text.contains("ca_file") && text.contains("/nonexistent/ca.pem"),
            "{text}"
        );
    }

    #[test]
    fn a_file_without_certificates_is_refused_by_name() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("empty.pem");
        std::fs::write(&path, "not a certificate\n").unwrap();
        let text = tls_config_with_ca_file(&path).unwrap_err().to_string();
        assert!(
            text.contains("empty.pem") && text.contains("no PEM certificate"),
            "{text}"
        );
    }
}
