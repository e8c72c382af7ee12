//! Shared by the loader tests: finding the built plugin libraries.

use std::path::PathBuf;

use dsh_plugin_api::OwnerKind;
use dsh_plugin_api::host::{CreateRequest, PluginInstance, PluginLibrary, library_file_name};
use dsh_plugin_api::{Service, ServiceKind};

/// The built library of `package`, looked up in the test executable's
/// directory (`target/<profile>/deps`, where cargo puts the cdylibs of this
/// crate's dev-dependencies) and then in the profile directory (where
/// `cargo build` puts workspace libraries).
pub fn library(package: &str) -> PathBuf {
    let exe = std::env::current_exe().expect("test executable path");
    let deps = exe.parent().expect("the executable's directory");
    let name = library_file_name(package);
    let candidates = [
        deps.join(&name),
        deps.parent()
            .map(|profile| profile.join(&name))
            .unwrap_or_default(),
    ];
    candidates
        .iter()
        .find(|path| path.is_file())
        .cloned()
        .unwrap_or_else(|| {
            panic!(
                "{name} was not built (looked in {} and its parent): run `cargo build --workspace` \
                 or `cargo test -p dsh-plugin-api` (which builds the probe plugins) first",
                deps.display()
            )
        })
}

/// Loads `package`'s library.
pub fn load(package: &str) -> PluginLibrary {
    PluginLibrary::load(&library(package)).unwrap_or_else(|err| panic!("load {package}: {err}"))
}

/// Creates an instance of `package` as `id`.
pub async fn create(
    package: &str,
    id: &str,
    config: serde_json::Value,
    services: Vec<Service>,
) -> PluginInstance {
    load(package)
        .create(CreateRequest {
            id: id.into(),
            config,
            services,
        })
        .await
        .unwrap_or_else(|err| panic!("create {id} ({package}): {err}"))
}

/// The one service of `kind` an instance provides.
pub fn service(instance: &PluginInstance, kind: ServiceKind) -> Service {
    instance
        .services()
        .iter()
        .find(|service| service.kind() == kind)
        .cloned()
        .unwrap_or_else(|| panic!("{} provides no {kind}", instance.id()))
}

/// The three probes composed like an E2B world: `e2b`, `fs` (injected with
/// `e2b`) and `subprocess` (injected with both).
pub struct World {
    pub e2b: PluginInstance,
    pub fs: PluginInstance,
    pub subprocess: PluginInstance,
}

impl World {
    pub async fn new(config: serde_json::Value) -> World {
        let e2b = create("dsh-probe-e2b", "e2b", config.clone(), Vec::new()).await;
        let owner = service(&e2b, ServiceKind::Owner(OwnerKind::E2B));
        let fs = create("dsh-probe-fs", "fs", config.clone(), vec![owner.clone()]).await;
        let files = service(&fs, ServiceKind::Fs);
        let subprocess = create(
            "dsh-probe-subprocess",
            "subprocess",
            config,
            vec![owner, files],
        )
        .await;
        World {
            e2b,
            fs,
            subprocess,
        }
    }

    pub fn owner(&self) -> std::sync::Arc<dyn dsh_plugin_api::owner::Owner> {
        match service(&self.e2b, ServiceKind::Owner(OwnerKind::E2B)) {
            Service::Owner(OwnerKind::E2B, owner) => owner,
            _ => unreachable!("service() matched the kind"),
        }
    }

    pub fn fs(&self) -> std::sync::Arc<dyn dsh_plugin_api::fs::FsProvider> {
        match service(&self.fs, ServiceKind::Fs) {
            Service::Fs(fs) => fs,
            _ => unreachable!("service() matched the kind"),
        }
    }

    pub fn subprocess(&self) -> std::sync::Arc<dyn dsh_plugin_api::subprocess::SubprocessProvider> {
        match service(&self.subprocess, ServiceKind::Subprocess) {
            Service::Subprocess(subprocess) => subprocess,
            _ => unreachable!("service() matched the kind"),
        }
    }

    /// Disposes in reverse order, each must succeed.
    pub async fn dispose(self) {
        self.subprocess.dispose().await.expect("dispose subprocess");
        self.fs.dispose().await.expect("dispose fs");
        self.e2b.dispose().await.expect("dispose e2b");
    }
}
