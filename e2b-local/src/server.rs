//! The whole server: preflight, the control plane and the envd front on their ports, and an
//! orderly shutdown that kills every sandbox.

use std::future::Future;
use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;

use tokio::net::TcpListener;
use tokio::sync::watch;

use crate::api::{self, ApiState};
use crate::host::HostFacts;
use crate::preflight::{self, PreflightError, StateLock};
use crate::registry::Registry;
use crate::world::WorldFactory;
use crate::world::cgroup::FreezerKind;
use e2b_local_envd::FileAccess;

/// How to serve.
#[derive(Debug, Clone)]
pub struct ServeConfig {
    /// Address both ports bind to.
    pub host: IpAddr,
    /// Control-plane port (0: ephemeral).
    pub api_port: u16,
    /// envd front port (0: ephemeral).
    pub envd_port: u16,
    /// The API key clients must send; a random `e2b_<hex>` key when `None`.
    pub api_key: Option<String>,
    /// Where sandbox overlays, `/tmp` and `/home/user` dirs live (not on overlayfs).
    pub state_dir: PathBuf,
    /// The e2b-local binary, re-executed as each sandbox's init.
    pub exe: PathBuf,
    /// Force a cgroup freezer version; `None` picks v1 if present, else v2.
    pub freezer: Option<FreezerKind>,
    /// Whose permissions every sandbox's envd performs file operations with (`--envd-file-access`).
    pub envd_file_access: FileAccess,
    /// Serve HTTPS on the front too, for this domain (`--tls`, `--domain`).
    pub tls_domain: Option<String>,
    /// Where sandbox addresses come from (`--sandbox-network`); `None`: loopback only.
    pub sandbox_network: Option<crate::world::network::Cidr>,
}

/// What a client needs to reach the server, known once it listens.
#[derive(Debug, Clone)]
pub struct ServerInfo {
    pub api_url: String,
    pub sandbox_url: String,
    pub api_key: String,
    pub state_dir: PathBuf,
    /// With `--tls`: the local CA certificate clients trust, and the domain it covers.
    pub tls: Option<(PathBuf, String)>,
}

impl ServerInfo {
    /// The environment variables that point both official SDKs at this server (its volumes'
    /// content API included).
    pub fn env(&self) -> Vec<(String, String)> {
        vec![
            ("E2B_API_URL".to_owned(), self.api_url.clone()),
            ("E2B_SANDBOX_URL".to_owned(), self.sandbox_url.clone()),
            ("E2B_API_KEY".to_owned(), self.api_key.clone()),
            // The volume content API shares the control plane's port.
            ("E2B_VOLUME_API_URL".to_owned(), self.api_url.clone()),
        ]
    }
}

/// Why serving failed.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    #[error(transparent)]
    Preflight(#[from] PreflightError),
    #[error("e2b-local: {0}")]
    Setup(String),
}

/// Serves until `shutdown` resolves, then kills every sandbox and returns. `on_ready` runs once
/// both ports listen. Runs on the caller's tokio runtime (multi-threaded: world teardown uses the
/// blocking pool).
pub async fn serve(
    config: ServeConfig,
    shutdown: impl Future<Output = ()>,
    on_ready: impl FnOnce(&ServerInfo),
) -> Result<(), ServeError> {
    let api_key = match config.api_key {
        Some(key) if crate::ids::is_valid_api_key(&key) => key,
        Some(key) => {
            return Err(ServeError::Setup(format!(
                "invalid --api-key {key:?}: the E2B SDKs only send keys matching ^e2b_[0-9a-f]+$"
            )));
        }
        None => crate::ids::api_key(),
    };
    preflight::check_host(&config.exe)?;
    let state_dir = preflight::prepare_state_dir(&config.state_dir)?;
    let _lock = StateLock::acquire(&state_dir)?;
    let instance = format!("{}-{}", std::process::id(), &crate::ids::sandbox_id()[..8]);
    let network = match config.sandbox_network {
        None => None,
        Some(pool) => Some(
            crate::world::network::AddressPool::new(pool)
                .map_err(ServeError::Setup)
                .and_then(|pool| {
                    crate::world::network::Network::new(pool).map_err(|e| {
                        ServeError::Setup(format!(
                            "open a netlink connection for sandbox networks: {e}"
                        ))
                    })
                })?,
        ),
    };
    let factory = WorldFactory::new(
        config.exe.clone(),
        state_dir.clone(),
        &instance,
        config.freezer,
        config.envd_file_access,
        network,
    )
    .map_err(|e| ServeError::Setup(format!("prepare sandbox worlds: {e}")))?;
    let swept = factory
        .sweep_stale()
        .map_err(|e| ServeError::Setup(format!("sweep stale sandboxes: {e}")))?;
    if swept > 0 {
        tracing::info!("removed {swept} sandbox dirs left by a previous run");
    }
    let snapshots = crate::snapshots::Snapshots::new(state_dir.join("snapshots"))
        .map_err(|e| ServeError::Setup(format!("prepare the snapshots dir: {e}")))?;
    let volumes = crate::volumes::Volumes::open(state_dir.join("volumes"))
        .map_err(|e| ServeError::Setup(format!("open the volumes dir: {e}")))?;
    let templates = crate::templates::Templates::open(state_dir.join("templates"))
        .map_err(|e| ServeError::Setup(format!("open the templates dir: {e}")))?;
    let registry = Registry::new(
        factory,
        HostFacts::read(&state_dir),
        snapshots,
        volumes,
        templates,
    );
    let tls = match &config.tls_domain {
        Some(domain) => {
            Some(crate::front::tls::prepare(&state_dir, domain).map_err(ServeError::Setup)?)
        }
        None => None,
    };

    let api_listener = bind(config.host, config.api_port, "API").await?;
    let envd_listener = bind(config.host, config.envd_port, "envd front").await?;
    let info = ServerInfo {
        api_url: url_of(
            api_listener
                .local_addr()
                .map_err(|e| ServeError::Setup(e.to_string()))?,
        ),
        sandbox_url: url_of(
            envd_listener
                .local_addr()
                .map_err(|e| ServeError::Setup(e.to_string()))?,
        ),
        api_key: api_key.clone(),
        state_dir: state_dir.clone(),
        tls: tls
            .as_ref()
            .zip(config.tls_domain.clone())
            .map(|(tls, domain)| (tls.ca.clone(), domain)),
    };

    let (stop_tx, stop_rx) = watch::channel(false);
    let stopped = |mut rx: watch::Receiver<bool>| async move {
        let _ = rx.wait_for(|stop| *stop).await;
    };
    let router = api::router(ApiState {
        registry: registry.clone(),
        api_key: api_key.into(),
        idempotency: std::sync::Arc::default(),
    });
    // With a domain, the front serves the API at `api.<domain>` too, as E2B does.
    let api_host = config
        .tls_domain
        .as_deref()
        .map(|domain| crate::front::api_host::ApiHost::new(domain, router.clone()));
    let api_task = tokio::spawn({
        let stop = stopped(stop_rx.clone());
        async move {
            axum::serve(api_listener, router)
                .with_graceful_shutdown(stop)
                .await
        }
    });
    let front_task = tokio::spawn(crate::front::serve(
        envd_listener,
        registry.clone(),
        tls,
        api_host,
        stopped(stop_rx),
    ));
    on_ready(&info);

    shutdown.await;
    tracing::info!("shutting down: killing every sandbox");
    let failures = registry.shutdown().await;
    let _ = stop_tx.send(true);
    let _ = front_task.await;
    match api_task.await {
        Ok(Err(err)) => tracing::warn!("API server: {err}"),
        Err(err) => tracing::warn!("API server task: {err}"),
        Ok(Ok(())) => {}
    }
    if let Err(err) = registry.factory().freezer().remove() {
        tracing::warn!("{err}");
    }
    let snapshots = registry.clone();
    match tokio::task::spawn_blocking(move || snapshots.snapshots.clear()).await {
        Ok(Ok(())) => {}
        Ok(Err(err)) => tracing::warn!("remove the snapshots: {err}"),
        Err(err) => tracing::warn!("remove the snapshots: {err}"),
    }
    if failures.is_empty() {
        Ok(())
    } else {
        Err(ServeError::Setup(format!(
            "shutdown: {}",
            failures.join("; ")
        )))
    }
}

async fn bind(host: IpAddr, port: u16, what: &str) -> Result<TcpListener, ServeError> {
    TcpListener::bind(SocketAddr::new(host, port))
        .await
        .map_err(|e| ServeError::Setup(format!("bind {what} port {host}:{port}: {e}")))
}

/// `http://<addr>`, with the unspecified address replaced by loopback so clients can use it.
fn url_of(addr: SocketAddr) -> String {
    let ip = match addr.ip() {
        IpAddr::V4(v4) if v4.is_unspecified() => IpAddr::V4(std::net::Ipv4Addr::LOCALHOST),
        IpAddr::V6(v6) if v6.is_unspecified() => IpAddr::V6(std::net::Ipv6Addr::LOCALHOST),
        ip => ip,
    };
    format!("http://{}", SocketAddr::new(ip, addr.port()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_use_loopback_for_unspecified_addresses() {
        assert_eq!(
            url_of("0.0.0.0:3000".parse().unwrap()),
            "http://127.0.0.1:3000"
        );
        assert_eq!(url_of("[::]:3000".parse().unwrap()), "http://[::1]:3000");
        assert_eq!(url_of("10.1.2.3:80".parse().unwrap()), "http://10.1.2.3:80");
    }
}
