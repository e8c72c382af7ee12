//! Decoding the helper's frame stream (see `dsh_supervisor::wire`) as it arrives
//! in envd's output chunks, which do not respect frame boundaries.
//!
//! Output bytes are passed on as slices of the chunks they arrived in
//! (never copied); one frame of output may come out as several pieces.

use bytes::Bytes;
use dsh_plugin_api::subprocess::Signal;
use dsh_provider_kit::status::Ended;

use crate::wire::{self, Stage, tag};

/// Which output stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stream {
    Stdout,
    Stderr,
}

impl Stream {
    pub fn index(self) -> usize {
        match self {
            Stream::Stdout => 0,
            Stream::Stderr => 1,
        }
    }

    fn from_wire(id: u8) -> Option<Stream> {
        match id {
            wire::STDOUT => Some(Stream::Stdout),
            wire::STDERR => Some(Stream::Stderr),
            _ => None,
        }
    }
}

/// One decoded frame (or piece of an output frame).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Frame {
    Started {
        pid: u32,
        starttime: u64,
    },
    Failed {
        stage: Stage,
        errno: i32,
        detail: String,
    },
    Output {
        stream: Stream,
        bytes: Bytes,
    },
    Counted {
        stream: Stream,
        count: u64,
    },
    Closed {
        stream: Stream,
        detached: bool,
    },
    Exited {
        ended: Ended,
        core: bool,
        group_empty: bool,
    },
    SpillFailed {
        stream: Stream,
        errno: i32,
    },
    /// What a first command learned of the sandbox (`probe`'s output).
    Probed(ProbeRecord),
}

/// `probe`'s output as a [`Frame::Probed`] carries it; its `Debug` shows
/// only its length (the ambient environment may hold secrets, and frames
/// are logged).
#[derive(Clone, PartialEq, Eq)]
pub struct ProbeRecord(pub Vec<u8>);

impl std::fmt::Debug for ProbeRecord {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "ProbeRecord({} bytes)", self.0.len())
    }
}

/// The helper sent something this host cannot read: the stream is unusable
/// from there on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FrameError(pub String);

impl std::fmt::Display for FrameError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// Largest non-output frame accepted (a failure detail is a path).
const CONTROL_LIMIT: usize = 1 << 20;

#[derive(Debug)]
enum State {
    /// Reading a header; `have` bytes of it are in `header`.
    Header { have: usize },
    /// Inside an output frame: `remaining` payload bytes to pass on.
    Output { stream: Stream, remaining: usize },
    /// Collecting a control frame's payload.
    Control { tag: u8, need: usize },
}

/// The incremental decoder.
#[derive(Debug)]
pub struct Decoder {
    header: [u8; wire::HEADER],
    state: State,
    payload: Vec<u8>,
}

impl Default for Decoder {
    fn default() -> Decoder {
        Decoder {
            header: [0; wire::HEADER],
            state: State::Header { have: 0 },
            payload: Vec::new(),
        }
    }
}

impl Decoder {
    /// Decodes `chunk`, appending complete frames and output pieces to
    /// `out`.
    pub fn push(&mut self, chunk: &Bytes, out: &mut Vec<Frame>) -> Result<(), FrameError> {
        let mut at = 0;
        while at < chunk.len() {
            match self.state {
                State::Header { have } => {
                    let take = (wire::HEADER - have).min(chunk.len() - at);
                    self.header[have..have + take].copy_from_slice(&chunk[at..at + take]);
                    at += take;
                    if have + take < wire::HEADER {
                        self.state = State::Header { have: have + take };
                    } else {
                        self.begin(out)?;
                    }
                }
                State::Output { stream, remaining } => {
                    let take = remaining.min(chunk.len() - at);
                    out.push(Frame::Output {
                        stream,
                        bytes: chunk.slice(at..at + take),
                    });
                    at += take;
                    self.state = if take == remaining {
                        State::Header { have: 0 }
                    } else {
                        State::Output {
                            stream,
                            remaining: remaining - take,
                        }
                    };
                }
                State::Control { tag, need } => {
                    let take = (need - self.payload.len()).min(chunk.len() - at);
                    self.payload.extend_from_slice(&chunk[at..at + take]);
                    at += take;
                    if self.payload.len() == need {
                        out.push(parse_control(tag, &self.payload)?);
                        self.payload.clear();
                        self.state = State::Header { have: 0 };
                    }
                }
            }
        }
        Ok(())
    }

    /// Whether the stream may end here (between frames).
    pub fn at_boundary(&self) -> bool {
        matches!(self.state, State::Header { have: 0 })
    }

    /// A complete header is in: decide what follows.
    fn begin(&mut self, out: &mut Vec<Frame>) -> Result<(), FrameError> {
        let tag = self.header[0];
        let len = u32::from_le_bytes([
            self.header[1],
            self.header[2],
            self.header[3],
            self.header[4],
        ]) as usize;
        self.state = match tag {
            tag::STDOUT | tag::STDERR => {
                let stream = if tag == tag::STDOUT {
                    Stream::Stdout
                } else {
                    Stream::Stderr
                };
                if len == 0 {
                    State::Header { have: 0 }
                } else {
                    State::Output {
                        stream,
                        remaining: len,
                    }
                }
            }
            tag::PROBED if len > crate::setup::PROBE_LIMIT => {
                return Err(FrameError(format!(
                    "the sandbox helper's probe of {len} bytes exceeds {}",
                    crate::setup::PROBE_LIMIT
                )));
            }
            tag::PROBED if len > 0 => State::Control { tag, need: len },
            _ if len > CONTROL_LIMIT => {
                return Err(FrameError(format!(
                    "frame {:?} of {len} bytes exceeds {CONTROL_LIMIT}",
                    tag as char
                )));
            }
            _ if len == 0 => {
                out.push(parse_control(tag, &[])?);
                State::Header { have: 0 }
            }
            _ => State::Control { tag, need: len },
        };
        Ok(())
    }
}

fn parse_control(tag: u8, payload: &[u8]) -> Result<Frame, FrameError> {
    let mut r = wire::Reader::new(payload);
    let bad = |e: wire::DecodeError| FrameError(format!("frame {:?}: {e}", tag as char));
    let stream =
        |id: u8| Stream::from_wire(id).ok_or_else(|| FrameError(format!("unknown stream {id}")));
    let frame = match tag {
        tag::STARTED => Frame::Started {
            pid: r.u32("pid").map_err(bad)?,
            starttime: r.u64("start time").map_err(bad)?,
        },
        tag::FAILED => {
            let stage = r.u8("stage").map_err(bad)?;
            let errno = r.i32("errno").map_err(bad)?;
            let detail = String::from_utf8_lossy(r.rest()).into_owned();
            return Ok(Frame::Failed {
                stage: Stage::from_u8(stage)
                    .ok_or_else(|| FrameError(format!("unknown stage {stage}")))?,
                errno,
                detail,
            });
        }
        tag::COUNTED => Frame::Counted {
            stream: stream(r.u8("stream").map_err(bad)?)?,
            count: r.u64("count").map_err(bad)?,
        },
        tag::CLOSED => Frame::Closed {
            stream: stream(r.u8("stream").map_err(bad)?)?,
            detached: r.u8("how").map_err(bad)? == wire::CLOSED_DETACHED,
        },
        tag::EXITED => {
            let kind = r.u8("kind").map_err(bad)?;
            let value = r.i32("value").map_err(bad)?;
            let ended = match kind {
                wire::EXIT_CODE => Ended::Code(value),
                wire::EXIT_SIGNAL => Ended::Signal(Signal(value)),
                other => return Err(FrameError(format!("unknown exit kind {other}"))),
            };
            Frame::Exited {
                ended,
                core: r.u8("core").map_err(bad)? != 0,
                group_empty: r.u8("group empty").map_err(bad)? != 0,
            }
        }
        tag::SPILL_FAILED => Frame::SpillFailed {
            stream: stream(r.u8("stream").map_err(bad)?)?,
            errno: r.i32("errno").map_err(bad)?,
        },
        tag::PROBED => return Ok(Frame::Probed(ProbeRecord(payload.to_vec()))),
        other => return Err(FrameError(format!("unknown frame tag {other:#04x}"))),
    };
    r.finish("the frame").map_err(bad)?;
    Ok(frame)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(tag: u8, payload: &[u8]) -> Vec<u8> {
        let mut bytes = vec![0u8; wire::HEADER];
        wire::frame_header(&mut bytes, tag, payload.len());
        bytes.extend_from_slice(payload);
        bytes
    }

    /// A stream with every kind of frame.
    fn sample() -> (Vec<u8>, Vec<Frame>) {
        let mut wire = Vec::new();
        let mut started = 77u32.to_le_bytes().to_vec();
        started.extend_from_slice(&123u64.to_le_bytes());
        wire.extend(frame(tag::STARTED, &started));
        wire.extend(frame(tag::STDOUT, b"hello \xff"));
        wire.extend(frame(tag::STDERR, b""));
        wire.extend(frame(tag::STDERR, b"err"));
        let mut counted = vec![wire::STDOUT];
        counted.extend_from_slice(&9u64.to_le_bytes());
        wire.extend(frame(tag::COUNTED, &counted));
        wire.extend(frame(tag::CLOSED, &[wire::STDERR, wire::CLOSED_DETACHED]));
        let mut exited = vec![wire::EXIT_SIGNAL];
        exited.extend_from_slice(&15i32.to_le_bytes());
        exited.extend_from_slice(&[0, 1]);
        wire.extend(frame(tag::EXITED, &exited));
        let mut spill = vec![wire::STDOUT];
        spill.extend_from_slice(&28i32.to_le_bytes());
        wire.extend(frame(tag::SPILL_FAILED, &spill));
        let expected = vec![
            Frame::Started {
                pid: 77,
                starttime: 123,
            },
            Frame::Output {
                stream: Stream::Stdout,
                bytes: Bytes::from_static(b"hello \xff"),
            },
            Frame::Output {
                stream: Stream::Stderr,
                bytes: Bytes::from_static(b"err"),
            },
            Frame::Counted {
                stream: Stream::Stdout,
                count: 9,
            },
            Frame::Closed {
                stream: Stream::Stderr,
                detached: true,
            },
            Frame::Exited {
                ended: Ended::Signal(Signal(15)),
                core: false,
                group_empty: true,
            },
            Frame::SpillFailed {
                stream: Stream::Stdout,
                errno: 28,
            },
        ];
        (wire, expected)
    }

    /// Output pieces merged back per frame, for comparing chunkings.
    fn merged(frames: Vec<Frame>) -> Vec<Frame> {
        let mut out: Vec<Frame> = Vec::new();
        for frame in frames {
            if let (
                Some(Frame::Output {
                    stream: last,
                    bytes: previous,
                }),
                Frame::Output { stream, bytes },
            ) = (out.last_mut(), &frame)
                && *last == *stream
            {
                let mut joined = previous.to_vec();
                joined.extend_from_slice(bytes);
                *previous = Bytes::from(joined);
                continue;
            }
            out.push(frame);
        }
        out
    }

    #[test]
    fn every_chunking_decodes_the_same_frames() {
        let (wire, expected) = sample();
        for size in 1..=wire.len() {
            let mut decoder = Decoder::default();
            let mut out = Vec::new();
            for chunk in wire.chunks(size) {
                decoder
                    .push(&Bytes::copy_from_slice(chunk), &mut out)
                    .expect("decodes");
            }
            assert!(decoder.at_boundary(), "chunk size {size}");
            assert_eq!(merged(out), expected, "chunk size {size}");
        }
    }

    #[test]
    fn output_is_sliced_not_copied() {
        let chunk = Bytes::from(frame(tag::STDOUT, b"abc"));
        let mut out = Vec::new();
        Decoder::default().push(&chunk, &mut out).unwrap();
        let Frame::Output { bytes, .. } = &out[0] else {
            panic!("output expected");
        };
        assert_eq!(bytes.as_ptr(), chunk[wire::HEADER..].as_ptr());
    }

    #[test]
    fn garbage_is_an_error() {
        let mut out = Vec::new();
        let err = Decoder::default()
            .push(&Bytes::from(frame(b'?', b"")), &mut out)
            .unwrap_err();
        assert!(err.0.contains("unknown frame tag"), "{err}");
        let mut huge = vec![tag::FAILED];
        huge.extend_from_slice(&u32::MAX.to_le_bytes());
        assert!(
            Decoder::default()
                .push(&Bytes::from(huge), &mut out)
                .is_err()
        );
        let err = Decoder::default()
            .push(&Bytes::from(frame(tag::CLOSED, &[9, 0])), &mut out)
            .unwrap_err();
        assert!(err.0.contains("unknown stream"), "{err}");
        let mut decoder = Decoder::default();
        decoder
            .push(&Bytes::from_static(b"O\x05"), &mut out)
            .unwrap();
        assert!(!decoder.at_boundary(), "mid-header");
    }
}
