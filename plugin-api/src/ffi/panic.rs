//! The panic guard: no unwind ever crosses the boundary.
//!
//! Every `extern` entry, every poll of an exported future or stream and
//! every drop of plugin-owned state runs inside [`catch`] (or
//! [`drop_quietly`]); a caught panic becomes an [`ErrorKind::Panicked`]
//! error naming the operation, the side that panicked (the plugin instance
//! by id — with stacked decorators the operation alone does not say whose
//! code failed) and the panic message, and the process keeps running.
//!
//! The message reaches people through that error and through `tracing`:
//! a plugin library replaces its (own copy of std's) panic hook when the
//! host loads it ([`install_hook`]), so no raw `thread '…' panicked` line
//! is printed to stderr beside the host's log.

use std::any::Any;
use std::panic::{AssertUnwindSafe, catch_unwind};

use crate::error::{Error, ErrorKind, Result};

/// Whose code a guard runs, as panic errors name it.
#[derive(Debug, Clone, Copy)]
pub enum Side<'a> {
    /// A plugin instance, by its manifest id (also the error's subject).
    Instance(&'a str),
    /// A plugin library outside any instance (descriptor, log sink), by
    /// package name.
    Library(&'a str),
    /// The host's side of the boundary (objects it exports to plugins).
    Host,
}

/// Runs `f`, turning a panic into a `Panicked` error for `operation` on
/// `side`.
///
/// Unwind safety is asserted: after a panic the state the closure touched
/// is not used again by the guard (the future or stream is dropped).
pub fn catch<T>(side: Side<'_>, operation: &str, f: impl FnOnce() -> T) -> Result<T> {
    catch_unwind(AssertUnwindSafe(f)).map_err(|payload| panicked(side, operation, payload))
}

/// The error for a caught panic: `stat: plugin "ro" panicked: boom`, with
/// the instance id as subject. The payload is dropped under its own guard
/// because a payload's destructor may itself panic.
pub fn panicked(side: Side<'_>, operation: &str, payload: Box<dyn Any + Send>) -> Error {
    let message = panic_message(payload.as_ref());
    drop_quietly(payload);
    let error = |who: String| {
        Error::new(
            ErrorKind::Panicked,
            format!("{operation}: {who} panicked: {message}"),
        )
    };
    match side {
        Side::Instance(id) => error(format!("plugin {id:?}")).with_subject(id),
        Side::Library(name) => error(format!("plugin library {name}")),
        Side::Host => error("the host".to_owned()),
    }
}

/// Replaces this binary's panic hook with one that reports through
/// `tracing` (target `dsh_plugin_api::panic`, at `info`: the caller also
/// receives the `Panicked` error, docs/design.md §8), labelled like every
/// forwarded event with the instance whose thread panicked.
///
/// Only a plugin library calls this (when the host hands it its log sink):
/// each cdylib has its own copy of std and so its own hook, which sees
/// exactly the panics of the library's code; the host's hook, and that of a
/// program linking the plugin as an rlib, are left alone.
pub fn install_hook() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        std::panic::set_hook(Box::new(|info| {
            thread_local! {
                static REPORTING: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
            }
            // A panic while reporting one (inside the forwarding subscriber)
            // is not reported again: that would recurse.
            if REPORTING
                .try_with(|flag| flag.replace(true))
                .unwrap_or(true)
            {
                return;
            }
            let message = panic_message(info.payload());
            match info.location() {
                Some(at) => tracing::info!(
                    target: "dsh_plugin_api::panic",
                    location = %at,
                    "panicked: {message}"
                ),
                None => tracing::info!(target: "dsh_plugin_api::panic", "panicked: {message}"),
            }
            let _ = REPORTING.try_with(|flag| flag.set(false));
        }));
    });
}

/// Drops `value`, swallowing a panic from its destructor (there is no caller
/// to report it to; the panic hook has already reported it).
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
    fn a_panic_becomes_a_panicked_error_naming_the_side() {
        let err = catch(Side::Instance("ro"), "stat", || -> u32 {
            panic!("boom {}", 7)
        })
        .unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Panicked);
        assert_eq!(err.message(), "stat: plugin \"ro\" panicked: boom 7");
        assert_eq!(err.subject(), Some("ro"));
        let err = catch(Side::Library("dsh-x"), "descriptor", || panic!("no")).unwrap_err();
        assert_eq!(
            err.message(),
            "descriptor: plugin library dsh-x panicked: no"
        );
        let err = catch(Side::Host, "stat", || panic!("no")).unwrap_err();
        assert_eq!(err.message(), "stat: the host panicked: no");
        assert_eq!(catch(Side::Host, "stat", || 5).unwrap(), 5);
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
