//! The wire of `dsh-supervisor world`: the `fs` seam's world-side
//! operations (`walk`, `search`, `read_many`, docs/design.md §5.1) answered
//! inside the sandbox for `dsh-fs-e2b` (docs/design.md §6.3).
//!
//! One process serves a provider for its whole life. It starts with the
//! world user's identity and its lease ([`WorldStart`]) in
//! [`crate::wire::REQUEST_ENV`], then reads frames on its stdin and writes
//! frames on its stdout, both `[tag: u8][len: u32 LE][payload]`
//! ([`crate::wire::frame_header`]), every payload but a [`PING`]'s starting
//! with the operation's id (`u64` LE, the host's choice; [`frame`],
//! [`split_id`]):
//!
//! - in: [`REQUEST`] (a [`WorldRequest`]: an operation starts), [`CANCEL`]
//!   (stop it, say nothing more of it), [`CREDIT`] (the host consumed that
//!   many more bytes of it: past [`WINDOW`] unacknowledged, no more is
//!   written, so one slow reader holds back its own operation and no
//!   other), [`PING`] (the host lives);
//! - out: [`EVENT`] frames (a walk's or search's events in order, the last
//!   one its `End`), one [`ITEMS`] frame (a `read_many`'s answer), one
//!   [`HELD`] frame (a hold has its file), one [`REPLACED`] frame (an
//!   edit's or a write's [`ReplaceAnswer`]), or an [`ERROR`] frame that
//!   ends the operation with the seam's error.
//!
//! A hold ([`WorldOp::Hold`]) is not part of the seam: it keeps a file's
//! inode referenced until the host cancels it, so that a rename over the
//! file (a write's publication) does not free it in the host's time — the
//! pages and blocks of a large file take tens of milliseconds to free; the
//! supervisor frees them when the hold ends (docs/design.md §6.3).
//!
//! An edit ([`WorldOp::Edit`]) and a write over an existing file
//! ([`WorldOp::Write`]) are the seam's done where the file is, for the files
//! they can do exactly as the envd way would: they answer
//! [`ReplaceAnswer::Declined`] — nothing changed — for any other, and the
//! host does that one the envd way.
//!
//! It ends on stdin's end (the provider's disposal closes it), and when
//! nothing arrived for its lease ([`LEASE`]) — envd keeps a process's stdin
//! open when its host dies, so the host's [`PING`]s every [`HEARTBEAT`] are
//! what keeps it alive.

use std::time::{Duration, UNIX_EPOCH};

use dsh_plugin_api::fs::{
    Edit, FileKind, Metadata, ReadManyItem, ReadManyLimits, SearchEvent, SearchLimit, SearchLimits,
    SearchLine, SearchMode, SearchSpec, SearchSummary, TextFile, Version, WalkEntry, WalkEvent,
    WalkSpec, WalkSummary,
};
use dsh_plugin_api::{Bytes, Error, ErrorKind, Text};

use crate::wire::{self, DecodeError, Identity, Reader, Writer};

/// In: an operation starts (id, [`WorldRequest`]).
pub const REQUEST: u8 = b'q';
/// In: the operation stops; nothing more of it is written.
pub const CANCEL: u8 = b'c';
/// In: the host consumed this many more bytes (`u64`, whole frames) of the
/// operation.
pub const CREDIT: u8 = b'k';
/// In: the host lives (no id, no payload).
pub const PING: u8 = b'p';
/// Out: one walk or search event.
pub const EVENT: u8 = b'e';
/// Out: a `read_many`'s items.
pub const ITEMS: u8 = b'r';
/// Out: the error that ended the operation.
pub const ERROR: u8 = b'x';
/// Out: a hold has its file (no body); the hold lasts until cancelled.
pub const HELD: u8 = b'h';
/// Out: an edit's or a write's answer ([`ReplaceAnswer`]).
pub const REPLACED: u8 = b'd';

/// Frame bytes of one operation written and not yet acknowledged by a
/// [`CREDIT`] past which the supervisor writes no more of it.
pub const WINDOW: u64 = 1 << 20;
/// The lease the host gives: the supervisor ends when nothing arrived on
/// its stdin for this long.
pub const LEASE: Duration = Duration::from_secs(30);
/// The host writes a [`PING`] when it has written nothing for this long.
pub const HEARTBEAT: Duration = Duration::from_secs(5);
/// The largest frame the supervisor accepts on its stdin.
pub const MAX_INPUT_FRAME: usize = 64 << 20;

/// The start request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorldStart {
    /// Every operation is performed with it.
    pub identity: Identity,
    /// The process ends when nothing arrived on its stdin for this long
    /// (whole milliseconds).
    pub lease: Duration,
}

impl WorldStart {
    pub fn encode(&self) -> Vec<u8> {
        let mut w = Writer::default();
        w.identity(&self.identity);
        w.u64(self.lease.as_millis() as u64);
        w.into_bytes()
    }

    pub fn decode(bytes: &[u8]) -> Result<WorldStart, DecodeError> {
        let mut r = Reader::new(bytes);
        let identity = r.identity()?;
        let lease = Duration::from_millis(r.u64("lease")?);
        r.finish("the world start request")?;
        Ok(WorldStart { identity, lease })
    }
}

/// A whole frame: header, `id`, `body`.
pub fn frame(tag: u8, id: u64, body: &[u8]) -> Vec<u8> {
    let mut out = vec![0u8; wire::HEADER];
    wire::frame_header(&mut out, tag, 8 + body.len());
    out.extend_from_slice(&id.to_le_bytes());
    out.extend_from_slice(body);
    out
}

/// A payload's operation id and the rest.
pub fn split_id(payload: &[u8]) -> Result<(u64, &[u8]), DecodeError> {
    let Some((id, body)) = payload.split_first_chunk::<8>() else {
        return Err(DecodeError("a frame without an operation id".into()));
    };
    Ok((u64::from_le_bytes(*id), body))
}

/// One frame read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Frame<'a> {
    pub tag: u8,
    pub payload: &'a [u8],
}

/// Splits the complete frames off the front of `buf`, and how many bytes
/// they took. A frame longer than `max` is an error.
pub fn complete_frames(buf: &[u8], max: usize) -> Result<(Vec<Frame<'_>>, usize), DecodeError> {
    let mut frames = Vec::new();
    let mut at = 0;
    while buf.len() - at >= wire::HEADER {
        let header = &buf[at..at + wire::HEADER];
        let len = u32::from_le_bytes([header[1], header[2], header[3], header[4]]) as usize;
        if len > max {
            return Err(DecodeError(format!(
                "a frame of {len} bytes (at most {max})"
            )));
        }
        if buf.len() - at - wire::HEADER < len {
            break;
        }
        let start = at + wire::HEADER;
        frames.push(Frame {
            tag: header[0],
            payload: &buf[start..start + len],
        });
        at = start + len;
    }
    Ok((frames, at))
}

/// What a world request asks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WorldOp {
    Walk {
        root: String,
        spec: WalkSpec,
    },
    Search {
        root: String,
        spec: SearchSpec,
    },
    ReadMany {
        paths: Vec<String>,
        limits: ReadManyLimits,
    },
    /// Keeps `path` (its final component not followed) referenced until
    /// cancelled; answered [`HELD`], or an error when it cannot be opened.
    Hold {
        path: String,
    },
    /// Applies `edits` to the file `target` names; answered by one
    /// [`REPLACED`] frame.
    Edit {
        target: Replacing,
        edits: Vec<Edit>,
    },
    /// Replaces the content of the existing file `target` names with
    /// `content`; answered by one [`REPLACED`] frame.
    Write {
        target: Replacing,
        content: Bytes,
    },
}

/// The existing file an edit or a write replaces: the regular file `path`
/// resolves to (symlinks followed), of at most `max_bytes`, at `version`
/// when one is given. The stored file gets the extended attribute
/// `attribute` (name, value: `dsh-fs-e2b`'s write token).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Replacing {
    pub path: String,
    pub version: Option<Version>,
    pub max_bytes: u64,
    pub attribute: (String, String),
}

/// What an edit or a write did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReplaceAnswer {
    /// Stored: the file's new version, and how many replacements an edit
    /// made (0 for a write).
    Replaced { version: Version, replacements: u64 },
    /// The edits do not apply to the file's text (the literal engine's
    /// failure, as the seam reports it); nothing changed.
    Refused { failure: String },
    /// Not done here, for this reason; nothing changed.
    Declined { reason: String },
}

/// One world-side operation, relative paths joining `cwd`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorldRequest {
    pub cwd: String,
    pub op: WorldOp,
}

impl WorldRequest {
    pub fn encode(&self) -> Vec<u8> {
        let mut w = Writer::default();
        w.str(&self.cwd);
        match &self.op {
            WorldOp::Walk { root, spec } => {
                w.u8(b'w');
                w.str(root);
                w.u32(spec.max_depth);
                w.u64(spec.max_entries);
                w.strs(&spec.globs);
                w.u8(u8::from(spec.gitignore));
                w.u8(u8::from(spec.beneath));
            }
            WorldOp::Search { root, spec } => {
                w.u8(b's');
                w.str(root);
                w.str(&spec.pattern);
                w.u8(u8::from(spec.case_insensitive));
                match spec.mode {
                    SearchMode::Lines { context } => {
                        w.u8(0);
                        w.u32(context);
                    }
                    SearchMode::FilesWithMatches => w.u8(1),
                    SearchMode::Count => w.u8(2),
                }
                w.strs(&spec.globs);
                w.strs(&spec.types);
                w.u8(u8::from(spec.gitignore));
                w.u32(spec.max_depth);
                w.u8(u8::from(spec.beneath));
                let limits = &spec.limits;
                for bound in [
                    limits.max_matches,
                    limits.max_bytes_scanned,
                    limits.max_files,
                    limits.max_output_bytes,
                    limits.max_entries,
                ] {
                    w.u64(bound);
                }
                w.u32(limits.max_line_chars);
            }
            WorldOp::ReadMany { paths, limits } => {
                w.u8(b'r');
                w.strs(paths);
                w.u64(limits.max_file_bytes);
                w.u64(limits.max_total_bytes);
                opt_str(&mut w, limits.beneath.as_deref());
            }
            WorldOp::Hold { path } => {
                w.u8(b'h');
                w.str(path);
            }
            WorldOp::Edit { target, edits } => {
                w.u8(b'e');
                replacing(&mut w, target);
                w.u32(edits.len() as u32);
                for edit in edits {
                    w.str(&edit.old);
                    w.str(&edit.new);
                    w.u8(u8::from(edit.replace_all));
                }
            }
            WorldOp::Write { target, content } => {
                w.u8(b'u');
                replacing(&mut w, target);
                w.bytes(content);
            }
        }
        w.into_bytes()
    }

    pub fn decode(bytes: &[u8]) -> Result<WorldRequest, DecodeError> {
        let mut r = Reader::new(bytes);
        let cwd = r.str("cwd")?;
        let op = match r.u8("operation")? {
            b'w' => WorldOp::Walk {
                root: r.str("root")?,
                spec: WalkSpec {
                    max_depth: r.u32("max_depth")?,
                    max_entries: r.u64("max_entries")?,
                    globs: r.strs("globs")?,
                    gitignore: flag(&mut r, "gitignore")?,
                    beneath: flag(&mut r, "beneath")?,
                },
            },
            b's' => WorldOp::Search {
                root: r.str("root")?,
                spec: SearchSpec {
                    pattern: r.str("pattern")?,
                    case_insensitive: flag(&mut r, "case_insensitive")?,
                    mode: match r.u8("mode")? {
                        0 => SearchMode::Lines {
                            context: r.u32("context")?,
                        },
                        1 => SearchMode::FilesWithMatches,
                        2 => SearchMode::Count,
                        other => return Err(DecodeError(format!("search mode {other}"))),
                    },
                    globs: r.strs("globs")?,
                    types: r.strs("types")?,
                    gitignore: flag(&mut r, "gitignore")?,
                    max_depth: r.u32("max_depth")?,
                    beneath: flag(&mut r, "beneath")?,
                    limits: SearchLimits {
                        max_matches: r.u64("max_matches")?,
                        max_bytes_scanned: r.u64("max_bytes_scanned")?,
                        max_files: r.u64("max_files")?,
                        max_output_bytes: r.u64("max_output_bytes")?,
                        max_entries: r.u64("max_entries")?,
                        max_line_chars: r.u32("max_line_chars")?,
                    },
                },
            },
            b'r' => WorldOp::ReadMany {
                paths: r.strs("paths")?,
                limits: ReadManyLimits {
                    max_file_bytes: r.u64("max_file_bytes")?,
                    max_total_bytes: r.u64("max_total_bytes")?,
                    beneath: read_opt_str(&mut r, "beneath")?,
                },
            },
            b'h' => WorldOp::Hold {
                path: r.str("path")?,
            },
            b'e' => {
                let target = read_replacing(&mut r)?;
                let count = r.u32("edit count")? as usize;
                // Each edit takes at least nine bytes: no count beyond them.
                if count > bytes.len() / 9 {
                    return Err(DecodeError(format!(
                        "edit count {count} exceeds the request"
                    )));
                }
                let mut edits = Vec::with_capacity(count);
                for _ in 0..count {
                    edits.push(Edit {
                        old: r.str("old")?,
                        new: r.str("new")?,
                        replace_all: flag(&mut r, "replace_all")?,
                    });
                }
                WorldOp::Edit { target, edits }
            }
            b'u' => WorldOp::Write {
                target: read_replacing(&mut r)?,
                content: Bytes::copy_from_slice(r.bytes("content")?),
            },
            other => return Err(DecodeError(format!("world operation {other}"))),
        };
        r.finish("the world request")?;
        Ok(WorldRequest { cwd, op })
    }
}

/// The payload of an [`EVENT`] frame of a walk.
pub fn encode_walk_event(event: &WalkEvent) -> Vec<u8> {
    let mut w = Writer::default();
    match event {
        WalkEvent::Entry(entry) => {
            w.u8(b'E');
            w.str(&entry.relative);
            w.str(&entry.path);
            w.u32(entry.depth);
            metadata(&mut w, &entry.metadata);
        }
        WalkEvent::End(summary) => {
            w.u8(b'Z');
            w.u8(u8::from(summary.complete));
            w.u64(summary.ignored);
            w.u64(summary.unreadable);
        }
    }
    w.into_bytes()
}

pub fn decode_walk_event(bytes: &[u8]) -> Result<WalkEvent, DecodeError> {
    let mut r = Reader::new(bytes);
    let event = match r.u8("walk event")? {
        b'E' => WalkEvent::Entry(WalkEntry {
            relative: r.str("relative")?,
            path: r.str("path")?,
            depth: r.u32("depth")?,
            metadata: read_metadata(&mut r)?,
        }),
        b'Z' => WalkEvent::End(WalkSummary {
            complete: flag(&mut r, "complete")?,
            ignored: r.u64("ignored")?,
            unreadable: r.u64("unreadable")?,
        }),
        other => return Err(DecodeError(format!("walk event {other}"))),
    };
    r.finish("a walk event")?;
    Ok(event)
}

/// The payload of an [`EVENT`] frame of a search.
pub fn encode_search_event(event: &SearchEvent) -> Vec<u8> {
    let mut w = Writer::default();
    match event {
        SearchEvent::Line(line) => {
            w.u8(b'L');
            w.str(&line.path);
            w.u64(line.line);
            w.str(&line.text);
            w.u64(line.offset);
            w.u64(line.len);
            w.u8(u8::from(line.context));
        }
        SearchEvent::File { path, matches } => {
            w.u8(b'F');
            w.str(path);
            w.u64(*matches);
        }
        SearchEvent::End(summary) => {
            w.u8(b'Z');
            w.u64(summary.files_searched);
            w.u64(summary.files_skipped);
            w.u64(summary.ignored);
            w.u8(match summary.stopped_by {
                None => 0,
                Some(SearchLimit::Matches) => 1,
                Some(SearchLimit::OutputBytes) => 2,
                Some(SearchLimit::BytesScanned) => 3,
                Some(SearchLimit::Files) => 4,
                Some(SearchLimit::Entries) => 5,
            });
        }
    }
    w.into_bytes()
}

pub fn decode_search_event(bytes: &[u8]) -> Result<SearchEvent, DecodeError> {
    let mut r = Reader::new(bytes);
    let event = match r.u8("search event")? {
        b'L' => SearchEvent::Line(SearchLine {
            path: r.str("path")?,
            line: r.u64("line")?,
            text: r.str("text")?,
            offset: r.u64("offset")?,
            len: r.u64("len")?,
            context: flag(&mut r, "context")?,
        }),
        b'F' => SearchEvent::File {
            path: r.str("path")?,
            matches: r.u64("matches")?,
        },
        b'Z' => SearchEvent::End(SearchSummary {
            files_searched: r.u64("files_searched")?,
            files_skipped: r.u64("files_skipped")?,
            ignored: r.u64("ignored")?,
            stopped_by: match r.u8("stopped_by")? {
                0 => None,
                1 => Some(SearchLimit::Matches),
                2 => Some(SearchLimit::OutputBytes),
                3 => Some(SearchLimit::BytesScanned),
                4 => Some(SearchLimit::Files),
                5 => Some(SearchLimit::Entries),
                other => return Err(DecodeError(format!("search limit {other}"))),
            },
        }),
        other => return Err(DecodeError(format!("search event {other}"))),
    };
    r.finish("a search event")?;
    Ok(event)
}

/// The payload of the [`ITEMS`] frame.
pub fn encode_items(items: &[ReadManyItem]) -> Vec<u8> {
    let mut w = Writer::default();
    w.u32(items.len() as u32);
    for item in items {
        w.str(&item.path);
        match &item.result {
            Ok(file) => {
                w.u8(0);
                w.bytes(file.text.as_bytes());
                w.str(&file.version.0);
            }
            Err(err) => {
                w.u8(1);
                error(&mut w, err);
            }
        }
    }
    w.into_bytes()
}

pub fn decode_items(payload: &[u8]) -> Result<Vec<ReadManyItem>, DecodeError> {
    let mut r = Reader::new(payload);
    let count = r.u32("item count")? as usize;
    if count > payload.len() / 5 {
        return Err(DecodeError(format!(
            "item count {count} exceeds the record"
        )));
    }
    let mut items = Vec::with_capacity(count);
    for _ in 0..count {
        let path = r.str("path")?;
        let result = match r.u8("outcome")? {
            0 => {
                let text = r.bytes("text")?;
                let text = Text::from_utf8(Bytes::copy_from_slice(text))
                    .map_err(|_| DecodeError("a text is not UTF-8".into()))?;
                Ok(TextFile {
                    text,
                    version: Version(r.str("version")?),
                })
            }
            1 => Err(read_error(&mut r)?),
            other => return Err(DecodeError(format!("outcome {other}"))),
        };
        items.push(ReadManyItem { path, result });
    }
    r.finish("the items")?;
    Ok(items)
}

/// The payload of the [`REPLACED`] frame.
pub fn encode_replace_answer(answer: &ReplaceAnswer) -> Vec<u8> {
    let mut w = Writer::default();
    match answer {
        ReplaceAnswer::Replaced {
            version,
            replacements,
        } => {
            w.u8(0);
            w.str(&version.0);
            w.u64(*replacements);
        }
        ReplaceAnswer::Refused { failure } => {
            w.u8(1);
            w.str(failure);
        }
        ReplaceAnswer::Declined { reason } => {
            w.u8(2);
            w.str(reason);
        }
    }
    w.into_bytes()
}

pub fn decode_replace_answer(payload: &[u8]) -> Result<ReplaceAnswer, DecodeError> {
    let mut r = Reader::new(payload);
    let answer = match r.u8("edit outcome")? {
        0 => ReplaceAnswer::Replaced {
            version: Version(r.str("version")?),
            replacements: r.u64("replacements")?,
        },
        1 => ReplaceAnswer::Refused {
            failure: r.str("failure")?,
        },
        2 => ReplaceAnswer::Declined {
            reason: r.str("reason")?,
        },
        other => return Err(DecodeError(format!("edit outcome {other}"))),
    };
    r.finish("an edit's answer")?;
    Ok(answer)
}

/// The payload of an [`ERROR`] frame.
pub fn encode_error(err: &Error) -> Vec<u8> {
    let mut w = Writer::default();
    error(&mut w, err);
    w.into_bytes()
}

pub fn decode_error(payload: &[u8]) -> Result<Error, DecodeError> {
    let mut r = Reader::new(payload);
    let err = read_error(&mut r)?;
    r.finish("an error")?;
    Ok(err)
}

fn error(w: &mut Writer, err: &Error) {
    w.u32(err.kind().code());
    w.str(err.message());
    opt_str(w, err.subject());
}

fn read_error(r: &mut Reader<'_>) -> Result<Error, DecodeError> {
    let kind = ErrorKind::from_code(r.u32("error kind")?);
    let message = r.str("error message")?;
    let err = Error::new(kind, message);
    Ok(match read_opt_str(r, "error subject")? {
        Some(subject) => err.with_subject(subject),
        None => err,
    })
}

fn metadata(w: &mut Writer, meta: &Metadata) {
    w.u8(match meta.kind {
        FileKind::File => 0,
        FileKind::Directory => 1,
        FileKind::Symlink => 2,
        FileKind::Other => 3,
    });
    w.u64(meta.size);
    w.u32(meta.mode);
    let (after, since) = match meta.modified.duration_since(UNIX_EPOCH) {
        Ok(since) => (1, since),
        Err(before) => (0, before.duration()),
    };
    w.u8(after);
    w.u64(since.as_secs());
    w.u32(since.subsec_nanos());
    opt_str(w, meta.symlink_target.as_deref());
    w.str(&meta.version.0);
}

fn read_metadata(r: &mut Reader<'_>) -> Result<Metadata, DecodeError> {
    let kind = match r.u8("kind")? {
        0 => FileKind::File,
        1 => FileKind::Directory,
        2 => FileKind::Symlink,
        3 => FileKind::Other,
        other => return Err(DecodeError(format!("file kind {other}"))),
    };
    let size = r.u64("size")?;
    let mode = r.u32("mode")?;
    let after = flag(r, "mtime sign")?;
    let since = Duration::new(r.u64("mtime seconds")?, r.u32("mtime nanoseconds")?);
    let modified = if after {
        UNIX_EPOCH.checked_add(since)
    } else {
        UNIX_EPOCH.checked_sub(since)
    }
    .ok_or_else(|| DecodeError("an mtime out of range".into()))?;
    Ok(Metadata {
        kind,
        size,
        mode,
        modified,
        symlink_target: read_opt_str(r, "symlink target")?,
        version: Version(r.str("version")?),
    })
}

fn replacing(w: &mut Writer, target: &Replacing) {
    w.str(&target.path);
    opt_str(w, target.version.as_ref().map(|version| version.0.as_str()));
    w.u64(target.max_bytes);
    w.str(&target.attribute.0);
    w.str(&target.attribute.1);
}

fn read_replacing(r: &mut Reader<'_>) -> Result<Replacing, DecodeError> {
    Ok(Replacing {
        path: r.str("path")?,
        version: read_opt_str(r, "version")?.map(Version),
        max_bytes: r.u64("max_bytes")?,
        attribute: (r.str("attribute name")?, r.str("attribute value")?),
    })
}

fn opt_str(w: &mut Writer, value: Option<&str>) {
    w.option(value, Writer::str);
}

fn read_opt_str(r: &mut Reader<'_>, what: &str) -> Result<Option<String>, DecodeError> {
    r.option(what, |r| r.str(what))
}

fn flag(r: &mut Reader<'_>, what: &str) -> Result<bool, DecodeError> {
    match r.u8(what)? {
        0 => Ok(false),
        1 => Ok(true),
        other => Err(DecodeError(format!("{what}: {other} is not a flag"))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn meta(kind: FileKind, modified: std::time::SystemTime, target: Option<&str>) -> Metadata {
        Metadata {
            kind,
            size: 12,
            mode: 0o4755,
            modified,
            symlink_target: target.map(str::to_owned),
            version: Version("0123abcd".into()),
        }
    }

    #[test]
    fn requests_round_trip() {
        let identity = Identity {
            uid: 1000,
            gid: 1000,
            groups: vec![1000, 27],
        };
        let limits = SearchLimits {
            max_matches: 1,
            max_bytes_scanned: 2,
            max_files: 3,
            max_output_bytes: 4,
            max_entries: 5,
            max_line_chars: 6,
        };
        let ops = [
            WorldOp::Walk {
                root: "src".into(),
                spec: WalkSpec {
                    max_depth: 3,
                    max_entries: 100,
                    globs: vec!["*.rs".into(), "!target".into()],
                    gitignore: true,
                    beneath: true,
                },
            },
            WorldOp::Search {
                root: "/w".into(),
                spec: SearchSpec {
                    pattern: r"fn \w+".into(),
                    case_insensitive: true,
                    mode: SearchMode::Lines { context: 2 },
                    globs: vec![],
                    types: vec!["rust".into()],
                    gitignore: false,
                    max_depth: 9,
                    beneath: false,
                    limits,
                },
            },
            WorldOp::Search {
                root: "x".into(),
                spec: SearchSpec {
                    pattern: "a".into(),
                    case_insensitive: false,
                    mode: SearchMode::Count,
                    globs: vec!["a/**".into()],
                    types: vec![],
                    gitignore: true,
                    max_depth: 1,
                    beneath: true,
                    limits,
                },
            },
            WorldOp::ReadMany {
                paths: vec!["a\nb".into(), "é".into()],
                limits: ReadManyLimits {
                    max_file_bytes: 10,
                    max_total_bytes: 20,
                    beneath: Some("/w".into()),
                },
            },
            WorldOp::Hold {
                path: "/w/big file".into(),
            },
            WorldOp::Edit {
                target: Replacing {
                    path: "/w/a.rs".into(),
                    version: Some(Version("v1".into())),
                    max_bytes: 1 << 20,
                    attribute: ("user.e2b.dsh-write".into(), "0f".into()),
                },
                edits: vec![
                    Edit {
                        old: "fn a".into(),
                        new: "fn b".into(),
                        replace_all: false,
                    },
                    Edit {
                        old: "x".into(),
                        new: String::new(),
                        replace_all: true,
                    },
                ],
            },
            WorldOp::Edit {
                target: Replacing {
                    path: "b".into(),
                    version: None,
                    max_bytes: 0,
                    attribute: (String::new(), String::new()),
                },
                edits: vec![],
            },
            WorldOp::Write {
                target: Replacing {
                    path: "/w/new\n".into(),
                    version: Some(Version("v3".into())),
                    max_bytes: 7,
                    attribute: ("user.e2b.dsh-write".into(), "1e".into()),
                },
                content: Bytes::from_static(&[0, 1, 2, 255]),
            },
        ];
        for op in ops {
            let request = WorldRequest {
                cwd: "/home/user".into(),
                op,
            };
            let encoded = request.encode();
            assert_eq!(WorldRequest::decode(&encoded), Ok(request));
            assert!(WorldRequest::decode(&encoded[..encoded.len() - 1]).is_err());
        }
        let start = WorldStart {
            identity,
            lease: Duration::from_millis(1500),
        };
        let encoded = start.encode();
        assert_eq!(WorldStart::decode(&encoded), Ok(start));
        assert!(WorldStart::decode(&encoded[1..]).is_err());
    }

    #[test]
    fn frames_carry_ids_and_split_whole() {
        let mut stream = frame(REQUEST, 7, b"abc");
        stream.extend(frame(CANCEL, u64::MAX, b""));
        let partial = frame(EVENT, 9, b"tail");
        stream.extend_from_slice(&partial[..6]);
        let (frames, used) = complete_frames(&stream, 64).unwrap();
        assert_eq!(used, stream.len() - 6);
        assert_eq!(frames.len(), 2);
        assert_eq!(frames[0].tag, REQUEST);
        assert_eq!(split_id(frames[0].payload), Ok((7, &b"abc"[..])));
        assert_eq!(frames[1].tag, CANCEL);
        assert_eq!(split_id(frames[1].payload), Ok((u64::MAX, &b""[..])));
        assert!(split_id(b"short").is_err());
        assert!(complete_frames(&frame(ITEMS, 1, &[0; 100]), 64).is_err());
    }

    #[test]
    fn answers_round_trip() {
        let before_epoch = UNIX_EPOCH - Duration::new(5, 7);
        let walk = [
            WalkEvent::Entry(WalkEntry {
                relative: "d/l".into(),
                path: "./d/l".into(),
                depth: 2,
                metadata: meta(
                    FileKind::Symlink,
                    UNIX_EPOCH + Duration::new(9, 3),
                    Some("../t"),
                ),
            }),
            WalkEvent::Entry(WalkEntry {
                relative: "old".into(),
                path: "old".into(),
                depth: 1,
                metadata: meta(FileKind::Other, before_epoch, None),
            }),
            WalkEvent::End(WalkSummary {
                complete: false,
                ignored: 3,
                unreadable: 1,
            }),
        ];
        for event in walk {
            assert_eq!(decode_walk_event(&encode_walk_event(&event)), Ok(event));
        }
        let search = [
            SearchEvent::Line(SearchLine {
                path: "a.rs".into(),
                line: 4,
                text: "fn x() {}".into(),
                offset: 2,
                len: 11,
                context: true,
            }),
            SearchEvent::File {
                path: "b.rs".into(),
                matches: 7,
            },
            SearchEvent::End(SearchSummary {
                files_searched: 1,
                files_skipped: 2,
                ignored: 3,
                stopped_by: Some(SearchLimit::BytesScanned),
            }),
        ];
        for event in search {
            assert_eq!(decode_search_event(&encode_search_event(&event)), Ok(event));
        }
        let items = vec![
            ReadManyItem {
                path: "a".into(),
                result: Ok(TextFile {
                    text: Text::from("one\n"),
                    version: Version("v".into()),
                }),
            },
            ReadManyItem {
                path: "b".into(),
                result: Err(Error::new(ErrorKind::Binary, "read_many: binary").with_subject("/w/b")),
            },
        ];
        assert_eq!(decode_items(&encode_items(&items)), Ok(items));
        let err = Error::new(ErrorKind::NotFound, "walk: gone");
        assert_eq!(decode_error(&encode_error(&err)), Ok(err));
        for answer in [
            ReplaceAnswer::Replaced {
                version: Version("v2".into()),
                replacements: 3,
            },
            ReplaceAnswer::Refused {
                failure: "edit 1 of 1: no match".into(),
            },
            ReplaceAnswer::Declined {
                reason: "a symlink".into(),
            },
        ] {
            let encoded = encode_replace_answer(&answer);
            assert_eq!(decode_replace_answer(&encoded), Ok(answer));
            assert!(decode_replace_answer(&encoded[..encoded.len() - 1]).is_err());
        }
        assert!(decode_replace_answer(&[3]).is_err());
        assert!(decode_walk_event(b"Q").is_err());
    }
}
