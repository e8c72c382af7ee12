//! The `fs` seam across the boundary.

mod export;
mod proxy;
mod types;
mod world;

use abi_stable::StableAbi;
use abi_stable::sabi_trait;
use abi_stable::std_types::{RArc, ROption, RStr, RString, RVec};

pub use export::export_fs;
pub use proxy::import_fs;
pub use types::*;
pub use world::*;

use crate::ffi::bytes::FfiBytes;
use crate::ffi::future::FfiFut;
use crate::ffi::stream::{FfiByteStream, FfiTextStream};

/// A streamed read as it crosses: version and size at open, and the chunks.
#[repr(C)]
#[derive(StableAbi)]
pub struct FfiReadStream<S> {
    pub version: RString,
    pub size: u64,
    pub chunks: S,
}

/// [`crate::fs::FsProvider`] as an FFI object; methods mirror it one to one
/// (see there for contracts).
#[sabi_trait]
pub trait FfiFs: Send + Sync {
    fn resolve<'a>(&'a self, path: RStr<'a>, cwd: ROption<RStr<'a>>) -> FfiFut<'a, FfiResolved>;
    fn contains<'a>(&'a self, root: RStr<'a>, target: RStr<'a>) -> FfiFut<'a, bool>;
    fn stat<'a>(&'a self, path: RStr<'a>) -> FfiFut<'a, FfiMetadata>;
    fn lstat<'a>(&'a self, path: RStr<'a>) -> FfiFut<'a, FfiMetadata>;
    fn list<'a>(&'a self, dir: RStr<'a>) -> FfiFut<'a, FfiListing>;
    fn read_text<'a>(&'a self, path: RStr<'a>) -> FfiFut<'a, FfiTextFile>;
    fn stream_text<'a>(&'a self, path: RStr<'a>) -> FfiFut<'a, FfiReadStream<FfiTextStream>>;
    fn read_bytes<'a>(&'a self, path: RStr<'a>) -> FfiFut<'a, FfiReadStream<FfiByteStream>>;
    fn write<'a>(
        &'a self,
        path: RStr<'a>,
        content: FfiBytes,
        guard: FfiWriteGuard,
    ) -> FfiFut<'a, FfiVersion>;
    fn write_stream<'a>(
        &'a self,
        path: RStr<'a>,
        content: FfiByteStream,
        guard: FfiWriteGuard,
    ) -> FfiFut<'a, FfiVersion>;
    fn edit<'a>(
        &'a self,
        path: RStr<'a>,
        edits: RVec<FfiEdit>,
        guard: FfiWriteGuard,
    ) -> FfiFut<'a, FfiEditOutcome>;
    fn mkdir<'a>(&'a self, path: RStr<'a>) -> FfiFut<'a, ()>;
    fn remove<'a>(&'a self, path: RStr<'a>) -> FfiFut<'a, bool>;
    fn rename<'a>(&'a self, from: RStr<'a>, to: RStr<'a>) -> FfiFut<'a, ()>;
    fn walk<'a>(&'a self, root: RStr<'a>, spec: FfiWalkSpec) -> FfiFut<'a, FfiWalkStream>;
    fn search<'a>(&'a self, root: RStr<'a>, spec: FfiSearchSpec) -> FfiFut<'a, FfiSearchStream>;
    #[sabi(last_prefix_field)]
    fn read_many<'a>(
        &'a self,
        paths: RVec<RString>,
        limits: FfiReadManyLimits,
    ) -> FfiFut<'a, FfiReadMany>;
}

/// An `fs` service as it crosses the ABI (shared, reference-counted).
pub type FfiFsObject = FfiFs_TO<'static, RArc<()>>;
