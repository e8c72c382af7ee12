//! `repr(C)` mirrors of the `subprocess` seam's types, with conversions
//! both ways.

use abi_stable::StableAbi;
use abi_stable::std_types::{RDuration, ROption, RString, RVec, Tuple2};

use crate::durable::{AttachSpec, DurableCommand, DurableState};
use crate::ffi::bytes::FfiBytes;
use crate::subprocess::{
    ExitStatus, OutputMode, OutputSnapshot, OutputStream, Signal, SpawnSpec, SpillInfo, SpillSpec,
    StdinMode, TerminalSpec,
};

#[repr(u8)]
#[derive(StableAbi, Clone, Copy)]
pub enum FfiStdinMode {
    Null,
    Pipe,
}

impl From<StdinMode> for FfiStdinMode {
    fn from(value: StdinMode) -> Self {
        match value {
            StdinMode::Null => FfiStdinMode::Null,
            StdinMode::Pipe => FfiStdinMode::Pipe,
        }
    }
}

impl From<FfiStdinMode> for StdinMode {
    fn from(value: FfiStdinMode) -> Self {
        match value {
            FfiStdinMode::Null => StdinMode::Null,
            FfiStdinMode::Pipe => StdinMode::Pipe,
        }
    }
}

#[repr(C, u8)]
#[derive(StableAbi, Clone, Copy)]
pub enum FfiOutputMode {
    Pipe,
    Inherit,
    /// The tail limit in bytes.
    Collect(u64),
    Null,
    IntoStdout,
}

impl From<OutputMode> for FfiOutputMode {
    fn from(value: OutputMode) -> Self {
        match value {
            OutputMode::Pipe => FfiOutputMode::Pipe,
            OutputMode::Inherit => FfiOutputMode::Inherit,
            OutputMode::Collect { limit } => FfiOutputMode::Collect(limit as u64),
            OutputMode::Null => FfiOutputMode::Null,
            OutputMode::IntoStdout => FfiOutputMode::IntoStdout,
        }
    }
}

impl From<FfiOutputMode> for OutputMode {
    fn from(value: FfiOutputMode) -> Self {
        match value {
            FfiOutputMode::Pipe => OutputMode::Pipe,
            FfiOutputMode::Inherit => OutputMode::Inherit,
            FfiOutputMode::Collect(limit) => OutputMode::Collect {
                limit: usize::try_from(limit).unwrap_or(usize::MAX),
            },
            FfiOutputMode::Null => OutputMode::Null,
            FfiOutputMode::IntoStdout => OutputMode::IntoStdout,
        }
    }
}

#[repr(u8)]
#[derive(StableAbi, Clone, Copy)]
pub enum FfiOutputStream {
    Stdout,
    Stderr,
}

impl From<OutputStream> for FfiOutputStream {
    fn from(value: OutputStream) -> Self {
        match value {
            OutputStream::Stdout => FfiOutputStream::Stdout,
            OutputStream::Stderr => FfiOutputStream::Stderr,
        }
    }
}

impl From<FfiOutputStream> for OutputStream {
    fn from(value: FfiOutputStream) -> Self {
        match value {
            FfiOutputStream::Stdout => OutputStream::Stdout,
            FfiOutputStream::Stderr => OutputStream::Stderr,
        }
    }
}

/// Environment entries in the spec's (sorted) order.
type FfiEnv = RVec<Tuple2<RString, RString>>;

fn env_to_ffi(env: std::collections::BTreeMap<String, String>) -> FfiEnv {
    env.into_iter()
        .map(|(name, value)| Tuple2(name.into(), value.into()))
        .collect()
}

fn env_from_ffi(env: FfiEnv) -> std::collections::BTreeMap<String, String> {
    env.into_iter()
        .map(|Tuple2(name, value)| (name.into(), value.into()))
        .collect()
}

fn strings_to_ffi(strings: Vec<String>) -> RVec<RString> {
    strings.into_iter().map(RString::from).collect()
}

fn strings_from_ffi(strings: RVec<RString>) -> Vec<String> {
    strings.into_iter().map(String::from).collect()
}

#[repr(C)]
#[derive(StableAbi)]
pub struct FfiSpawnSpec {
    pub argv: RVec<RString>,
    pub cwd: ROption<RString>,
    pub env: FfiEnv,
    pub stdin: FfiStdinMode,
    pub stdout: FfiOutputMode,
    pub stderr: FfiOutputMode,
    /// The spill limit, when a spill copy is requested.
    pub spill: ROption<u64>,
    pub timeout: ROption<RDuration>,
    pub drain_grace: RDuration,
}

impl From<SpawnSpec> for FfiSpawnSpec {
    fn from(value: SpawnSpec) -> Self {
        FfiSpawnSpec {
            argv: strings_to_ffi(value.argv),
            cwd: value.cwd.map(RString::from).into(),
            env: env_to_ffi(value.env),
            stdin: value.stdin.into(),
            stdout: value.stdout.into(),
            stderr: value.stderr.into(),
            spill: value.spill.map(|spill| spill.limit).into(),
            timeout: value.timeout.map(RDuration::from).into(),
            drain_grace: value.drain_grace.into(),
        }
    }
}

impl From<FfiSpawnSpec> for SpawnSpec {
    fn from(value: FfiSpawnSpec) -> Self {
        SpawnSpec {
            argv: strings_from_ffi(value.argv),
            cwd: value.cwd.into_option().map(String::from),
            env: env_from_ffi(value.env),
            stdin: value.stdin.into(),
            stdout: value.stdout.into(),
            stderr: value.stderr.into(),
            spill: value.spill.into_option().map(|limit| SpillSpec { limit }),
            timeout: value.timeout.into_option().map(Into::into),
            drain_grace: value.drain_grace.into(),
        }
    }
}

#[repr(C)]
#[derive(StableAbi)]
pub struct FfiTerminalSpec {
    pub argv: RVec<RString>,
    pub cwd: ROption<RString>,
    pub env: FfiEnv,
    pub cols: u16,
    pub rows: u16,
}

impl From<TerminalSpec> for FfiTerminalSpec {
    fn from(value: TerminalSpec) -> Self {
        FfiTerminalSpec {
            argv: strings_to_ffi(value.argv),
            cwd: value.cwd.map(RString::from).into(),
            env: env_to_ffi(value.env),
            cols: value.cols,
            rows: value.rows,
        }
    }
}

impl From<FfiTerminalSpec> for TerminalSpec {
    fn from(value: FfiTerminalSpec) -> Self {
        TerminalSpec {
            argv: strings_from_ffi(value.argv),
            cwd: value.cwd.into_option().map(String::from),
            env: env_from_ffi(value.env),
            cols: value.cols,
            rows: value.rows,
        }
    }
}

#[repr(C)]
#[derive(StableAbi, Clone, Copy)]
pub struct FfiExitStatus {
    pub code: ROption<i32>,
    pub signal: ROption<i32>,
    pub timed_out: bool,
}

impl From<ExitStatus> for FfiExitStatus {
    fn from(value: ExitStatus) -> Self {
        FfiExitStatus {
            code: value.code.into(),
            signal: value.signal.map(|signal| signal.0).into(),
            timed_out: value.timed_out,
        }
    }
}

impl From<FfiExitStatus> for ExitStatus {
    fn from(value: FfiExitStatus) -> Self {
        ExitStatus {
            code: value.code.into_option(),
            signal: value.signal.into_option().map(Signal),
            timed_out: value.timed_out,
        }
    }
}

#[repr(C)]
#[derive(StableAbi)]
pub struct FfiSpillInfo {
    pub path: RString,
    pub len: u64,
    pub complete: bool,
}

impl From<SpillInfo> for FfiSpillInfo {
    fn from(value: SpillInfo) -> Self {
        FfiSpillInfo {
            path: value.path.into(),
            len: value.len,
            complete: value.complete,
        }
    }
}

impl From<FfiSpillInfo> for SpillInfo {
    fn from(value: FfiSpillInfo) -> Self {
        SpillInfo {
            path: value.path.into(),
            len: value.len,
            complete: value.complete,
        }
    }
}

#[repr(C)]
#[derive(StableAbi)]
pub struct FfiOutputSnapshot {
    pub total: u64,
    pub offset: u64,
    pub bytes: FfiBytes,
    pub truncated: bool,
    pub spill: ROption<FfiSpillInfo>,
}

impl From<OutputSnapshot> for FfiOutputSnapshot {
    fn from(value: OutputSnapshot) -> Self {
        FfiOutputSnapshot {
            total: value.total,
            offset: value.offset,
            bytes: FfiBytes::from_bytes(value.bytes),
            truncated: value.truncated,
            spill: value.spill.map(FfiSpillInfo::from).into(),
        }
    }
}

impl From<FfiOutputSnapshot> for OutputSnapshot {
    fn from(value: FfiOutputSnapshot) -> Self {
        OutputSnapshot {
            total: value.total,
            offset: value.offset,
            bytes: value.bytes.into_bytes(),
            truncated: value.truncated,
            spill: value.spill.into_option().map(SpillInfo::from),
        }
    }
}

#[repr(C, u8)]
#[derive(StableAbi, Clone, Copy)]
pub enum FfiDurableState {
    Running,
    Ended(FfiExitStatus),
    Lost,
}

impl From<DurableState> for FfiDurableState {
    fn from(value: DurableState) -> Self {
        match value {
            DurableState::Running => FfiDurableState::Running,
            DurableState::Ended(status) => FfiDurableState::Ended(status.into()),
            DurableState::Lost => FfiDurableState::Lost,
        }
    }
}

impl From<FfiDurableState> for DurableState {
    fn from(value: FfiDurableState) -> Self {
        match value {
            FfiDurableState::Running => DurableState::Running,
            FfiDurableState::Ended(status) => DurableState::Ended(status.into()),
            FfiDurableState::Lost => DurableState::Lost,
        }
    }
}

#[repr(C)]
#[derive(StableAbi)]
pub struct FfiDurableCommand {
    pub id: RString,
    pub pid: u32,
    pub argv: RVec<RString>,
    pub cwd: RString,
    pub started_unix_ms: u64,
    pub state: FfiDurableState,
    pub totals: Tuple2<u64, u64>,
    pub retained_from: Tuple2<u64, u64>,
}

impl From<DurableCommand> for FfiDurableCommand {
    fn from(value: DurableCommand) -> Self {
        FfiDurableCommand {
            id: value.id.into(),
            pid: value.pid,
            argv: strings_to_ffi(value.argv),
            cwd: value.cwd.into(),
            started_unix_ms: value.started_unix_ms,
            state: value.state.into(),
            totals: Tuple2(value.totals[0], value.totals[1]),
            retained_from: Tuple2(value.retained_from[0], value.retained_from[1]),
        }
    }
}

impl From<FfiDurableCommand> for DurableCommand {
    fn from(value: FfiDurableCommand) -> Self {
        DurableCommand {
            id: value.id.into(),
            pid: value.pid,
            argv: strings_from_ffi(value.argv),
            cwd: value.cwd.into(),
            started_unix_ms: value.started_unix_ms,
            state: value.state.into(),
            totals: [value.totals.0, value.totals.1],
            retained_from: [value.retained_from.0, value.retained_from.1],
        }
    }
}

#[repr(C)]
#[derive(StableAbi)]
pub struct FfiAttachSpec {
    pub id: RString,
    pub from: u64,
    pub stdout: FfiOutputMode,
    pub stderr: FfiOutputMode,
}

impl From<AttachSpec> for FfiAttachSpec {
    fn from(value: AttachSpec) -> Self {
        FfiAttachSpec {
            id: value.id.into(),
            from: value.from,
            stdout: value.stdout.into(),
            stderr: value.stderr.into(),
        }
    }
}

impl From<FfiAttachSpec> for AttachSpec {
    fn from(value: FfiAttachSpec) -> Self {
        AttachSpec {
            id: value.id.into(),
            from: value.from,
            stdout: value.stdout.into(),
            stderr: value.stderr.into(),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use bytes::Bytes;

    use super::*;

    #[test]
    fn spawn_specs_round_trip() {
        let mut spec = SpawnSpec::new(["/bin/sh", "-c", "echo ü"]);
        spec.cwd = Some("/tmp".into());
        spec.env.insert("A".into(), "1=2".into());
        spec.env.insert("B".into(), String::new());
        spec.stdin = StdinMode::Pipe;
        spec.stdout = OutputMode::Collect { limit: 4096 };
        spec.stderr = OutputMode::Inherit;
        spec.spill = Some(SpillSpec { limit: 1 << 20 });
        spec.timeout = Some(Duration::from_millis(1500));
        spec.drain_grace = Duration::from_millis(20);
        assert_eq!(SpawnSpec::from(FfiSpawnSpec::from(spec.clone())), spec);
        let plain = SpawnSpec::new(["true"]);
        assert_eq!(SpawnSpec::from(FfiSpawnSpec::from(plain.clone())), plain);
        let mut null = SpawnSpec::new(["true"]);
        null.stdout = OutputMode::Null;
        null.stderr = OutputMode::Pipe;
        assert_eq!(SpawnSpec::from(FfiSpawnSpec::from(null.clone())), null);
    }

    #[test]
    fn terminal_specs_statuses_and_snapshots_round_trip() {
        let mut spec = TerminalSpec::new(["bash", "-l"]);
        spec.cols = 132;
        spec.rows = 43;
        spec.env.insert("TERM".into(), "xterm".into());
        assert_eq!(
            TerminalSpec::from(FfiTerminalSpec::from(spec.clone())),
            spec
        );
        for status in [
            ExitStatus {
                code: Some(3),
                signal: None,
                timed_out: false,
            },
            ExitStatus {
                code: None,
                signal: Some(Signal::KILL),
                timed_out: true,
            },
        ] {
            assert_eq!(ExitStatus::from(FfiExitStatus::from(status)), status);
        }
        let snapshot = OutputSnapshot {
            total: 10,
            offset: 4,
            bytes: Bytes::from_static(b"efghij"),
            truncated: true,
            spill: Some(SpillInfo {
                path: "/s/out".into(),
                len: 10,
                complete: false,
            }),
        };
        assert_eq!(
            OutputSnapshot::from(FfiOutputSnapshot::from(snapshot.clone())),
            snapshot
        );
        let command = DurableCommand {
            id: "0123456789abcdef0123456789abcdef".into(),
            pid: 42,
            argv: vec!["sh".into(), "-c".into(), "sleep 1".into()],
            cwd: "/w".into(),
            started_unix_ms: 1_700_000_000_000,
            state: DurableState::Ended(ExitStatus {
                code: None,
                signal: Some(Signal::TERM),
                timed_out: true,
            }),
            totals: [10, 20],
            retained_from: [0, 5],
        };
        assert_eq!(
            DurableCommand::from(FfiDurableCommand::from(command.clone())),
            command
        );
        for state in [DurableState::Running, DurableState::Lost] {
            assert_eq!(DurableState::from(FfiDurableState::from(state)), state);
        }
        let mut attach = AttachSpec::new("0123456789abcdef0123456789abcdef", 7);
        attach.stderr = OutputMode::Collect { limit: 9 };
        assert_eq!(
            AttachSpec::from(FfiAttachSpec::from(attach.clone())),
            attach
        );
        for stream in [OutputStream::Stdout, OutputStream::Stderr] {
            assert_eq!(OutputStream::from(FfiOutputStream::from(stream)), stream);
        }
    }
}
