//! A created plugin instance across the boundary: its services and its
//! disposal.
//!
//! Create and dispose are the two calls that must not be half-cancelled:
//! a plugin that has begun creating a sandbox must either hand it over or
//! tear it down. Both therefore run as tasks on the instance's own runtime
//! and report through runtime-agnostic channels; dropping the caller's
//! future stops the *waiting* only. A create whose caller went away
//! disposes the fresh instance itself; a dispose whose caller went away
//! still completes and stops the runtime.

use std::sync::{Arc, Mutex, PoisonError};

use abi_stable::sabi_trait;
use abi_stable::std_types::{RArc, RResult, RVec};
use async_ffi::{FfiFuture, FutureExt as _};
use futures::FutureExt as _;
use futures::future::BoxFuture;

use crate::error::{Error, Result};
use crate::ffi::context::CallContext;
use crate::ffi::error::FfiResult;
use crate::ffi::future::guarded_ffi;
use crate::ffi::panic::{catch, drop_quietly, panicked};
use crate::ffi::runtime::{PluginRuntime, Stopped};
use crate::ffi::service::FfiService;
use crate::plugin::Plugin;

/// A plugin instance as an FFI object.
#[sabi_trait]
pub trait FfiInstance: Send + Sync {
    /// The services the instance provides (exported once, at creation).
    fn services(&self) -> FfiResult<RVec<FfiService>>;

    /// Disposes the instance, then stops its runtime; resolves once both
    /// are done. A second call fails with `Closed`.
    #[sabi(last_prefix_field)]
    fn dispose(&self) -> FfiFuture<FfiResult<()>>;
}

/// An instance as it crosses the ABI.
pub type FfiInstanceObject = FfiInstance_TO<'static, RArc<()>>;

/// A plugin with its type erased: only disposal is needed after creation.
pub trait Disposable: Send + Sync + 'static {
    fn dispose(&self) -> BoxFuture<'_, Result<()>>;
}

impl<P: Plugin> Disposable for P {
    fn dispose(&self) -> BoxFuture<'_, Result<()>> {
        Plugin::dispose(self)
    }
}

/// Awaits `future` of the instance owning `context` with panics caught and
/// turned into `Panicked` errors naming the instance.
pub async fn guarded<T>(
    context: &CallContext,
    operation: &str,
    future: BoxFuture<'_, Result<T>>,
) -> Result<T> {
    match std::panic::AssertUnwindSafe(future).catch_unwind().await {
        Ok(result) => result,
        Err(payload) => Err(panicked(context.side(), operation, payload)),
    }
}

/// Runs the plugin's dispose, closes the instance's context, drops the
/// plugin inside it and begins the runtime's shutdown. Meant to run as a
/// task of that runtime.
pub async fn dispose_plugin(
    plugin: Box<dyn Disposable>,
    runtime: &PluginRuntime,
) -> (Result<()>, Stopped) {
    let context = runtime.context();
    let result = guarded(context, "dispose", plugin.dispose()).await;
    context.close();
    {
        let _entered = context.enter();
        drop_quietly(plugin);
    }
    (result, runtime.begin_shutdown())
}

/// The exporting side of an instance.
pub struct InstanceExport {
    runtime: Arc<PluginRuntime>,
    /// Taken by the one dispose.
    plugin: Mutex<Option<Box<dyn Disposable>>>,
    /// Exported services, released at dispose.
    services: Mutex<Vec<FfiService>>,
}

impl InstanceExport {
    pub fn new(
        runtime: Arc<PluginRuntime>,
        plugin: Box<dyn Disposable>,
        services: Vec<FfiService>,
    ) -> InstanceExport {
        InstanceExport {
            runtime,
            plugin: Mutex::new(Some(plugin)),
            services: Mutex::new(services),
        }
    }

    /// Disposes an instance nobody received (its create was abandoned).
    pub async fn dispose_abandoned(self) {
        let plugin = self
            .plugin
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        if let Some(plugin) = plugin {
            let (result, stopped) = dispose_plugin(plugin, &self.runtime).await;
            if let Err(err) = result {
                tracing::warn!(
                    target: "dsh_plugin_api",
                    instance = %self.runtime.context().label(),
                    error = %err,
                    "disposing an instance whose create was abandoned failed"
                );
            }
            drop(stopped);
        }
    }

    fn start_dispose(&self) -> FfiFuture<FfiResult<()>> {
        let context = self.runtime.context();
        let plugin = self
            .plugin
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        let Some(plugin) = plugin else {
            let err = Error::closed(format!(
                "dispose: plugin instance `{}` was already disposed",
                context.label()
            ))
            .with_subject(context.label().to_string());
            return std::future::ready(RResult::RErr(err.into())).into_ffi();
        };
        let services =
            std::mem::take(&mut *self.services.lock().unwrap_or_else(PoisonError::into_inner));
        let (done, report) = futures::channel::oneshot::channel();
        let runtime = self.runtime.clone();
        self.runtime.spawn(async move {
            let outcome = dispose_plugin(plugin, &runtime).await;
            {
                let _entered = runtime.context().enter();
                drop_quietly(services);
            }
            let _ = done.send(outcome);
        });
        let label = context.label().clone();
        guarded_ffi(label.clone(), "dispose", async move {
            match report.await {
                Ok((result, stopped)) => {
                    stopped.await;
                    match result {
                        Ok(()) => RResult::ROk(()),
                        Err(err) => RResult::RErr(err.into()),
                    }
                }
                Err(_) => {
                    let err = Error::closed(format!(
                        "dispose: the runtime of plugin instance `{label}` stopped before dispose completed"
                    ))
                    .with_subject(label.to_string());
                    RResult::RErr(err.into())
                }
            }
        })
    }
}

impl FfiInstance for InstanceExport {
    fn services(&self) -> FfiResult<RVec<FfiService>> {
        let context = self.runtime.context();
        let _entered = context.enter();
        if context.is_closed() {
            return RResult::RErr(context.closed_error("services").into());
        }
        let services = self.services.lock().unwrap_or_else(PoisonError::into_inner);
        RResult::ROk(services.iter().map(FfiService::shallow_clone).collect())
    }

    fn dispose(&self) -> FfiFuture<FfiResult<()>> {
        let context = self.runtime.context();
        catch(context.side(), "dispose", || self.start_dispose())
            .unwrap_or_else(|err| std::future::ready(RResult::RErr(err.into())).into_ffi())
    }
}

impl Drop for InstanceExport {
    /// Dropped without dispose (the host dropped the instance): the plugin
    /// is dropped inside its context without its dispose, and the runtime
    /// stops in the background when the last reference goes.
    fn drop(&mut self) {
        let context = self.runtime.context();
        context.close();
        let _entered = context.enter();
        let plugin = self
            .plugin
            .get_mut()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        drop_quietly(plugin);
        let services = std::mem::take(
            self.services
                .get_mut()
                .unwrap_or_else(PoisonError::into_inner),
        );
        drop_quietly(services);
    }
}
