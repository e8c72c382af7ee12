//! A loaded composition owned by one test.

use std::sync::Arc;

use dsh_host::{Host, HostError, Manifest, ManifestFormat, SearchPath};
use dsh_plugin_api::fs::FsProvider;
use dsh_plugin_api::subprocess::SubprocessProvider;
#[cfg(feature = "e2b-local")]
use e2b_local::harness::{LocalServer, ServerOptions};
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
///
/// Dropped without [`World::dispose`] — a test that panicked or returned
/// early — it is disposed before the drop returns, as `dispose` would: its
/// commands and terminals are ended, then its server stopped (see the
/// `Drop` impl).
pub struct World {
    /// `None` once disposed.
    host: Option<Host>,
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
    /// server at [`World::dispose`]. The server is the default of
    /// [`World::e2b_local_with`]: found next to the test executable, or
    /// built there from the dsh checkout this crate comes from.
    ///
    /// # Panics
    /// If the server cannot start (not root, no `e2b-local` binary and
    /// none could be built) or the composition cannot.
    pub async fn e2b_local() -> World {
        World::e2b_local_with(ServerOptions::new()).await
    }

    #[cfg(feature = "e2b-local")]
    /// [`World::e2b_local`] on a server started as `options` say (its
    /// binary, ports, state directory, sandbox network, more `serve`
    /// arguments), e.g.
    /// `ServerOptions::new().api_port(3000).arg("--envd-file-access").arg("as-root")`.
    ///
    /// # Panics
    /// As [`World::e2b_local`].
    pub async fn e2b_local_with(options: ServerOptions) -> World {
        let server = tokio::task::spawn_blocking(move || LocalServer::start_with(&options))
            .await
            .unwrap_or_else(|join| std::panic::resume_unwind(join.into_panic()));
        // JSON is YAML: the server's settings go in the manifest, so no
        // environment variable is read or set.
        let manifest = serde_json::json!({"plugins": [
            {"id": "e2b", "name": "dsh-e2b-owner", "config": {
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
        World {
            host: Some(host),
            server,
        }
    }

    /// The composition's served `fs`.
    ///
    /// # Panics
    /// If it serves none.
    pub fn fs(&self) -> Arc<dyn FsProvider> {
        self.host()
            .fs()
            .unwrap_or_else(|err| panic!("dsh-testkit: {err}"))
    }

    /// The composition's served `subprocess`.
    ///
    /// # Panics
    /// If it serves none.
    pub fn subprocess(&self) -> Arc<dyn SubprocessProvider> {
        self.host()
            .subprocess()
            .unwrap_or_else(|err| panic!("dsh-testkit: {err}"))
    }

    /// The host, for everything else (plugins, services by id).
    pub fn host(&self) -> &Host {
        self.host.as_ref().expect(LIVE)
    }

    #[cfg(feature = "e2b-local")]
    /// The e2b-local server under an E2B world (its URLs, API key, state
    /// directory, log); `None` for a world without one.
    pub fn server(&self) -> Option<&LocalServer> {
        self.server.as_ref()
    }

    /// Disposes every plugin (reverse create order), then stops the
    /// e2b-local server, if any.
    ///
    /// # Panics
    /// If a plugin fails to dispose.
    pub async fn dispose(mut self) {
        let host = self.host.take().expect(LIVE);
        end(host, self.server.take())
            .await
            .unwrap_or_else(|err| panic!("dsh-testkit: dispose: {err}"));
    }
}

/// Why a world's host is always there: only [`World::dispose`] and the
/// drop take it, and both end the world.
const LIVE: &str = "a world keeps its host until it is disposed or dropped";

/// Disposes the plugins of `host`, then stops `server`, if any (which kills
/// its sandboxes); the outcome is the plugins'.
async fn end(host: Host, server: Option<LocalServer>) -> Result<(), HostError> {
    let disposed = host.dispose().await;
    #[cfg(feature = "e2b-local")]
    if let Some(server) = server {
        tokio::task::spawn_blocking(move || server.stop())
            .await
            .unwrap_or_else(|join| std::panic::resume_unwind(join.into_panic()));
    }
    #[cfg(not(feature = "e2b-local"))]
    let _: Option<LocalServer> = server;
    disposed
}

impl Drop for World {
    /// Disposes an undisposed world before returning, as
    /// [`World::dispose`] does — never in the background: a test that
    /// panicked is about to end its runtime and then its process, which
    /// would cut a background disposal short and leave its commands
    /// running on the host. The disposal runs on a thread of its own with
    /// a runtime of its own (the dropping thread may be the test runtime's
    /// only one; plugins run on theirs), and the dropping thread waits for
    /// it: as long as the plugins take to end their processes (their kill
    /// grace at most) and the server to stop. A failure is reported on
    /// stderr, not raised: the drop may be part of a panic.
    fn drop(&mut self) {
        let (Some(host), server) = (self.host.take(), self.server.take()) else {
            return;
        };
        let disposal = std::thread::Builder::new()
            .name("dsh-testkit-drop".to_owned())
            .spawn(move || {
                let runtime = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .map_err(|err| format!("start a runtime to dispose on: {err}"))?;
                runtime
                    .block_on(end(host, server))
                    .map_err(|err| err.to_string())
            });
        let outcome = match disposal {
            Ok(thread) => thread
                .join()
                .unwrap_or_else(|_| Err("the disposing thread panicked".to_owned())),
            Err(err) => Err(format!("start a thread to dispose on: {err}")),
        };
        if let Err(err) = outcome {
            use std::io::Write;
            // Not eprintln!: it panics if stderr is gone, and this may run
            // during a panic.
            let _ = writeln!(
                std::io::stderr(),
                "dsh-testkit: a world dropped without dispose: dispose: {err}"
            );
        }
    }
}
