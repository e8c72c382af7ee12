//! The `subprocess` seam across the boundary: the provider, its process
//! handles and its terminals.

mod export;
mod proxy;
mod types;

use abi_stable::sabi_trait;
use abi_stable::std_types::{RArc, RDuration, ROption, RStr, RString, RVec};

pub use export::export_subprocess;
pub use proxy::import_subprocess;
pub use types::*;

use crate::ffi::bytes::FfiBytes;
use crate::ffi::error::FfiResult;
use crate::ffi::future::FfiFut;
use crate::ffi::stream::{FfiByteStream, FfiWriter};

/// [`crate::subprocess::SubprocessProvider`] as an FFI object.
#[sabi_trait]
pub trait FfiSubprocess: Send + Sync {
    fn resolve_executable<'a>(
        &'a self,
        name: RStr<'a>,
        extra_path: RVec<RString>,
    ) -> FfiFut<'a, RString>;
    fn spawn<'a>(&'a self, spec: FfiSpawnSpec) -> FfiFut<'a, FfiProcessObject>;
    fn spawn_terminal<'a>(&'a self, spec: FfiTerminalSpec) -> FfiFut<'a, FfiTerminalObject>;
    /// `retain` is [`crate::durable::DurableSpec::retain`].
    fn spawn_durable<'a>(&'a self, spec: FfiSpawnSpec, retain: u64) -> FfiFut<'a, FfiAttached>;
    fn list_durable<'a>(&'a self) -> FfiFut<'a, RVec<FfiDurableCommand>>;
    fn attach<'a>(&'a self, spec: FfiAttachSpec) -> FfiFut<'a, FfiAttached>;
    #[sabi(last_prefix_field)]
    fn forget<'a>(&'a self, id: RStr<'a>) -> FfiFut<'a, ()>;
}

/// [`crate::durable::Attached`] as it crosses the ABI.
#[repr(C)]
#[derive(abi_stable::StableAbi)]
pub struct FfiAttached {
    pub id: RString,
    pub process: FfiProcessObject,
    pub from: abi_stable::std_types::Tuple2<u64, u64>,
}

/// [`crate::subprocess::Process`] as an FFI object. Synchronous methods
/// return results so a panic on the exporting side still crosses as an
/// error.
#[sabi_trait]
pub trait FfiProcess: Send + Sync {
    fn pid(&self) -> FfiResult<u32>;
    fn take_stdin(&self) -> FfiResult<ROption<FfiWriter>>;
    fn take_stdout(&self) -> FfiResult<ROption<FfiByteStream>>;
    fn take_stderr(&self) -> FfiResult<ROption<FfiByteStream>>;
    fn wait<'a>(&'a self) -> FfiFut<'a, FfiExitStatus>;
    fn read_output<'a>(
        &'a self,
        stream: FfiOutputStream,
        offset: u64,
        max_len: u64,
    ) -> FfiFut<'a, FfiOutputSnapshot>;
    #[sabi(last_prefix_field)]
    fn terminate<'a>(&'a self, grace: RDuration) -> FfiFut<'a, ()>;
}

/// [`crate::subprocess::Terminal`] as an FFI object.
#[sabi_trait]
pub trait FfiTerminal: Send + Sync {
    fn pid(&self) -> FfiResult<u32>;
    fn take_output(&self) -> FfiResult<ROption<FfiByteStream>>;
    fn write<'a>(&'a self, data: FfiBytes) -> FfiFut<'a, ()>;
    fn resize<'a>(&'a self, cols: u16, rows: u16) -> FfiFut<'a, ()>;
    fn foreground_pgid<'a>(&'a self) -> FfiFut<'a, u32>;
    fn signal<'a>(&'a self, signal: i32) -> FfiFut<'a, ()>;
    fn terminate<'a>(&'a self) -> FfiFut<'a, ()>;
    #[sabi(last_prefix_field)]
    fn wait<'a>(&'a self) -> FfiFut<'a, FfiExitStatus>;
}

/// A `subprocess` service as it crosses the ABI.
pub type FfiSubprocessObject = FfiSubprocess_TO<'static, RArc<()>>;
/// A process handle as it crosses the ABI.
pub type FfiProcessObject = FfiProcess_TO<'static, RArc<()>>;
/// A terminal handle as it crosses the ABI.
pub type FfiTerminalObject = FfiTerminal_TO<'static, RArc<()>>;
