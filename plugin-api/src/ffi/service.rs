//! Typed services across the boundary, and the stable codes of their kinds.

use std::sync::Arc;

use abi_stable::StableAbi;
use abi_stable::std_types::RString;

use crate::error::{Error, Result};
use crate::ffi::context::CallContext;
use crate::ffi::fs::{FfiFs_TO, FfiFsObject, export_fs, import_fs};
use crate::ffi::owner::{FfiOwner_TO, FfiOwnerObject, export_owner, import_owner};
use crate::ffi::subprocess::{
    FfiSubprocess_TO, FfiSubprocessObject, export_subprocess, import_subprocess,
};
use crate::owner::OwnerKind;
use crate::plugin::{Service, ServiceKind};

/// One service instance as it crosses the ABI.
#[repr(C, u8)]
#[derive(StableAbi)]
pub enum FfiService {
    Fs(FfiFsObject),
    Subprocess(FfiSubprocessObject),
    /// An owner, with its kind's name ([`OwnerKind::name`]).
    Owner {
        kind: RString,
        object: FfiOwnerObject,
    },
}

impl FfiService {
    /// Another handle to the same service objects.
    pub fn shallow_clone(&self) -> FfiService {
        match self {
            FfiService::Fs(fs) => FfiService::Fs(FfiFs_TO::from_sabi(fs.obj.shallow_clone())),
            FfiService::Subprocess(subprocess) => {
                FfiService::Subprocess(FfiSubprocess_TO::from_sabi(subprocess.obj.shallow_clone()))
            }
            FfiService::Owner { kind, object } => FfiService::Owner {
                kind: kind.clone(),
                object: FfiOwner_TO::from_sabi(object.obj.shallow_clone()),
            },
        }
    }
}

/// A service kind in a descriptor: a stable code, and for an owner its
/// kind's name — so a kind a newer plugin adds is reported, not misread,
/// and a new owner kind changes no layout.
#[repr(C)]
#[derive(StableAbi, Debug, Clone, PartialEq, Eq)]
pub struct FfiServiceKind {
    pub code: u32,
    /// The owner kind's name when `code` is [`OWNER_CODE`]; empty otherwise.
    pub owner: RString,
}

const FS_CODE: u32 = 1;
const SUBPROCESS_CODE: u32 = 2;
/// The code of every owner kind; the name tells them apart.
pub const OWNER_CODE: u32 = 3;

/// A kind as it crosses.
pub fn export_kind(kind: ServiceKind) -> FfiServiceKind {
    let (code, owner) = match kind {
        ServiceKind::Fs => (FS_CODE, ""),
        ServiceKind::Subprocess => (SUBPROCESS_CODE, ""),
        ServiceKind::Owner(owner) => (OWNER_CODE, owner.name()),
    };
    FfiServiceKind {
        code,
        owner: owner.into(),
    }
}

/// The kind that crossed, if this build knows it; otherwise what it is
/// (`service kind code 9`, ``owner kind `vendor` ``) for the caller's
/// message.
pub fn import_kind(kind: &FfiServiceKind) -> std::result::Result<ServiceKind, String> {
    match kind.code {
        FS_CODE => Ok(ServiceKind::Fs),
        SUBPROCESS_CODE => Ok(ServiceKind::Subprocess),
        OWNER_CODE => owner_kind(&kind.owner).map(ServiceKind::Owner),
        code => Err(format!("service kind code {code}")),
    }
}

fn owner_kind(name: &str) -> std::result::Result<OwnerKind, String> {
    OwnerKind::from_name(name).ok_or_else(|| format!("owner kind `{name}`"))
}

/// Exports a service owned by the side of `context`; proxies are unwrapped.
pub fn export_service(service: Service, context: &Arc<CallContext>) -> FfiService {
    match service {
        Service::Fs(fs) => FfiService::Fs(export_fs(fs, context)),
        Service::Subprocess(subprocess) => {
            FfiService::Subprocess(export_subprocess(subprocess, context))
        }
        Service::Owner(kind, owner) => FfiService::Owner {
            kind: kind.name().into(),
            object: export_owner(owner, context),
        },
    }
}

/// Imports a service for the side of `local`. Fails only if an owner's
/// kind is unknown to this build or its identity cannot be read.
pub fn import_service(service: FfiService, local: &Arc<CallContext>) -> Result<Service> {
    Ok(match service {
        FfiService::Fs(fs) => Service::Fs(import_fs(fs)),
        FfiService::Subprocess(subprocess) => Service::Subprocess(import_subprocess(subprocess)),
        FfiService::Owner { kind, object } => {
            let kind = owner_kind(&kind).map_err(|unknown| {
                Error::new(
                    crate::ErrorKind::Unsupported,
                    format!(
                        "import a service: {unknown} is unknown to this dsh-plugin-api ({})",
                        env!("CARGO_PKG_VERSION")
                    ),
                )
            })?;
            Service::Owner(kind, import_owner(object, local)?)
        }
    })
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use abi_stable::std_types::RBox;
    use futures::StreamExt;

    use super::*;
    use crate::ffi::stream::{FfiStream_TO, export_stream, import_stream};
    use crate::owner::{DaemonRequest, DaemonResponse, Owner, SandboxInfo};

    struct Unit;

    #[async_trait::async_trait]
    impl Owner for Unit {
        fn info(&self) -> SandboxInfo {
            SandboxInfo {
                sandbox_id: "unit".into(),
                template_id: "t".into(),
                daemon_version: "0".into(),
                cwd: "/".into(),
                runtime_root: "/.dsh-e2b".into(),
            }
        }

        async fn daemon(&self, _: DaemonRequest) -> Result<DaemonResponse> {
            Err(crate::Error::new(
                crate::ErrorKind::Unsupported,
                "daemon: unit owner",
            ))
        }

        async fn alive(&self) -> Result<bool> {
            Ok(true)
        }
    }

    fn address(service: &FfiService) -> usize {
        match service {
            FfiService::Owner { object, .. } => object.obj.sabi_erased_ref().as_ptr() as usize,
            FfiService::Fs(fs) => fs.obj.sabi_erased_ref().as_ptr() as usize,
            FfiService::Subprocess(subprocess) => {
                subprocess.obj.sabi_erased_ref().as_ptr() as usize
            }
        }
    }

    #[test]
    fn a_proxy_handed_on_is_the_ffi_object_it_stands_for() {
        let context = CallContext::host();
        let exported = export_service(Service::Owner(OwnerKind::E2B, Arc::new(Unit)), &context);
        let original = address(&exported);
        let proxy = import_service(exported, &context).expect("import");
        let Service::Owner(OwnerKind::E2B, owner) = &proxy else {
            panic!("an e2b owner service");
        };
        assert_eq!(owner.info().sandbox_id, "unit");
        let handed_on = export_service(proxy.clone(), &context);
        assert_eq!(address(&handed_on), original, "no wrapper around the proxy");
        // A plain object is wrapped afresh each time.
        let first = export_service(Service::Owner(OwnerKind::E2B, Arc::new(Unit)), &context);
        let second = export_service(Service::Owner(OwnerKind::E2B, Arc::new(Unit)), &context);
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
        let code = |kind| export_kind(kind).code;
        assert_eq!(code(ServiceKind::Fs), 1);
        assert_eq!(code(ServiceKind::Subprocess), 2);
        assert_eq!(
            export_kind(ServiceKind::Owner(OwnerKind::E2B)),
            FfiServiceKind {
                code: 3,
                owner: "e2b".into()
            }
        );
        for kind in ServiceKind::known() {
            assert_eq!(import_kind(&export_kind(kind)), Ok(kind));
        }
        let unknown = |code, owner: &str| {
            import_kind(&FfiServiceKind {
                code,
                owner: owner.into(),
            })
        };
        assert_eq!(unknown(0, ""), Err("service kind code 0".to_owned()));
        assert_eq!(unknown(99, ""), Err("service kind code 99".to_owned()));
        assert_eq!(
            unknown(OWNER_CODE, "vendor-from-the-future"),
            Err("owner kind `vendor-from-the-future`".to_owned())
        );
    }

    #[test]
    fn an_owner_of_an_unknown_kind_is_refused_at_import() {
        let context = CallContext::host();
        let FfiService::Owner { object, .. } =
            export_service(Service::Owner(OwnerKind::E2B, Arc::new(Unit)), &context)
        else {
            panic!("an owner service");
        };
        let newer = FfiService::Owner {
            kind: "vendor-from-the-future".into(),
            object,
        };
        let Err(err) = import_service(newer, &context) else {
            panic!("an unknown owner kind is refused");
        };
        assert_eq!(err.kind(), crate::ErrorKind::Unsupported);
        assert!(
            err.message()
                .contains("owner kind `vendor-from-the-future`"),
            "{err}"
        );
    }
}
