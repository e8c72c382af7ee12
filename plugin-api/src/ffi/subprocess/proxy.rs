//! The importing side of `subprocess`: FFI objects behind the plain traits.

use std::sync::Arc;
use std::time::Duration;

use abi_stable::std_types::{ROption, RString, RVec};
use async_trait::async_trait;
use bytes::Bytes;

use super::{
    FfiAttached, FfiDurableCommand, FfiProcess_TO, FfiProcessObject, FfiSubprocess_TO,
    FfiSubprocessObject, FfiTerminal_TO, FfiTerminalObject,
};
use crate::durable::{AttachSpec, Attached, DurableCommand, DurableSpec};
use crate::error::Result;
use crate::ffi::bytes::FfiBytes;
use crate::ffi::error::{FfiResult, lift};
use crate::ffi::future::import;
use crate::ffi::registry;
use crate::ffi::stream::{import_stream, import_writer};
use crate::stream::{ByteStream, ByteWriter};
use crate::subprocess::{
    ExitStatus, OutputSnapshot, OutputStream, Process, Signal, SpawnSpec, SubprocessProvider,
    Terminal, TerminalSpec,
};

/// Imports a `subprocess` object as a plain provider.
pub fn import_subprocess(object: FfiSubprocessObject) -> Arc<dyn SubprocessProvider> {
    let proxy = Arc::new(SubprocessProxy { object });
    registry::register::<SubprocessProxy>(Arc::as_ptr(&proxy));
    proxy
}

/// Imports a process handle; its pid is read once (it never changes).
fn import_process(object: FfiProcessObject) -> Result<Arc<dyn Process>> {
    let pid = lift(object.pid())?;
    let proxy = Arc::new(ProcessProxy { object, pid });
    registry::register::<ProcessProxy>(Arc::as_ptr(&proxy));
    Ok(proxy)
}

/// Imports a terminal handle; its pid is read once.
fn import_terminal(object: FfiTerminalObject) -> Result<Arc<dyn Terminal>> {
    let pid = lift(object.pid())?;
    let proxy = Arc::new(TerminalProxy { object, pid });
    registry::register::<TerminalProxy>(Arc::as_ptr(&proxy));
    Ok(proxy)
}

/// The handle a `take_*` call produced. The plain methods cannot fail, so
/// an error from the other side (a caught panic, a disposed instance) is
/// logged and reported as "no handle".
fn taken<T>(result: FfiResult<ROption<T>>, operation: &str) -> Option<T> {
    match lift::<ROption<T>, ROption<T>>(result) {
        Ok(handle) => handle.into_option(),
        Err(err) => {
            tracing::error!(
                target: "dsh_plugin_api",
                error = %err,
                "{operation} failed across the plugin boundary; no handle returned"
            );
            None
        }
    }
}

pub(super) struct SubprocessProxy {
    object: FfiSubprocessObject,
}

impl SubprocessProxy {
    pub(super) fn object(&self) -> FfiSubprocessObject {
        FfiSubprocess_TO::from_sabi(self.object.obj.shallow_clone())
    }
}

impl Drop for SubprocessProxy {
    fn drop(&mut self) {
        registry::unregister::<SubprocessProxy>(self);
    }
}

#[async_trait]
impl SubprocessProvider for SubprocessProxy {
    async fn resolve_executable(&self, name: &str, extra_path: &[String]) -> Result<String> {
        let extra_path = extra_path
            .iter()
            .map(|dir| RString::from(dir.as_str()))
            .collect();
        import(self.object.resolve_executable(name.into(), extra_path)).await
    }

    async fn spawn(&self, spec: SpawnSpec) -> Result<Arc<dyn Process>> {
        let object: FfiProcessObject = import(self.object.spawn(spec.into())).await?;
        import_process(object)
    }

    async fn spawn_terminal(&self, spec: TerminalSpec) -> Result<Arc<dyn Terminal>> {
        let object: FfiTerminalObject = import(self.object.spawn_terminal(spec.into())).await?;
        import_terminal(object)
    }

    async fn spawn_durable(&self, spec: SpawnSpec, durable: DurableSpec) -> Result<Attached> {
        let attached: FfiAttached =
            import(self.object.spawn_durable(spec.into(), durable.retain)).await?;
        import_attached(attached)
    }

    async fn list_durable(&self) -> Result<Vec<DurableCommand>> {
        let commands: RVec<FfiDurableCommand> = import(self.object.list_durable()).await?;
        Ok(commands.into_iter().map(DurableCommand::from).collect())
    }

    async fn attach(&self, spec: AttachSpec) -> Result<Attached> {
        let attached: FfiAttached = import(self.object.attach(spec.into())).await?;
        import_attached(attached)
    }

    async fn forget(&self, id: &str) -> Result<()> {
        import(self.object.forget(id.into())).await
    }
}

fn import_attached(attached: FfiAttached) -> Result<Attached> {
    Ok(Attached {
        id: attached.id.into(),
        process: import_process(attached.process)?,
        from: [attached.from.0, attached.from.1],
    })
}

pub(super) struct ProcessProxy {
    object: FfiProcessObject,
    pid: u32,
}

impl ProcessProxy {
    pub(super) fn object(&self) -> FfiProcessObject {
        FfiProcess_TO::from_sabi(self.object.obj.shallow_clone())
    }
}

impl Drop for ProcessProxy {
    fn drop(&mut self) {
        registry::unregister::<ProcessProxy>(self);
    }
}

#[async_trait]
impl Process for ProcessProxy {
    fn pid(&self) -> u32 {
        self.pid
    }

    fn take_stdin(&self) -> Option<Box<dyn ByteWriter>> {
        taken(self.object.take_stdin(), "take_stdin").map(import_writer)
    }

    fn take_stdout(&self) -> Option<ByteStream> {
        taken(self.object.take_stdout(), "take_stdout").map(import_stream)
    }

    fn take_stderr(&self) -> Option<ByteStream> {
        taken(self.object.take_stderr(), "take_stderr").map(import_stream)
    }

    async fn wait(&self) -> Result<ExitStatus> {
        import(self.object.wait()).await
    }

    async fn read_output(
        &self,
        stream: OutputStream,
        offset: u64,
        max_len: usize,
    ) -> Result<OutputSnapshot> {
        import(
            self.object
                .read_output(stream.into(), offset, max_len as u64),
        )
        .await
    }

    async fn terminate(&self, grace: Duration) -> Result<()> {
        import(self.object.terminate(grace.into())).await
    }
}

pub(super) struct TerminalProxy {
    object: FfiTerminalObject,
    pid: u32,
}

impl TerminalProxy {
    pub(super) fn object(&self) -> FfiTerminalObject {
        FfiTerminal_TO::from_sabi(self.object.obj.shallow_clone())
    }
}

impl Drop for TerminalProxy {
    fn drop(&mut self) {
        registry::unregister::<TerminalProxy>(self);
    }
}

#[async_trait]
impl Terminal for TerminalProxy {
    fn pid(&self) -> u32 {
        self.pid
    }

    fn take_output(&self) -> Option<ByteStream> {
        taken(self.object.take_output(), "take_output").map(import_stream)
    }

    async fn write(&self, data: Bytes) -> Result<()> {
        import(self.object.write(FfiBytes::from_bytes(data))).await
    }

    async fn resize(&self, cols: u16, rows: u16) -> Result<()> {
        import(self.object.resize(cols, rows)).await
    }

    async fn foreground_pgid(&self) -> Result<u32> {
        import(self.object.foreground_pgid()).await
    }

    async fn signal(&self, signal: Signal) -> Result<()> {
        import(self.object.signal(signal.0)).await
    }

    async fn terminate(&self) -> Result<()> {
        import(self.object.terminate()).await
    }

    async fn wait(&self) -> Result<ExitStatus> {
        import(self.object.wait()).await
    }
}
