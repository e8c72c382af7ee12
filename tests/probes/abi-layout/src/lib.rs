//! Test fixture: what a plugin built against another layout of the plugin
//! API looks like to a host — the same entry symbols, the same API version,
//! a root module of the same name and crate version, but different types.
//! The host must refuse it as incompatible, naming the layout.

#![allow(
    non_local_definitions,
    reason = "abi_stable 0.11's derive expands impls inside a const"
)]

use abi_stable::StableAbi;
use abi_stable::library::{CheckTypeLayout, LibHeader, RootModule, RootModuleResult};
use abi_stable::prefix_type::PrefixTypeTrait;
use abi_stable::sabi_types::VersionStrings;
use abi_stable::std_types::RString;

/// The root module as a different plugin-API layout declares it.
#[repr(C)]
#[derive(StableAbi)]
#[sabi(kind(Prefix(prefix_ref = PluginModuleRef)))]
#[sabi(missing_field(panic))]
pub struct PluginModule {
    pub descriptor: extern "C" fn() -> RString,
    #[sabi(last_prefix_field)]
    pub create: extern "C" fn(u64) -> u64,
}

impl RootModule for PluginModuleRef {
    abi_stable::declare_root_module_statics! {PluginModuleRef}

    const BASE_NAME: &'static str = "dsh_plugin";
    const NAME: &'static str = "dsh plugin";
    const VERSION_STRINGS: VersionStrings = abi_stable::package_version_strings!();
}

extern "C" fn descriptor() -> RString {
    "dsh-probe-abi-layout".into()
}

extern "C" fn create(value: u64) -> u64 {
    value
}

fn module() -> PluginModuleRef {
    PluginModule { descriptor, create }.leak_into_prefix()
}

extern "C" fn loader() -> RootModuleResult {
    abi_stable::library::__call_root_module_loader(module)
}

/// The plugin API version the real plugins declare.
#[unsafe(export_name = "dsh_plugin_api_version__dsh_probe_abi_layout")]
pub static API_VERSION: u32 = dsh_plugin_api::API_VERSION;

/// The header, as `export_plugin!` would emit it for this module type.
#[unsafe(export_name = "dsh_plugin_header__dsh_probe_abi_layout")]
pub static HEADER: LibHeader =
    // SAFETY: `loader` returns the prefix reference of this crate's
    // `PluginModule`, the module type the header is declared with.
    unsafe { LibHeader::from_constructor::<PluginModuleRef>(loader, CheckTypeLayout::Yes) };
