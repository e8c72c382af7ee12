//! The state directory of durable commands: where things are, the two
//! records a supervisor writes (`command` before the command runs,
//! `status` once it ended), and what a reader derives from them and from
//! the retained segments.
//!
//! ```text
//! <DIR>/                      0700, the helper's euid's
//! <DIR>/<id>/                 0700, one per command (id: 32 hex digits)
//! <DIR>/<id>/command          written once, atomically, before the exec
//! <DIR>/<id>/status           written once, atomically, at the very end
//! <DIR>/<id>/stdout.<offset>  retained segments (see `retain`)
//! <DIR>/<id>/stderr.<offset>
//! ```
//!
//! Records are `key value` lines. Readers take no locks: records appear
//! by rename, segments only grow or disappear whole.

use std::io::{self, Write};
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

use dsh_process_group::table;
use dsh_supervisor::wire::{self, DurableEntry, DurableState, valid_durable_id};

/// A failure of an operation: errno and message (an `error` line).
pub type Failure = (i32, String);

pub const COMMAND: &str = "command";
pub const STATUS: &str = "status";
/// The streams' names, indexed like the wire's `[stdout, stderr]` pairs.
pub const STREAMS: [&str; 2] = ["stdout", "stderr"];

fn failure(err: &io::Error, what: impl std::fmt::Display) -> Failure {
    (
        err.raw_os_error().unwrap_or(libc::EIO),
        format!("{what}: {err}"),
    )
}

/// Milliseconds since the Unix epoch.
pub fn now_unix_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// The file name of the segment of `stream` that starts at absolute offset
/// `start`.
pub fn segment_name(stream: usize, start: u64) -> String {
    format!("{}.{start:020}", STREAMS[stream])
}

/// Checks that `dir` is a real directory (not a symlink) owned by the
/// helper's effective uid, with no group or other permission bits:
/// nobody else can plant or swap anything in it. Missing: ENOENT.
pub fn check_dir(dir: &Path) -> Result<(), Failure> {
    let meta = std::fs::symlink_metadata(dir).map_err(|err| failure(&err, dir.display()))?;
    let euid = rustix::process::geteuid().as_raw();
    if !meta.file_type().is_dir() || meta.uid() != euid || meta.mode() & 0o077 != 0 {
        return Err((
            libc::EPERM,
            format!(
                "{} is not a private directory of uid {euid} (a real directory, mode 0700 or stricter)",
                dir.display()
            ),
        ));
    }
    Ok(())
}

/// Creates `dir` (mode 0700; its parent must exist) if it is missing, then
/// checks it.
pub fn ensure_dir(dir: &Path) -> Result<(), Failure> {
    match std::fs::DirBuilder::new().mode(0o700).create(dir) {
        Ok(()) => {}
        Err(err) if err.kind() == io::ErrorKind::AlreadyExists => {}
        Err(err) => return Err(failure(&err, format!("create {}", dir.display()))),
    }
    check_dir(dir)
}

/// The directory of command `id` in the checked state directory `dir`. A
/// malformed id is EINVAL and never touches the filesystem; an unknown
/// one is ENOENT.
pub fn command_dir(dir: &Path, id: &str) -> Result<PathBuf, Failure> {
    if !valid_durable_id(id) {
        return Err((libc::EINVAL, format!("malformed durable id {id:?}")));
    }
    check_dir(dir)?;
    let path = dir.join(id);
    match std::fs::symlink_metadata(&path) {
        Ok(meta) if meta.file_type().is_dir() => Ok(path),
        Ok(_) => Err((libc::ENOENT, format!("no durable command {id}"))),
        Err(err) if err.kind() == io::ErrorKind::NotFound => {
            Err((libc::ENOENT, format!("no durable command {id}")))
        }
        Err(err) => Err(failure(&err, path.display())),
    }
}

/// Writes `<dir>/<name>` atomically: a temporary file, then a rename.
pub fn write_atomic(dir: &Path, name: &str, text: &str) -> io::Result<()> {
    let temp = dir.join(format!(".{name}.tmp"));
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW)
        .open(&temp)?;
    file.write_all(text.as_bytes())?;
    drop(file);
    std::fs::rename(&temp, dir.join(name))
}

/// `key value` lines.
fn fields(text: &str) -> Vec<(&str, &str)> {
    text.lines()
        .filter_map(|line| line.split_once(' '))
        .collect()
}

fn field<'a>(fields: &[(&str, &'a str)], key: &str) -> Option<&'a str> {
    fields.iter().find(|(k, _)| *k == key).map(|(_, v)| *v)
}

fn number<T: std::str::FromStr>(fields: &[(&str, &str)], key: &str) -> Option<T> {
    field(fields, key)?.parse().ok()
}

/// What the supervisor records before the command may exec.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Record {
    /// The command: its pid (= process group and session id) and start
    /// time in clock ticks, which tell it from a later process with the
    /// same pid.
    pub pid: u32,
    pub starttime: u64,
    /// The supervisor, likewise.
    pub supervisor: u32,
    pub supervisor_starttime: u64,
    pub started_unix_ms: u64,
    pub argv: Vec<String>,
    pub cwd: String,
    pub retain: u64,
}

impl Record {
    pub fn to_text(&self) -> String {
        let mut argv = wire::Writer::default();
        argv.strs(&self.argv);
        format!(
            "pid {}\nstarttime {}\nsupervisor {}\nsupervisor_starttime {}\nstarted_ms {}\nargv {}\ncwd {}\nretain {}\n",
            self.pid,
            self.starttime,
            self.supervisor,
            self.supervisor_starttime,
            self.started_unix_ms,
            wire::base64_encode(&argv.into_bytes()),
            wire::base64_encode(self.cwd.as_bytes()),
            self.retain,
        )
    }

    pub fn parse(text: &str) -> Option<Record> {
        let f = fields(text);
        let argv_bytes = wire::base64_decode(field(&f, "argv")?).ok()?;
        let mut reader = wire::Reader::new(&argv_bytes);
        let argv = reader.strs("argv").ok()?;
        reader.finish("argv").ok()?;
        Some(Record {
            pid: number(&f, "pid")?,
            starttime: number(&f, "starttime")?,
            supervisor: number(&f, "supervisor")?,
            supervisor_starttime: number(&f, "supervisor_starttime")?,
            started_unix_ms: number(&f, "started_ms")?,
            argv,
            cwd: String::from_utf8(wire::base64_decode(field(&f, "cwd")?).ok()?).ok()?,
            retain: number(&f, "retain")?,
        })
    }

    /// `<cmd_dir>/command`, or `None` when missing or corrupt.
    pub fn read(cmd_dir: &Path) -> Option<Record> {
        Record::parse(&std::fs::read_to_string(cmd_dir.join(COMMAND)).ok()?)
    }

    /// Whether the supervisor still runs.
    pub fn supervisor_alive(&self) -> bool {
        alive(self.supervisor, self.supervisor_starttime)
    }

    /// Whether the command itself still exists (running, or a zombie its
    /// supervisor has not reaped yet): its pid has its start time.
    pub fn command_exists(&self) -> bool {
        matches!(
            table::stat_of(self.pid as i32),
            Ok(Some(stat)) if stat.starttime == self.starttime
        )
    }
}

/// Whether `pid` is a live process started at `starttime`.
pub fn alive(pid: u32, starttime: u64) -> bool {
    matches!(
        table::stat_of(pid as i32),
        Ok(Some(stat)) if stat.starttime == starttime && stat.is_live()
    )
}

/// The start time of `pid` in clock ticks.
pub fn starttime_of(pid: u32) -> io::Result<u64> {
    table::stat_of(pid as i32)?
        .map(|stat| stat.starttime)
        .ok_or_else(|| io::Error::from_raw_os_error(libc::ESRCH))
}

/// How the command ended, written by the supervisor last.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Status {
    pub code: Option<i32>,
    pub signal: Option<i32>,
    pub timed_out: bool,
    /// Final byte counts of stdout and stderr.
    pub totals: [u64; 2],
    pub ended_unix_ms: u64,
}

impl Status {
    pub fn to_text(&self) -> String {
        let opt = |value: Option<i32>| value.map_or("-".to_owned(), |v| v.to_string());
        format!(
            "code {}\nsignal {}\ntimed_out {}\nstdout {}\nstderr {}\nended_ms {}\n",
            opt(self.code),
            opt(self.signal),
            u8::from(self.timed_out),
            self.totals[0],
            self.totals[1],
            self.ended_unix_ms,
        )
    }

    pub fn parse(text: &str) -> Option<Status> {
        let f = fields(text);
        let opt = |key: &str| -> Option<Option<i32>> {
            match field(&f, key)? {
                "-" => Some(None),
                value => value.parse().ok().map(Some),
            }
        };
        Some(Status {
            code: opt("code")?,
            signal: opt("signal")?,
            timed_out: match field(&f, "timed_out")? {
                "0" => false,
                "1" => true,
                _ => return None,
            },
            totals: [number(&f, "stdout")?, number(&f, "stderr")?],
            ended_unix_ms: number(&f, "ended_ms")?,
        })
    }

    /// `<cmd_dir>/status`, or `None` when missing (or corrupt).
    pub fn read(cmd_dir: &Path) -> Option<Status> {
        Status::parse(&std::fs::read_to_string(cmd_dir.join(STATUS)).ok()?)
    }

    /// The wait status this ending corresponds to (for mirroring it).
    pub fn raw_wait_status(&self) -> i32 {
        match (self.signal, self.code) {
            (Some(signal), _) => signal & 0x7f,
            (None, Some(code)) => (code & 0xff) << 8,
            (None, None) => 125 << 8,
        }
    }
}

/// The retained segments of `stream`: their starting offsets, ascending.
pub fn segments(cmd_dir: &Path, stream: usize) -> io::Result<Vec<u64>> {
    let prefix = format!("{}.", STREAMS[stream]);
    let mut starts = Vec::new();
    for dirent in std::fs::read_dir(cmd_dir)? {
        let name = dirent?.file_name();
        if let Some(start) = name
            .to_str()
            .and_then(|name| name.strip_prefix(&prefix))
            .filter(|digits| digits.len() == 20)
            .and_then(|digits| digits.parse::<u64>().ok())
        {
            starts.push(start);
        }
    }
    starts.sort_unstable();
    Ok(starts)
}

/// The first retained offset of `stream` and the bytes it has produced so
/// far (the end of its last segment).
pub fn extent(cmd_dir: &Path, stream: usize) -> (u64, u64) {
    let starts = segments(cmd_dir, stream).unwrap_or_default();
    let (Some(&first), Some(&last)) = (starts.first(), starts.last()) else {
        return (0, 0);
    };
    let len = std::fs::metadata(cmd_dir.join(segment_name(stream, last))).map_or(0, |m| m.len());
    (first, last + len)
}

/// The state of a command: its status when recorded, else Running while
/// its supervisor lives, else Lost. The status is read again after the
/// supervisor is found gone: it may have written it and exited between.
pub fn state(cmd_dir: &Path, record: &Record) -> (DurableState, Option<Status>) {
    let ended = |status: Status| {
        (
            DurableState::Ended {
                code: status.code,
                signal: status.signal,
                timed_out: status.timed_out,
            },
            Some(status),
        )
    };
    if let Some(status) = Status::read(cmd_dir) {
        return ended(status);
    }
    if record.supervisor_alive() {
        return (DurableState::Running, None);
    }
    match Status::read(cmd_dir) {
        Some(status) => ended(status),
        None => (DurableState::Lost, None),
    }
}

/// The entry of command `id`, or `None` when its record is missing or
/// corrupt.
pub fn entry(cmd_dir: &Path, id: &str) -> Option<DurableEntry> {
    let record = Record::read(cmd_dir)?;
    let (state, status) = state(cmd_dir, &record);
    let [out, err] = [0, 1].map(|stream| extent(cmd_dir, stream));
    let totals = status.map_or([out.1, err.1], |status| status.totals);
    Some(DurableEntry {
        id: id.to_owned(),
        pid: record.pid,
        started_unix_ms: record.started_unix_ms,
        argv: record.argv,
        cwd: record.cwd,
        state,
        totals,
        retained_from: [out.0, err.0],
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_round_trip() {
        let record = Record {
            pid: 12,
            starttime: 345,
            supervisor: 11,
            supervisor_starttime: 344,
            started_unix_ms: 1_700_000_000_000,
            argv: vec!["sh".into(), "-c".into(), "echo a\nb".into()],
            cwd: "/tmp/x y".into(),
            retain: 1 << 20,
        };
        assert_eq!(Record::parse(&record.to_text()), Some(record));
        let status = Status {
            code: None,
            signal: Some(15),
            timed_out: true,
            totals: [1, 2],
            ended_unix_ms: 9,
        };
        assert_eq!(Status::parse(&status.to_text()), Some(status.clone()));
        assert_eq!(status.raw_wait_status(), 15);
        assert!(Status::parse("code 1\n").is_none());
    }

    #[test]
    fn segment_names_sort_by_offset() {
        assert_eq!(segment_name(0, 65536), "stdout.00000000000000065536");
        assert_eq!(segment_name(1, u64::MAX), "stderr.18446744073709551615");
    }
}
