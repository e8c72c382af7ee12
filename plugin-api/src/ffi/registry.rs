//! Recognising our own proxies, so that a proxy handed on is unwrapped.
//!
//! When a side passes on an object it received over FFI (the host passing
//! plugin A's `fs` to plugin B, a decorator returning the stream of the
//! provider it wraps), the FFI object underneath must travel, not a new
//! export wrapped around the proxy: otherwise every call would hop through
//! the middle side and its runtime. Plain trait objects (`Arc<dyn
//! FsProvider>`, `Pin<Box<dyn Stream>>` …) cannot be downcast, so every proxy
//! registers its address (with its type) while it lives; the exporting code
//! asks the registry whether a trait object's data pointer is a live proxy of
//! the expected type before wrapping it.
//!
//! Soundness: a proxy registers after it has been placed in its final heap
//! allocation (`Arc` or `Box`) and unregisters in `Drop`, before that
//! allocation is freed. A caller holding a live trait object whose data
//! pointer is registered for type `P` therefore holds a `P`: no other live
//! object can share a heap address with it (proxies are never zero-sized).

use std::any::TypeId;
use std::collections::HashSet;
use std::sync::{Arc, Mutex, OnceLock, PoisonError};

fn live() -> &'static Mutex<HashSet<(TypeId, usize)>> {
    static LIVE: OnceLock<Mutex<HashSet<(TypeId, usize)>>> = OnceLock::new();
    LIVE.get_or_init(Default::default)
}

fn with_live<R>(f: impl FnOnce(&mut HashSet<(TypeId, usize)>) -> R) -> R {
    f(&mut live().lock().unwrap_or_else(PoisonError::into_inner))
}

/// Records that a `P` lives at `address` (its final heap location).
pub fn register<P: 'static>(address: *const P) {
    const { assert!(size_of::<P>() > 0, "proxies must not be zero-sized") };
    with_live(|live| live.insert((TypeId::of::<P>(), address as usize)));
}

/// Forgets the `P` at `address`; called from `P`'s `Drop`.
pub fn unregister<P: 'static>(address: *const P) {
    with_live(|live| live.remove(&(TypeId::of::<P>(), address as usize)));
}

/// Whether a live `P` is registered at `address`.
pub fn is_live<P: 'static>(address: *const ()) -> bool {
    with_live(|live| live.contains(&(TypeId::of::<P>(), address as usize)))
}

/// The live `P` that `object` points at, if it is one.
pub fn proxy_of<P: 'static, T: ?Sized>(object: &Arc<T>) -> Option<&P> {
    let address = Arc::as_ptr(object).cast::<()>();
    // SAFETY: a registered address holds a live `P` (module docs); `object`
    // keeps it alive for the returned borrow.
    is_live::<P>(address).then(|| unsafe { &*address.cast::<P>() })
}

/// `object` as the live `P` it is, or `object` back if it is not one.
pub fn take_proxy<P: 'static, T: ?Sized>(object: Box<T>) -> Result<Box<P>, Box<T>> {
    let address = (&raw const *object).cast::<()>();
    if is_live::<P>(address) {
        // SAFETY: a registered address holds a live `P` in its own box
        // (module docs); ownership of that box moves to the result.
        Ok(unsafe { Box::from_raw(Box::into_raw(object).cast::<P>()) })
    } else {
        Err(object)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Probe(#[allow(dead_code, reason = "gives the probe a size; never read")] u8);

    #[test]
    fn registration_is_per_type_and_address() {
        let boxed = Box::new(Probe(1));
        let address: *const Probe = &*boxed;
        assert!(!is_live::<Probe>(address.cast()));
        register(address);
        assert!(is_live::<Probe>(address.cast()));
        assert!(!is_live::<u64>(address.cast()));
        unregister(address);
        assert!(!is_live::<Probe>(address.cast()));
    }
}
