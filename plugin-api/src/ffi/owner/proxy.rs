//! The importing side of `e2b`: an [`super::FfiE2bOwner`] object behind
//! [`E2bOwner`].

use std::sync::Arc;

use async_trait::async_trait;

use super::{
    FfiE2bObject, FfiE2bOwner_TO, FfiEnvdRequest, FfiEnvdResponse, headers_from_ffi, headers_to_ffi,
};
use crate::e2b::{E2bOwner, EnvdRequest, EnvdResponse, SandboxInfo};
use crate::error::Result;
use crate::ffi::context::CallContext;
use crate::ffi::error::lift;
use crate::ffi::future::import;
use crate::ffi::registry;
use crate::ffi::stream::{export_stream, import_stream};

/// Imports an owner. Its [`SandboxInfo`] is read once here (it is fixed for
/// the owner's lifetime), so a failure surfaces now rather than from the
/// infallible `info()`. Request bodies are exported with `local`, the
/// context of the importing side that produces them.
pub fn import_e2b(object: FfiE2bObject, local: &Arc<CallContext>) -> Result<Arc<dyn E2bOwner>> {
    let info = lift(object.info())?;
    let proxy = Arc::new(E2bProxy {
        object,
        info,
        local: local.clone(),
    });
    registry::register::<E2bProxy>(Arc::as_ptr(&proxy));
    Ok(proxy)
}

pub(super) struct E2bProxy {
    object: FfiE2bObject,
    info: SandboxInfo,
    local: Arc<CallContext>,
}

impl E2bProxy {
    pub(super) fn object(&self) -> FfiE2bObject {
        FfiE2bOwner_TO::from_sabi(self.object.obj.shallow_clone())
    }
}

impl Drop for E2bProxy {
    fn drop(&mut self) {
        registry::unregister::<E2bProxy>(self);
    }
}

#[async_trait]
impl E2bOwner for E2bProxy {
    fn info(&self) -> SandboxInfo {
        self.info.clone()
    }

    async fn envd(&self, request: EnvdRequest) -> Result<EnvdResponse> {
        let request = FfiEnvdRequest {
            method: request.method.into(),
            path_and_query: request.path_and_query.into(),
            headers: headers_to_ffi(request.headers),
            body: export_stream(request.body, &self.local, "envd request body"),
        };
        let response: FfiEnvdResponse = import(self.object.envd(request)).await?;
        Ok(EnvdResponse {
            status: response.status,
            headers: headers_from_ffi(response.headers),
            body: import_stream(response.body),
        })
    }

    async fn alive(&self) -> Result<bool> {
        import(self.object.alive()).await
    }
}
