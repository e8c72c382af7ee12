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
//!
//! Closing also wakes every call that is pending on the side at that moment
//! (each pending poll parks its waker here), so such calls resolve with
//! `Closed` instead of waiting for a plugin that is gone — even a future
//! that nothing of the plugin would ever wake again.

use std::collections::HashMap;
use std::mem::ManuallyDrop;
use std::ops::Deref;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::task::Waker;

use tokio::runtime::{EnterGuard, Handle};

use crate::error::{Error, Result};
use crate::ffi::log_forward::{self, InstanceScope};
use crate::ffi::panic::{Side, catch, drop_quietly};

/// Where exported calls run; shared by every object one side exports.
#[derive(Debug)]
pub struct CallContext {
    label: Arc<str>,
    handle: Option<Handle>,
    closed: AtomicBool,
    /// Only a plugin instance's context is ever closed; the host's is not,
    /// and its calls skip parking.
    closable: bool,
    parked: Mutex<Parked>,
}

/// Wakers of the calls pending on a context, by call.
#[derive(Debug, Default)]
struct Parked {
    next: u64,
    wakers: HashMap<u64, Waker>,
}

/// Guards held for the duration of one poll or drop on the exporting side.
pub struct Entered<'a> {
    _runtime: Option<EnterGuard<'a>>,
    _scope: InstanceScope,
}

impl CallContext {
    /// The context of a plugin instance: enters `handle` and labels log
    /// records with the instance id `label`; closed at dispose.
    pub fn instance(label: Arc<str>, handle: Handle) -> Arc<CallContext> {
        CallContext::new(label, Some(handle), true)
    }

    /// The context of objects the host exports to plugins: the host's tokio
    /// runtime if the caller runs inside one, so host-side service futures
    /// polled on plugin threads still find their reactor. Never closed.
    pub fn host() -> Arc<CallContext> {
        CallContext::new(Arc::from("host"), Handle::try_current().ok(), false)
    }

    fn new(label: Arc<str>, handle: Option<Handle>, closable: bool) -> Arc<CallContext> {
        Arc::new(CallContext {
            label,
            handle,
            closed: AtomicBool::new(false),
            closable,
            parked: Mutex::new(Parked::default()),
        })
    }

    /// The instance id (or `host`).
    pub fn label(&self) -> &Arc<str> {
        &self.label
    }

    /// Whose code runs in this context, as panic errors name it.
    pub fn side(&self) -> Side<'_> {
        if self.closable {
            Side::Instance(&self.label)
        } else {
            Side::Host
        }
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

    /// Marks every object of this context as closed — later polls fail with
    /// [`crate::ErrorKind::Closed`] instead of reaching a disposed plugin —
    /// and wakes every call parked on it.
    pub fn close(&self) {
        self.closed.store(true, Ordering::SeqCst);
        let parked = std::mem::take(&mut self.lock_parked().wakers);
        for waker in parked.into_values() {
            waker.wake();
        }
    }

    /// Whether [`CallContext::close`] was called.
    pub fn is_closed(&self) -> bool {
        self.closed.load(Ordering::SeqCst)
    }

    fn lock_parked(&self) -> std::sync::MutexGuard<'_, Parked> {
        self.parked.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Records that the call owning `slot` is pending with `waker`, so that
    /// [`CallContext::close`] wakes it. Called after every pending poll;
    /// `slot` keeps the call's registration.
    pub fn park(&self, slot: &mut Option<u64>, waker: &Waker) {
        if !self.closable {
            return;
        }
        {
            let mut parked = self.lock_parked();
            match slot {
                Some(id) => match parked.wakers.get_mut(id) {
                    Some(known) if known.will_wake(waker) => {}
                    Some(known) => *known = waker.clone(),
                    None => {
                        parked.wakers.insert(*id, waker.clone());
                    }
                },
                None => {
                    let id = parked.next;
                    parked.next += 1;
                    parked.wakers.insert(id, waker.clone());
                    *slot = Some(id);
                }
            }
        }
        // A close that drained the wakers before this registration is seen
        // here (the flag is set before draining).
        if self.is_closed() {
            waker.wake_by_ref();
        }
    }

    /// Forgets the registration in `slot` (the call completed or was
    /// dropped).
    pub fn unpark(&self, slot: &mut Option<u64>) {
        if let Some(id) = slot.take() {
            self.lock_parked().wakers.remove(&id);
        }
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
        catch(self.context.side(), operation, || f(&self.value))
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
