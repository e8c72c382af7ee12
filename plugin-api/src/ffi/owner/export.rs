//! The exporting side of an owner: a plain [`Owner`] behind [`FfiOwner`].

use std::sync::Arc;

use abi_stable::sabi_trait::TD_Opaque;
use abi_stable::std_types::RArc;

use super::proxy::OwnerProxy;
use super::{
    FfiDaemonRequest, FfiDaemonResponse, FfiOwner, FfiOwner_TO, FfiOwnerObject, FfiSandboxInfo,
    headers_from_ffi, headers_to_ffi,
};
use crate::ffi::context::{Bound, CallContext};
use crate::ffi::error::{FfiResult, lower};
use crate::ffi::future::{FfiFut, export_call};
use crate::ffi::registry;
use crate::ffi::stream::{export_stream, import_stream};
use crate::owner::{DaemonRequest, DaemonResponse, Owner};

type OwnerExport = Bound<Arc<dyn Owner>>;

/// Exports an owner (a proxy is unwrapped).
pub fn export_owner(owner: Arc<dyn Owner>, context: &Arc<CallContext>) -> FfiOwnerObject {
    if let Some(proxy) = registry::proxy_of::<OwnerProxy, _>(&owner) {
        return proxy.object();
    }
    FfiOwner_TO::from_ptr(RArc::new(Bound::new(owner, context.clone())), TD_Opaque)
}

impl FfiOwner for OwnerExport {
    fn info(&self) -> FfiResult<FfiSandboxInfo> {
        lower(self.call("info", |owner| owner.info()))
    }

    fn daemon<'a>(&'a self, request: FfiDaemonRequest) -> FfiFut<'a, FfiDaemonResponse> {
        let context = self.context().clone();
        let request = DaemonRequest {
            method: request.method.into(),
            path_and_query: request.path_and_query.into(),
            headers: headers_from_ffi(request.headers),
            body: import_stream(request.body),
        };
        let map = move |response: DaemonResponse| FfiDaemonResponse {
            status: response.status,
            headers: headers_to_ffi(response.headers),
            body: export_stream(response.body, &context, "daemon"),
        };
        export_call(self, "daemon", |owner| owner.daemon(request), map)
    }

    fn alive<'a>(&'a self) -> FfiFut<'a, bool> {
        export_call(self, "alive", |owner| owner.alive(), |alive| alive)
    }
}
