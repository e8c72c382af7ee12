//! One tokio runtime per plugin instance.
//!
//! Created with the instance (before [`crate::Plugin::create`] runs), never
//! shared with another instance or with the host, and shut down after
//! [`crate::Plugin::dispose`]. Shutdown never blocks an async context: the
//! runtime is handed to a short-lived thread that waits for its workers (and
//! up to [`SHUTDOWN_GRACE`] for blocking tasks), and the disposing future
//! awaits that thread through a runtime-agnostic channel.

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::runtime::{Builder, Runtime};

use crate::error::{Error, Result};
use crate::ffi::context::CallContext;
use crate::ffi::log_forward;

/// Worker threads per instance runtime. Plugin futures are polled on the
/// caller's thread (see the module docs of `ffi`), so workers only drive the
/// reactor, timers and the tasks a plugin spawns; two keep I/O readiness
/// flowing while one worker runs a long task.
pub const WORKER_THREADS: usize = 2;

/// How long shutdown waits for blocking tasks (`spawn_blocking`) that are
/// still running after dispose; they are detached afterwards.
pub const SHUTDOWN_GRACE: Duration = Duration::from_secs(5);

/// The runtime of one plugin instance and the call context bound to it.
#[derive(Debug)]
pub struct PluginRuntime {
    runtime: Mutex<Option<Runtime>>,
    context: Arc<CallContext>,
}

impl PluginRuntime {
    /// Starts the runtime for instance `id`: multi-thread, named workers
    /// (`dsh-<id>`, truncated by the OS to 15 bytes), I/O and time enabled;
    /// every runtime thread labels its log records with `id`.
    pub fn start(id: &str) -> Result<PluginRuntime> {
        let label: Arc<str> = Arc::from(id);
        let thread_label = label.clone();
        let runtime = Builder::new_multi_thread()
            .worker_threads(WORKER_THREADS)
            .thread_name(format!("dsh-{id}"))
            .on_thread_start(move || log_forward::set_thread_instance(thread_label.clone()))
            .enable_all()
            .build()
            .map_err(|err| {
                Error::from_io("create: starting the plugin runtime", &err).with_subject(id)
            })?;
        let context = CallContext::instance(label, runtime.handle().clone());
        Ok(PluginRuntime {
            runtime: Mutex::new(Some(runtime)),
            context,
        })
    }

    /// The context every object of this instance exports with.
    pub fn context(&self) -> &Arc<CallContext> {
        &self.context
    }

    /// Spawns `task` on this runtime (a no-op once it is shut down: the
    /// task is dropped unpolled).
    pub fn spawn(&self, task: impl Future<Output = ()> + Send + 'static) {
        if let Some(handle) = self.context.handle() {
            drop(handle.spawn(task));
        }
    }

    /// Closes the context (later calls fail with `Closed`) and shuts the
    /// runtime down: every task is dropped, blocking tasks get
    /// [`SHUTDOWN_GRACE`]. Idempotent. The shutdown proceeds on its own
    /// thread whether or not the returned future is awaited; the future
    /// resolves once the worker threads have stopped (at once if another
    /// call already began the shutdown), on any executor. May be called
    /// from a task of this very runtime: that task is dropped when it
    /// next yields.
    pub fn begin_shutdown(&self) -> Stopped {
        self.context.close();
        let Some(runtime) = lock(&self.runtime).take() else {
            return Stopped(None);
        };
        let (done, stopped) = futures::channel::oneshot::channel::<()>();
        // The runtime travels through a slot so it can be recovered if no
        // thread can be started.
        let slot = Arc::new(Mutex::new(Some(runtime)));
        let thread_slot = slot.clone();
        let spawned = std::thread::Builder::new()
            .name("dsh-shutdown".to_owned())
            .spawn(move || {
                if let Some(runtime) = lock(&thread_slot).take() {
                    runtime.shutdown_timeout(SHUTDOWN_GRACE);
                }
                let _ = done.send(());
            });
        if let Err(err) = spawned {
            tracing::warn!(
                target: "dsh_plugin_api",
                instance = %self.context.label(),
                "no thread to shut the plugin runtime down ({err}); shutting down in the background"
            );
            if let Some(runtime) = lock(&slot).take() {
                runtime.shutdown_background();
            }
            return Stopped(None);
        }
        Stopped(Some(stopped))
    }
}

/// Resolves once a runtime's worker threads have stopped.
#[must_use = "await it to know the runtime has stopped"]
pub struct Stopped(Option<futures::channel::oneshot::Receiver<()>>);

impl Future for Stopped {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        match self.0.as_mut() {
            // A dropped sender (the thread died) also means "over".
            Some(receiver) => Pin::new(receiver).poll(cx).map(|_| ()),
            None => Poll::Ready(()),
        }
    }
}

impl Drop for PluginRuntime {
    /// Dropped without [`PluginRuntime::begin_shutdown`] (a create that was
    /// cancelled, an instance dropped without dispose): stop in the
    /// background, never block the dropping thread.
    fn drop(&mut self) {
        self.context.close();
        if let Some(runtime) = lock(&self.runtime).take() {
            runtime.shutdown_background();
        }
    }
}

fn lock(slot: &Mutex<Option<Runtime>>) -> std::sync::MutexGuard<'_, Option<Runtime>> {
    slot.lock().unwrap_or_else(PoisonError::into_inner)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shutdown_stops_the_workers_and_closes_the_context() {
        let runtime = PluginRuntime::start("unit").expect("start");
        let handle = runtime.context().clone();
        let (tx, rx) = std::sync::mpsc::channel();
        {
            let _entered = handle.enter();
            tokio::spawn(async move {
                let name = std::thread::current().name().map(str::to_owned);
                tx.send(name).expect("send");
            });
        }
        let name = rx.recv().expect("task ran").expect("named thread");
        assert_eq!(name, "dsh-unit");
        futures::executor::block_on(runtime.begin_shutdown());
        assert!(handle.is_closed());
        assert!(lock(&runtime.runtime).is_none());
        // Idempotent.
        futures::executor::block_on(runtime.begin_shutdown());
    }
}
