//! The importing side of an owner: an [`super::FfiOwner`] object behind
//! [`Owner`].

use std::sync::Arc;

use async_trait::async_trait;

use super::{
    FfiDaemonRequest, FfiDaemonResponse, FfiOwner_TO, FfiOwnerObject, headers_from_ffi,
    headers_to_ffi,
};
use crate::error::Result;
use crate::ffi::context::CallContext;
use crate::ffi::error::lift;
use crate::ffi::future::import;
use crate::ffi::registry;
use crate::ffi::stream::{export_stream, import_stream};
use crate::owner::{DaemonRequest, DaemonResponse, Owner, SandboxInfo};

/// Imports an owner. Its [`SandboxInfo`] is read once here (it is fixed for
/// the owner's lifetime), so a failure surfaces now rather than from the
/// infallible `info()`. Request bodies are exported with `local`, the
/// context of the importing side that produces them.
pub fn import_owner(object: FfiOwnerObject, local: &Arc<CallContext>) -> Result<Arc<dyn Owner>> {
    let info = lift(object.info())?;
    let proxy = Arc::new(OwnerProxy {
        object,
        info,
        local: local.clone(),
    });
    registry::register::<OwnerProxy>(Arc::as_ptr(&proxy));
    Ok(proxy)
}

pub(super) struct OwnerProxy {
    object: FfiOwnerObject,
    info: SandboxInfo,
    local: Arc<CallContext>,
}

impl OwnerProxy {
    pub(super) fn object(&self) -> FfiOwnerObject {
        FfiOwner_TO::from_sabi(self.object.obj.shallow_clone())
    }
}

impl Drop for OwnerProxy {
    fn drop(&mut self) {
        registry::unregister::<OwnerProxy>(self);
    }
}

#[async_trait]
impl Owner for OwnerProxy {
    fn info(&self) -> SandboxInfo {
        self.info.clone()
    }

    async fn daemon(&self, request: DaemonRequest) -> Result<DaemonResponse> {
        let request = FfiDaemonRequest {
            method: request.method.into(),
            path_and_query: request.path_and_query.into(),
            headers: headers_to_ffi(request.headers),
            body: export_stream(request.body, &self.local, "daemon request body"),
        };
        let response: FfiDaemonResponse = import(self.object.daemon(request)).await?;
        Ok(DaemonResponse {
            status: response.status,
            headers: headers_from_ffi(response.headers),
            body: import_stream(response.body),
        })
    }

    async fn alive(&self) -> Result<bool> {
        import(self.object.alive()).await
    }
}
