//! A program's stdout or stderr as a result shows it: the whole if it fits
//! in [`HEAD_BYTES`] + [`TAIL_BYTES`], else its head and tail around a
//! marker saying how many bytes were omitted — `run`'s bounds. Only those
//! bytes are kept, however much the program writes. Bytes are joined before
//! decoding, so a character split between two writes is whole.

use std::collections::VecDeque;

use crate::commands::{HEAD_BYTES, TAIL_BYTES, cut_character_start, decode_piece};

/// One output stream of one run, bounded.
#[derive(Debug, Default)]
pub(crate) struct Capture {
    head: Vec<u8>,
    tail: VecDeque<u8>,
    total: u64,
}

/// A stream as a result shows it.
pub(crate) struct Captured {
    pub(crate) text: String,
    pub(crate) bytes: u64,
    pub(crate) omitted_bytes: u64,
}

impl Capture {
    pub(crate) fn push(&mut self, mut bytes: &[u8]) {
        self.total += bytes.len() as u64;
        let room = HEAD_BYTES - self.head.len();
        let into_head = room.min(bytes.len());
        self.head.extend_from_slice(&bytes[..into_head]);
        bytes = &bytes[into_head..];
        if bytes.len() >= TAIL_BYTES {
            self.tail.clear();
            bytes = &bytes[bytes.len() - TAIL_BYTES..];
        }
        let overflow = (self.tail.len() + bytes.len()).saturating_sub(TAIL_BYTES);
        self.tail.drain(..overflow);
        self.tail.extend(bytes);
    }

    pub(crate) fn finish(self) -> Captured {
        let tail: Vec<u8> = self.tail.into();
        let kept = (self.head.len() + tail.len()) as u64;
        if kept == self.total {
            let mut all = self.head;
            all.extend_from_slice(&tail);
            let (text, _) = decode_piece(&all, false);
            return Captured {
                text,
                bytes: self.total,
                omitted_bytes: 0,
            };
        }
        let (head, head_len) = decode_piece(&self.head, true);
        let skip = cut_character_start(&tail);
        let (tail_text, _) = decode_piece(&tail[skip..], false);
        let tail_start = self.total - (tail.len() - skip) as u64;
        let omitted = tail_start - head_len as u64;
        Captured {
            text: format!(
                "{head}\n[… {omitted} bytes omitted (bytes {head_len}..{tail_start} of {}) …]\n{tail_text}",
                self.total
            ),
            bytes: self.total,
            omitted_bytes: omitted,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_character_split_between_writes_is_whole() {
        let mut capture = Capture::default();
        for byte in "é€😀".as_bytes() {
            capture.push(&[*byte]);
        }
        assert_eq!(capture.finish().text, "é€😀");
    }

    #[test]
    fn a_long_stream_keeps_head_and_tail_and_counts_the_rest() {
        let mut capture = Capture::default();
        capture.push(&vec![b'h'; HEAD_BYTES]);
        for _ in 0..100 {
            capture.push(&vec![b'm'; 1000]);
        }
        capture.push(&vec![b't'; TAIL_BYTES]);
        let captured = capture.finish();
        assert_eq!(captured.bytes, (HEAD_BYTES + 100_000 + TAIL_BYTES) as u64);
        assert_eq!(captured.omitted_bytes, 100_000);
        assert!(captured.text.starts_with(&"h".repeat(HEAD_BYTES)));
        assert!(captured.text.ends_with(&"t".repeat(TAIL_BYTES)));
        assert!(captured.text.contains("100000 bytes omitted"));
    }
}
