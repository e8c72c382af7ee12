//! The tracing bridge's boundary types: a host-provided sink that plugins
//! forward their `tracing` events to.
//!
//! Protocol: a plugin's forwarding subscriber registers each event callsite
//! it meets with the sink ([`FfiLogSink::register_callsite`]) and caches the
//! host's answer — the host's interest in that callsite, judged by the host's
//! own filter (so one `RUST_LOG` controls plugins too) — together with the
//! id the host assigned. Events of enabled callsites then cross as the id,
//! the emitting plugin instance and the field values, formatted on the
//! plugin side.

use abi_stable::StableAbi;
use abi_stable::sabi_trait;
use abi_stable::std_types::{RArc, ROption, RStr, RString, RVec};

/// A level as it crosses: 1 = ERROR … 5 = TRACE (0 = off, for maxima).
pub type LevelCode = u8;

/// The level code of `level`.
pub fn level_code(level: tracing::Level) -> LevelCode {
    match level {
        tracing::Level::ERROR => 1,
        tracing::Level::WARN => 2,
        tracing::Level::INFO => 3,
        tracing::Level::DEBUG => 4,
        tracing::Level::TRACE => 5,
    }
}

/// The level of a code (codes above 5 are TRACE, 0 is never a level).
pub fn level_of(code: LevelCode) -> tracing::Level {
    match code {
        0 | 1 => tracing::Level::ERROR,
        2 => tracing::Level::WARN,
        3 => tracing::Level::INFO,
        4 => tracing::Level::DEBUG,
        _ => tracing::Level::TRACE,
    }
}

/// The code of a level filter (`OFF` = 0).
pub fn filter_code(filter: tracing::level_filters::LevelFilter) -> LevelCode {
    filter.into_level().map_or(0, level_code)
}

/// The level filter of a code.
pub fn filter_of(code: LevelCode) -> tracing::level_filters::LevelFilter {
    if code == 0 {
        tracing::level_filters::LevelFilter::OFF
    } else {
        level_of(code).into()
    }
}

/// A plugin event callsite, described for the host.
#[repr(C)]
#[derive(StableAbi, Debug, Clone, PartialEq, Eq, Hash)]
pub struct FfiCallsite {
    pub level: LevelCode,
    pub name: RString,
    pub target: RString,
    pub module_path: ROption<RString>,
    pub file: ROption<RString>,
    pub line: ROption<u32>,
    /// Field names in the callsite's order (`message` first when present).
    pub fields: RVec<RString>,
}

/// The host's answer to a registration.
#[repr(C)]
#[derive(StableAbi, Debug, Clone, Copy, PartialEq, Eq)]
pub struct FfiInterest {
    /// The id events of this callsite are sent with.
    pub id: u64,
    /// 0 = never, 1 = sometimes (send; the host filters), 2 = always.
    pub interest: u8,
}

/// One event: its callsite, the emitting instance and one value per field
/// (absent fields are `None`), each formatted with `Debug`.
#[repr(C)]
#[derive(StableAbi, Debug)]
pub struct FfiLogEvent<'a> {
    pub callsite: u64,
    pub instance: RStr<'a>,
    pub values: RVec<ROption<RString>>,
}

/// The host's log sink, installed once per loaded library.
#[sabi_trait]
pub trait FfiLogSink: Send + Sync {
    /// The most verbose level the host may want (a hint; per-callsite
    /// interest decides).
    fn max_level(&self) -> LevelCode;

    /// Registers a callsite; called once per callsite per interest rebuild.
    fn register_callsite(&self, callsite: FfiCallsite) -> FfiInterest;

    /// Delivers an event of a registered callsite to the host's `tracing`.
    #[sabi(last_prefix_field)]
    fn event(&self, event: FfiLogEvent<'_>);
}

/// The sink as it crosses the ABI.
pub type FfiSink = FfiLogSink_TO<'static, RArc<()>>;
