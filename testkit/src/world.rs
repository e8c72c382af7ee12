//! A loaded composition owned by one test.

use std::sync::Arc;

use dsh_host::{Host, Manifest, ManifestFormat, SearchPath};
use dsh_plugin_api::fs::FsProvider;
use dsh_plugin_api::subprocess::SubprocessProvider;
#[cfg(feature = "e2b-local")]
use e2b_local::harness::LocalServer;
/// Without the E2B feature no world has a server.
#[cfg(not(feature = "e2b-local"))]
type LocalServer = std::convert::Infallible;

use crate::plugins::plugin_dirs;

#[cfg(feature = "e2b-local")]
/// The cwd of the E2B world (the sandbox user's workspace, as the shipped
/// `config/e2b-local.yaml` sets it).
const E2B_CWD: &str = "/home/user/workspace";

/// A running composition for one test, and the e2b-local server under it
/// (E2B). Runs on the test's tokio runtime.
pub struct World {
    host: Host,
    server: Option<LocalServer>,
}

impl World {
    /// The local composition: files and commands of this machine.
    ///
    /// # Panics
    /// If it cannot start (a plugin library is missing: the message names
    /// every place searched).
    pub async fn local() -> World {
        World::start(dsh_host::embedded::LOCAL_YAML, "<dsh-testkit local>", None).await
    }

    #[cfg(feature = "e2b-local")]
    /// The E2B composition on a fresh e2b-local server started for this
    /// world: one sandbox (cwd `/home/user/workspace`), killed with the
    /// server at [`World::dispose`].
    ///
    /// # Panics
    /// If the server cannot start (not root, no `e2b-local` binary) or the
    /// composition cannot.
    pub async fn e2b_local() -> World {
        let server = tokio::task::spawn_blocking(LocalServer::start)
            .await
            .unwrap_or_else(|join| std::panic::resume_unwind(join.into_panic()));
        // JSON is YAML: the server's settings go in the manifest, so no
        // environment variable is read or set.
        let manifest = serde_json::json!({"plugins": [
            {"id": "e2b", "name": "dsh-e2b", "config": {
                "apiKey": server.api_key(), "apiUrl": server.api_url(),
                "sandboxUrl": server.sandbox_url(), "cwd": E2B_CWD, "onDispose": "kill"}},
            {"id": "fs", "name": "dsh-fs-e2b"},
            {"id": "subprocess", "name": "dsh-subprocess-e2b"},
        ]});
        World::start(
            &manifest.to_string(),
            "<dsh-testkit e2b-local>",
            Some(server),
        )
        .await
    }

    /// Any composition, from YAML text (`name` in messages), its plugins
    /// found in [`plugin_dirs`].
    ///
    /// # Panics
    /// If the manifest is invalid or the composition cannot start.
    pub async fn from_yaml(text: &str, name: &str) -> World {
        World::start(text, name, None).await
    }

    async fn start(text: &str, name: &str, server: Option<LocalServer>) -> World {
        let manifest = Manifest::parse(text, ManifestFormat::Yaml, name, None)
            .unwrap_or_else(|err| panic!("dsh-testkit: {err}"));
        let host = Host::from_manifest(&manifest, &SearchPath::new(plugin_dirs()))
            .await
            .unwrap_or_else(|err| panic!("dsh-testkit: start {name}: {err}"));
        World { host, server }
    }

    /// The composition's served `fs`.
    ///
    /// # Panics
    /// If it serves none.
    pub fn fs(&self) -> Arc<dyn FsProvider> {
        self.host
            .fs()
            .unwrap_or_else(|err| panic!("dsh-testkit: {err}"))
    }

    /// The composition's served `subprocess`.
    ///
    /// # Panics
    /// If it serves none.
    pub fn subprocess(&self) -> Arc<dyn SubprocessProvider> {
        self.host
            .subprocess()
            .unwrap_or_else(|err| panic!("dsh-testkit: {err}"))
    }

    /// The host, for everything else (plugins, services by id).
    pub fn host(&self) -> &Host {
        &self.host
    }

    /// Disposes every plugin (reverse create order), then stops the
    /// e2b-local server, if any. A world dropped without it is disposed in
    /// the background and its server killed with its sandboxes.
    ///
    /// # Panics
    /// If a plugin fails to dispose.
    pub async fn dispose(self) {
        let World { host, server } = self;
        let disposed = host.dispose().await;
        #[cfg(feature = "e2b-local")]
        if let Some(server) = server {
            tokio::task::spawn_blocking(move || server.stop())
                .await
                .unwrap_or_else(|join| std::panic::resume_unwind(join.into_panic()));
        }
        #[cfg(not(feature = "e2b-local"))]
        let _: Option<LocalServer> = server;
        disposed.unwrap_or_else(|err| panic!("dsh-testkit: dispose: {err}"));
    }
}
