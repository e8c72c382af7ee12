//! Loading plugin libraries and creating instances from them.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};

use abi_stable::library::{AbiHeaderRef, LibraryError, RawLibrary, RootModule};

use super::error::LoadError;
use super::instance::{CreateRequest, PluginInstance};
use crate::API_VERSION;
use crate::config::FieldError;
use crate::error::{Error, Result};
use crate::ffi::context::CallContext;
use crate::ffi::error::lift;
use crate::ffi::export::{API_VERSION_SYMBOL_PREFIX, HEADER_SYMBOL_PREFIX};
use crate::ffi::future::import;
use crate::ffi::instance::FfiInstanceObject;
use crate::ffi::log_sink::host_sink;
use crate::ffi::module::{FfiCreateRequest, FfiDescriptor, FfiFieldError, PluginModuleRef};
use crate::ffi::service::{FfiServiceKind, export_service, import_kind, import_service};
use crate::host::elf::exported_symbols_with_prefix;
use crate::plugin::ServiceKind;

/// A plugin's descriptor as read from its library.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LoadedDescriptor {
    /// Package name (`dsh-fs-local`).
    pub name: String,
    /// The plugin's own version.
    pub version: String,
    /// The plugin API version it was built against (equal to
    /// [`API_VERSION`] for every library that loads).
    pub api_version: u32,
    /// Services every instance provides.
    pub provides: Vec<ServiceKind>,
    /// Services every instance requires at create.
    pub inject: Vec<ServiceKind>,
}

/// A loaded plugin library. Cheap to clone; libraries are never unloaded.
///
/// # Library files
///
/// A plugin crate is `crate-type = ["cdylib", "rlib"]` with an explicit
/// `[lib] name` equal to the package name with underscores; the manifest
/// name maps to the file by one rule: an npm-style `@scope/` is dropped,
/// dashes become underscores, and the name is wrapped in `lib….so` —
/// `dsh-fs-local` → `libdsh_fs_local.so` (see [`library_file_name`]). The
/// file may be renamed or symlinked: the loader finds the plugin by its
/// exported symbols, not by the file name.
#[derive(Clone)]
pub struct PluginLibrary {
    inner: Arc<Library>,
}

struct Library {
    path: PathBuf,
    descriptor: LoadedDescriptor,
    module: PluginModuleRef,
}

impl std::fmt::Debug for PluginLibrary {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PluginLibrary")
            .field("path", &self.inner.path)
            .field("descriptor", &self.inner.descriptor)
            .finish()
    }
}

/// The library file name for a plugin's manifest (package) name: an
/// npm-style `@scope/` is dropped, dashes become underscores, and the name
/// is wrapped in `lib….so` — `dsh-fs-local` and `@acme/dsh-fs-local` are
/// both `libdsh_fs_local.so`.
pub fn library_file_name(name: &str) -> String {
    let name = match name
        .strip_prefix('@')
        .and_then(|scoped| scoped.split_once('/'))
    {
        Some((_scope, package)) => package,
        None => name,
    };
    format!(
        "{}{}{}",
        std::env::consts::DLL_PREFIX,
        name.replace('-', "_"),
        std::env::consts::DLL_SUFFIX
    )
}

/// Loaded libraries by canonical path, for [`refresh_log_filters`].
fn loaded() -> &'static Mutex<Vec<(PathBuf, PluginModuleRef)>> {
    static LOADED: Mutex<Vec<(PathBuf, PluginModuleRef)>> = Mutex::new(Vec::new());
    &LOADED
}

impl PluginLibrary {
    /// Loads the plugin library at `path`: finds its entry symbols, maps it
    /// (`dlopen`), checks the plugin API version and the layout of every
    /// ABI type, reads the descriptor and hands the library this host's
    /// log sink. Nothing is created. Loading the same file twice is allowed
    /// (both handles share one mapping). Blocking (file I/O, `dlopen`).
    pub fn load(path: &Path) -> std::result::Result<PluginLibrary, LoadError> {
        let open = |reason: String| LoadError::Open {
            path: path.to_owned(),
            reason,
        };
        let metadata = std::fs::metadata(path).map_err(|err| match err.kind() {
            std::io::ErrorKind::NotFound => open("no such file".to_owned()),
            _ => open(err.to_string()),
        })?;
        if metadata.is_dir() {
            return Err(open("it is a directory, not a library file".to_owned()));
        }
        let path = std::fs::canonicalize(path).map_err(|err| open(err.to_string()))?;
        let not_a_plugin = |reason: String| LoadError::NotAPlugin {
            path: path.clone(),
            reason,
        };
        let incompatible = |reason: String| LoadError::Incompatible {
            path: path.clone(),
            reason,
        };

        let crate_name = plugin_crate(&path).map_err(not_a_plugin)?;
        let raw = RawLibrary::load_at(&path).map_err(|err| LoadError::Open {
            path: path.clone(),
            reason: match err {
                LibraryError::OpenError { err, .. } => err.to_string(),
                other => other.to_string().trim().to_owned(),
            },
        })?;
        // Never unloaded: code of the library may have run (initialisers),
        // and abi_stable's rule is that loaded libraries stay.
        let raw: &'static RawLibrary = Box::leak(Box::new(raw));

        let version_symbol = format!("{API_VERSION_SYMBOL_PREFIX}{crate_name}\0");
        // SAFETY: the symbol is the `u32` static emitted by `export_plugin!`.
        let api_version = unsafe {
            let symbol = raw
                .get::<*const u32>(version_symbol.as_bytes())
                .map_err(|err| not_a_plugin(err.to_string().trim().to_owned()))?;
            (*symbol).read()
        };
        if api_version != API_VERSION {
            return Err(incompatible(format!(
                "built against dsh plugin API version {api_version}, this host speaks version \
                 {API_VERSION}; rebuild the plugin against a matching dsh-plugin-api"
            )));
        }

        let header_symbol = format!("{HEADER_SYMBOL_PREFIX}{crate_name}\0");
        // SAFETY: the symbol is the abi_stable `LibHeader` static emitted by
        // `export_plugin!`; `AbiHeaderRef` is a pointer to its leading
        // `AbiHeader`, which `upgrade` validates before use.
        let header = unsafe {
            *raw.get::<AbiHeaderRef>(header_symbol.as_bytes())
                .map_err(|err| not_a_plugin(err.to_string().trim().to_owned()))?
        };
        let header = header
            .upgrade()
            .map_err(|err| incompatible(describe(&err)))?;
        let name = header.root_mod_consts().name().as_str();
        if name != PluginModuleRef::NAME {
            return Err(not_a_plugin(format!(
                "its root module is `{name}`, not `{}`",
                PluginModuleRef::NAME
            )));
        }
        let module = header
            .init_root_module::<PluginModuleRef>()
            .map_err(|err| incompatible(describe(&err)))?;

        let descriptor = lift::<FfiDescriptor, FfiDescriptor>((module.descriptor())())
            .map_err(|err| not_a_plugin(format!("reading its descriptor failed: {err}")))
            .and_then(|descriptor| decode(descriptor, api_version).map_err(&incompatible))?;

        match lift::<bool, bool>((module.install_log_sink())(host_sink())) {
            Ok(true) => {}
            Ok(false) => tracing::warn!(
                target: "dsh_plugin_api",
                library = %path.display(),
                "the plugin installed a tracing subscriber of its own; its log records are not forwarded"
            ),
            Err(err) => tracing::warn!(
                target: "dsh_plugin_api",
                library = %path.display(),
                error = %err,
                "installing the log sink failed; the plugin's log records are not forwarded"
            ),
        }
        {
            let mut loaded = loaded().lock().unwrap_or_else(PoisonError::into_inner);
            if !loaded.iter().any(|(known, _)| *known == path) {
                loaded.push((path.clone(), module));
            }
        }

        Ok(PluginLibrary {
            inner: Arc::new(Library {
                path,
                descriptor,
                module,
            }),
        })
    }

    /// The canonical path of the library file.
    pub fn path(&self) -> &Path {
        &self.inner.path
    }

    /// The descriptor, read at load.
    pub fn descriptor(&self) -> &LoadedDescriptor {
        &self.inner.descriptor
    }

    /// Validates an entry's `config` against the plugin's config type
    /// without creating anything: every field error, each with its path
    /// (empty: valid). Runs the plugin's code on the caller's thread, under
    /// the panic guard; an `Err` means the check itself could not run.
    pub fn validate_config(&self, config: &serde_json::Value) -> Result<Vec<FieldError>> {
        let text = serde_json::to_string(config).map_err(|err| {
            Error::config(format!(
                "validate_config: the config cannot be encoded as JSON: {err}"
            ))
        })?;
        let errors = lift::<_, abi_stable::std_types::RVec<FfiFieldError>>((self
            .inner
            .module
            .validate_config())(
            text.as_str().into()
        ))?;
        Ok(errors
            .into_iter()
            .map(|error| FieldError::new(error.path.into_string(), error.message.into_string()))
            .collect())
    }

    /// Creates an instance: the plugin gets its own runtime, receives
    /// `request.services` (exactly the kinds its descriptor injects, each
    /// once, or creation fails with `Config`) and its config, and returns
    /// the services it provides as plain-trait proxies.
    ///
    /// Call from within the host's tokio runtime: services the host
    /// implements itself are exported with that runtime's handle, so their
    /// futures find their reactor when plugins poll them. Dropping the
    /// returned future stops waiting only: the plugin finishes creating on
    /// its own runtime and, finding nobody to hand the instance to,
    /// disposes it.
    pub async fn create(&self, request: CreateRequest) -> Result<PluginInstance> {
        let context = CallContext::host();
        let CreateRequest {
            id,
            config,
            services,
        } = request;
        let config = serde_json::to_string(&config).map_err(|err| {
            Error::config(format!(
                "create: the config cannot be encoded as JSON: {err}"
            ))
            .with_subject(id.clone())
        })?;
        let services = services
            .into_iter()
            .map(|service| export_service(service, &context))
            .collect();
        let create = self.inner.module.create();
        let object: FfiInstanceObject = import(create(FfiCreateRequest {
            id: id.as_str().into(),
            config: config.into(),
            services,
        }))
        .await?;
        let provided =
            lift::<_, abi_stable::std_types::RVec<_>>(object.services()).and_then(|provided| {
                provided
                    .into_iter()
                    .map(|service| import_service(service, &context))
                    .collect::<Result<Vec<_>>>()
            });
        match provided {
            Ok(services) => Ok(PluginInstance::new(id, services, object)),
            Err(err) => {
                // Created but unusable: dispose it before reporting.
                if let Err(dispose) = lift::<(), ()>(object.dispose().await) {
                    return Err(err.context(format!(
                        "(disposing the instance after the failure also failed: {dispose})"
                    )));
                }
                Err(err)
            }
        }
    }
}

/// Re-sends the host's log filter to every loaded library: call it after
/// installing or reconfiguring the host's `tracing` subscriber if plugin
/// libraries were loaded before (libraries loaded later pick it up at
/// load).
pub fn refresh_log_filters() {
    let modules = loaded()
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .clone();
    for (path, module) in modules {
        if let Err(err) = lift::<bool, bool>((module.install_log_sink())(host_sink())) {
            tracing::warn!(
                target: "dsh_plugin_api",
                library = %path.display(),
                error = %err,
                "re-installing the log sink failed"
            );
        }
    }
}

/// The crate name of the one plugin the library at `path` exports.
fn plugin_crate(path: &Path) -> std::result::Result<String, String> {
    let symbols = exported_symbols_with_prefix(path, API_VERSION_SYMBOL_PREFIX)?;
    let crates: Vec<String> = symbols
        .iter()
        .map(|symbol| symbol[API_VERSION_SYMBOL_PREFIX.len()..].to_owned())
        .filter(|name| !name.is_empty())
        .collect();
    match crates.as_slice() {
        [] => Err(format!(
            "it exports no dsh plugin entry (no `{API_VERSION_SYMBOL_PREFIX}*` symbol); a plugin \
             crate exports itself with `dsh_plugin_api::export_plugin!`"
        )),
        [one] => Ok(one.clone()),
        several => {
            // A plugin linking another plugin's rlib exports both; the one
            // named like the file is the library's own.
            let stem = path.file_stem().and_then(|stem| stem.to_str()).map(|stem| {
                stem.strip_prefix(std::env::consts::DLL_PREFIX)
                    .unwrap_or(stem)
            });
            stem.and_then(|stem| several.iter().find(|name| name.as_str() == stem))
                .cloned()
                .ok_or_else(|| {
                    format!(
                        "it exports several dsh plugin entries ({}) and its file name names none of them",
                        several.join(", ")
                    )
                })
        }
    }
}

fn decode(
    descriptor: FfiDescriptor,
    api_version: u32,
) -> std::result::Result<LoadedDescriptor, String> {
    let name = descriptor.name.into_string();
    let kinds = |kinds: &[FfiServiceKind], list: &str| {
        kinds
            .iter()
            .map(|kind| {
                import_kind(kind).map_err(|unknown| {
                    let known: Vec<&str> = ServiceKind::known().map(ServiceKind::name).collect();
                    format!(
                        "plugin `{name}`'s descriptor {list} list names {unknown}, unknown to this \
                         host (its dsh-plugin-api {} knows {}): the plugin was built against a newer \
                         dsh-plugin-api; use a dsh that knows the kind",
                        env!("CARGO_PKG_VERSION"),
                        known.join(", ")
                    )
                })
            })
            .collect::<std::result::Result<Vec<_>, _>>()
    };
    let provides = kinds(&descriptor.provides, "provides")?;
    let inject = kinds(&descriptor.inject, "inject")?;
    Ok(LoadedDescriptor {
        name,
        version: descriptor.version.into(),
        api_version,
        provides,
        inject,
    })
}

/// A readable account of an abi_stable refusal. Layout reports list every
/// type involved and run to hundreds of lines; the findings (`Error:` what,
/// `Expected:`/`Found:` values, in which type) are what a reader needs.
fn describe(err: &LibraryError) -> String {
    match err {
        LibraryError::AbiInstability(_) => format!(
            "the layout of its plugin-API types differs from this host's (it was built against \
             another dsh-plugin-api): {}",
            layout_findings(&err.to_string())
        ),
        LibraryError::IncompatibleVersionNumber {
            expected_version,
            actual_version,
            ..
        } => format!(
            "built against dsh-plugin-api {actual_version}, this host has {expected_version}"
        ),
        LibraryError::InvalidAbiHeader(_) => format!(
            "built with an incompatible abi_stable: {}",
            first_lines(&err.to_string(), 6)
        ),
        other => first_lines(&other.to_string(), 12),
    }
}

fn first_lines(text: &str, max: usize) -> String {
    let lines: Vec<&str> = text
        .lines()
        .map(str::trim)
        .filter(|line| !line.is_empty())
        .collect();
    if lines.len() > max {
        format!(
            "{} … ({} more lines)",
            lines[..max].join(" "),
            lines.len() - max
        )
    } else {
        lines.join(" ")
    }
}

/// `<what> in <type> (expected <x>, found <y>)` for each finding of an
/// abi_stable layout report (at most three); the report's first lines if it
/// has no findings in the expected shape.
fn layout_findings(report: &str) -> String {
    let lines: Vec<&str> = report
        .lines()
        .map(str::trim)
        .filter(|line| !line.is_empty())
        .collect();
    let mut findings = Vec::new();
    let mut current_type = None;
    let mut index = 0;
    while index < lines.len() {
        let line = lines[index];
        if line == "Layout of expected type:" {
            current_type = lines[index + 1..]
                .iter()
                .find_map(|line| line.strip_prefix("type:"));
        }
        if let Some(what) = line.strip_prefix("Error:") {
            let (mut expected, mut found, mut side) = (Vec::new(), Vec::new(), 0);
            index += 1;
            while index < lines.len()
                && !lines[index].starts_with("Error:")
                && lines[index] != "Layout of expected type:"
            {
                match lines[index] {
                    "Expected:" => side = 1,
                    "Found:" => side = 2,
                    value if side == 1 => expected.push(value),
                    value if side == 2 => found.push(value),
                    _ => {}
                }
                index += 1;
            }
            findings.push(format!(
                "{what}{} (expected {}, found {})",
                current_type
                    .map(|name| format!(" in {name}"))
                    .unwrap_or_default(),
                expected.join(" "),
                found.join(" ")
            ));
            continue;
        }
        index += 1;
    }
    match findings.len() {
        0 => first_lines(report, 8),
        1..=3 => findings.join("; "),
        more => format!("{}; and {} more", findings[..3].join("; "), more - 3),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layout_reports_are_reduced_to_their_findings() {
        let report = "Compared <this>:\n    type:PrefixRef\nLayout of expected type:\n    --- Type Layout ---\n    type:PluginModule\n    size:24\nLayout of found type:\n    type:PluginModule\nError:mismatched package\nExpected:\n    dsh-plugin-api\nFound:\n    other-crate\n";
        assert_eq!(
            layout_findings(report),
            "mismatched package in PluginModule (expected dsh-plugin-api, found other-crate)"
        );
        assert_eq!(layout_findings("odd\nreport"), "odd report");
    }

    fn descriptor(provides: Vec<FfiServiceKind>) -> FfiDescriptor {
        FfiDescriptor {
            name: "dsh-vendor-owner".into(),
            version: "1.0.0".into(),
            provides: provides.into_iter().collect(),
            inject: abi_stable::std_types::RVec::new(),
        }
    }

    #[test]
    fn an_owner_kind_from_a_newer_plugin_is_a_load_error_naming_plugin_and_kind() {
        let newer = FfiServiceKind {
            code: crate::ffi::service::OWNER_CODE,
            owner: "vendor-from-the-future".into(),
        };
        let err = decode(descriptor(vec![newer]), API_VERSION).unwrap_err();
        assert!(err.contains("plugin `dsh-vendor-owner`"), "{err}");
        assert!(err.contains("owner kind `vendor-from-the-future`"), "{err}");
        assert!(err.contains("knows fs, subprocess, e2b"), "{err}");

        let e2b = crate::ffi::service::export_kind(ServiceKind::Owner(crate::OwnerKind::E2B));
        let known = decode(descriptor(vec![e2b]), API_VERSION).expect("the e2b owner kind");
        assert_eq!(known.provides, [ServiceKind::Owner(crate::OwnerKind::E2B)]);
    }
}
