//! Test fixture: a plugin library built against a newer plugin API version.
//! The version is the first thing a host checks, so the declaration is all
//! this library needs; the host must refuse it before reading anything
//! else, naming both versions.

/// One more than the API version of this build.
#[unsafe(export_name = "dsh_plugin_api_version__dsh_probe_api_version")]
pub static API_VERSION: u32 = dsh_plugin_api::API_VERSION + 1;
