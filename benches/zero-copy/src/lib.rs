//! The plugin side of dsh's zero-copy prototype (see `benches/README.md`).
//!
//! dsh's plugin API copies every byte buffer once per crossing: a buffer
//! allocated by one binary may only be freed by that binary, so the
//! receiver converts an `RVec<u8>` into its own `Vec<u8>` by copying. This
//! library, loaded with `dlopen` like a plugin, moves buffers across the
//! boundary both ways so the benchmark can compare that copy with wrapping
//! the foreign buffer in [`bytes::Bytes`] instead:
//!
//! - [`Receive::Wrap`]: `Bytes::from_owner(rvec)` — the `RVec` keeps its
//!   vtable, so the allocating binary frees it;
//! - [`FfiBytes`]: any `Bytes` (not only a whole `Vec`) crossing as data
//!   pointer + length + owner + the owner's release function.
//!
//! [`plain`] is the same work in-process, the baseline of every figure.

// abi_stable's #[sabi_trait] expands impls inside a const.
#![allow(non_local_definitions)]

pub mod ffi_bytes;
pub mod module;
pub mod plain;

pub use ffi_bytes::{FfiBytes, live_owners};
pub use module::{ChunkReaderBox, Receive, Received, ZeroCopyModule, ZeroCopyModuleRef};
