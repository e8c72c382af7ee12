//! The root module every plugin library exports: a prefix type (fields may
//! be appended in later versions) holding the descriptor, the log-sink
//! installer and the factory.

use abi_stable::StableAbi;
use abi_stable::library::RootModule;
use abi_stable::sabi_types::VersionStrings;
use abi_stable::std_types::{RStr, RString, RVec};
use async_ffi::FfiFuture;

use crate::ffi::error::FfiResult;
use crate::ffi::instance::FfiInstanceObject;
use crate::ffi::log::FfiSink;
use crate::ffi::service::{FfiService, FfiServiceKind};

/// A plugin's descriptor as it crosses: service kinds as stable codes with
/// an owner kind's name ([`FfiServiceKind`]), so an unknown kind is
/// reported, not misread.
#[repr(C)]
#[derive(StableAbi, Debug)]
pub struct FfiDescriptor {
    pub name: RString,
    pub version: RString,
    pub provides: RVec<FfiServiceKind>,
    pub inject: RVec<FfiServiceKind>,
}

/// What the host sends to create an instance.
#[repr(C)]
#[derive(StableAbi)]
pub struct FfiCreateRequest {
    pub id: RString,
    /// The entry's config subtree as JSON text.
    pub config: RString,
    pub services: RVec<FfiService>,
}

/// One problem in a config ([`crate::FieldError`] as it crosses).
#[repr(C)]
#[derive(StableAbi, Debug)]
pub struct FfiFieldError {
    pub path: RString,
    pub message: RString,
}

/// The root module.
#[repr(C)]
#[derive(StableAbi)]
#[sabi(kind(Prefix(prefix_ref = PluginModuleRef)))]
#[sabi(missing_field(panic))]
pub struct PluginModule {
    /// The static descriptor (read before anything is created).
    pub descriptor: extern "C" fn() -> FfiResult<FfiDescriptor>,
    /// Installs the host's log sink for the whole library; `true` if the
    /// library's forwarding subscriber is active.
    pub install_log_sink: extern "C" fn(FfiSink) -> FfiResult<bool>,
    /// Creates an instance on a runtime of its own.
    pub create: extern "C" fn(FfiCreateRequest) -> FfiFuture<FfiResult<FfiInstanceObject>>,
    /// Validates an entry's config (JSON text) without creating anything:
    /// every field error (empty: valid). Runs on the caller's thread.
    #[sabi(last_prefix_field)]
    pub validate_config: extern "C" fn(RStr<'_>) -> FfiResult<RVec<FfiFieldError>>,
}

impl RootModule for PluginModuleRef {
    abi_stable::declare_root_module_statics! {PluginModuleRef}

    const BASE_NAME: &'static str = "dsh_plugin";
    const NAME: &'static str = "dsh plugin";
    const VERSION_STRINGS: VersionStrings = abi_stable::package_version_strings!();
}
