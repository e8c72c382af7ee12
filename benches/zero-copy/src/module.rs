//! The library's root module: functions that move byte buffers across the
//! boundary in both directions, and how the receiving side takes them.

use std::path::Path;

use abi_stable::library::RootModule;
use abi_stable::prefix_type::PrefixTypeTrait;
use abi_stable::sabi_trait::TD_Opaque;
use abi_stable::sabi_types::VersionStrings;
use abi_stable::std_types::{RBox, ROption, RResult, RStr, RString, RVec};
use abi_stable::{
    StableAbi, declare_root_module_statics, export_root_module, package_version_strings, sabi_trait,
};
use bytes::Bytes;

use crate::ffi_bytes::{FfiBytes, live_owners};
use crate::plain::{self, ChunkFile};

/// How the receiving side takes an `RVec<u8>` allocated by the other binary.
#[repr(u8)]
#[derive(StableAbi, Debug, Clone, Copy, PartialEq, Eq)]
pub enum Receive {
    /// `RVec::into_vec`: a copy into this binary's allocation (abi_stable
    /// copies whenever the vector's vtable is another binary's). This is
    /// what dsh's plugin API does today.
    Copy,
    /// `Bytes::from_owner(rvec)`: no copy; the `RVec` (and its vtable,
    /// which frees with the allocating binary's allocator) lives inside the
    /// `Bytes` until its last clone drops.
    Wrap,
}

/// A received buffer, as the plain side would hold it.
#[derive(Debug)]
pub enum Received {
    Copied(Vec<u8>),
    Wrapped(Bytes),
}

impl Receive {
    /// Takes `buffer` the way this strategy does.
    pub fn take(self, buffer: RVec<u8>) -> Received {
        match self {
            Receive::Copy => Received::Copied(buffer.into_vec()),
            Receive::Wrap => Received::Wrapped(Bytes::from_owner(buffer)),
        }
    }
}

impl Received {
    pub fn as_slice(&self) -> &[u8] {
        match self {
            Received::Copied(vec) => vec,
            Received::Wrapped(bytes) => bytes,
        }
    }
}

/// A file read in chunks across the boundary (the shape of dsh's pull
/// streams, one call per chunk).
#[sabi_trait]
pub trait ChunkReader: Send {
    /// The next chunk as an `RVec` (receiver copies or wraps); `None` at
    /// the end.
    fn next_rvec(&mut self) -> RResult<ROption<RVec<u8>>, RString>;

    /// The next chunk as [`FfiBytes`]; `None` at the end.
    #[sabi(last_prefix_field)]
    fn next_ffi(&mut self) -> RResult<ROption<FfiBytes>, RString>;
}

/// A chunk reader as it crosses.
pub type ChunkReaderBox = ChunkReader_TO<'static, RBox<()>>;

impl ChunkReader for ChunkFile {
    fn next_rvec(&mut self) -> RResult<ROption<RVec<u8>>, RString> {
        next(self, RVec::from)
    }

    fn next_ffi(&mut self) -> RResult<ROption<FfiBytes>, RString> {
        next(self, |chunk| FfiBytes::from_bytes(Bytes::from(chunk)))
    }
}

fn next<T>(file: &mut ChunkFile, wrap: impl FnOnce(Vec<u8>) -> T) -> RResult<ROption<T>, RString> {
    match file.next_chunk() {
        Ok(chunk) => RResult::ROk(chunk.map(wrap).into()),
        Err(err) => RResult::RErr(format!("read chunk: {err}").into()),
    }
}

/// The root module.
#[repr(C)]
#[derive(StableAbi)]
#[sabi(kind(Prefix(prefix_ref = ZeroCopyModuleRef)))]
#[sabi(missing_field(panic))]
pub struct ZeroCopyModule {
    /// Reads a whole file; the buffer crosses as an `RVec`.
    pub read_file_rvec: extern "C" fn(path: RStr<'_>) -> RResult<RVec<u8>, RString>,
    /// Reads a whole file; the buffer crosses as [`FfiBytes`].
    pub read_file_ffi: extern "C" fn(path: RStr<'_>) -> RResult<FfiBytes, RString>,
    /// Opens a file for chunked reading (chunks of at most `chunk_len`).
    pub open_chunks:
        extern "C" fn(path: RStr<'_>, chunk_len: usize) -> RResult<ChunkReaderBox, RString>,
    /// Writes `content` (allocated by the caller), taken as `receive` says.
    pub write_file_rvec:
        extern "C" fn(path: RStr<'_>, content: RVec<u8>, receive: Receive) -> RResult<u64, RString>,
    /// Writes `content` (owned by the caller), wrapped without a copy.
    pub write_file_ffi: extern "C" fn(path: RStr<'_>, content: FfiBytes) -> RResult<u64, RString>,
    /// Takes a caller-allocated buffer as `receive` says, touches it, drops
    /// it: the cost of one crossing alone.
    pub take_rvec: extern "C" fn(content: RVec<u8>, receive: Receive) -> u64,
    /// Takes a caller-owned [`FfiBytes`], wraps it, touches it, drops it.
    pub take_ffi: extern "C" fn(content: FfiBytes) -> u64,
    /// [`FfiBytes`] owners this library made that are not yet released.
    #[sabi(last_prefix_field)]
    pub live_owners: extern "C" fn() -> u64,
}

impl RootModule for ZeroCopyModuleRef {
    declare_root_module_statics! {ZeroCopyModuleRef}
    const BASE_NAME: &'static str = "dsh_bench_zero_copy";
    const NAME: &'static str = "dsh_bench_zero_copy";
    const VERSION_STRINGS: VersionStrings = package_version_strings!();
}

/// The module this library exports.
#[export_root_module]
pub fn root_module() -> ZeroCopyModuleRef {
    ZeroCopyModule {
        read_file_rvec,
        read_file_ffi,
        open_chunks,
        write_file_rvec,
        write_file_ffi,
        take_rvec,
        take_ffi,
        live_owners: live_owners_here,
    }
    .leak_into_prefix()
}

fn failed(operation: &str, path: RStr<'_>, err: std::io::Error) -> RString {
    format!("{operation} {}: {err}", path.as_str()).into()
}

extern "C" fn read_file_rvec(path: RStr<'_>) -> RResult<RVec<u8>, RString> {
    match plain::read_file(Path::new(path.as_str())) {
        Ok(content) => RResult::ROk(content.into()),
        Err(err) => RResult::RErr(failed("read", path, err)),
    }
}

extern "C" fn read_file_ffi(path: RStr<'_>) -> RResult<FfiBytes, RString> {
    match plain::read_file(Path::new(path.as_str())) {
        Ok(content) => RResult::ROk(FfiBytes::from_bytes(content.into())),
        Err(err) => RResult::RErr(failed("read", path, err)),
    }
}

extern "C" fn open_chunks(path: RStr<'_>, chunk_len: usize) -> RResult<ChunkReaderBox, RString> {
    match ChunkFile::open(Path::new(path.as_str()), chunk_len) {
        Ok(file) => RResult::ROk(ChunkReader_TO::from_value(file, TD_Opaque)),
        Err(err) => RResult::RErr(failed("open", path, err)),
    }
}

extern "C" fn write_file_rvec(
    path: RStr<'_>,
    content: RVec<u8>,
    receive: Receive,
) -> RResult<u64, RString> {
    let content = receive.take(content);
    match plain::write_file(Path::new(path.as_str()), content.as_slice()) {
        Ok(written) => RResult::ROk(written),
        Err(err) => RResult::RErr(failed("write", path, err)),
    }
}

extern "C" fn write_file_ffi(path: RStr<'_>, content: FfiBytes) -> RResult<u64, RString> {
    let content = content.into_bytes();
    match plain::write_file(Path::new(path.as_str()), &content) {
        Ok(written) => RResult::ROk(written),
        Err(err) => RResult::RErr(failed("write", path, err)),
    }
}

extern "C" fn take_rvec(content: RVec<u8>, receive: Receive) -> u64 {
    plain::touch(receive.take(content).as_slice())
}

extern "C" fn take_ffi(content: FfiBytes) -> u64 {
    plain::touch(&content.into_bytes())
}

extern "C" fn live_owners_here() -> u64 {
    live_owners()
}
