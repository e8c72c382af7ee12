//! The panic guard: no unwind ever crosses the boundary.
//!
//! Every `extern` entry, every poll of an exported future or stream and
//! every drop of plugin-owned state runs inside [`catch`] (or
//! [`drop_quietly`]); a caught panic becomes an [`ErrorKind::Panicked`]
//! error naming the operation and carrying the panic message, and the
//! process keeps running.

use std::any::Any;
use std::panic::{AssertUnwindSafe, catch_unwind};

use crate::error::{Error, ErrorKind, Result};

/// Runs `f`, turning a panic into a `Panicked` error for `operation`.
///
/// Unwind safety is asserted: after a panic the state the closure touched
/// is not used again by the guard (the future or stream is dropped).
pub fn catch<T>(operation: &str, f: impl FnOnce() -> T) -> Result<T> {
    catch_unwind(AssertUnwindSafe(f)).map_err(|payload| panicked(operation, payload))
}

/// The error for a caught panic. The payload is dropped under its own guard
/// because a payload's destructor may itself panic.
pub fn panicked(operation: &str, payload: Box<dyn Any + Send>) -> Error {
    let message = panic_message(payload.as_ref());
    drop_quietly(payload);
    Error::new(
        ErrorKind::Panicked,
        format!("{operation}: the plugin panicked: {message}"),
    )
}

/// Drops `value`, swallowing a panic from its destructor (there is no caller
/// to report it to; the panic hook has already printed it).
pub fn drop_quietly<T>(value: T) {
    if let Err(payload) = catch_unwind(AssertUnwindSafe(move || drop(value))) {
        // A payload whose destructor panics again is leaked rather than risk
        // unwinding out of here.
        std::mem::forget(payload);
    }
}

/// The text of a panic payload (`panic!("…")` produces `&str` or `String`).
fn panic_message(payload: &(dyn Any + Send)) -> String {
    if let Some(text) = payload.downcast_ref::<&str>() {
        (*text).to_owned()
    } else if let Some(text) = payload.downcast_ref::<String>() {
        text.clone()
    } else {
        "non-string panic payload".to_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_panic_becomes_a_panicked_error_with_its_message() {
        let err = catch("stat", || -> u32 { panic!("boom {}", 7) }).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Panicked);
        assert_eq!(err.message(), "stat: the plugin panicked: boom 7");
        assert_eq!(catch("stat", || 5).unwrap(), 5);
    }

    #[test]
    fn a_panicking_destructor_is_contained() {
        struct Bomb;
        impl Drop for Bomb {
            fn drop(&mut self) {
                panic!("drop bomb");
            }
        }
        drop_quietly(Bomb);
    }
}
