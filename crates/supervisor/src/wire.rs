//! The wire between `dsh-subprocess-e2b` (on the host) and `dsh-supervisor`
//! (its helper in the sandbox).
//!
//! - **Requests** go host → helper in the helper's own environment
//!   ([`REQUEST_ENV`], base64 of a length-prefixed record): never on a
//!   command line, readable only by root (the helper runs as root), and
//!   gone from the user's program, whose environment is built from scratch.
//! - **Frames** go helper → host on the helper's stdout (the envd pipe of a
//!   root process, which no sandbox process can write to):
//!   `[tag: u8][len: u32 LE][payload]`. Output bytes travel raw inside
//!   frames, so a program cannot forge a fact by printing it.
//! - **Control lines**: the helper's one-shot subcommands print one line,
//!   `ok …`, `empty`, `busy …`, `gone` or `error <kind> <errno> <message>`.

use base64::Engine;
use base64::engine::general_purpose::STANDARD as BASE64;

/// The environment variable carrying the base64 request.
pub const REQUEST_ENV: &str = "DSH_E2B_REQUEST";

/// The version of this wire; the helper prints it for `version`, and the
/// host checks it after installing the helper.
pub const VERSION: u32 = 6;

/// Longest base64 request the host sends in one environment variable:
/// Linux refuses single strings over 128 KiB (`MAX_ARG_STRLEN`) at exec.
pub const MAX_REQUEST_ENV: usize = 120 * 1024;

/// Which output stream a frame is about.
pub const STDOUT: u8 = 1;
pub const STDERR: u8 = 2;

/// Frame tags (helper → host).
pub mod tag {
    /// The command runs: `pid: u32` (its process group and session id),
    /// then the helper's own start time in clock ticks (`u64`), which a
    /// later `detach` uses to make sure it signals this helper.
    pub const STARTED: u8 = b'S';
    /// The command could not start: `stage: u8`, `errno: i32`, detail
    /// (UTF-8). The helper exits afterwards.
    pub const FAILED: u8 = b'F';
    /// Raw bytes the command wrote to stdout / stderr.
    pub const STDOUT: u8 = b'O';
    pub const STDERR: u8 = b'E';
    /// Bytes of a stream that are counted but not relayed (null mode):
    /// `stream: u8`, `count: u64`.
    pub const COUNTED: u8 = b'C';
    /// A stream ended: `stream: u8`, `how: u8` ([`super::CLOSED_EOF`] or
    /// [`super::CLOSED_DETACHED`]).
    pub const CLOSED: u8 = b'Z';
    /// The direct child ended: `kind: u8` ([`super::EXIT_CODE`] or
    /// [`super::EXIT_SIGNAL`]), `value: i32`, `core: u8`, `group_empty: u8`
    /// (nothing of its process group was left when it was reaped).
    pub const EXITED: u8 = b'X';
    /// Writing the spill copy of a stream failed: `stream: u8`,
    /// `errno: i32`; the copy is incomplete from there on.
    pub const SPILL_FAILED: u8 = b'P';
    /// What a `run` with a [`super::ProbeFor`] learned of the sandbox, before
    /// anything else: exactly what `probe` prints.
    pub const PROBED: u8 = b'I';
}

/// How a stream ended (payload of [`tag::CLOSED`]).
pub const CLOSED_EOF: u8 = 0;
pub const CLOSED_DETACHED: u8 = 1;

/// How the direct child ended (payload of [`tag::EXITED`]).
pub const EXIT_CODE: u8 = 0;
pub const EXIT_SIGNAL: u8 = 1;

/// Length of a frame header.
pub const HEADER: usize = 5;

/// Where starting a command failed (payload of [`tag::FAILED`], and the
/// marker of a terminal that could not start).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum Stage {
    /// Decoding the request.
    Request = 1,
    /// Pipes, fork, spill files or other helper resources.
    Resources = 2,
    /// Taking on the sandbox user's identity.
    Identity = 3,
    /// Entering the working directory (the detail is the directory).
    Cwd = 4,
    /// Finding the program (the detail lists the directories searched).
    Program = 5,
    /// Executing the program found (the detail is its path).
    Exec = 6,
    /// Creating a spill file (the detail is its path).
    Spill = 7,
}

impl Stage {
    pub fn from_u8(value: u8) -> Option<Stage> {
        Some(match value {
            1 => Stage::Request,
            2 => Stage::Resources,
            3 => Stage::Identity,
            4 => Stage::Cwd,
            5 => Stage::Program,
            6 => Stage::Exec,
            7 => Stage::Spill,
            _ => return None,
        })
    }
}

/// Writes one frame header for a payload of `len` bytes into `header`.
pub fn frame_header(header: &mut [u8], tag: u8, len: usize) {
    header[0] = tag;
    header[1..HEADER].copy_from_slice(&(len as u32).to_le_bytes());
}

/// The sandbox user a command runs as.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Identity {
    pub uid: u32,
    pub gid: u32,
    /// Supplementary groups.
    pub groups: Vec<u32>,
}

impl Identity {
    /// Root's: the provider's own commands that read root-owned state.
    pub fn root() -> Identity {
        Identity {
            uid: 0,
            gid: 0,
            groups: Vec::new(),
        }
    }

    /// The identity of a request whose helper learns the user itself
    /// ([`ProbeFor`]): ids no `setuid` accepts, so a helper that did not
    /// replace them would start nothing rather than run as root.
    pub fn unlearned() -> Identity {
        Identity {
            uid: u32::MAX,
            gid: u32::MAX,
            groups: Vec::new(),
        }
    }
}

/// What happens to one output stream in the helper.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Relay {
    /// Bytes are relayed in frames.
    Data,
    /// Only their number is (null mode: the bytes need not cross the
    /// network).
    Count,
    /// stderr only: the command's fd 2 is its stdout pipe (`2>&1`), so
    /// its stderr arrives as stdout; the stderr stream is closed at the
    /// start.
    Merged,
}

/// Spill files of one command, created as the sandbox user.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Spill {
    /// The provider's spill directory (created as the user, mode 0700, if
    /// missing).
    pub dir: String,
    /// File names inside it.
    pub stdout: String,
    pub stderr: String,
    /// Bytes each copy may take.
    pub limit: u64,
}

/// What to start, as whom, and where: the part `run` and `exec` share.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Launch {
    pub identity: Identity,
    pub argv: Vec<String>,
    /// `NAME=VALUE` entries, exactly the program's environment.
    pub env: Vec<String>,
    pub cwd: String,
    /// Absolute directories searched for a bare `argv[0]`.
    pub search: Vec<String>,
}

/// `run`: supervise one command.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunRequest {
    pub launch: Launch,
    pub stdout: Relay,
    pub stderr: Relay,
    pub spill: Option<Spill>,
    /// A provider's first command, which learns the sandbox itself instead
    /// of after a `probe` of its own; `launch.identity` and `launch.search`
    /// are then the helper's to set, and `launch.env` holds the explicit
    /// entries only.
    pub probe: Option<ProbeFor>,
}

/// What a `run` learns before it starts its command, as `probe` would: the
/// helper looks `user` up, takes the ambient environment from its own
/// (envd's) and composes the command's with it ([`crate::ambient`]),
/// reports what `probe` prints in a [`tag::PROBED`] frame, and runs the
/// command as `user`. Only a template's copy of the helper runs such a
/// `run`, and it does not hash itself first: the template's build checked
/// the copy (`dsh template`'s recipe, docs/design.md §6.4).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProbeFor {
    pub user: String,
}

/// `exec`: become the program of a terminal.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExecRequest {
    pub launch: Launch,
    /// The random boundary printed (with a status byte) right before the
    /// program starts, so the host can tell the helper's bytes from the
    /// program's.
    pub boundary: String,
}

/// `resolve`: find a program as the sandbox user would.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResolveRequest {
    pub identity: Identity,
    pub name: String,
    pub search: Vec<String>,
}

/// `remove`: delete a tree as the sandbox user.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RemoveRequest {
    pub identity: Identity,
    pub path: String,
}

/// The byte after the boundary of a terminal: the program starts now.
pub const BOUNDARY_STARTED: u8 = b'+';
/// The byte after the boundary of a terminal that could not start; then
/// `<stage>:<errno>:<base64 detail>;`.
pub const BOUNDARY_FAILED: u8 = b'!';

/// A decoding failure, with what was being read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DecodeError(pub String);

impl std::fmt::Display for DecodeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// Builds a record: little-endian integers, length-prefixed strings and
/// counted lists.
#[derive(Debug, Default)]
pub struct Writer {
    buf: Vec<u8>,
}

impl Writer {
    pub fn u8(&mut self, value: u8) {
        self.buf.push(value);
    }

    pub fn u32(&mut self, value: u32) {
        self.buf.extend_from_slice(&value.to_le_bytes());
    }

    pub fn u64(&mut self, value: u64) {
        self.buf.extend_from_slice(&value.to_le_bytes());
    }

    pub fn str(&mut self, value: &str) {
        self.u32(value.len() as u32);
        self.buf.extend_from_slice(value.as_bytes());
    }

    /// Length-prefixed raw bytes.
    pub fn bytes(&mut self, value: &[u8]) {
        self.u32(value.len() as u32);
        self.buf.extend_from_slice(value);
    }

    pub fn strs(&mut self, values: &[String]) {
        self.u32(values.len() as u32);
        for value in values {
            self.str(value);
        }
    }

    /// An optional value: a presence byte (0 absent, 1 present), then the
    /// value as `write` writes it.
    pub fn option<T: ?Sized>(&mut self, value: Option<&T>, write: impl FnOnce(&mut Self, &T)) {
        match value {
            None => self.u8(0),
            Some(value) => {
                self.u8(1);
                write(self, value);
            }
        }
    }

    pub fn identity(&mut self, identity: &Identity) {
        self.u32(identity.uid);
        self.u32(identity.gid);
        self.u32(identity.groups.len() as u32);
        for group in &identity.groups {
            self.u32(*group);
        }
    }

    pub fn into_bytes(self) -> Vec<u8> {
        self.buf
    }
}

/// Reads a record built by [`Writer`].
#[derive(Debug)]
pub struct Reader<'a> {
    buf: &'a [u8],
}

impl<'a> Reader<'a> {
    pub fn new(buf: &'a [u8]) -> Reader<'a> {
        Reader { buf }
    }

    fn take(&mut self, n: usize, what: &str) -> Result<&'a [u8], DecodeError> {
        if self.buf.len() < n {
            return Err(DecodeError(format!("truncated record reading {what}")));
        }
        let (head, rest) = self.buf.split_at(n);
        self.buf = rest;
        Ok(head)
    }

    pub fn u8(&mut self, what: &str) -> Result<u8, DecodeError> {
        Ok(self.take(1, what)?[0])
    }

    pub fn u32(&mut self, what: &str) -> Result<u32, DecodeError> {
        let bytes = self.take(4, what)?;
        Ok(u32::from_le_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]))
    }

    pub fn i32(&mut self, what: &str) -> Result<i32, DecodeError> {
        Ok(self.u32(what)? as i32)
    }

    pub fn u64(&mut self, what: &str) -> Result<u64, DecodeError> {
        let bytes = self.take(8, what)?;
        let mut array = [0u8; 8];
        array.copy_from_slice(bytes);
        Ok(u64::from_le_bytes(array))
    }

    pub fn str(&mut self, what: &str) -> Result<String, DecodeError> {
        let len = self.u32(what)? as usize;
        let bytes = self.take(len, what)?;
        String::from_utf8(bytes.to_vec()).map_err(|_| DecodeError(format!("{what} is not UTF-8")))
    }

    /// Bytes written by [`Writer::bytes`].
    pub fn bytes(&mut self, what: &str) -> Result<&'a [u8], DecodeError> {
        let len = self.u32(what)? as usize;
        self.take(len, what)
    }

    pub fn strs(&mut self, what: &str) -> Result<Vec<String>, DecodeError> {
        let count = self.u32(what)? as usize;
        // Each string takes at least its 4-byte length: a count beyond that
        // is corrupt, not a reason to allocate.
        if count > self.buf.len() / 4 {
            return Err(DecodeError(format!(
                "{what}: count {count} exceeds the record"
            )));
        }
        (0..count).map(|_| self.str(what)).collect()
    }

    /// A value written by [`Writer::option`], read by `read` when present.
    pub fn option<T>(
        &mut self,
        what: &str,
        read: impl FnOnce(&mut Self) -> Result<T, DecodeError>,
    ) -> Result<Option<T>, DecodeError> {
        match self.u8(what)? {
            0 => Ok(None),
            1 => read(self).map(Some),
            other => Err(DecodeError(format!("{what}: presence byte {other}"))),
        }
    }

    pub fn identity(&mut self) -> Result<Identity, DecodeError> {
        let uid = self.u32("uid")?;
        let gid = self.u32("gid")?;
        let count = self.u32("group count")? as usize;
        if count > self.buf.len() / 4 {
            return Err(DecodeError(format!(
                "group count {count} exceeds the record"
            )));
        }
        let groups = (0..count)
            .map(|_| self.u32("group"))
            .collect::<Result<_, _>>()?;
        Ok(Identity { uid, gid, groups })
    }

    /// The unread rest.
    pub fn rest(&self) -> &'a [u8] {
        self.buf
    }

    /// Fails unless everything was read.
    pub fn finish(&self, what: &str) -> Result<(), DecodeError> {
        if self.buf.is_empty() {
            Ok(())
        } else {
            Err(DecodeError(format!(
                "{} unexpected bytes after {what}",
                self.buf.len()
            )))
        }
    }
}

fn relay_byte(relay: Relay) -> u8 {
    match relay {
        Relay::Data => 0,
        Relay::Count => 1,
        Relay::Merged => 2,
    }
}

fn relay_of(byte: u8) -> Result<Relay, DecodeError> {
    match byte {
        0 => Ok(Relay::Data),
        1 => Ok(Relay::Count),
        2 => Ok(Relay::Merged),
        other => Err(DecodeError(format!("unknown relay mode {other}"))),
    }
}

impl Launch {
    fn write(&self, w: &mut Writer) {
        w.identity(&self.identity);
        w.strs(&self.argv);
        w.strs(&self.env);
        w.str(&self.cwd);
        w.strs(&self.search);
    }

    fn read(r: &mut Reader<'_>) -> Result<Launch, DecodeError> {
        let launch = Launch {
            identity: r.identity()?,
            argv: r.strs("argv")?,
            env: r.strs("env")?,
            cwd: r.str("cwd")?,
            search: r.strs("search path")?,
        };
        if launch.argv.is_empty() {
            return Err(DecodeError("argv is empty".to_owned()));
        }
        Ok(launch)
    }
}

impl RunRequest {
    pub fn encode(&self) -> Vec<u8> {
        let mut w = Writer::default();
        w.u32(VERSION);
        self.launch.write(&mut w);
        w.u8(relay_byte(self.stdout));
        w.u8(relay_byte(self.stderr));
        w.option(self.spill.as_ref(), |w, spill| {
            w.str(&spill.dir);
            w.str(&spill.stdout);
            w.str(&spill.stderr);
            w.u64(spill.limit);
        });
        w.option(self.probe.as_ref(), |w, probe| {
            w.str(&probe.user);
        });
        w.into_bytes()
    }

    pub fn decode(bytes: &[u8]) -> Result<RunRequest, DecodeError> {
        let mut r = Reader::new(bytes);
        check_version(&mut r)?;
        let request = RunRequest {
            launch: Launch::read(&mut r)?,
            stdout: match relay_of(r.u8("stdout relay")?)? {
                Relay::Merged => {
                    return Err(DecodeError(
                        "stdout cannot be merged into itself".to_owned(),
                    ));
                }
                relay => relay,
            },
            stderr: relay_of(r.u8("stderr relay")?)?,
            spill: r.option("spill", |r| {
                Ok(Spill {
                    dir: r.str("spill dir")?,
                    stdout: r.str("stdout spill name")?,
                    stderr: r.str("stderr spill name")?,
                    limit: r.u64("spill limit")?,
                })
            })?,
            probe: r.option("probe", |r| {
                Ok(ProbeFor {
                    user: r.str("probed user")?,
                })
            })?,
        };
        r.finish("the run request")?;
        Ok(request)
    }
}

impl ExecRequest {
    pub fn encode(&self) -> Vec<u8> {
        let mut w = Writer::default();
        w.u32(VERSION);
        self.launch.write(&mut w);
        w.str(&self.boundary);
        w.into_bytes()
    }

    pub fn decode(bytes: &[u8]) -> Result<ExecRequest, DecodeError> {
        let mut r = Reader::new(bytes);
        check_version(&mut r)?;
        let request = ExecRequest {
            launch: Launch::read(&mut r)?,
            boundary: r.str("boundary")?,
        };
        r.finish("the exec request")?;
        Ok(request)
    }
}

impl ResolveRequest {
    pub fn encode(&self) -> Vec<u8> {
        let mut w = Writer::default();
        w.u32(VERSION);
        w.identity(&self.identity);
        w.str(&self.name);
        w.strs(&self.search);
        w.into_bytes()
    }

    pub fn decode(bytes: &[u8]) -> Result<ResolveRequest, DecodeError> {
        let mut r = Reader::new(bytes);
        check_version(&mut r)?;
        let request = ResolveRequest {
            identity: r.identity()?,
            name: r.str("name")?,
            search: r.strs("search path")?,
        };
        r.finish("the resolve request")?;
        Ok(request)
    }
}

impl RemoveRequest {
    pub fn encode(&self) -> Vec<u8> {
        let mut w = Writer::default();
        w.u32(VERSION);
        w.identity(&self.identity);
        w.str(&self.path);
        w.into_bytes()
    }

    pub fn decode(bytes: &[u8]) -> Result<RemoveRequest, DecodeError> {
        let mut r = Reader::new(bytes);
        check_version(&mut r)?;
        let request = RemoveRequest {
            identity: r.identity()?,
            path: r.str("path")?,
        };
        r.finish("the remove request")?;
        Ok(request)
    }
}

/// `durable-start`: start a command that outlives its caller, its output
/// retained in `dir` (see the helper's `durable` module).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DurableStartRequest {
    /// The command's id, chosen by the caller (128 random bits, see
    /// [`valid_durable_id`]) so that it can start the follower at once; an
    /// id already present is refused.
    pub id: String,
    pub launch: Launch,
    /// The state directory (created mode 0700 if missing; its parent must
    /// exist).
    pub dir: String,
    /// Bytes of each stream that are always kept (at least the last
    /// `retain` bytes).
    pub retain: u64,
    /// SIGTERM to the group after this long, SIGKILL 2 s later; 0 = none.
    pub timeout_ms: u64,
    /// How long output is still read after the command exited.
    pub drain_grace_ms: u64,
    /// A holding follower comes next: the supervisor holds every byte
    /// from offset 0 until it arrives (or a minute passes).
    pub hold: bool,
    /// The command's fd 2 is its stdout pipe (`2>&1`): one retained
    /// stream in the order written; stderr's stays empty.
    pub merge_stderr: bool,
}

impl DurableStartRequest {
    pub fn encode(&self) -> Vec<u8> {
        let mut w = Writer::default();
        w.u32(VERSION);
        w.str(&self.id);
        self.launch.write(&mut w);
        w.str(&self.dir);
        w.u64(self.retain);
        w.u64(self.timeout_ms);
        w.u64(self.drain_grace_ms);
        w.u8(u8::from(self.hold));
        w.u8(u8::from(self.merge_stderr));
        w.into_bytes()
    }

    pub fn decode(bytes: &[u8]) -> Result<DurableStartRequest, DecodeError> {
        let mut r = Reader::new(bytes);
        check_version(&mut r)?;
        let request = DurableStartRequest {
            id: r.str("id")?,
            launch: Launch::read(&mut r)?,
            dir: r.str("state dir")?,
            retain: r.u64("retain")?,
            timeout_ms: r.u64("timeout")?,
            drain_grace_ms: r.u64("drain grace")?,
            hold: r.u8("hold")? != 0,
            merge_stderr: r.u8("merge stderr")? != 0,
        };
        r.finish("the durable start request")?;
        Ok(request)
    }
}

/// Where a durable command is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DurableState {
    /// Its supervisor runs (the command may have exited and its output be
    /// draining).
    Running,
    /// Its status is recorded: the exit code or the signal that ended it,
    /// and whether the timeout fired.
    Ended {
        code: Option<i32>,
        signal: Option<i32>,
        timed_out: bool,
    },
    /// No status, and its supervisor is gone: the true end is unknown.
    Lost,
}

/// One durable command, as `durable-list` and `durable-info` report it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DurableEntry {
    pub id: String,
    /// The command's pid (its process group and session id).
    pub pid: u32,
    pub started_unix_ms: u64,
    pub argv: Vec<String>,
    pub cwd: String,
    pub state: DurableState,
    /// Bytes produced so far (final once ended): stdout, stderr.
    pub totals: [u64; 2],
    /// The first retained offset of stdout, stderr.
    pub retained_from: [u64; 2],
}

impl DurableEntry {
    /// One line of space-separated `key=value` fields, in this order:
    /// `id=<32 hex> pid=<n> started_ms=<n> argv=<base64> cwd=<base64>
    /// state=running|lost|ended [code=<n>|- signal=<n>|- timed_out=0|1]
    /// totals=<stdout>,<stderr> retained_from=<stdout>,<stderr>`. `argv` is
    /// the base64 of a counted list of length-prefixed strings (the
    /// request encoding), `cwd` the base64 of its bytes; the three ended
    /// fields appear exactly when `state=ended`.
    pub fn to_line(&self) -> String {
        let mut argv = Writer::default();
        argv.strs(&self.argv);
        let mut line = format!(
            "id={} pid={} started_ms={} argv={} cwd={} state=",
            self.id,
            self.pid,
            self.started_unix_ms,
            base64_encode(&argv.into_bytes()),
            base64_encode(self.cwd.as_bytes()),
        );
        let opt = |value: Option<i32>| value.map_or("-".to_owned(), |v| v.to_string());
        match &self.state {
            DurableState::Running => line.push_str("running"),
            DurableState::Lost => line.push_str("lost"),
            DurableState::Ended {
                code,
                signal,
                timed_out,
            } => line.push_str(&format!(
                "ended code={} signal={} timed_out={}",
                opt(*code),
                opt(*signal),
                u8::from(*timed_out)
            )),
        }
        line.push_str(&format!(
            " totals={},{} retained_from={},{}",
            self.totals[0], self.totals[1], self.retained_from[0], self.retained_from[1]
        ));
        line
    }

    /// Parses what [`DurableEntry::to_line`] wrote (surrounding whitespace
    /// ignored). Every field is required; fields of unknown keys are
    /// skipped, so a later helper may add some.
    pub fn parse_line(line: &str) -> Result<DurableEntry, DecodeError> {
        let fields = Fields::parse(line.trim())?;
        let id = fields.get("id")?.to_owned();
        if !valid_durable_id(&id) {
            return Err(DecodeError(format!("malformed id {id:?}")));
        }
        let argv_bytes = base64_decode(fields.get("argv")?)?;
        let mut r = Reader::new(&argv_bytes);
        let argv = r.strs("argv")?;
        r.finish("argv")?;
        let cwd = String::from_utf8(base64_decode(fields.get("cwd")?)?)
            .map_err(|_| DecodeError("cwd is not UTF-8".to_owned()))?;
        let state = match fields.get("state")? {
            "running" => DurableState::Running,
            "lost" => DurableState::Lost,
            "ended" => DurableState::Ended {
                code: fields.optional_i32("code")?,
                signal: fields.optional_i32("signal")?,
                timed_out: match fields.get("timed_out")? {
                    "0" => false,
                    "1" => true,
                    other => return Err(DecodeError(format!("timed_out {other:?}"))),
                },
            },
            other => return Err(DecodeError(format!("unknown state {other:?}"))),
        };
        Ok(DurableEntry {
            id,
            pid: fields.number("pid")?,
            started_unix_ms: fields.number("started_ms")?,
            argv,
            cwd,
            state,
            totals: fields.pair("totals")?,
            retained_from: fields.pair("retained_from")?,
        })
    }
}

/// The `key=value` fields of one line.
struct Fields<'a>(Vec<(&'a str, &'a str)>);

impl<'a> Fields<'a> {
    fn parse(line: &'a str) -> Result<Fields<'a>, DecodeError> {
        line.split(' ')
            .map(|field| {
                field
                    .split_once('=')
                    .ok_or_else(|| DecodeError(format!("field {field:?} has no '='")))
            })
            .collect::<Result<_, _>>()
            .map(Fields)
    }

    fn get(&self, key: &str) -> Result<&'a str, DecodeError> {
        self.0
            .iter()
            .find(|(k, _)| *k == key)
            .map(|(_, v)| *v)
            .ok_or_else(|| DecodeError(format!("missing field {key}")))
    }

    fn number<T: std::str::FromStr>(&self, key: &str) -> Result<T, DecodeError> {
        let text = self.get(key)?;
        text.parse()
            .map_err(|_| DecodeError(format!("{key} {text:?} is not a number")))
    }

    fn optional_i32(&self, key: &str) -> Result<Option<i32>, DecodeError> {
        match self.get(key)? {
            "-" => Ok(None),
            _ => self.number(key).map(Some),
        }
    }

    fn pair(&self, key: &str) -> Result<[u64; 2], DecodeError> {
        let text = self.get(key)?;
        let bad = || DecodeError(format!("{key} {text:?} is not two numbers"));
        let (a, b) = text.split_once(',').ok_or_else(bad)?;
        Ok([a.parse().map_err(|_| bad())?, b.parse().map_err(|_| bad())?])
    }
}

/// Whether `id` is a durable command id: exactly 32 lowercase hex digits
/// (128 random bits). Anything else is refused before it could name a
/// path.
pub fn valid_durable_id(id: &str) -> bool {
    id.len() == 32 && id.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

fn check_version(r: &mut Reader<'_>) -> Result<(), DecodeError> {
    let version = r.u32("version")?;
    if version == VERSION {
        Ok(())
    } else {
        Err(DecodeError(format!(
            "request of wire version {version}, this helper speaks {VERSION}"
        )))
    }
}

/// Standard base64 with padding: how the wire carries bytes as text (the
/// request in [`REQUEST_ENV`], the detail of a terminal's failure marker —
/// characters a PTY passes through unchanged).
pub fn base64_encode(bytes: &[u8]) -> String {
    BASE64.encode(bytes)
}

/// Decodes what [`base64_encode`] produced; anything else is an error.
pub fn base64_decode(text: impl AsRef<[u8]>) -> Result<Vec<u8>, DecodeError> {
    BASE64
        .decode(text)
        .map_err(|err| DecodeError(format!("base64: {err}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn identity() -> Identity {
        Identity {
            uid: 1000,
            gid: 1000,
            groups: vec![27, 1000],
        }
    }

    #[test]
    fn base64_round_trips_every_length_and_rejects_garbage() {
        for len in 0..70 {
            let bytes: Vec<u8> = (0..len).map(|i| (i * 37 + 11) as u8).collect();
            let text = base64_encode(&bytes);
            assert_eq!(base64_decode(&text).unwrap(), bytes, "len {len}");
        }
        assert_eq!(base64_encode(b"hi"), "aGk=");
        for bad in ["a", "a===", "aG=k", "aGk=aGk=", "a*k="] {
            assert!(base64_decode(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn requests_round_trip() {
        let run = RunRequest {
            launch: Launch {
                identity: identity(),
                argv: vec!["sh".into(), "-c".into(), "echo é".into()],
                env: vec!["A=b=c".into(), "EMPTY=".into()],
                cwd: "/home/user/work space".into(),
                search: vec!["/usr/bin".into(), "/bin".into()],
            },
            stdout: Relay::Data,
            stderr: Relay::Count,
            spill: Some(Spill {
                dir: "/tmp/s".into(),
                stdout: "1.stdout".into(),
                stderr: "1.stderr".into(),
                limit: 1 << 40,
            }),
            probe: None,
        };
        assert_eq!(RunRequest::decode(&run.encode()).unwrap(), run);
        let probing = RunRequest {
            probe: Some(ProbeFor {
                user: "user".into(),
            }),
            ..run.clone()
        };
        assert_eq!(RunRequest::decode(&probing.encode()).unwrap(), probing);
        let merged = RunRequest {
            stderr: Relay::Merged,
            ..run.clone()
        };
        assert_eq!(RunRequest::decode(&merged.encode()).unwrap(), merged);
        let stdout_merged = RunRequest {
            stdout: Relay::Merged,
            ..run.clone()
        };
        assert!(RunRequest::decode(&stdout_merged.encode()).is_err());
        let exec = ExecRequest {
            launch: Launch {
                identity: identity(),
                argv: vec!["bash".into()],
                env: vec![],
                cwd: "/".into(),
                search: vec![],
            },
            boundary: "0123abcd".into(),
        };
        assert_eq!(ExecRequest::decode(&exec.encode()).unwrap(), exec);
        let resolve = ResolveRequest {
            identity: identity(),
            name: "ls".into(),
            search: vec!["/bin".into()],
        };
        assert_eq!(ResolveRequest::decode(&resolve.encode()).unwrap(), resolve);
        let remove = RemoveRequest {
            identity: identity(),
            path: "/tmp/x".into(),
        };
        assert_eq!(RemoveRequest::decode(&remove.encode()).unwrap(), remove);
    }

    #[test]
    fn corrupt_requests_are_errors() {
        let run = RunRequest {
            launch: Launch {
                identity: identity(),
                argv: vec!["true".into()],
                env: vec![],
                cwd: "/".into(),
                search: vec![],
            },
            stdout: Relay::Data,
            stderr: Relay::Data,
            spill: None,
            probe: None,
        };
        let bytes = run.encode();
        for cut in 0..bytes.len() {
            assert!(RunRequest::decode(&bytes[..cut]).is_err(), "cut at {cut}");
        }
        let mut extra = bytes.clone();
        extra.push(0);
        assert!(RunRequest::decode(&extra).is_err());
        let mut future = bytes.clone();
        future[0] = 99;
        let err = RunRequest::decode(&future).unwrap_err();
        assert!(err.0.contains("wire version 99"), "{err}");
        let mut empty_argv = run.clone();
        empty_argv.launch.argv.clear();
        assert!(RunRequest::decode(&empty_argv.encode()).is_err());
        // A huge count must not allocate.
        let mut w = Writer::default();
        w.u32(VERSION);
        w.identity(&identity());
        w.u32(u32::MAX);
        assert!(RunRequest::decode(&w.into_bytes()).is_err());
    }

    fn durable_request() -> DurableStartRequest {
        DurableStartRequest {
            id: format!("{:032x}", rand_id()),
            launch: Launch {
                identity: identity(),
                argv: vec!["sh".into(), "-c".into(), "echo hi".into()],
                env: vec!["A=b".into()],
                cwd: "/tmp".into(),
                search: vec!["/bin".into()],
            },
            dir: "/var/lib/dsh-e2b/durable".into(),
            retain: 1 << 20,
            timeout_ms: 0,
            drain_grace_ms: 250,
            hold: false,
            merge_stderr: true,
        }
    }

    #[test]
    fn durable_start_requests_round_trip_and_reject_corruption() {
        let request = durable_request();
        let bytes = request.encode();
        assert_eq!(DurableStartRequest::decode(&bytes).unwrap(), request);
        for cut in 0..bytes.len() {
            assert!(
                DurableStartRequest::decode(&bytes[..cut]).is_err(),
                "cut {cut}"
            );
        }
        let mut extra = bytes.clone();
        extra.push(0);
        assert!(DurableStartRequest::decode(&extra).is_err());
        // Another request kind is not a durable start.
        assert!(
            DurableStartRequest::decode(
                &ExecRequest {
                    launch: request.launch.clone(),
                    boundary: String::new(),
                }
                .encode()
            )
            .is_err()
        );
    }

    #[test]
    fn durable_entries_round_trip_as_one_line() {
        let mut entry = DurableEntry {
            id: "0123456789abcdef0123456789abcdef".into(),
            pid: 4242,
            started_unix_ms: 1_700_000_000_123,
            argv: vec![
                "sh".into(),
                "-c".into(),
                "echo a  b\n=x,y".into(),
                String::new(),
            ],
            cwd: "/home/user/with space\nand=equals".into(),
            state: DurableState::Running,
            totals: [10, u64::MAX],
            retained_from: [0, 7],
        };
        let states = [
            DurableState::Running,
            DurableState::Lost,
            DurableState::Ended {
                code: Some(3),
                signal: None,
                timed_out: false,
            },
            DurableState::Ended {
                code: None,
                signal: Some(15),
                timed_out: true,
            },
            DurableState::Ended {
                code: Some(-1),
                signal: None,
                timed_out: true,
            },
        ];
        for state in states {
            entry.state = state;
            let line = entry.to_line();
            assert!(!line.contains('\n'), "{line}");
            assert_eq!(
                line.split(' ').filter(|f| f.is_empty()).count(),
                0,
                "{line}"
            );
            assert_eq!(DurableEntry::parse_line(&line).unwrap(), entry, "{line}");
            assert_eq!(
                DurableEntry::parse_line(&format!("{line} later=1\n")).unwrap(),
                entry
            );
        }
        entry.argv.clear();
        assert_eq!(DurableEntry::parse_line(&entry.to_line()).unwrap(), entry);
        let line = entry.to_line();
        for bad in [
            line.replace("pid=4242", "pid=x"),
            line.replace("state=ended", "state=gone"),
            line.replace("id=0123", "id=../x"),
            line.replace(" totals=10,", " totals=10;"),
            line.replace("timed_out=1", "timed_out=2"),
            line.replace(" cwd=", " cwd=*"),
            "".to_owned(),
            "id".to_owned(),
        ] {
            assert!(DurableEntry::parse_line(&bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn durable_ids_are_32_lowercase_hex_digits() {
        assert!(valid_durable_id("0123456789abcdef0123456789abcdef"));
        for bad in [
            "",
            "../x",
            "0123456789abcdef0123456789abcde",
            "0123456789abcdef0123456789abcdef0",
            "0123456789ABCDEF0123456789abcdef",
            "0123456789abcdef0123456789abcdeg",
            "0123456789abcdef/123456789abcdef",
        ] {
            assert!(!valid_durable_id(bad), "{bad}");
        }
    }

    #[test]
    fn stages_round_trip() {
        for stage in [
            Stage::Request,
            Stage::Resources,
            Stage::Identity,
            Stage::Cwd,
            Stage::Program,
            Stage::Exec,
            Stage::Spill,
        ] {
            assert_eq!(Stage::from_u8(stage as u8), Some(stage));
        }
        assert_eq!(Stage::from_u8(0), None);
    }
    /// 128 bits that differ per call (the ids of test requests).
    fn rand_id() -> u128 {
        use std::hash::BuildHasher;
        let state = std::collections::hash_map::RandomState::new();
        (u128::from(state.hash_one(1u8)) << 64) | u128::from(state.hash_one(2u8))
    }
}
