//! Futures across the boundary: [`async_ffi::BorrowingFfiFuture`] with the
//! exporting side's runtime entered on every poll.
//!
//! [`export`] wraps a plain future of the exporting side: each poll checks
//! the closed flag, enters the side's [`CallContext`] (tokio runtime +
//! tracing scope) and runs under the panic guard; dropping the FFI future
//! drops the plain future right away, inside the same context, so the
//! exporting side observes the cancellation synchronously. The importing
//! side simply awaits the FFI future and lifts its result.

use std::future::Future;
use std::ops::Deref;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use async_ffi::BorrowingFfiFuture;
use futures::future::BoxFuture;

use abi_stable::std_types::RResult;

use crate::error::{Error, Result};
use crate::ffi::context::{Bound, CallContext};
use crate::ffi::error::{FfiResult, lift};
use crate::ffi::panic::{catch, drop_quietly};

/// The FFI future every fallible async method returns.
pub type FfiFut<'a, T> = BorrowingFfiFuture<'a, FfiResult<T>>;

/// Exports a plain future of the side owning `context` as an FFI future
/// whose output is converted with `map`. `make` creates the plain future; it
/// runs at once, inside the context and the panic guard (a provider may do
/// work before its first `.await`). `operation` names the call in `Closed`
/// and `Panicked` errors.
pub fn export<'a, C, T, U, M, F>(
    context: C,
    operation: &'static str,
    make: M,
    map: F,
) -> FfiFut<'a, U>
where
    C: Deref<Target = CallContext> + Send + Unpin + 'a,
    T: Send + 'a,
    U: 'a,
    M: FnOnce() -> BoxFuture<'a, Result<T>>,
    F: FnOnce(T) -> U + Send + Unpin + 'a,
{
    let future = {
        let _entered = context.enter();
        catch(context.side(), operation, make)
            .unwrap_or_else(|err| Box::pin(std::future::ready(Err(err))))
    };
    BorrowingFfiFuture::new(Exported {
        context,
        operation,
        future: Some(future),
        map: Some(map),
        parked: None,
    })
}

/// An FFI future over `future` (of this crate's own glue, not plugin code),
/// with a panic still reported as a `Panicked` error rather than crossing
/// the boundary as async-ffi's `Panicked` poll (which the other side would
/// re-raise).
pub fn guarded_ffi<T: Send + 'static>(
    id: Arc<str>,
    operation: &'static str,
    future: impl Future<Output = FfiResult<T>> + Send + 'static,
) -> async_ffi::FfiFuture<FfiResult<T>> {
    use async_ffi::FutureExt as _;
    use futures::FutureExt as _;
    async move {
        match std::panic::AssertUnwindSafe(future).catch_unwind().await {
            Ok(result) => result,
            Err(payload) => fail(crate::ffi::panic::panicked(
                crate::ffi::panic::Side::Instance(&id),
                operation,
                payload,
            )),
        }
    }
    .into_ffi()
}

/// Awaits an imported FFI future and lifts its result.
pub async fn import<T, U: From<T>>(future: FfiFut<'_, T>) -> Result<U> {
    lift(future.await)
}

struct Exported<'a, C: Deref<Target = CallContext>, T, F> {
    context: C,
    operation: &'static str,
    /// `None` once the output was produced (or the call failed).
    future: Option<BoxFuture<'a, Result<T>>>,
    map: Option<F>,
    /// The registration that lets a close wake this call.
    parked: Option<u64>,
}

impl<C, T, U, F> Future for Exported<'_, C, T, F>
where
    C: Deref<Target = CallContext> + Unpin,
    F: FnOnce(T) -> U + Unpin,
{
    type Output = FfiResult<U>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<FfiResult<U>> {
        let this = self.get_mut();
        let context: &CallContext = &this.context;
        let (Some(future), Some(_)) = (this.future.as_mut(), this.map.as_ref()) else {
            // Polled after completion: report it rather than panic across
            // the boundary.
            return Poll::Ready(fail(Error::closed(format!(
                "{}: polled after completion",
                this.operation
            ))));
        };
        let entered = context.enter();
        let output = if context.is_closed() {
            Err(context.closed_error(this.operation))
        } else {
            match catch(context.side(), this.operation, || future.as_mut().poll(cx)) {
                Ok(Poll::Pending) => {
                    context.park(&mut this.parked, cx.waker());
                    return Poll::Pending;
                }
                Ok(Poll::Ready(result)) => result,
                Err(panicked) => Err(panicked),
            }
        };
        context.unpark(&mut this.parked);
        // Done: release the plain future (and whatever it borrows) now,
        // inside the exporting side's context.
        if let Some(done) = this.future.take() {
            drop_quietly(done);
        }
        let map = this.map.take();
        let output = match (output, map) {
            (Ok(value), Some(map)) => catch(context.side(), this.operation, || map(value)),
            (Ok(_), None) => Err(Error::closed(format!(
                "{}: polled after completion",
                this.operation
            ))),
            (Err(err), map) => {
                drop_quietly(map);
                Err(err)
            }
        };
        drop(entered);
        Poll::Ready(match output {
            Ok(value) => RResult::ROk(value),
            Err(err) => fail(err),
        })
    }
}

fn fail<U>(err: Error) -> FfiResult<U> {
    RResult::RErr(err.into())
}

impl<C: Deref<Target = CallContext>, T, F> Drop for Exported<'_, C, T, F> {
    /// Cancellation: the plain future is dropped inside the exporting
    /// side's context, under the panic guard.
    fn drop(&mut self) {
        self.context.unpark(&mut self.parked);
        if let Some(future) = self.future.take() {
            let _entered = self.context.enter();
            drop_quietly(future);
        }
        if let Some(map) = self.map.take() {
            drop_quietly(map);
        }
    }
}

/// [`export`] for a call on an exported object: `make` receives the plain
/// object, the context is the one the object is bound to.
pub fn export_call<'a, S, T, U, M, F>(
    object: &'a Bound<Arc<S>>,
    operation: &'static str,
    make: M,
    map: F,
) -> FfiFut<'a, U>
where
    S: ?Sized + 'a,
    T: Send + 'a,
    U: 'a,
    M: FnOnce(&'a S) -> BoxFuture<'a, Result<T>>,
    F: FnOnce(T) -> U + Send + Unpin + 'a,
{
    let target: &'a S = object;
    export(&**object.context(), operation, move || make(target), map)
}
