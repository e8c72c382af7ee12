//! Typed services across the boundary, and the stable codes of their kinds.

use std::sync::Arc;

use abi_stable::StableAbi;

use crate::error::Result;
use crate::ffi::context::CallContext;
use crate::ffi::e2b::{FfiE2bObject, FfiE2bOwner_TO, export_e2b, import_e2b};
use crate::ffi::fs::{FfiFs_TO, FfiFsObject, export_fs, import_fs};
use crate::ffi::subprocess::{
    FfiSubprocess_TO, FfiSubprocessObject, export_subprocess, import_subprocess,
};
use crate::plugin::{Service, ServiceKind};

/// One service instance as it crosses the ABI.
#[repr(C, u8)]
#[derive(StableAbi)]
pub enum FfiService {
    Fs(FfiFsObject),
    Subprocess(FfiSubprocessObject),
    E2b(FfiE2bObject),
}

impl FfiService {
    /// Another handle to the same service objects.
    pub fn shallow_clone(&self) -> FfiService {
        match self {
            FfiService::Fs(fs) => FfiService::Fs(FfiFs_TO::from_sabi(fs.obj.shallow_clone())),
            FfiService::Subprocess(subprocess) => {
                FfiService::Subprocess(FfiSubprocess_TO::from_sabi(subprocess.obj.shallow_clone()))
            }
            FfiService::E2b(owner) => {
                FfiService::E2b(FfiE2bOwner_TO::from_sabi(owner.obj.shallow_clone()))
            }
        }
    }
}

/// The stable code of a service kind in descriptors.
pub fn kind_code(kind: ServiceKind) -> u32 {
    match kind {
        ServiceKind::Fs => 1,
        ServiceKind::Subprocess => 2,
        ServiceKind::E2b => 3,
    }
}

/// The kind of a descriptor code, if this build knows it.
pub fn kind_of_code(code: u32) -> Option<ServiceKind> {
    ServiceKind::ALL
        .into_iter()
        .find(|kind| kind_code(*kind) == code)
}

/// Exports a service owned by the side of `context`; proxies are unwrapped.
pub fn export_service(service: Service, context: &Arc<CallContext>) -> FfiService {
    match service {
        Service::Fs(fs) => FfiService::Fs(export_fs(fs, context)),
        Service::Subprocess(subprocess) => {
            FfiService::Subprocess(export_subprocess(subprocess, context))
        }
        Service::E2b(owner) => FfiService::E2b(export_e2b(owner, context)),
    }
}

/// Imports a service for the side of `local`. Fails only if an `e2b`
/// owner's identity cannot be read.
pub fn import_service(service: FfiService, local: &Arc<CallContext>) -> Result<Service> {
    Ok(match service {
        FfiService::Fs(fs) => Service::Fs(import_fs(fs)),
        FfiService::Subprocess(subprocess) => Service::Subprocess(import_subprocess(subprocess)),
        FfiService::E2b(owner) => Service::E2b(import_e2b(owner, local)?),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kind_codes_are_stable_and_round_trip() {
        assert_eq!(kind_code(ServiceKind::Fs), 1);
        assert_eq!(kind_code(ServiceKind::Subprocess), 2);
        assert_eq!(kind_code(ServiceKind::E2b), 3);
        for kind in ServiceKind::ALL {
            assert_eq!(kind_of_code(kind_code(kind)), Some(kind));
        }
        assert_eq!(kind_of_code(0), None);
        assert_eq!(kind_of_code(99), None);
    }
}
