//! The stable ABI between a host and its plugin libraries (abi_stable
//! 0.11), and the glue that wraps the plain seam traits into it. Nothing in
//! here is public: plugin authors see [`crate::export_plugin!`], hosts see
//! [`crate::host`].
//!
//! # Layout
//!
//! One file per seam or concern: [`module`] (the root module, a prefix
//! type) and [`export`] (its plugin side, generic over the plugin type);
//! [`instance`] (create/dispose of an instance); [`fs`], [`subprocess`],
//! [`owner`] (per seam: `#[sabi_trait]` objects, `repr(C)` mirrors with
//! `From` both ways, the exporting side, the importing proxy); [`stream`] (pull
//! streams and writers); [`bytes`] (byte and text payloads); [`service`];
//! [`error`]; [`future`]; [`context`] and [`runtime`]; [`mod@panic`];
//! [`registry`] (proxy unwrapping); [`log`], [`log_forward`], [`log_sink`]
//! (the tracing bridge).
//!
//! # Decisions
//!
//! - **Loading.** A library exports two symbols named after its crate —
//!   `dsh_plugin_api_version__<crate>` (a `u32`) and
//!   `dsh_plugin_header__<crate>` (abi_stable's `LibHeader`). The host finds
//!   them by reading the ELF dynamic symbol table (no code of a non-plugin
//!   runs), maps the library with abi_stable's `RawLibrary`, checks the API
//!   version, then validates the header (`AbiHeaderRef::upgrade`) and calls
//!   `init_root_module` on it — which checks the layout of every type
//!   reachable from the root module. This is `lib_header_from_path` minus
//!   its fixed symbol name; `RootModule::load_from_file` is never used (it
//!   caches one module per type, so a second plugin would silently be the
//!   first). Why per-crate names: abi_stable's fixed header symbol makes two
//!   plugin rlibs unlinkable into one program ("multiple definition",
//!   measured with GNU ld), and plugins are `cdylib` + `rlib` so they can be
//!   used in-process. Libraries are never unloaded.
//! - **Futures** cross as [`async_ffi::BorrowingFfiFuture`], borrowing the
//!   object and the string arguments (no copies of paths), and are **polled
//!   with the exporting side's runtime entered**: each poll enters the
//!   instance's tokio runtime and tracing scope, runs under `catch_unwind`
//!   and checks the disposed flag. Dropping the FFI future drops the plugin
//!   future immediately, in the plugin's context: the plugin observes the
//!   cancellation synchronously. The alternative — spawn the future on the
//!   plugin runtime and complete it through a runtime-agnostic channel —
//!   was measured (`cargo run --release -p dsh-plugin-api --example
//!   ffi_overhead`; 2 vCPUs shared with other builds, load average ~4, six
//!   runs): `std::fs::read_to_string` of 1 KiB took 5.0–7.2 µs; the FFI
//!   round trip added 0.15–0.93 µs to an in-memory `read_text` of 1 KiB
//!   (0.15–0.25 µs in the quieter runs) — 1.03–1.16× of the peer for a
//!   provider doing the same work as `std::fs` — while spawn + oneshot alone
//!   added 12.0–14.8 µs (2.7–3.6×: a cross-thread wake-up per call). Entered
//!   on poll it is. Consequence for plugin code: it runs on the caller's
//!   thread; `tokio::task::block_in_place` there runs inline (that thread is
//!   no worker of the plugin's runtime), so long blocking work belongs in
//!   `spawn_blocking`. Only `create` and `dispose` run as tasks on the
//!   instance runtime (they must not be half-cancelled; their cost does not
//!   matter).
//! - **One runtime per instance** ([`runtime`]): multi-thread, 2 named
//!   workers (`dsh-<id>`), created before `Plugin::create`, shut down after
//!   `Plugin::dispose` on a thread of its own (never blocking an async
//!   context), with 5 s of grace for blocking tasks. After dispose every
//!   object of the instance answers `Closed`, and calls or pulls pending at
//!   that moment are woken to answer it (each pending poll parks its waker
//!   on the instance's context; a waker is only cloned when a call actually
//!   waits, never on the fast path).
//! - **Streams** are pull objects ([`stream`]): `poll_next_chunk` with the
//!   consumer's waker answers pending / chunk / end / error — the pull of
//!   docs/design.md §4.5 without a boxed future per chunk. Nothing is buffered
//!   in between (backpressure is the producer's, end to end); dropping the
//!   consumer drops the producer at once. Writers have `close`.
//! - **Byte payloads are never copied** ([`bytes`]): stream chunks, writes
//!   and snapshots cross as [`bytes::FfiBytes`] (`#[repr(C)] { ptr, len,
//!   owner, release }`) and text as [`bytes::FfiText`] over it. A buffer may
//!   only be freed by the allocator of the binary that made it, so the
//!   sender boxes its `Bytes` as the owner and passes its own `release`;
//!   the receiver wraps the data with `Bytes::from_owner`, and the last
//!   clone's drop runs the sender's `release`. Any `Bytes` crosses this way
//!   (a slice, a shared buffer, a chunk received from another plugin), so
//!   a decorator hands on what it received without a copy. Before API
//!   version 2 each crossing copied (`RVec::into_vec` copies whenever the
//!   vector's vtable is another binary's), and that copy was the whole gap
//!   on the bulk paths: through the host, `read_text` of 64 MiB took 1.86×
//!   `std::fs::read_to_string`, `read_bytes` 1.29× a plain `File::read`
//!   loop, `write` 1.82× `std::fs::write` — each at parity in-process.
//!   Without the copy (`cargo bench -p dsh-benches`, 2 vCPUs, load ~1,
//!   ext4): 1.005×, 1.06× and 1.10× (1.00× against the same atomic
//!   protocol in std), equal to the in-process provider within the noise;
//!   the 256 MiB pipe through the host is as fast as in-process. A
//!   crossing still allocates one small box for the owner (~40 ns, what
//!   copying 1 KiB cost).
//! - **Panics never cross** ([`mod@panic`]): every `extern` entry, every
//!   vtable method implemented here, every poll and every drop of plugin
//!   state runs under `catch_unwind`; a panic becomes `ErrorKind::Panicked` with the
//!   panic message and the operation. Synchronous seam methods (`pid`,
//!   `take_stdout`, `info` …) return results across the boundary; the
//!   importing side reads fixed values (`pid`, `info`) once at import so
//!   its infallible plain methods stay infallible.
//! - **Errors** cross as [`error::FfiError`]: stable kind code, message,
//!   optional subject. Unknown codes survive as `ErrorKind::Other`.
//! - **Proxies both ways, never nested** ([`registry`]): the host's
//!   services are proxies over FFI objects; services a plugin receives are
//!   the same proxies. Handing a proxy on (host → another plugin, a
//!   decorator returning its provider's stream) hands on the FFI object it
//!   stands for, so calls never hop through a middle side.
//! - **Tracing** ([`log_forward`], [`log_sink`]): the host hands each
//!   library a sink at load; the library installs a forwarding subscriber
//!   once. Interest is decided per callsite by the host's own subscriber,
//!   events cross with their field values formatted, and the host re-emits
//!   them through callsites of their own (target, level, fields kept, plus
//!   `dsh.plugin` = the instance id).
//! - **Compile time**: the seam glue is written against trait objects
//!   (`Arc<dyn FsProvider>` …), so it is compiled once in this crate; only
//!   the root-module functions are generic over the plugin type.

#![allow(
    non_local_definitions,
    reason = "abi_stable 0.11's #[sabi_trait] expands impls inside a const"
)]
pub mod bytes;
pub mod context;
pub mod error;
pub mod export;
pub mod fs;
pub mod future;
pub mod instance;
pub mod log;
pub mod log_forward;
pub mod log_sink;
pub mod module;
pub mod owner;
pub mod panic;
pub mod registry;
pub mod runtime;
pub mod service;
pub mod stream;
pub mod subprocess;
