//! The exporting side of `fs`: a plain [`FsProvider`] behind [`FfiFs`].

use std::sync::Arc;

use abi_stable::sabi_trait::TD_Opaque;
use abi_stable::std_types::{RArc, RBox, ROption, RStr, RString, RVec};

use super::proxy::FsProxy;
use super::{
    FfiEdit, FfiEditOutcome, FfiFs, FfiFs_TO, FfiFsObject, FfiListing, FfiMetadata, FfiReadMany,
    FfiReadManyLimits, FfiReadStream, FfiResolved, FfiSearchSpec, FfiSearchStream, FfiTextFile,
    FfiVersion, FfiWalkSpec, FfiWalkStream, FfiWriteGuard,
};
use crate::ffi::bytes::FfiBytes;
use crate::ffi::context::{Bound, CallContext};
use crate::ffi::future::{FfiFut, export_call};
use crate::ffi::registry;
use crate::ffi::stream::{
    ChunkType, FfiByteStream, FfiStream_TO, FfiTextStream, PlainStream, export_stream,
    import_stream,
};
use crate::fs::{FsProvider, ReadStream};

type FsExport = Bound<Arc<dyn FsProvider>>;

/// Exports `fs` (owned by the side of `context`). A proxy is unwrapped: the
/// FFI object it stands for is handed on instead.
pub fn export_fs(fs: Arc<dyn FsProvider>, context: &Arc<CallContext>) -> FfiFsObject {
    if let Some(proxy) = registry::proxy_of::<FsProxy, _>(&fs) {
        return proxy.object();
    }
    FfiFs_TO::from_ptr(RArc::new(Bound::new(fs, context.clone())), TD_Opaque)
}

impl FfiFs for FsExport {
    fn resolve<'a>(&'a self, path: RStr<'a>, cwd: ROption<RStr<'a>>) -> FfiFut<'a, FfiResolved> {
        let cwd = cwd.into_option().map(|cwd| cwd.as_str());
        export_call(
            self,
            "resolve",
            |fs| fs.resolve(path.as_str(), cwd),
            FfiResolved::from,
        )
    }

    fn contains<'a>(&'a self, root: RStr<'a>, target: RStr<'a>) -> FfiFut<'a, bool> {
        let call = |fs: &'a dyn FsProvider| fs.contains(root.as_str(), target.as_str());
        export_call(self, "contains", call, |inside| inside)
    }

    fn stat<'a>(&'a self, path: RStr<'a>) -> FfiFut<'a, FfiMetadata> {
        export_call(self, "stat", |fs| fs.stat(path.as_str()), FfiMetadata::from)
    }

    fn lstat<'a>(&'a self, path: RStr<'a>) -> FfiFut<'a, FfiMetadata> {
        export_call(
            self,
            "lstat",
            |fs| fs.lstat(path.as_str()),
            FfiMetadata::from,
        )
    }

    fn list<'a>(&'a self, dir: RStr<'a>) -> FfiFut<'a, FfiListing> {
        export_call(self, "list", |fs| fs.list(dir.as_str()), FfiListing::from)
    }

    fn read_text<'a>(&'a self, path: RStr<'a>) -> FfiFut<'a, FfiTextFile> {
        export_call(
            self,
            "read_text",
            |fs| fs.read_text(path.as_str()),
            FfiTextFile::from,
        )
    }

    fn stream_text<'a>(&'a self, path: RStr<'a>) -> FfiFut<'a, FfiReadStream<FfiTextStream>> {
        let context = self.context().clone();
        let map = move |read| export_read_stream(read, &context, "stream_text");
        export_call(self, "stream_text", |fs| fs.stream_text(path.as_str()), map)
    }

    fn read_bytes<'a>(&'a self, path: RStr<'a>) -> FfiFut<'a, FfiReadStream<FfiByteStream>> {
        let context = self.context().clone();
        let map = move |read| export_read_stream(read, &context, "read_bytes");
        export_call(self, "read_bytes", |fs| fs.read_bytes(path.as_str()), map)
    }

    fn write<'a>(
        &'a self,
        path: RStr<'a>,
        content: FfiBytes,
        guard: FfiWriteGuard,
    ) -> FfiFut<'a, FfiVersion> {
        let call = move |fs: &'a dyn FsProvider| {
            fs.write(path.as_str(), content.into_bytes(), guard.into())
        };
        export_call(self, "write", call, FfiVersion::from)
    }

    fn write_stream<'a>(
        &'a self,
        path: RStr<'a>,
        content: FfiByteStream,
        guard: FfiWriteGuard,
    ) -> FfiFut<'a, FfiVersion> {
        let call = move |fs: &'a dyn FsProvider| {
            fs.write_stream(path.as_str(), import_stream(content), guard.into())
        };
        export_call(self, "write_stream", call, FfiVersion::from)
    }

    fn edit<'a>(
        &'a self,
        path: RStr<'a>,
        edits: RVec<FfiEdit>,
        guard: FfiWriteGuard,
    ) -> FfiFut<'a, FfiEditOutcome> {
        let call = move |fs: &'a dyn FsProvider| {
            let edits = edits.into_iter().map(Into::into).collect();
            fs.edit(path.as_str(), edits, guard.into())
        };
        export_call(self, "edit", call, FfiEditOutcome::from)
    }

    fn mkdir<'a>(&'a self, path: RStr<'a>) -> FfiFut<'a, ()> {
        export_call(self, "mkdir", |fs| fs.mkdir(path.as_str()), |()| ())
    }

    fn remove<'a>(&'a self, path: RStr<'a>) -> FfiFut<'a, bool> {
        export_call(
            self,
            "remove",
            |fs| fs.remove(path.as_str()),
            |existed| existed,
        )
    }

    fn rename<'a>(&'a self, from: RStr<'a>, to: RStr<'a>) -> FfiFut<'a, ()> {
        let call = |fs: &'a dyn FsProvider| fs.rename(from.as_str(), to.as_str());
        export_call(self, "rename", call, |()| ())
    }

    fn walk<'a>(&'a self, root: RStr<'a>, spec: FfiWalkSpec) -> FfiFut<'a, FfiWalkStream> {
        let context = self.context().clone();
        let map = move |events| export_stream(events, &context, "walk");
        let call = move |fs: &'a dyn FsProvider| fs.walk(root.as_str(), spec.into());
        export_call(self, "walk", call, map)
    }

    fn search<'a>(&'a self, root: RStr<'a>, spec: FfiSearchSpec) -> FfiFut<'a, FfiSearchStream> {
        let context = self.context().clone();
        let map = move |events| export_stream(events, &context, "search");
        let call = move |fs: &'a dyn FsProvider| fs.search(root.as_str(), spec.into());
        export_call(self, "search", call, map)
    }

    fn read_many<'a>(
        &'a self,
        paths: RVec<RString>,
        limits: FfiReadManyLimits,
    ) -> FfiFut<'a, FfiReadMany> {
        let call = move |fs: &'a dyn FsProvider| {
            let paths = paths.into_iter().map(String::from).collect();
            fs.read_many(paths, limits.into())
        };
        export_call(self, "read_many", call, FfiReadMany::from)
    }
}

fn export_read_stream<T: ChunkType>(
    read: ReadStream<PlainStream<T::Plain>>,
    context: &Arc<CallContext>,
    operation: &'static str,
) -> FfiReadStream<FfiStream_TO<'static, RBox<()>, T>> {
    FfiReadStream {
        version: read.version.0.into(),
        size: read.size,
        chunks: export_stream(read.chunks, context, operation),
    }
}
