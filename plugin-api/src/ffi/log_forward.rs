//! The plugin side of the tracing bridge.
//!
//! Each cdylib links its own `tracing`, so events a plugin emits reach no
//! subscriber of the host's. When the host loads a library it hands over
//! its sink ([`install`]); the library then installs (once) a global
//! subscriber that asks the host, per callsite, whether it is interested
//! (the host's own filter decides, so `RUST_LOG` governs plugins too) and
//! forwards the events of interesting callsites, each labelled with the
//! plugin instance that emitted it.
//!
//! The instance label is thread-local: a plugin runtime's threads carry
//! their instance id for life, and a poll of an exported future or stream
//! on a foreign thread carries it for the duration of the poll
//! ([`scope`]). Spans are not forwarded (their callsites are disabled);
//! forwarded events appear inside whatever span the host thread is in.

use std::cell::RefCell;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};
use std::sync::{Arc, Once, OnceLock, PoisonError, RwLock};

use abi_stable::std_types::{ROption, RString, RVec};
use tracing_core::field::{Field, Visit};
use tracing_core::span::{Attributes, Id, Record};
use tracing_core::subscriber::{Interest, Subscriber};
use tracing_core::{Event, LevelFilter, Metadata};

use crate::ffi::log::{FfiCallsite, FfiInterest, FfiLogEvent, FfiSink, filter_of, level_code};

/// Set once a sink is installed in this binary; until then scopes cost
/// nothing (the host binary, which never installs one, pays nothing).
static ACTIVE: AtomicBool = AtomicBool::new(false);

thread_local! {
    static INSTANCE: RefCell<Option<Arc<str>>> = const { RefCell::new(None) };
}

struct Forwarder {
    sink: RwLock<Option<FfiSink>>,
    max_level: AtomicU8,
    /// Host answers by callsite (`&'static Metadata` address).
    callsites: RwLock<HashMap<usize, FfiInterest>>,
    /// The label of events emitted outside any instance (the library name).
    library: RwLock<Arc<str>>,
}

fn forwarder() -> &'static Forwarder {
    static FORWARDER: OnceLock<Forwarder> = OnceLock::new();
    FORWARDER.get_or_init(|| Forwarder {
        sink: RwLock::new(None),
        max_level: AtomicU8::new(0),
        callsites: RwLock::new(HashMap::new()),
        library: RwLock::new(Arc::from("plugin")),
    })
}

/// Installs (or replaces) the host's sink for this library and makes the
/// forwarding subscriber this library's global default. Returns `false` if
/// the library had already installed a global subscriber of its own (its
/// events then stay with it).
pub fn install(sink: FfiSink, library: &str) -> bool {
    let state = forwarder();
    state.max_level.store(sink.max_level(), Ordering::Release);
    *state
        .library
        .write()
        .unwrap_or_else(PoisonError::into_inner) = Arc::from(library);
    *state.sink.write().unwrap_or_else(PoisonError::into_inner) = Some(sink);
    state
        .callsites
        .write()
        .unwrap_or_else(PoisonError::into_inner)
        .clear();
    ACTIVE.store(true, Ordering::Release);
    static SUBSCRIBER: Once = Once::new();
    static OURS: AtomicBool = AtomicBool::new(false);
    SUBSCRIBER.call_once(|| {
        let ours = tracing_core::dispatcher::set_global_default(tracing_core::Dispatch::new(
            ForwardingSubscriber,
        ))
        .is_ok();
        OURS.store(ours, Ordering::Release);
    });
    // Callsites registered under the previous sink (or none) ask again.
    tracing_core::callsite::rebuild_interest_cache();
    OURS.load(Ordering::Acquire)
}

/// Labels this thread's events with `label` until the guard drops.
pub fn scope(label: &Arc<str>) -> InstanceScope {
    if !ACTIVE.load(Ordering::Relaxed) {
        return InstanceScope { previous: None };
    }
    let previous = INSTANCE
        .try_with(|current| current.replace(Some(label.clone())))
        .ok();
    InstanceScope { previous }
}

/// Labels every event of the current thread with `label` (for the threads
/// of an instance's runtime).
pub fn set_thread_instance(label: Arc<str>) {
    let _ = INSTANCE.try_with(|current| *current.borrow_mut() = Some(label));
}

/// Restores the previous label on drop.
pub struct InstanceScope {
    /// `None` when forwarding is inactive (nothing was changed).
    previous: Option<Option<Arc<str>>>,
}

impl Drop for InstanceScope {
    fn drop(&mut self) {
        if let Some(previous) = self.previous.take() {
            let _ = INSTANCE.try_with(|current| *current.borrow_mut() = previous);
        }
    }
}

struct ForwardingSubscriber;

fn key(metadata: &'static Metadata<'static>) -> usize {
    std::ptr::from_ref(metadata) as usize
}

fn answer(metadata: &Metadata<'_>) -> Option<FfiInterest> {
    let key = std::ptr::from_ref(metadata).cast::<()>() as usize;
    forwarder()
        .callsites
        .read()
        .unwrap_or_else(PoisonError::into_inner)
        .get(&key)
        .copied()
}

fn describe(metadata: &'static Metadata<'static>) -> FfiCallsite {
    FfiCallsite {
        level: level_code(*metadata.level()),
        name: metadata.name().into(),
        target: metadata.target().into(),
        module_path: metadata.module_path().map(RString::from).into(),
        file: metadata.file().map(RString::from).into(),
        line: metadata.line().into(),
        fields: metadata
            .fields()
            .iter()
            .map(|field| RString::from(field.name()))
            .collect(),
    }
}

impl Subscriber for ForwardingSubscriber {
    fn register_callsite(&self, metadata: &'static Metadata<'static>) -> Interest {
        if !metadata.is_event() {
            return Interest::never();
        }
        let state = forwarder();
        let answer = {
            let sink = state.sink.read().unwrap_or_else(PoisonError::into_inner);
            let Some(sink) = sink.as_ref() else {
                return Interest::never();
            };
            sink.register_callsite(describe(metadata))
        };
        state
            .callsites
            .write()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(key(metadata), answer);
        match answer.interest {
            0 => Interest::never(),
            1 => Interest::sometimes(),
            _ => Interest::always(),
        }
    }

    fn max_level_hint(&self) -> Option<LevelFilter> {
        Some(filter_of(forwarder().max_level.load(Ordering::Acquire)))
    }

    fn enabled(&self, metadata: &Metadata<'_>) -> bool {
        metadata.is_event() && answer(metadata).is_some_and(|answer| answer.interest > 0)
    }

    fn new_span(&self, _: &Attributes<'_>) -> Id {
        // Span callsites are never enabled, so this is not reached; any
        // non-zero id is valid for a subscriber that tracks no spans.
        Id::from_u64(1)
    }

    fn record(&self, _: &Id, _: &Record<'_>) {}

    fn record_follows_from(&self, _: &Id, _: &Id) {}

    fn event(&self, event: &Event<'_>) {
        let metadata = event.metadata();
        let Some(answer) = answer(metadata) else {
            return;
        };
        let mut values = Values(vec![None; metadata.fields().len()]);
        event.record(&mut values);
        let state = forwarder();
        let instance = INSTANCE
            .try_with(|current| current.borrow().clone())
            .ok()
            .flatten()
            .unwrap_or_else(|| {
                state
                    .library
                    .read()
                    .unwrap_or_else(PoisonError::into_inner)
                    .clone()
            });
        let sink = state.sink.read().unwrap_or_else(PoisonError::into_inner);
        if let Some(sink) = sink.as_ref() {
            sink.event(FfiLogEvent {
                callsite: answer.id,
                instance: instance.as_ref().into(),
                values: values
                    .0
                    .into_iter()
                    .map(|value| ROption::from(value.map(RString::from)))
                    .collect::<RVec<_>>(),
            });
        }
    }

    fn enter(&self, _: &Id) {}

    fn exit(&self, _: &Id) {}
}

/// Field values by field index, each as its `Debug` text (a message and
/// `%value` fields print as their `Display`, like a local subscriber).
struct Values(Vec<Option<String>>);

impl Visit for Values {
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        if let Some(slot) = self.0.get_mut(field.index()) {
            *slot = Some(format!("{value:?}"));
        }
    }
}
