//! Finding where a terminal's program begins in its output.
//!
//! The helper writes a random boundary (128 bits, hex) and one status byte
//! right before it becomes the program: `+` (starting now) or `!` with
//! `<stage>:<errno>:<base64 detail>;` (could not start). Everything up to and
//! including that marker is the helper's; everything after `+` is the
//! program's, first byte included. The program cannot print the boundary
//! first: it does not exist yet, and never sees the boundary.

use bytes::Bytes;

use crate::wire::{self, BOUNDARY_FAILED, BOUNDARY_STARTED, Stage};

/// Most bytes the scan keeps while looking for the boundary.
const SCAN_LIMIT: usize = 64 * 1024;

/// What the output said so far.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Scan {
    /// Keep reading.
    More,
    /// The program starts; `rest` is its first output.
    Started { rest: Bytes },
    /// It could not start.
    Failed {
        stage: Stage,
        errno: i32,
        detail: String,
    },
    /// The helper wrote something else (the text, for the message).
    Garbage(String),
}

/// Scans a terminal's first output for `boundary`.
#[derive(Debug)]
pub struct BoundaryScan {
    boundary: Vec<u8>,
    seen: Vec<u8>,
}

impl BoundaryScan {
    pub fn new(boundary: &str) -> BoundaryScan {
        BoundaryScan {
            boundary: boundary.as_bytes().to_vec(),
            seen: Vec::new(),
        }
    }

    /// Adds `bytes` and says what is known now.
    pub fn push(&mut self, bytes: &[u8]) -> Scan {
        self.seen.extend_from_slice(bytes);
        let Some(at) = self
            .seen
            .windows(self.boundary.len())
            .position(|window| window == self.boundary)
        else {
            return if self.seen.len() > SCAN_LIMIT {
                self.garbage()
            } else {
                Scan::More
            };
        };
        let after = at + self.boundary.len();
        match self.seen.get(after) {
            None => Scan::More,
            Some(&BOUNDARY_STARTED) => Scan::Started {
                rest: Bytes::copy_from_slice(&self.seen[after + 1..]),
            },
            Some(&BOUNDARY_FAILED) => {
                let marker = &self.seen[after + 1..];
                let Some(end) = marker.iter().position(|&b| b == b';') else {
                    return Scan::More;
                };
                parse_failure(&marker[..end]).unwrap_or_else(|| self.garbage())
            }
            Some(_) => self.garbage(),
        }
    }

    /// What was seen, for a message.
    pub fn seen(&self) -> String {
        String::from_utf8_lossy(&self.seen[..self.seen.len().min(512)]).into_owned()
    }

    fn garbage(&self) -> Scan {
        Scan::Garbage(self.seen())
    }
}

/// `<stage>:<errno>:<base64 detail>`.
fn parse_failure(marker: &[u8]) -> Option<Scan> {
    let text = std::str::from_utf8(marker).ok()?;
    let mut parts = text.splitn(3, ':');
    let stage = Stage::from_u8(parts.next()?.parse().ok()?)?;
    let errno = parts.next()?.parse().ok()?;
    let detail = wire::base64_decode(parts.next()?).ok()?;
    Some(Scan::Failed {
        stage,
        errno,
        detail: String::from_utf8_lossy(&detail).into_owned(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const B: &str = "0123456789abcdef0123456789abcdef";

    #[test]
    fn the_program_begins_right_after_the_marker_whatever_the_chunking() {
        let stream = format!("noise{B}+$ prompt\r\n");
        for size in 1..stream.len() {
            let mut scan = BoundaryScan::new(B);
            let mut outcome = Scan::More;
            let mut fed = 0;
            for chunk in stream.as_bytes().chunks(size) {
                fed += chunk.len();
                outcome = scan.push(chunk);
                if outcome != Scan::More {
                    break;
                }
            }
            let Scan::Started { rest } = outcome else {
                panic!("size {size}: {outcome:?}");
            };
            let mut program = rest.to_vec();
            program.extend_from_slice(&stream.as_bytes()[fed..]);
            assert_eq!(program, b"$ prompt\r\n", "chunk size {size}");
        }
    }

    #[test]
    fn failures_carry_stage_errno_and_detail() {
        let mut scan = BoundaryScan::new(B);
        assert_eq!(scan.push(format!("{B}!5:2:").as_bytes()), Scan::More);
        assert_eq!(
            scan.push(format!("{};", wire::base64_encode(b"nope")).as_bytes()),
            Scan::Failed {
                stage: Stage::Program,
                errno: 2,
                detail: "nope".into()
            }
        );
    }

    #[test]
    fn anything_else_is_garbage() {
        let mut scan = BoundaryScan::new(B);
        assert!(matches!(
            scan.push(format!("{B}?").as_bytes()),
            Scan::Garbage(_)
        ));
        let mut scan = BoundaryScan::new(B);
        assert!(matches!(
            scan.push(format!("{B}!x:y:z;").as_bytes()),
            Scan::Garbage(_)
        ));
        let mut scan = BoundaryScan::new(B);
        assert!(matches!(
            scan.push(&vec![b'x'; SCAN_LIMIT + 1]),
            Scan::Garbage(_)
        ));
    }
}
