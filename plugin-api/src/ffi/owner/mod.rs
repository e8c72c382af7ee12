//! The owner services across the boundary: one FFI object for every
//! [`crate::OwnerKind`], the kind travelling beside it by name
//! ([`super::service::FfiService::Owner`]).

mod export;
mod proxy;
mod types;

use abi_stable::sabi_trait;
use abi_stable::std_types::RArc;

pub use export::export_owner;
pub use proxy::import_owner;
pub use types::*;

use crate::ffi::error::FfiResult;
use crate::ffi::future::FfiFut;

/// [`crate::owner::Owner`] as an FFI object.
#[sabi_trait]
pub trait FfiOwner: Send + Sync {
    fn info(&self) -> FfiResult<FfiSandboxInfo>;
    fn daemon<'a>(&'a self, request: FfiDaemonRequest) -> FfiFut<'a, FfiDaemonResponse>;
    #[sabi(last_prefix_field)]
    fn alive<'a>(&'a self) -> FfiFut<'a, bool>;
}

/// An owner as it crosses the ABI.
pub type FfiOwnerObject = FfiOwner_TO<'static, RArc<()>>;
