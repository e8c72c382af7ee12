//! `serve --tls`: the front also speaks HTTPS — told apart from plain HTTP by a connection's
//! first byte, so one port serves both — with a certificate for `*.<domain>`, `<domain>`,
//! `localhost` and `127.0.0.1`, issued at each start by a local certificate authority that
//! e2b-local creates once in `<state dir>/tls/`: `ca.pem` is what a client trusts, `ca-key.pem`
//! (0600) never leaves the state dir, which every sandbox has hidden. The CA is rebuilt from its
//! key and fixed subject at each start, so the certificate a user trusted once stays valid.

use std::io::Write;
use std::net::{IpAddr, Ipv4Addr};
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use rcgen::{
    BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair, KeyUsagePurpose, SanType,
};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use tokio_rustls::TlsAcceptor;

/// The certificate a client trusts, in `<state dir>/tls/`.
pub const CA_FILE: &str = "ca.pem";
const CA_KEY_FILE: &str = "ca-key.pem";

/// The front's TLS side.
#[derive(Clone)]
pub struct FrontTls {
    pub acceptor: TlsAcceptor,
    /// The CA certificate to trust.
    pub ca: PathBuf,
}

impl std::fmt::Debug for FrontTls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FrontTls")
            .field("ca", &self.ca)
            .finish_non_exhaustive()
    }
}

/// The CA's fixed identity: the same at every start, with the same key.
fn ca_params() -> CertificateParams {
    let mut params = CertificateParams::default();
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params
        .distinguished_name
        .push(DnType::CommonName, "e2b-local local CA");
    params
        .distinguished_name
        .push(DnType::OrganizationName, "e2b-local");
    params.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    params
}

/// Loads (or, the first time, creates) the CA in `<state_dir>/tls/` and issues the front's
/// certificate for `domain`.
pub fn prepare(state_dir: &Path, domain: &str) -> Result<FrontTls, String> {
    let dir = state_dir.join("tls");
    let fail = |what: &str, err: &dyn std::fmt::Display| format!("TLS: {what}: {err}");
    std::fs::create_dir_all(&dir).map_err(|e| fail(&format!("create {}", dir.display()), &e))?;
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700))
        .map_err(|e| fail(&format!("chmod {}", dir.display()), &e))?;
    let (ca, key_path) = (dir.join(CA_FILE), dir.join(CA_KEY_FILE));
    let ca_key = if ca.is_file() && key_path.is_file() {
        let pem = std::fs::read_to_string(&key_path)
            .map_err(|e| fail(&format!("read {}", key_path.display()), &e))?;
        KeyPair::from_pem(&pem).map_err(|e| fail(&format!("parse {}", key_path.display()), &e))?
    } else {
        let key = KeyPair::generate().map_err(|e| fail("generate the CA key", &e))?;
        let cert = ca_params()
            .self_signed(&key)
            .map_err(|e| fail("sign the CA certificate", &e))?;
        write_private(&key_path, key.serialize_pem().as_bytes())
            .map_err(|e| fail(&format!("write {}", key_path.display()), &e))?;
        std::fs::write(&ca, cert.pem())
            .map_err(|e| fail(&format!("write {}", ca.display()), &e))?;
        key
    };
    let issuer = Issuer::new(ca_params(), ca_key);
    let key = KeyPair::generate().map_err(|e| fail("generate the front's key", &e))?;
    let mut params = CertificateParams::new(vec![
        format!("*.{domain}"),
        domain.to_owned(),
        "localhost".to_owned(),
    ])
    .map_err(|e| fail(&format!("the names of {domain:?}"), &e))?;
    params
        .subject_alt_names
        .push(SanType::IpAddress(IpAddr::V4(Ipv4Addr::LOCALHOST)));
    params.distinguished_name.push(DnType::CommonName, domain);
    let cert = params
        .signed_by(&key, &issuer)
        .map_err(|e| fail("sign the front's certificate", &e))?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| fail("protocol versions", &e))?
        .with_no_client_auth()
        .with_single_cert(
            vec![CertificateDer::from(cert.der().to_vec())],
            PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.serialize_der())),
        )
        .map_err(|e| fail("the front's certificate", &e))?;
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(FrontTls {
        acceptor: TlsAcceptor::from(Arc::new(config)),
        ca,
    })
}

/// Writes a new file only its owner can read.
fn write_private(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(path)?;
    file.write_all(bytes)?;
    file.sync_all()
}

#[cfg(test)]
mod tests {
    use super::*;
    use rustls::pki_types::ServerName;
    use rustls::pki_types::pem::PemObject;

    /// A TLS handshake with `tls`, by a client trusting only `ca`, for `name`.
    async fn handshake(tls: &FrontTls, ca: &[u8], name: &str) -> Result<(), String> {
        let mut roots = rustls::RootCertStore::empty();
        roots
            .add(CertificateDer::from_pem_slice(ca).map_err(|e| e.to_string())?)
            .map_err(|e| e.to_string())?;
        let client = rustls::ClientConfig::builder_with_provider(Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?
        .with_root_certificates(roots)
        .with_no_client_auth();
        let (client_io, server_io) = tokio::io::duplex(64 * 1024);
        let acceptor = tls.acceptor.clone();
        let server = tokio::spawn(async move { acceptor.accept(server_io).await.map(drop) });
        let connector = tokio_rustls::TlsConnector::from(Arc::new(client));
        let name = ServerName::try_from(name.to_owned()).map_err(|e| e.to_string())?;
        let connected = connector.connect(name, client_io).await.map(drop);
        let _ = server.await;
        connected.map_err(|e| e.to_string())
    }

    #[tokio::test]
    async fn the_ca_is_created_once_and_still_vouches_for_a_later_start() {
        let dir = tempfile::tempdir().unwrap();
        let first = prepare(dir.path(), "e2b.test").unwrap();
        let trusted = std::fs::read(&first.ca).unwrap();
        let second = prepare(dir.path(), "e2b.test").unwrap();
        assert_eq!(
            std::fs::read(&second.ca).unwrap(),
            trusted,
            "the CA file stays"
        );
        // The certificate of a later start chains to the CA a client trusted at the first.
        handshake(&second, &trusted, "8000-abc.e2b.test")
            .await
            .unwrap();
        handshake(&second, &trusted, "localhost").await.unwrap();
        assert!(
            handshake(&second, &trusted, "8000-abc.elsewhere.test")
                .await
                .is_err()
        );
        let other = tempfile::tempdir().unwrap();
        let stranger = std::fs::read(prepare(other.path(), "e2b.test").unwrap().ca).unwrap();
        assert!(
            handshake(&second, &stranger, "8000-abc.e2b.test")
                .await
                .is_err(),
            "another CA does not vouch for it"
        );
    }
}
