//! Byte and text streams, and byte writers, across the boundary.
//!
//! A stream crosses as a pull object: the consumer's poll calls
//! `poll_next_chunk` with its waker, the producer's side polls its plain
//! stream with its runtime entered and answers pending / chunk / end /
//! error. Nothing is buffered in between, so the consumer's pace is the
//! producer's pace (backpressure end to end); dropping the consumer's end
//! drops the producer's stream at once, inside the producer's context.
//! Polling is used instead of one [`async_ffi::FfiFuture`] per chunk: it is
//! the same pull, without a boxed future per chunk.
//!
//! Chunks are never copied: they cross as [`FfiBytes`] / [`FfiText`],
//! which the receiving side wraps as `Bytes` / `Text` while the sending
//! binary keeps owning (and eventually frees) the buffer.

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use abi_stable::StableAbi;
use abi_stable::sabi_trait;
use abi_stable::sabi_trait::TD_Opaque;
use abi_stable::std_types::RBox;
use async_ffi::{ContextExt, FfiContext};
use futures::Stream;

use bytes::Bytes;

use crate::error::{Error, Result};
use crate::ffi::bytes::{FfiBytes, FfiText};
use crate::ffi::context::CallContext;
use crate::ffi::error::FfiError;
use crate::ffi::future::{FfiFut, export, import};
use crate::ffi::panic::{catch, drop_quietly};
use crate::ffi::registry;
use crate::stream::ByteWriter;
use crate::text::Text;

/// One answer of [`FfiStream::poll_next_chunk`].
#[repr(C, u8)]
#[derive(StableAbi)]
pub enum FfiChunk<T> {
    /// Not ready; the waker passed in will be woken.
    Pending,
    /// The next (non-empty) chunk.
    Chunk(T),
    /// The stream ended; later polls answer `End` again.
    End,
    /// The stream failed; it is over (later polls answer `End`).
    Error(FfiError),
}

/// A pull-based stream of chunks ([`FfiBytes`] or [`FfiText`]).
#[sabi_trait]
pub trait FfiStream<T>: Send + Unpin {
    /// Polls for the next chunk with the caller's waker.
    #[sabi(last_prefix_field)]
    fn poll_next_chunk(&mut self, cx: &mut FfiContext<'_>) -> FfiChunk<T>;
}

/// A byte stream as it crosses the ABI.
pub type FfiByteStream = FfiStream_TO<'static, RBox<()>, FfiBytes>;
/// A text stream as it crosses the ABI.
pub type FfiTextStream = FfiStream_TO<'static, RBox<()>, FfiText>;

/// The chunk types that cross: each with its plain counterpart. Neither
/// direction copies.
pub trait ChunkType: StableAbi + Send + Sized + 'static {
    /// `Bytes` or `Text`.
    type Plain: Send + 'static;
    fn from_plain(plain: Self::Plain) -> Self;
    fn into_plain(self) -> Self::Plain;
}

impl ChunkType for FfiBytes {
    type Plain = Bytes;
    fn from_plain(plain: Bytes) -> Self {
        FfiBytes::from_bytes(plain)
    }
    fn into_plain(self) -> Bytes {
        self.into_bytes()
    }
}

impl ChunkType for FfiText {
    type Plain = Text;
    fn from_plain(plain: Text) -> Self {
        FfiText::from_text(plain)
    }
    fn into_plain(self) -> Text {
        self.into_text()
    }
}

/// A plain stream of chunks.
pub type PlainStream<P> = Pin<Box<dyn Stream<Item = Result<P>> + Send + 'static>>;

/// Exports a plain stream produced on the side owning `context`.
/// `operation` names the producing call in errors (`read_bytes`, …). A
/// stream that is itself a proxy is unwrapped: its FFI object is returned.
pub fn export_stream<T: ChunkType>(
    stream: PlainStream<T::Plain>,
    context: &Arc<CallContext>,
    operation: &'static str,
) -> FfiStream_TO<'static, RBox<()>, T> {
    // SAFETY: the box is re-pinned below unless it is a `StreamProxy`,
    // which is `Unpin`; the pointee is never moved.
    let stream = unsafe { Pin::into_inner_unchecked(stream) };
    let inner = match registry::take_proxy::<StreamProxy<T>, _>(stream) {
        Ok(proxy) => match proxy.into_object() {
            Some(object) => return object,
            None => None,
        },
        Err(stream) => Some(Box::into_pin(stream)),
    };
    FfiStream_TO::from_value(
        StreamExport::<T> {
            context: context.clone(),
            operation,
            inner,
            parked: None,
        },
        TD_Opaque,
    )
}

/// Imports a stream object as a plain stream.
pub fn import_stream<T: ChunkType>(
    object: FfiStream_TO<'static, RBox<()>, T>,
) -> PlainStream<T::Plain> {
    let proxy = Box::new(StreamProxy {
        object: Some(object),
    });
    registry::register::<StreamProxy<T>>(&*proxy);
    Box::into_pin(proxy)
}

struct StreamExport<T: ChunkType> {
    context: Arc<CallContext>,
    operation: &'static str,
    /// `None` once the stream ended or failed.
    inner: Option<PlainStream<T::Plain>>,
    /// The registration that lets a close wake a pending pull.
    parked: Option<u64>,
}

impl<T: ChunkType> FfiStream<T> for StreamExport<T> {
    fn poll_next_chunk(&mut self, cx: &mut FfiContext<'_>) -> FfiChunk<T> {
        let Some(inner) = self.inner.as_mut() else {
            return FfiChunk::End;
        };
        let _entered = self.context.enter();
        if self.context.is_closed() {
            self.context.unpark(&mut self.parked);
            drop_quietly(self.inner.take());
            return FfiChunk::Error(self.context.closed_error(self.operation).into());
        }
        let (context, parked) = (&self.context, &mut self.parked);
        let polled = catch(self.context.side(), self.operation, || {
            cx.with_context(|cx| {
                let polled = inner.as_mut().poll_next(cx);
                if polled.is_pending() {
                    context.park(parked, cx.waker());
                }
                polled
            })
        });
        let answer = match polled {
            Ok(Poll::Pending) => return FfiChunk::Pending,
            Ok(Poll::Ready(Some(Ok(chunk)))) => return FfiChunk::Chunk(T::from_plain(chunk)),
            Ok(Poll::Ready(Some(Err(err)))) | Err(err) => FfiChunk::Error(err.into()),
            Ok(Poll::Ready(None)) => FfiChunk::End,
        };
        // Over: release the producer now rather than when the consumer drops.
        self.context.unpark(&mut self.parked);
        drop_quietly(self.inner.take());
        answer
    }
}

impl<T: ChunkType> Drop for StreamExport<T> {
    fn drop(&mut self) {
        self.context.unpark(&mut self.parked);
        if let Some(inner) = self.inner.take() {
            let _entered = self.context.enter();
            drop_quietly(inner);
        }
    }
}

/// The consumer's end of an imported stream.
struct StreamProxy<T: ChunkType> {
    /// `None` once handed on by [`export_stream`].
    object: Option<FfiStream_TO<'static, RBox<()>, T>>,
}

impl<T: ChunkType> StreamProxy<T> {
    #[allow(
        clippy::boxed_local,
        reason = "by box, not by value: moving the proxy out of its box would make its `Drop` \
                  unregister the wrong address"
    )]
    fn into_object(mut self: Box<Self>) -> Option<FfiStream_TO<'static, RBox<()>, T>> {
        self.object.take()
    }
}

impl<T: ChunkType> Stream for StreamProxy<T> {
    type Item = Result<T::Plain>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = self.get_mut();
        let Some(object) = this.object.as_mut() else {
            return Poll::Ready(None);
        };
        match cx.with_ffi_context(|cx| object.poll_next_chunk(cx)) {
            FfiChunk::Pending => Poll::Pending,
            FfiChunk::Chunk(chunk) => Poll::Ready(Some(Ok(chunk.into_plain()))),
            FfiChunk::End => {
                this.object = None;
                Poll::Ready(None)
            }
            FfiChunk::Error(err) => {
                this.object = None;
                Poll::Ready(Some(Err(Error::from(err))))
            }
        }
    }
}

impl<T: ChunkType> Drop for StreamProxy<T> {
    fn drop(&mut self) {
        registry::unregister::<StreamProxy<T>>(self);
    }
}

/// The writing end of a byte pipe as it crosses the ABI.
#[sabi_trait]
pub trait FfiByteWriter: Send + Unpin {
    /// Writes the whole chunk; resolves once it was handed on.
    fn write<'a>(&'a mut self, chunk: FfiBytes) -> FfiFut<'a, ()>;

    /// Signals end of input. Later writes fail with `Closed`.
    #[sabi(last_prefix_field)]
    fn close<'a>(&'a mut self) -> FfiFut<'a, ()>;
}

/// A byte writer as it crosses the ABI.
pub type FfiWriter = FfiByteWriter_TO<'static, RBox<()>>;

/// Exports a plain writer owned by the side of `context`; a writer that is
/// itself a proxy is unwrapped.
pub fn export_writer(writer: Box<dyn ByteWriter>, context: &Arc<CallContext>) -> FfiWriter {
    let inner = match registry::take_proxy::<WriterProxy, _>(writer) {
        Ok(proxy) => match proxy.into_object() {
            Some(object) => return object,
            None => None,
        },
        Err(writer) => Some(writer),
    };
    FfiByteWriter_TO::from_value(
        WriterExport {
            context: context.clone(),
            inner,
        },
        TD_Opaque,
    )
}

/// Imports a writer object as a plain writer.
pub fn import_writer(object: FfiWriter) -> Box<dyn ByteWriter> {
    let proxy = Box::new(WriterProxy {
        object: Some(object),
    });
    registry::register::<WriterProxy>(&*proxy);
    proxy
}

struct WriterExport {
    context: Arc<CallContext>,
    /// `None` only for the husk of a proxy that was handed on twice.
    inner: Option<Box<dyn ByteWriter>>,
}

impl WriterExport {
    fn call<'a>(
        &'a mut self,
        operation: &'static str,
        call: impl FnOnce(&'a mut Box<dyn ByteWriter>) -> futures::future::BoxFuture<'a, Result<()>>,
    ) -> FfiFut<'a, ()> {
        let inner = self.inner.as_mut();
        export(
            &*self.context,
            operation,
            move || match inner {
                Some(inner) => call(inner),
                None => Box::pin(std::future::ready(Err(Error::closed(format!(
                    "{operation}: the writer was handed on"
                ))))),
            },
            |()| (),
        )
    }
}

impl FfiByteWriter for WriterExport {
    fn write<'a>(&'a mut self, chunk: FfiBytes) -> FfiFut<'a, ()> {
        let chunk = chunk.into_bytes();
        self.call("write", move |inner| inner.write(chunk))
    }

    fn close<'a>(&'a mut self) -> FfiFut<'a, ()> {
        self.call("close", |inner| inner.close())
    }
}

impl Drop for WriterExport {
    fn drop(&mut self) {
        if let Some(inner) = self.inner.take() {
            let _entered = self.context.enter();
            drop_quietly(inner);
        }
    }
}

struct WriterProxy {
    object: Option<FfiWriter>,
}

impl WriterProxy {
    #[allow(
        clippy::boxed_local,
        reason = "by box, not by value (see `StreamProxy::into_object`)"
    )]
    fn into_object(mut self: Box<Self>) -> Option<FfiWriter> {
        self.object.take()
    }

    fn object(&mut self, operation: &str) -> Result<&mut FfiWriter> {
        self.object
            .as_mut()
            .ok_or_else(|| Error::closed(format!("{operation}: the writer was handed on")))
    }
}

#[async_trait::async_trait]
impl ByteWriter for WriterProxy {
    async fn write(&mut self, chunk: Bytes) -> Result<()> {
        import(self.object("write")?.write(FfiBytes::from_bytes(chunk))).await
    }

    async fn close(&mut self) -> Result<()> {
        import(self.object("close")?.close()).await
    }
}

impl Drop for WriterProxy {
    fn drop(&mut self) {
        registry::unregister::<WriterProxy>(self);
    }
}
