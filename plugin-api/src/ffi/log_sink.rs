//! The host side of the tracing bridge: re-emitting plugin events into the
//! host's `tracing`.
//!
//! Every plugin callsite becomes a host callsite of its own, with the
//! plugin's level, target, name, file, line and fields plus `dsh.plugin`
//! (the emitting instance id), registered with the host's callsite registry.
//! The host's subscriber therefore filters and formats plugin events exactly
//! like its own: `RUST_LOG=dsh_fs_local=debug` enables that plugin's debug
//! events. Host callsites are leaked on purpose: there is one per distinct
//! plugin callsite, and libraries are never unloaded either.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::{Mutex, OnceLock, PoisonError, RwLock};

use abi_stable::sabi_trait::TD_Opaque;
use abi_stable::std_types::RArc;
use tracing_core::callsite::Callsite;
use tracing_core::field::{FieldSet, Value};
use tracing_core::metadata::Kind;
use tracing_core::subscriber::Interest;
use tracing_core::{Event, LevelFilter, Metadata};

use crate::ffi::log::{
    FfiCallsite, FfiInterest, FfiLogEvent, FfiLogSink, FfiLogSink_TO, FfiSink, LevelCode,
    filter_code, level_of,
};
use crate::ffi::panic::{Side, catch};

/// The field carrying the emitting plugin instance's id.
pub const PLUGIN_FIELD: &str = "dsh.plugin";

/// The sink handed to every library this host loads.
pub fn host_sink() -> FfiSink {
    FfiLogSink_TO::from_ptr(RArc::new(HostLogSink), TD_Opaque)
}

/// The host's current maximum level, as plugins receive it.
pub fn host_max_level() -> LevelCode {
    filter_code(LevelFilter::current())
}

struct HostLogSink;

impl FfiLogSink for HostLogSink {
    fn max_level(&self) -> LevelCode {
        host_max_level()
    }

    fn register_callsite(&self, callsite: FfiCallsite) -> FfiInterest {
        catch(Side::Host, "register_callsite", || register(callsite)).unwrap_or(FfiInterest {
            id: u64::MAX,
            interest: 0,
        })
    }

    fn event(&self, event: FfiLogEvent<'_>) {
        let _ = catch(Side::Host, "log event", || emit(&event));
    }
}

struct Registry {
    by_description: HashMap<FfiCallsite, u64>,
}

fn registry() -> &'static Mutex<Registry> {
    static REGISTRY: OnceLock<Mutex<Registry>> = OnceLock::new();
    REGISTRY.get_or_init(|| {
        Mutex::new(Registry {
            by_description: HashMap::new(),
        })
    })
}

/// Callsites by id, read on every event.
fn callsites() -> &'static RwLock<Vec<&'static PluginCallsite>> {
    static CALLSITES: OnceLock<RwLock<Vec<&'static PluginCallsite>>> = OnceLock::new();
    CALLSITES.get_or_init(|| RwLock::new(Vec::new()))
}

fn register(description: FfiCallsite) -> FfiInterest {
    let mut registry = registry().lock().unwrap_or_else(PoisonError::into_inner);
    let id = match registry.by_description.get(&description) {
        Some(id) => *id,
        None => {
            let callsite = PluginCallsite::leak(&description);
            let mut all = callsites().write().unwrap_or_else(PoisonError::into_inner);
            let id = all.len() as u64;
            all.push(callsite);
            drop(all);
            registry.by_description.insert(description, id);
            // Registering computes the host's interest (set_interest).
            tracing_core::callsite::register(callsite);
            id
        }
    };
    let callsite = callsites().read().unwrap_or_else(PoisonError::into_inner)[id as usize];
    FfiInterest {
        id,
        interest: callsite.interest.load(Ordering::Acquire),
    }
}

fn emit(event: &FfiLogEvent<'_>) {
    let Some(callsite) = usize::try_from(event.callsite).ok().and_then(|id| {
        callsites()
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .get(id)
            .copied()
    }) else {
        return;
    };
    if callsite.interest.load(Ordering::Acquire) == 0 {
        return;
    }
    let metadata = callsite.metadata();
    let texts: Vec<Option<tracing_core::field::DisplayValue<&str>>> = event
        .values
        .iter()
        .map(|value| {
            value
                .as_ref()
                .map(|text| tracing_core::field::display(text.as_str()))
                .into_option()
        })
        .chain(std::iter::once(Some(tracing_core::field::display(
            event.instance.as_str(),
        ))))
        .collect();
    let values: Vec<Option<&dyn Value>> = texts
        .iter()
        .map(|text| text.as_ref().map(|text| text as &dyn Value))
        .collect();
    if values.len() != metadata.fields().len() {
        // A malformed event (wrong number of values) is dropped rather
        // than misattributed.
        return;
    }
    let values = metadata.fields().value_set_all(&values);
    tracing_core::dispatcher::get_default(|dispatch| {
        if dispatch.enabled(metadata) {
            dispatch.event(&Event::new(metadata, &values));
        }
    });
}

/// A host callsite standing for one plugin callsite.
struct PluginCallsite {
    metadata: OnceLock<Metadata<'static>>,
    interest: AtomicU8,
}

impl PluginCallsite {
    fn leak(description: &FfiCallsite) -> &'static PluginCallsite {
        let callsite: &'static PluginCallsite = Box::leak(Box::new(PluginCallsite {
            metadata: OnceLock::new(),
            interest: AtomicU8::new(0),
        }));
        let leak = |text: &str| -> &'static str { Box::leak(text.to_owned().into_boxed_str()) };
        let fields: Vec<&'static str> = description
            .fields
            .iter()
            .map(|name| leak(name.as_str()))
            .chain(std::iter::once(PLUGIN_FIELD))
            .collect();
        let fields: &'static [&'static str] = Box::leak(fields.into_boxed_slice());
        let metadata = Metadata::new(
            leak(description.name.as_str()),
            leak(description.target.as_str()),
            level_of(description.level),
            description
                .file
                .as_ref()
                .map(|file| leak(file.as_str()))
                .into_option(),
            description.line.into_option(),
            description
                .module_path
                .as_ref()
                .map(|path| leak(path.as_str()))
                .into_option(),
            FieldSet::new(fields, tracing_core::identify_callsite!(callsite)),
            Kind::EVENT,
        );
        let _ = callsite.metadata.set(metadata);
        callsite
    }
}

impl Callsite for PluginCallsite {
    fn set_interest(&self, interest: Interest) {
        let code = if interest.is_never() {
            0
        } else if interest.is_always() {
            2
        } else {
            1
        };
        self.interest.store(code, Ordering::Release);
    }

    fn metadata(&self) -> &Metadata<'_> {
        self.metadata
            .get()
            .expect("a plugin callsite's metadata is set before it is registered")
    }
}
