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
    use std::sync::atomic::{AtomicUsize, Ordering};

    use abi_stable::std_types::RBox;
    use futures::StreamExt;

    use super::*;
    use crate::e2b::{E2bOwner, EnvdRequest, EnvdResponse, SandboxInfo};
    use crate::ffi::stream::{FfiStream_TO, export_stream, import_stream};

    struct Owner;

    #[async_trait::async_trait]
    impl E2bOwner for Owner {
        fn info(&self) -> SandboxInfo {
            SandboxInfo {
                sandbox_id: "unit".into(),
                template_id: "t".into(),
                envd_version: "0".into(),
                cwd: "/".into(),
                runtime_root: "/.dsh-e2b".into(),
            }
        }

        async fn envd(&self, _: EnvdRequest) -> Result<EnvdResponse> {
            Err(crate::Error::new(
                crate::ErrorKind::Unsupported,
                "envd: unit owner",
            ))
        }

        async fn alive(&self) -> Result<bool> {
            Ok(true)
        }
    }

    fn address(service: &FfiService) -> usize {
        match service {
            FfiService::E2b(owner) => owner.obj.sabi_erased_ref().as_ptr() as usize,
            FfiService::Fs(fs) => fs.obj.sabi_erased_ref().as_ptr() as usize,
            FfiService::Subprocess(subprocess) => {
                subprocess.obj.sabi_erased_ref().as_ptr() as usize
            }
        }
    }

    #[test]
    fn a_proxy_handed_on_is_the_ffi_object_it_stands_for() {
        let context = CallContext::host();
        let exported = export_service(Service::E2b(Arc::new(Owner)), &context);
        let original = address(&exported);
        let proxy = import_service(exported, &context).expect("import");
        let Service::E2b(owner) = &proxy else {
            panic!("an e2b service");
        };
        assert_eq!(owner.info().sandbox_id, "unit");
        let handed_on = export_service(proxy.clone(), &context);
        assert_eq!(address(&handed_on), original, "no wrapper around the proxy");
        // A plain object is wrapped afresh each time.
        let first = export_service(Service::E2b(Arc::new(Owner)), &context);
        let second = export_service(Service::E2b(Arc::new(Owner)), &context);
        assert_ne!(address(&first), address(&second));
        // The proxy's registration ends with it.
        drop(proxy);
        drop(handed_on);
    }

    #[test]
    fn a_stream_proxy_handed_on_is_its_ffi_object() {
        let context = CallContext::host();
        let pulled = Arc::new(AtomicUsize::new(0));
        let counter = pulled.clone();
        let plain = futures::stream::iter(0..3u8).map(move |index| {
            counter.fetch_add(1, Ordering::SeqCst);
            Ok(bytes::Bytes::from(vec![index]))
        });
        let object: FfiStream_TO<'static, RBox<()>, crate::ffi::bytes::FfiBytes> =
            export_stream(Box::pin(plain), &context, "unit");
        let original = object.obj.sabi_erased_ref().as_ptr() as usize;
        let proxy = import_stream(object);
        let again: FfiStream_TO<'static, RBox<()>, crate::ffi::bytes::FfiBytes> =
            export_stream(proxy, &context, "unit");
        assert_eq!(again.obj.sabi_erased_ref().as_ptr() as usize, original);
        let chunks: Vec<bytes::Bytes> = futures::executor::block_on(
            import_stream(again)
                .map(|chunk| chunk.expect("chunk"))
                .collect(),
        );
        assert_eq!(chunks, [vec![0], vec![1], vec![2]]);
        assert_eq!(pulled.load(Ordering::SeqCst), 3);
    }

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
