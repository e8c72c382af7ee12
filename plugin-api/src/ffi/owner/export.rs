//! The exporting side of `e2b`: a plain [`E2bOwner`] behind [`FfiE2bOwner`].

use std::sync::Arc;

use abi_stable::sabi_trait::TD_Opaque;
use abi_stable::std_types::RArc;

use super::proxy::E2bProxy;
use super::{
    FfiE2bObject, FfiE2bOwner, FfiE2bOwner_TO, FfiEnvdRequest, FfiEnvdResponse, FfiSandboxInfo,
    headers_from_ffi, headers_to_ffi,
};
use crate::e2b::{E2bOwner, EnvdRequest, EnvdResponse};
use crate::ffi::context::{Bound, CallContext};
use crate::ffi::error::{FfiResult, lower};
use crate::ffi::future::{FfiFut, export_call};
use crate::ffi::registry;
use crate::ffi::stream::{export_stream, import_stream};

type E2bExport = Bound<Arc<dyn E2bOwner>>;

/// Exports an owner (a proxy is unwrapped).
pub fn export_e2b(owner: Arc<dyn E2bOwner>, context: &Arc<CallContext>) -> FfiE2bObject {
    if let Some(proxy) = registry::proxy_of::<E2bProxy, _>(&owner) {
        return proxy.object();
    }
    FfiE2bOwner_TO::from_ptr(RArc::new(Bound::new(owner, context.clone())), TD_Opaque)
}

impl FfiE2bOwner for E2bExport {
    fn info(&self) -> FfiResult<FfiSandboxInfo> {
        lower(self.call("info", |owner| owner.info()))
    }

    fn envd<'a>(&'a self, request: FfiEnvdRequest) -> FfiFut<'a, FfiEnvdResponse> {
        let context = self.context().clone();
        let request = EnvdRequest {
            method: request.method.into(),
            path_and_query: request.path_and_query.into(),
            headers: headers_from_ffi(request.headers),
            body: import_stream(request.body),
        };
        let map = move |response: EnvdResponse| FfiEnvdResponse {
            status: response.status,
            headers: headers_to_ffi(response.headers),
            body: export_stream(response.body, &context, "envd"),
        };
        export_call(self, "envd", |owner| owner.envd(request), map)
    }

    fn alive<'a>(&'a self) -> FfiFut<'a, bool> {
        export_call(self, "alive", |owner| owner.alive(), |alive| alive)
    }
}
