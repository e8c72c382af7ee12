//! The exporting side of `subprocess`: plain providers, processes and
//! terminals behind their FFI objects.

use std::sync::Arc;

use abi_stable::sabi_trait::TD_Opaque;
use abi_stable::std_types::{RArc, RDuration, ROption, RStr, RString, RVec};

use super::proxy::{ProcessProxy, SubprocessProxy, TerminalProxy};
use super::{
    FfiAttachSpec, FfiAttached, FfiDurableCommand, FfiExitStatus, FfiOutputSnapshot,
    FfiOutputStream, FfiProcess, FfiProcess_TO, FfiProcessObject, FfiSpawnSpec, FfiSubprocess,
    FfiSubprocess_TO, FfiSubprocessObject, FfiTerminal, FfiTerminal_TO, FfiTerminalObject,
    FfiTerminalSpec,
};
use crate::durable::{Attached, DurableSpec};
use crate::ffi::bytes::FfiBytes;
use crate::ffi::context::{Bound, CallContext};
use crate::ffi::error::{FfiResult, lower};
use crate::ffi::future::{FfiFut, export_call};
use crate::ffi::registry;
use crate::ffi::stream::{FfiByteStream, FfiWriter, export_stream, export_writer};
use crate::subprocess::{Process, Signal, SubprocessProvider, Terminal};

type SubprocessExport = Bound<Arc<dyn SubprocessProvider>>;
type ProcessExport = Bound<Arc<dyn Process>>;
type TerminalExport = Bound<Arc<dyn Terminal>>;

/// Exports a `subprocess` provider (a proxy is unwrapped).
pub fn export_subprocess(
    subprocess: Arc<dyn SubprocessProvider>,
    context: &Arc<CallContext>,
) -> FfiSubprocessObject {
    if let Some(proxy) = registry::proxy_of::<SubprocessProxy, _>(&subprocess) {
        return proxy.object();
    }
    FfiSubprocess_TO::from_ptr(
        RArc::new(Bound::new(subprocess, context.clone())),
        TD_Opaque,
    )
}

/// Exports a process handle (a proxy is unwrapped).
pub fn export_process(process: Arc<dyn Process>, context: &Arc<CallContext>) -> FfiProcessObject {
    if let Some(proxy) = registry::proxy_of::<ProcessProxy, _>(&process) {
        return proxy.object();
    }
    FfiProcess_TO::from_ptr(RArc::new(Bound::new(process, context.clone())), TD_Opaque)
}

/// Exports a terminal handle (a proxy is unwrapped).
pub fn export_terminal(
    terminal: Arc<dyn Terminal>,
    context: &Arc<CallContext>,
) -> FfiTerminalObject {
    if let Some(proxy) = registry::proxy_of::<TerminalProxy, _>(&terminal) {
        return proxy.object();
    }
    FfiTerminal_TO::from_ptr(RArc::new(Bound::new(terminal, context.clone())), TD_Opaque)
}

impl FfiSubprocess for SubprocessExport {
    fn resolve_executable<'a>(
        &'a self,
        name: RStr<'a>,
        extra_path: RVec<RString>,
    ) -> FfiFut<'a, RString> {
        let call = move |subprocess: &'a dyn SubprocessProvider| {
            let extra_path: Vec<String> = extra_path.into_iter().map(String::from).collect();
            Box::pin(async move {
                subprocess
                    .resolve_executable(name.as_str(), &extra_path)
                    .await
            }) as futures::future::BoxFuture<'a, _>
        };
        export_call(self, "resolve_executable", call, RString::from)
    }

    fn spawn<'a>(&'a self, spec: FfiSpawnSpec) -> FfiFut<'a, FfiProcessObject> {
        let context = self.context().clone();
        let map = move |process| export_process(process, &context);
        export_call(
            self,
            "spawn",
            |subprocess| subprocess.spawn(spec.into()),
            map,
        )
    }

    fn spawn_terminal<'a>(&'a self, spec: FfiTerminalSpec) -> FfiFut<'a, FfiTerminalObject> {
        let context = self.context().clone();
        let map = move |terminal| export_terminal(terminal, &context);
        let call = |subprocess: &'a dyn SubprocessProvider| subprocess.spawn_terminal(spec.into());
        export_call(self, "spawn_terminal", call, map)
    }

    fn spawn_durable<'a>(&'a self, spec: FfiSpawnSpec, retain: u64) -> FfiFut<'a, FfiAttached> {
        let context = self.context().clone();
        let map = move |attached| export_attached(attached, &context);
        let call = move |subprocess: &'a dyn SubprocessProvider| {
            subprocess.spawn_durable(spec.into(), DurableSpec { retain })
        };
        export_call(self, "spawn_durable", call, map)
    }

    fn list_durable<'a>(&'a self) -> FfiFut<'a, RVec<FfiDurableCommand>> {
        let map = |commands: Vec<_>| commands.into_iter().map(FfiDurableCommand::from).collect();
        export_call(
            self,
            "list_durable",
            |subprocess| subprocess.list_durable(),
            map,
        )
    }

    fn attach<'a>(&'a self, spec: FfiAttachSpec) -> FfiFut<'a, FfiAttached> {
        let context = self.context().clone();
        let map = move |attached| export_attached(attached, &context);
        let call = move |subprocess: &'a dyn SubprocessProvider| subprocess.attach(spec.into());
        export_call(self, "attach", call, map)
    }

    fn forget<'a>(&'a self, id: RStr<'a>) -> FfiFut<'a, ()> {
        let call = move |subprocess: &'a dyn SubprocessProvider| subprocess.forget(id.as_str());
        export_call(self, "forget", call, |()| ())
    }
}

fn export_attached(attached: Attached, context: &Arc<CallContext>) -> FfiAttached {
    FfiAttached {
        id: attached.id.into(),
        process: export_process(attached.process, context),
        from: abi_stable::std_types::Tuple2(attached.from[0], attached.from[1]),
    }
}

fn take_stream(
    object: &ProcessExport,
    operation: &'static str,
    take: impl FnOnce(&dyn Process) -> Option<crate::stream::ByteStream>,
) -> FfiResult<ROption<FfiByteStream>> {
    let context = object.context().clone();
    lower(object.call(operation, |process| {
        ROption::from(take(process).map(|stream| export_stream(stream, &context, operation)))
    }))
}

impl FfiProcess for ProcessExport {
    fn pid(&self) -> FfiResult<u32> {
        lower(self.call("pid", |process| process.pid()))
    }

    fn take_stdin(&self) -> FfiResult<ROption<FfiWriter>> {
        let context = self.context().clone();
        lower(self.call("take_stdin", |process| {
            ROption::from(
                process
                    .take_stdin()
                    .map(|writer| export_writer(writer, &context)),
            )
        }))
    }

    fn take_stdout(&self) -> FfiResult<ROption<FfiByteStream>> {
        take_stream(self, "take_stdout", |process| process.take_stdout())
    }

    fn take_stderr(&self) -> FfiResult<ROption<FfiByteStream>> {
        take_stream(self, "take_stderr", |process| process.take_stderr())
    }

    fn wait<'a>(&'a self) -> FfiFut<'a, FfiExitStatus> {
        export_call(self, "wait", |process| process.wait(), FfiExitStatus::from)
    }

    fn read_output<'a>(
        &'a self,
        stream: FfiOutputStream,
        offset: u64,
        max_len: u64,
    ) -> FfiFut<'a, FfiOutputSnapshot> {
        let max_len = usize::try_from(max_len).unwrap_or(usize::MAX);
        let call =
            move |process: &'a dyn Process| process.read_output(stream.into(), offset, max_len);
        export_call(self, "read_output", call, FfiOutputSnapshot::from)
    }

    fn terminate<'a>(&'a self, grace: RDuration) -> FfiFut<'a, ()> {
        let call = move |process: &'a dyn Process| process.terminate(grace.into());
        export_call(self, "terminate", call, |()| ())
    }
}

impl FfiTerminal for TerminalExport {
    fn pid(&self) -> FfiResult<u32> {
        lower(self.call("pid", |terminal| terminal.pid()))
    }

    fn take_output(&self) -> FfiResult<ROption<FfiByteStream>> {
        let context = self.context().clone();
        lower(self.call("take_output", |terminal| {
            ROption::from(
                terminal
                    .take_output()
                    .map(|stream| export_stream(stream, &context, "take_output")),
            )
        }))
    }

    fn write<'a>(&'a self, data: FfiBytes) -> FfiFut<'a, ()> {
        let data = data.into_bytes();
        let call = move |terminal: &'a dyn Terminal| terminal.write(data);
        export_call(self, "write", call, |()| ())
    }

    fn resize<'a>(&'a self, cols: u16, rows: u16) -> FfiFut<'a, ()> {
        let call = move |terminal: &'a dyn Terminal| terminal.resize(cols, rows);
        export_call(self, "resize", call, |()| ())
    }

    fn foreground_pgid<'a>(&'a self) -> FfiFut<'a, u32> {
        export_call(
            self,
            "foreground_pgid",
            |terminal| terminal.foreground_pgid(),
            |pgid| pgid,
        )
    }

    fn signal<'a>(&'a self, signal: i32) -> FfiFut<'a, ()> {
        let call = move |terminal: &'a dyn Terminal| terminal.signal(Signal(signal));
        export_call(self, "signal", call, |()| ())
    }

    fn terminate<'a>(&'a self) -> FfiFut<'a, ()> {
        export_call(self, "terminate", |terminal| terminal.terminate(), |()| ())
    }

    fn wait<'a>(&'a self) -> FfiFut<'a, FfiExitStatus> {
        export_call(
            self,
            "wait",
            |terminal| terminal.wait(),
            FfiExitStatus::from,
        )
    }
}
