//! A running composition and its typed services.

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use dsh_plugin_api::fs::FsProvider;
use dsh_plugin_api::owner::Owner;
use dsh_plugin_api::subprocess::SubprocessProvider;
use dsh_plugin_api::{OwnerKind, Service, ServiceKind};

use crate::composition::{Composition, PluginInfo};
use crate::error::HostError;
use crate::lifecycle::{self, DisposeError, DisposeFailure, Running};
use crate::manifest::{Manifest, ManifestFormat};
use crate::resolve::SearchPath;

/// A created composition: every plugin running, services ready.
///
/// Typed accessors hand out the plain seam traits (`Arc<dyn FsProvider>` …);
/// they stay valid objects after [`Host::dispose`], but their plugins are
/// gone and calls fail. Always call [`Host::dispose`] before dropping a
/// host; a host dropped undisposed disposes its plugins in a background
/// task on the current tokio runtime (if any) and logs a warning.
pub struct Host {
    origin: String,
    plugins: Vec<PluginInfo>,
    /// Every provided service with its plugin id, in create order.
    services: Vec<(String, Service)>,
    running: tokio::sync::Mutex<Option<Vec<Running>>>,
    disposed: AtomicBool,
}

impl std::fmt::Debug for Host {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Host")
            .field("origin", &self.origin)
            .field("plugins", &self.plugins)
            .field("disposed", &self.disposed.load(Ordering::Relaxed))
            .finish_non_exhaustive()
    }
}

impl Host {
    pub(crate) fn new(origin: String, plugins: Vec<PluginInfo>, running: Vec<Running>) -> Host {
        let services = running
            .iter()
            .flat_map(|running| {
                running
                    .services
                    .iter()
                    .map(|service| (running.id.clone(), service.clone()))
            })
            .collect();
        Host {
            origin,
            plugins,
            services,
            running: tokio::sync::Mutex::new(Some(running)),
            disposed: AtomicBool::new(false),
        }
    }

    /// Reads, validates and starts the manifest at `path` (TOML or YAML by
    /// extension), finding libraries on [`SearchPath::from_env`].
    ///
    /// Reading and `dlopen` run on the runtime's blocking pool; creation on
    /// the caller's tokio runtime (see [`Composition::start`]).
    pub async fn load(path: &Path) -> Result<Host, HostError> {
        let path = path.to_path_buf();
        off_thread(move || Composition::load(&path))
            .await?
            .start()
            .await
    }

    /// Parses, validates and starts a manifest given as text. Relative
    /// entry paths resolve against the current directory.
    pub async fn from_str(text: &str, format: ManifestFormat) -> Result<Host, HostError> {
        let text = text.to_owned();
        off_thread(move || Composition::from_text(&text, format, "<manifest>"))
            .await?
            .start()
            .await
    }

    /// Validates and starts a parsed manifest with an explicit search path.
    pub async fn from_manifest(
        manifest: &Manifest,
        search: &SearchPath,
    ) -> Result<Host, HostError> {
        let (manifest, search) = (manifest.clone(), search.clone());
        off_thread(move || Composition::from_manifest(&manifest, &search))
            .await?
            .start()
            .await
    }

    /// Starts the default local composition (`config/local.yaml`, compiled
    /// in): `fs` from `dsh-fs-local`, `subprocess` from
    /// `dsh-subprocess-local`.
    pub async fn embedded_local() -> Result<Host, HostError> {
        off_thread(Composition::embedded_local).await?.start().await
    }

    /// What messages call the manifest.
    pub fn origin(&self) -> &str {
        &self.origin
    }

    /// The plugins in create (load) order.
    pub fn plugins(&self) -> &[PluginInfo] {
        &self.plugins
    }

    /// The composition's `fs` service: the entry whose `serve` lists it, or
    /// the only provider, or else the only one not injected into another
    /// plugin (a decorator over the provider it wraps) — chosen at
    /// validation, which refuses a composition where that is ambiguous; an
    /// error if no entry provides it, or every provider is consumed by
    /// another entry (then [`Host::service_of`] asks by id).
    pub fn fs(&self) -> Result<Arc<dyn FsProvider>, HostError> {
        self.only("fs", ServiceKind::Fs, |service| match service {
            Service::Fs(fs) => Some(fs),
            _ => None,
        })
    }

    /// The composition's `subprocess` service, chosen as [`Host::fs`] is.
    pub fn subprocess(&self) -> Result<Arc<dyn SubprocessProvider>, HostError> {
        self.only(
            "subprocess",
            ServiceKind::Subprocess,
            |service| match service {
                Service::Subprocess(subprocess) => Some(subprocess),
                _ => None,
            },
        )
    }

    /// The composition's owner of `kind` (`OwnerKind::E2B`), chosen as
    /// [`Host::fs`] is.
    pub fn owner(&self, kind: OwnerKind) -> Result<Arc<dyn Owner>, HostError> {
        self.only("owner", ServiceKind::Owner(kind), |service| match service {
            Service::Owner(_, owner) => Some(owner),
            _ => None,
        })
    }

    /// The `kind` service of the plugin with id `id` (for compositions with
    /// several providers of one service).
    pub fn service_of(&self, id: &str, kind: ServiceKind) -> Result<Service, HostError> {
        self.check_live("service_of")?;
        self.services
            .iter()
            .find(|(owner, service)| owner == id && service.kind() == kind)
            .map(|(_, service)| service.clone())
            .ok_or_else(|| HostError::NotProvidedBy {
                operation: "service_of",
                id: id.to_owned(),
                service: kind,
            })
    }

    /// The served `kind` service, as validation chose it
    /// ([`PluginInfo::serves`]).
    fn only<T>(
        &self,
        operation: &'static str,
        kind: ServiceKind,
        typed: fn(Service) -> Option<T>,
    ) -> Result<T, HostError> {
        self.check_live(operation)?;
        let of_kind = || {
            self.services
                .iter()
                .filter(move |(_, service)| service.kind() == kind)
        };
        match crate::composition::served_by(self.plugins.iter(), kind) {
            Some(id) => {
                let (_, service) = of_kind()
                    .find(|(owner, _)| owner == id)
                    .expect("a served entry provides the service");
                Ok(typed(service.clone()).expect("filtered by kind"))
            }
            None => {
                let providers: Vec<String> = of_kind().map(|(id, _)| id.clone()).collect();
                if providers.is_empty() {
                    Err(HostError::ServiceMissing {
                        operation,
                        service: kind,
                    })
                } else {
                    Err(HostError::ServiceNotServed {
                        operation,
                        service: kind,
                        providers,
                    })
                }
            }
        }
    }

    fn check_live(&self, operation: &'static str) -> Result<(), HostError> {
        if self.disposed.load(Ordering::Acquire) {
            Err(HostError::Disposed { operation })
        } else {
            Ok(())
        }
    }

    /// Whether [`Host::dispose`] has begun.
    pub fn is_disposed(&self) -> bool {
        self.disposed.load(Ordering::Acquire)
    }

    /// Disposes every plugin in exact reverse create order; every dispose
    /// runs even if an earlier one failed, and failures come back together.
    ///
    /// Idempotent: the first call disposes and returns the outcome;
    /// concurrent and later calls wait for it and return `Ok(())`. Typed
    /// accessors fail from the moment disposal begins.
    ///
    /// Inside a tokio runtime the disposal runs as a task of that runtime,
    /// so dropping this future does not interrupt it (the outcome is then
    /// only logged); outside one it runs inline in this future.
    pub async fn dispose(&self) -> Result<(), HostError> {
        self.disposed.store(true, Ordering::Release);
        let mut running = self.running.lock().await;
        let Some(instances) = running.take() else {
            return Ok(());
        };
        let outcome = match tokio::runtime::Handle::try_current() {
            Ok(handle) => {
                let task = handle.spawn(async move {
                    let outcome = lifecycle::dispose_all(instances).await;
                    if let Err(err) = &outcome {
                        tracing::debug!("dispose: {err}");
                    }
                    outcome
                });
                match task.await {
                    Ok(outcome) => outcome,
                    Err(join) if join.is_panic() => std::panic::resume_unwind(join.into_panic()),
                    Err(_) => Err(DisposeError {
                        failures: vec![DisposeFailure {
                            id: self.origin.clone(),
                            name: "dsh-host".to_owned(),
                            error: dsh_plugin_api::Error::new(
                                dsh_plugin_api::ErrorKind::Cancelled,
                                "dispose: the runtime shut down before disposal finished",
                            ),
                        }],
                    }),
                }
            }
            Err(_) => lifecycle::dispose_all(instances).await,
        };
        Ok(outcome?)
    }
}

/// Runs blocking work (file reads, `dlopen`) on the tokio blocking pool when
/// there is a runtime, inline otherwise.
async fn off_thread<T: Send + 'static>(work: impl FnOnce() -> T + Send + 'static) -> T {
    match tokio::runtime::Handle::try_current() {
        Ok(handle) => match handle.spawn_blocking(work).await {
            Ok(value) => value,
            Err(join) => std::panic::resume_unwind(join.into_panic()),
        },
        Err(_) => work(),
    }
}

impl Drop for Host {
    fn drop(&mut self) {
        let Some(instances) = self.running.get_mut().take() else {
            return;
        };
        tracing::warn!(
            manifest = %self.origin,
            "host dropped without dispose(); disposing {} plugin(s) in the background",
            instances.len()
        );
        match tokio::runtime::Handle::try_current() {
            Ok(handle) => {
                handle.spawn(async move {
                    if let Err(err) = lifecycle::dispose_all(instances).await {
                        tracing::warn!("background dispose failed: {err}");
                    }
                });
            }
            Err(_) => tracing::warn!("no tokio runtime: plugins left undisposed"),
        }
    }
}
