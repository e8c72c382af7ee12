//! The context an exported object's calls run in.
//!
//! Each cdylib links its own tokio, so a plugin future polled on a host
//! thread must find *its own* runtime entered, or the first timer or socket
//! it touches panics ("no reactor running"). A [`CallContext`] carries what
//! every poll, stream pull and drop on the exporting side needs: the tokio
//! handle of the exporting side (the plugin instance's runtime, or the
//! host's runtime for objects the host exports), the label used by the
//! tracing bridge (the plugin instance id), and the closed flag set once the
//! instance is disposed.

use std::mem::ManuallyDrop;
use std::ops::Deref;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use tokio::runtime::{EnterGuard, Handle};

use crate::error::{Error, Result};
use crate::ffi::log_forward::{self, InstanceScope};
use crate::ffi::panic::{catch, drop_quietly};

/// Where exported calls run; shared by every object one side exports.
#[derive(Debug)]
pub struct CallContext {
    label: Arc<str>,
    handle: Option<Handle>,
    closed: AtomicBool,
}

/// Guards held for the duration of one poll or drop on the exporting side.
pub struct Entered<'a> {
    _runtime: Option<EnterGuard<'a>>,
    _scope: InstanceScope,
}

impl CallContext {
    /// A context that enters `handle` (if any) and labels log records with
    /// `label`.
    pub fn new(label: Arc<str>, handle: Option<Handle>) -> Arc<CallContext> {
        Arc::new(CallContext {
            label,
            handle,
            closed: AtomicBool::new(false),
        })
    }

    /// The context of objects the host exports to plugins: the host's tokio
    /// runtime if the caller runs inside one, so host-side service futures
    /// polled on plugin threads still find their reactor.
    pub fn host() -> Arc<CallContext> {
        CallContext::new(Arc::from("host"), Handle::try_current().ok())
    }

    /// The instance id (or `host`).
    pub fn label(&self) -> &Arc<str> {
        &self.label
    }

    /// The tokio handle of the exporting side, if it has one.
    pub fn handle(&self) -> Option<&Handle> {
        self.handle.as_ref()
    }

    /// Enters the exporting side's runtime and tracing scope until the
    /// returned guard drops. Guards nest (a plugin future polling another
    /// plugin's future enters both, innermost last).
    pub fn enter(&self) -> Entered<'_> {
        Entered {
            _runtime: self.handle.as_ref().map(Handle::enter),
            _scope: log_forward::scope(&self.label),
        }
    }

    /// Marks every object of this context as closed: later calls fail with
    /// [`crate::ErrorKind::Closed`] instead of reaching a disposed plugin.
    pub fn close(&self) {
        self.closed.store(true, Ordering::Release);
    }

    /// Whether [`CallContext::close`] was called.
    pub fn is_closed(&self) -> bool {
        self.closed.load(Ordering::Acquire)
    }

    /// The error every call made after [`CallContext::close`] returns.
    pub fn closed_error(&self, operation: &str) -> Error {
        Error::closed(format!(
            "{operation}: plugin instance `{}` was disposed",
            self.label
        ))
        .with_subject(self.label.to_string())
    }
}

/// A value owned by an exporting side (a provider, a stream, a process
/// handle), dropped inside that side's context and under the panic guard —
/// its destructor may touch the side's runtime.
pub struct Bound<T> {
    value: ManuallyDrop<T>,
    context: Arc<CallContext>,
}

impl<T> Bound<T> {
    /// Binds `value` to `context`.
    pub fn new(value: T, context: Arc<CallContext>) -> Bound<T> {
        Bound {
            value: ManuallyDrop::new(value),
            context,
        }
    }

    /// The context the value belongs to.
    pub fn context(&self) -> &Arc<CallContext> {
        &self.context
    }
}

impl<S: ?Sized> Bound<Arc<S>> {
    /// Runs a synchronous method of the bound object inside its context and
    /// under the panic guard; fails with `Closed` once the context is closed.
    pub fn call<T>(&self, operation: &str, f: impl FnOnce(&S) -> T) -> Result<T> {
        let _entered = self.context.enter();
        if self.context.is_closed() {
            return Err(self.context.closed_error(operation));
        }
        catch(operation, || f(&self.value))
    }
}

impl<T> Deref for Bound<T> {
    type Target = T;

    fn deref(&self) -> &T {
        &self.value
    }
}

impl<T> Drop for Bound<T> {
    fn drop(&mut self) {
        let _entered = self.context.enter();
        // SAFETY: `value` is taken exactly once, here, and never used again.
        let value = unsafe { ManuallyDrop::take(&mut self.value) };
        drop_quietly(value);
    }
}
