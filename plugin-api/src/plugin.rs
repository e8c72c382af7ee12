//! What a plugin is: a descriptor, a factory and the services it provides.
//!
//! A plugin author implements [`Plugin`] with plain async Rust and exports it
//! with [`crate::export_plugin!`]; the host reads the [`Descriptor`] before
//! anything is created, validates the whole manifest graph, then calls
//! [`Plugin::create`] in dependency order, handing each plugin exactly the
//! services it declared in [`Descriptor::inject`]. Disposal runs in exact
//! reverse order.

use std::sync::Arc;

use async_trait::async_trait;
use serde::de::DeserializeOwned;

use schemars::JsonSchema;

use crate::config::FieldError;
use crate::error::{Error, Result};
use crate::fs::FsProvider;
use crate::owner::{Owner, OwnerKind};
use crate::subprocess::SubprocessProvider;

/// A service a plugin can provide or inject.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ServiceKind {
    /// [`FsProvider`].
    Fs,
    /// [`SubprocessProvider`].
    Subprocess,
    /// An [`Owner`] of the given kind (`ServiceKind::Owner(OwnerKind::E2B)`,
    /// named `e2b` in manifests).
    Owner(OwnerKind),
}

impl ServiceKind {
    /// Every kind this release knows, in a stable order: `fs`,
    /// `subprocess`, then the owner kinds of [`OwnerKind::KNOWN`].
    pub fn known() -> impl Iterator<Item = ServiceKind> {
        [ServiceKind::Fs, ServiceKind::Subprocess]
            .into_iter()
            .chain(OwnerKind::KNOWN.iter().copied().map(ServiceKind::Owner))
    }

    /// The name used in manifests and messages: `fs`, `subprocess`, or the
    /// owner kind's name (`e2b`).
    pub fn name(self) -> &'static str {
        match self {
            ServiceKind::Fs => "fs",
            ServiceKind::Subprocess => "subprocess",
            ServiceKind::Owner(kind) => kind.name(),
        }
    }

    /// The known kind for a manifest name.
    pub fn from_name(name: &str) -> Option<ServiceKind> {
        ServiceKind::known().find(|kind| kind.name() == name)
    }
}

impl std::fmt::Display for ServiceKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// One service instance, typed.
#[derive(Clone)]
pub enum Service {
    Fs(Arc<dyn FsProvider>),
    Subprocess(Arc<dyn SubprocessProvider>),
    /// An owner, with the kind of world it holds.
    Owner(OwnerKind, Arc<dyn Owner>),
}

impl Service {
    /// Which kind of service this is.
    pub fn kind(&self) -> ServiceKind {
        match self {
            Service::Fs(_) => ServiceKind::Fs,
            Service::Subprocess(_) => ServiceKind::Subprocess,
            Service::Owner(kind, _) => ServiceKind::Owner(*kind),
        }
    }
}

impl std::fmt::Debug for Service {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Service({})", self.kind())
    }
}

/// A plugin's static description, read by the host before any instance is
/// created.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Descriptor {
    /// Package name, e.g. `dsh-fs-local` (the library is `libdsh_fs_local.so`).
    pub name: &'static str,
    /// The plugin's own version (semver).
    pub version: &'static str,
    /// Services every instance provides.
    pub provides: &'static [ServiceKind],
    /// Services every instance requires, injected at create.
    pub inject: &'static [ServiceKind],
}

/// The services injected into one instance: exactly those its descriptor
/// declared, bound by the host.
#[derive(Debug, Clone, Default)]
pub struct Injected {
    services: Vec<Service>,
}

impl Injected {
    /// Injected services from a list (the host builds this; one per kind).
    pub fn new(services: Vec<Service>) -> Injected {
        Injected { services }
    }

    /// All injected services.
    pub fn all(&self) -> &[Service] {
        &self.services
    }

    /// The injected `fs` service, or a `Config` error if none was declared.
    pub fn fs(&self) -> Result<Arc<dyn FsProvider>> {
        self.services
            .iter()
            .find_map(|service| match service {
                Service::Fs(fs) => Some(fs.clone()),
                _ => None,
            })
            .ok_or_else(|| missing(ServiceKind::Fs))
    }

    /// The injected `subprocess` service, or a `Config` error.
    pub fn subprocess(&self) -> Result<Arc<dyn SubprocessProvider>> {
        self.services
            .iter()
            .find_map(|service| match service {
                Service::Subprocess(subprocess) => Some(subprocess.clone()),
                _ => None,
            })
            .ok_or_else(|| missing(ServiceKind::Subprocess))
    }

    /// The injected owner of `kind` (`OwnerKind::E2B`), or a `Config`
    /// error.
    pub fn owner(&self, kind: OwnerKind) -> Result<Arc<dyn Owner>> {
        self.services
            .iter()
            .find_map(|service| match service {
                Service::Owner(of, owner) if *of == kind => Some(owner.clone()),
                _ => None,
            })
            .ok_or_else(|| missing(ServiceKind::Owner(kind)))
    }
}

fn missing(kind: ServiceKind) -> Error {
    Error::config(format!(
        "service {kind} was not injected (declare it in the descriptor's inject list)"
    ))
}

/// Everything a plugin instance receives at creation.
#[derive(Debug, Clone)]
pub struct CreateContext {
    /// The manifest entry's id (unique in the manifest).
    pub id: String,
    /// The entry's `config` subtree (`null` when absent).
    pub config: serde_json::Value,
    /// The declared services, bound by the host.
    pub services: Injected,
}

impl CreateContext {
    /// Deserialises the config strictly into `T` (which should use
    /// `#[serde(deny_unknown_fields)]`); an absent config deserialises from
    /// an empty object. Errors are `Config` errors naming the field path
    /// (`config.timeoutMs: invalid type: string "x", expected u64`).
    pub fn config<T: DeserializeOwned>(&self) -> Result<T> {
        let value = match &self.config {
            serde_json::Value::Null => serde_json::Value::Object(serde_json::Map::new()),
            other => other.clone(),
        };
        serde_path_to_error::deserialize(value).map_err(|err| {
            let path = err.path().to_string();
            let field = if path == "." {
                "config".to_owned()
            } else {
                format!("config.{path}")
            };
            Error::config(format!("{field}: {}", err.inner())).with_subject(self.id.clone())
        })
    }
}

/// A plugin: created once per manifest entry, provides services, disposed
/// once.
///
/// Every instance has a tokio runtime of its own (created by the export
/// layer with the instance). `create` and `dispose` run as tasks on it; every
/// other future is polled with that runtime *entered* on the caller's thread,
/// so plugin code may use `tokio::spawn`, timers and I/O freely (long
/// blocking work belongs in `spawn_blocking`). Tasks it spawns live until
/// [`Plugin::dispose`] returns.
#[async_trait]
pub trait Plugin: Send + Sync + Sized + 'static {
    /// The type of the entry's `config`, deriving `Deserialize` and
    /// [`crate::JsonSchema`] (use `#[serde(deny_unknown_fields)]`;
    /// [`crate::NoConfig`] for none). The host validates every entry's config
    /// against it before anything is created (`dsh check`), reporting every
    /// field error at once (see [`crate::config`]); `create` is only ever
    /// called with a config that passed, and reads it with
    /// [`CreateContext::config`].
    type Config: DeserializeOwned + JsonSchema;

    /// The static description (see [`Descriptor`]).
    const DESCRIPTOR: Descriptor;

    /// Checks of a parsed config that its type cannot express (a range, a
    /// path's shape, fields that exclude each other), each problem with
    /// its path; run with the schema check, before anything is created.
    /// The default has none. Must not block or touch the world: it runs on
    /// the host's thread, outside any instance.
    fn check_config(config: &Self::Config) -> Vec<FieldError> {
        let _ = config;
        Vec::new()
    }

    /// Creates an instance. A failure after partial setup must undo that
    /// setup before returning (the host disposes only created instances).
    async fn create(ctx: CreateContext) -> Result<Self>;

    /// The services this instance provides, one per kind in
    /// `DESCRIPTOR.provides`. Called once, after `create`.
    fn services(&self) -> Vec<Service>;

    /// Releases everything the instance owns. Called once; every dependent
    /// has been disposed before. Should complete even if some step fails,
    /// reporting the failures together.
    async fn dispose(&self) -> Result<()>;
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ErrorKind;

    #[derive(Debug, serde::Deserialize)]
    #[serde(deny_unknown_fields, rename_all = "camelCase")]
    #[allow(
        dead_code,
        reason = "only deserialised: the test checks what parsing accepts"
    )]
    struct Sample {
        #[serde(default)]
        timeout_ms: u64,
        nested: Option<Nested>,
    }

    #[derive(Debug, serde::Deserialize)]
    #[serde(deny_unknown_fields)]
    #[allow(
        dead_code,
        reason = "only deserialised: the test checks what parsing accepts"
    )]
    struct Nested {
        depth: u32,
    }

    fn ctx(config: serde_json::Value) -> CreateContext {
        CreateContext {
            id: "probe".into(),
            config,
            services: Injected::default(),
        }
    }

    #[test]
    fn config_errors_name_the_field_path() {
        let err = ctx(serde_json::json!({"timeoutMs": "x"}))
            .config::<Sample>()
            .unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Config);
        assert!(
            err.message().starts_with("config.timeoutMs: invalid type"),
            "{err}"
        );
        assert_eq!(err.subject(), Some("probe"));

        let err = ctx(serde_json::json!({"nested": {"depth": 1, "extra": true}}))
            .config::<Sample>()
            .unwrap_err();
        assert!(err.message().starts_with("config.nested"), "{err}");
        assert!(err.message().contains("unknown field `extra`"), "{err}");
    }

    #[test]
    fn absent_config_is_an_empty_object() {
        assert!(ctx(serde_json::Value::Null).config::<Sample>().is_ok());
    }

    #[test]
    fn missing_injection_is_a_config_error() {
        let err = Injected::default().fs().err().expect("no fs");
        assert_eq!(err.kind(), ErrorKind::Config);
    }

    #[test]
    fn service_kinds_round_trip_by_name() {
        for kind in ServiceKind::known() {
            assert_eq!(ServiceKind::from_name(kind.name()), Some(kind));
        }
        // Existing manifests name the E2B owner service `e2b`.
        assert_eq!(
            ServiceKind::from_name("e2b"),
            Some(ServiceKind::Owner(OwnerKind::E2B))
        );
        assert_eq!(ServiceKind::from_name("db"), None);
    }
}
