//! The plugin side of the root module, generic over the plugin type: what
//! [`crate::export_plugin!`] instantiates.

use std::sync::Arc;

use abi_stable::library::{CheckTypeLayout, LibHeader, RootModuleResult};
use abi_stable::prefix_type::PrefixTypeTrait;
use abi_stable::sabi_trait::TD_Opaque;
use abi_stable::std_types::{RArc, RResult, RStr, RVec};
use async_ffi::{FfiFuture, FutureExt as _};

use crate::config::{self, FieldError};
use crate::error::{Error, Result};
use crate::ffi::error::{FfiResult, lower};
use crate::ffi::future::guarded_ffi;
use crate::ffi::instance::{FfiInstance_TO, FfiInstanceObject, InstanceExport, guarded};
use crate::ffi::log::FfiSink;
use crate::ffi::log_forward;
use crate::ffi::module::{
    FfiCreateRequest, FfiDescriptor, FfiFieldError, PluginModule, PluginModuleRef,
};
use crate::ffi::panic::{Side, catch, install_hook};
use crate::ffi::runtime::{PluginRuntime, Stopped};
use crate::ffi::service::{
    FfiService, FfiServiceKind, export_kind, export_service, import_service,
};
use crate::plugin::{CreateContext, Injected, Plugin, ServiceKind};

/// The prefix of the `u32` static holding the plugin API version a library
/// was built against; the crate name follows (`export_plugin!` spells the
/// same literal).
pub const API_VERSION_SYMBOL_PREFIX: &str = "dsh_plugin_api_version__";

/// The prefix of the abi_stable library header static; the crate name
/// follows.
pub const HEADER_SYMBOL_PREFIX: &str = "dsh_plugin_header__";

/// The library header of a plugin library exporting `P`.
pub const fn lib_header<P: Plugin>() -> LibHeader {
    // SAFETY: `root_module_loader::<P>` returns the prefix reference of a
    // `PluginModule`, the module type the header is declared with.
    unsafe {
        LibHeader::from_constructor::<PluginModuleRef>(
            root_module_loader::<P>,
            CheckTypeLayout::Yes,
        )
    }
}

extern "C" fn root_module_loader<P: Plugin>() -> RootModuleResult {
    abi_stable::library::__call_root_module_loader(root_module::<P>)
}

fn root_module<P: Plugin>() -> PluginModuleRef {
    PluginModule {
        descriptor: descriptor::<P>,
        install_log_sink: install_log_sink::<P>,
        create: create::<P>,
        validate_config: validate_config::<P>,
    }
    .leak_into_prefix()
}

fn codes(kinds: &[ServiceKind]) -> RVec<FfiServiceKind> {
    kinds.iter().copied().map(export_kind).collect()
}

fn failed<T: Send + 'static>(err: Error) -> FfiFuture<FfiResult<T>> {
    std::future::ready(RResult::RErr(err.into())).into_ffi()
}

extern "C" fn descriptor<P: Plugin>() -> FfiResult<FfiDescriptor> {
    let read = catch(Side::Library(P::DESCRIPTOR.name), "descriptor", || {
        FfiDescriptor {
            name: P::DESCRIPTOR.name.into(),
            version: P::DESCRIPTOR.version.into(),
            provides: codes(P::DESCRIPTOR.provides),
            inject: codes(P::DESCRIPTOR.inject),
        }
    });
    lower(read)
}

extern "C" fn install_log_sink<P: Plugin>(sink: FfiSink) -> FfiResult<bool> {
    lower(catch(
        Side::Library(P::DESCRIPTOR.name),
        "install_log_sink",
        || {
            // Only a loaded library gets here, never a program linking the
            // plugin as an rlib, whose hook is the program's own.
            install_hook();
            log_forward::install(sink, P::DESCRIPTOR.name)
        },
    ))
}

extern "C" fn validate_config<P: Plugin>(config: RStr<'_>) -> FfiResult<RVec<FfiFieldError>> {
    lower(catch(
        Side::Library(P::DESCRIPTOR.name),
        "validate_config",
        || {
            let errors = match serde_json::from_str(config.as_str()) {
                Ok(value) => config_problems::<P>(&value),
                Err(err) => vec![FieldError::new("", format!("not valid JSON: {err}"))],
            };
            errors
                .into_iter()
                .map(|error| FfiFieldError {
                    path: error.path.into(),
                    message: error.message.into(),
                })
                .collect::<RVec<FfiFieldError>>()
        },
    ))
}

/// Every problem of `config` for `P`: the schema derived from `P::Config`,
/// its deserialisation, then `P::check_config`.
fn config_problems<P: Plugin>(config: &serde_json::Value) -> Vec<FieldError> {
    match config::validate::<P::Config>(config) {
        Ok(parsed) => P::check_config(&parsed),
        Err(errors) => errors,
    }
}

extern "C" fn create<P: Plugin>(
    request: FfiCreateRequest,
) -> FfiFuture<FfiResult<FfiInstanceObject>> {
    // The id is copied outside the guard so that a panic can name it.
    let id = request.id.to_string();
    catch(Side::Instance(&id), "create", || start_create::<P>(request)).unwrap_or_else(failed)
}

/// Why a create failed, and the runtime's shutdown to wait for.
type CreateFailure = (Error, Stopped);

fn start_create<P: Plugin>(request: FfiCreateRequest) -> FfiFuture<FfiResult<FfiInstanceObject>> {
    let FfiCreateRequest {
        id,
        config,
        services,
    } = request;
    let id = id.into_string();
    let runtime = match PluginRuntime::start(&id) {
        Ok(runtime) => Arc::new(runtime),
        Err(err) => return failed(err),
    };
    let (done, report) =
        futures::channel::oneshot::channel::<Result<InstanceExport, CreateFailure>>();
    let task_runtime = runtime.clone();
    runtime.spawn(async move {
        let outcome = match build::<P>(id, config.into_string(), services, &task_runtime).await {
            Ok(instance) => Ok(instance),
            Err(err) => Err((err, task_runtime.begin_shutdown())),
        };
        drop(task_runtime);
        if let Err(Ok(abandoned)) = done.send(outcome) {
            abandoned.dispose_abandoned().await;
        }
    });
    let label = runtime.context().label().clone();
    drop(runtime);
    guarded_ffi(label.clone(), "create", async move {
        match report.await {
            Ok(Ok(instance)) => RResult::ROk(FfiInstance_TO::from_ptr(RArc::new(instance), TD_Opaque)),
            Ok(Err((err, stopped))) => {
                stopped.await;
                RResult::RErr(err.into())
            }
            Err(_) => RResult::RErr(
                Error::closed(format!(
                    "create: the runtime of plugin instance `{label}` stopped before create completed"
                ))
                .with_subject(label.to_string())
                .into(),
            ),
        }
    })
}

/// Creates the instance on its runtime: config, injected services (checked
/// against the descriptor), `P::create`, `P::services` (checked too; on a
/// mismatch the fresh plugin is disposed before the error is returned).
async fn build<P: Plugin>(
    id: String,
    config: String,
    services: RVec<FfiService>,
    runtime: &Arc<PluginRuntime>,
) -> Result<InstanceExport> {
    let context = runtime.context();
    let config: serde_json::Value = serde_json::from_str(&config).map_err(|err| {
        Error::config(format!("create: the config is not valid JSON: {err}"))
            .with_subject(id.clone())
    })?;
    // The host validated it before creating anything; checked again here
    // so that a host that did not (or a changed config) cannot reach
    // `create` with a config `dsh check` would refuse.
    let problems = config_problems::<P>(&config);
    if !problems.is_empty() {
        return Err(config::config_error(&id, &problems));
    }
    let injected = services
        .into_iter()
        .map(|service| import_service(service, context))
        .collect::<Result<Vec<_>>>()?;
    check_kinds(
        &id,
        "the injected services",
        injected.iter().map(|service| service.kind()).collect(),
        "the descriptor's inject list",
        P::DESCRIPTOR.inject,
    )?;
    let plugin = guarded(
        context,
        "create",
        P::create(CreateContext {
            id: id.clone(),
            config,
            services: Injected::new(injected),
        }),
    )
    .await?;
    let provided = catch(context.side(), "services", || plugin.services()).and_then(|provided| {
        check_kinds(
            &id,
            "services()",
            provided.iter().map(|service| service.kind()).collect(),
            "the descriptor's provides list",
            P::DESCRIPTOR.provides,
        )?;
        Ok(provided)
    });
    let provided = match provided {
        Ok(provided) => provided,
        Err(err) => {
            // The plugin exists: undo it before reporting.
            let disposed = guarded(context, "dispose", Plugin::dispose(&plugin)).await;
            drop(plugin);
            return Err(match disposed {
                Ok(()) => err,
                Err(dispose) => err.context(format!(
                    "(dispose after the failure also failed: {dispose})"
                )),
            });
        }
    };
    let exported = provided
        .into_iter()
        .map(|service| export_service(service, context))
        .collect();
    Ok(InstanceExport::new(
        runtime.clone(),
        Box::new(plugin),
        exported,
    ))
}

fn check_kinds(
    id: &str,
    what: &str,
    mut actual: Vec<ServiceKind>,
    declared_as: &str,
    declared: &[ServiceKind],
) -> Result<()> {
    let mut expected = declared.to_vec();
    actual.sort();
    expected.sort();
    if actual == expected {
        return Ok(());
    }
    let names = |kinds: &[ServiceKind]| {
        kinds
            .iter()
            .map(|kind| kind.name())
            .collect::<Vec<_>>()
            .join(", ")
    };
    Err(Error::config(format!(
        "create: {what} ({}) do not match {declared_as} ({})",
        names(&actual),
        names(&expected)
    ))
    .with_subject(id))
}
