//! `repr(C)` mirrors of the owner services' types.

use abi_stable::StableAbi;
use abi_stable::std_types::{RString, RVec, Tuple2};

use crate::ffi::stream::FfiByteStream;
use crate::owner::SandboxInfo;

#[repr(C)]
#[derive(StableAbi)]
pub struct FfiSandboxInfo {
    pub sandbox_id: RString,
    pub template_id: RString,
    pub daemon_version: RString,
    pub cwd: RString,
    pub runtime_root: RString,
}

impl From<SandboxInfo> for FfiSandboxInfo {
    fn from(value: SandboxInfo) -> Self {
        FfiSandboxInfo {
            sandbox_id: value.sandbox_id.into(),
            template_id: value.template_id.into(),
            daemon_version: value.daemon_version.into(),
            cwd: value.cwd.into(),
            runtime_root: value.runtime_root.into(),
        }
    }
}

impl From<FfiSandboxInfo> for SandboxInfo {
    fn from(value: FfiSandboxInfo) -> Self {
        SandboxInfo {
            sandbox_id: value.sandbox_id.into(),
            template_id: value.template_id.into(),
            daemon_version: value.daemon_version.into(),
            cwd: value.cwd.into(),
            runtime_root: value.runtime_root.into(),
        }
    }
}

/// HTTP headers in order: name and raw value bytes.
pub type FfiHeaders = RVec<Tuple2<RString, RVec<u8>>>;

pub fn headers_to_ffi(headers: Vec<(String, Vec<u8>)>) -> FfiHeaders {
    headers
        .into_iter()
        .map(|(name, value)| Tuple2(name.into(), value.into()))
        .collect()
}

pub fn headers_from_ffi(headers: FfiHeaders) -> Vec<(String, Vec<u8>)> {
    headers
        .into_iter()
        .map(|Tuple2(name, value)| (name.into(), value.into_vec()))
        .collect()
}

#[repr(C)]
#[derive(StableAbi)]
pub struct FfiDaemonRequest {
    pub method: RString,
    pub path_and_query: RString,
    pub headers: FfiHeaders,
    /// Produced by the caller, pulled by the owner.
    pub body: FfiByteStream,
}

#[repr(C)]
#[derive(StableAbi)]
pub struct FfiDaemonResponse {
    pub status: u16,
    pub headers: FfiHeaders,
    /// Produced by the owner, pulled by the caller.
    pub body: FfiByteStream,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn info_and_headers_round_trip() {
        let info = SandboxInfo {
            sandbox_id: "sbx".into(),
            template_id: "base".into(),
            daemon_version: "0.6.13".into(),
            cwd: "/home/user/workspace".into(),
            runtime_root: "/home/user/workspace/.dsh-e2b".into(),
        };
        assert_eq!(SandboxInfo::from(FfiSandboxInfo::from(info.clone())), info);
        let headers = vec![
            ("content-type".to_owned(), b"application/json".to_vec()),
            ("x-raw".to_owned(), vec![0, 255, 10]),
        ];
        assert_eq!(headers_from_ffi(headers_to_ffi(headers.clone())), headers);
    }
}
