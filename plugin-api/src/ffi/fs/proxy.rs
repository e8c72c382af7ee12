//! The importing side of `fs`: an [`super::FfiFs`] object behind [`FsProvider`].

use std::sync::Arc;

use abi_stable::std_types::{ROption, RStr};
use async_trait::async_trait;
use bytes::Bytes;

use super::{FfiFs_TO, FfiFsObject, FfiReadStream, FfiSearchStream, FfiWalkStream};
use crate::error::Result;
use crate::ffi::bytes::FfiBytes;
use crate::ffi::context::CallContext;
use crate::ffi::future::import;
use crate::ffi::registry;
use crate::ffi::stream::{FfiByteStream, FfiTextStream, export_stream, import_stream};
use crate::fs::{
    DirEntry, Edit, EditOutcome, FsProvider, Metadata, ReadManyItem, ReadManyLimits, ReadStream,
    Resolved, SearchSpec, SearchStream, TextFile, Version, WalkSpec, WalkStream, WriteGuard,
};
use crate::stream::{ByteStream, TextStream};

/// Imports an `fs` object as a plain provider. Calls go straight to the
/// exporting side; nothing runs on the importing side's runtime.
pub fn import_fs(object: FfiFsObject) -> Arc<dyn FsProvider> {
    let proxy = Arc::new(FsProxy { object });
    registry::register::<FsProxy>(Arc::as_ptr(&proxy));
    proxy
}

pub(super) struct FsProxy {
    object: FfiFsObject,
}

impl FsProxy {
    /// Another handle to the FFI object this proxy stands for.
    pub(super) fn object(&self) -> FfiFsObject {
        FfiFs_TO::from_sabi(self.object.obj.shallow_clone())
    }
}

impl Drop for FsProxy {
    fn drop(&mut self) {
        registry::unregister::<FsProxy>(self);
    }
}

fn read_stream<S, P>(read: FfiReadStream<S>, chunks: impl FnOnce(S) -> P) -> ReadStream<P> {
    ReadStream {
        version: Version(read.version.into()),
        size: read.size,
        chunks: chunks(read.chunks),
    }
}

#[async_trait]
impl FsProvider for FsProxy {
    async fn resolve(&self, path: &str, cwd: Option<&str>) -> Result<Resolved> {
        import(
            self.object
                .resolve(path.into(), ROption::from(cwd.map(RStr::from))),
        )
        .await
    }

    async fn contains(&self, root: &str, target: &str) -> Result<bool> {
        import(self.object.contains(root.into(), target.into())).await
    }

    async fn stat(&self, path: &str) -> Result<Metadata> {
        import(self.object.stat(path.into())).await
    }

    async fn lstat(&self, path: &str) -> Result<Metadata> {
        import(self.object.lstat(path.into())).await
    }

    async fn list(&self, dir: &str) -> Result<Vec<DirEntry>> {
        import(self.object.list(dir.into())).await
    }

    async fn read_text(&self, path: &str) -> Result<TextFile> {
        import(self.object.read_text(path.into())).await
    }

    async fn stream_text(&self, path: &str) -> Result<ReadStream<TextStream>> {
        let read: FfiReadStream<FfiTextStream> =
            import(self.object.stream_text(path.into())).await?;
        Ok(read_stream(read, import_stream))
    }

    async fn read_bytes(&self, path: &str) -> Result<ReadStream<ByteStream>> {
        let read: FfiReadStream<FfiByteStream> =
            import(self.object.read_bytes(path.into())).await?;
        Ok(read_stream(read, import_stream))
    }

    async fn write(&self, path: &str, content: Bytes, guard: WriteGuard) -> Result<Version> {
        let content = FfiBytes::from_bytes(content);
        import(self.object.write(path.into(), content, guard.into())).await
    }

    async fn write_stream(
        &self,
        path: &str,
        content: ByteStream,
        guard: WriteGuard,
    ) -> Result<Version> {
        // The content is pulled by the provider from this side, in this
        // side's runtime (see `CallContext::host`).
        let content = export_stream::<FfiBytes>(content, &CallContext::host(), "write_stream");
        import(self.object.write_stream(path.into(), content, guard.into())).await
    }

    async fn edit(&self, path: &str, edits: Vec<Edit>, guard: WriteGuard) -> Result<EditOutcome> {
        let edits = edits.into_iter().map(Into::into).collect();
        import(self.object.edit(path.into(), edits, guard.into())).await
    }

    async fn mkdir(&self, path: &str) -> Result<()> {
        import(self.object.mkdir(path.into())).await
    }

    async fn remove(&self, path: &str) -> Result<bool> {
        import(self.object.remove(path.into())).await
    }

    async fn rename(&self, from: &str, to: &str) -> Result<()> {
        import(self.object.rename(from.into(), to.into())).await
    }

    async fn walk(&self, root: &str, spec: WalkSpec) -> Result<WalkStream> {
        let events: FfiWalkStream = import(self.object.walk(root.into(), spec.into())).await?;
        Ok(import_stream(events))
    }

    async fn search(&self, root: &str, spec: SearchSpec) -> Result<SearchStream> {
        let events: FfiSearchStream = import(self.object.search(root.into(), spec.into())).await?;
        Ok(import_stream(events))
    }

    async fn read_many(
        &self,
        paths: Vec<String>,
        limits: ReadManyLimits,
    ) -> Result<Vec<ReadManyItem>> {
        let paths = paths.into_iter().map(Into::into).collect();
        import(self.object.read_many(paths, limits.into())).await
    }
}
