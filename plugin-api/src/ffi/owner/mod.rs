//! The `e2b` owner service across the boundary.

mod export;
mod proxy;
mod types;

use abi_stable::sabi_trait;
use abi_stable::std_types::RArc;

pub use export::export_e2b;
pub use proxy::import_e2b;
pub use types::*;

use crate::ffi::error::FfiResult;
use crate::ffi::future::FfiFut;

/// [`crate::e2b::E2bOwner`] as an FFI object.
#[sabi_trait]
pub trait FfiE2bOwner: Send + Sync {
    fn info(&self) -> FfiResult<FfiSandboxInfo>;
    fn envd<'a>(&'a self, request: FfiEnvdRequest) -> FfiFut<'a, FfiEnvdResponse>;
    #[sabi(last_prefix_field)]
    fn alive<'a>(&'a self) -> FfiFut<'a, bool>;
}

/// An `e2b` owner as it crosses the ABI.
pub type FfiE2bObject = FfiE2bOwner_TO<'static, RArc<()>>;
