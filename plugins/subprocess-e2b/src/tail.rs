//! The bounded tail of one collected output stream.

use std::collections::VecDeque;

/// The last `limit` bytes of a stream, addressed by absolute offset. It
/// never holds more than `limit` bytes, whatever the stream's size.
#[derive(Debug)]
pub struct Tail {
    limit: usize,
    kept: VecDeque<u8>,
    /// Bytes ever appended.
    total: u64,
}

impl Tail {
    pub fn new(limit: usize) -> Tail {
        Tail {
            limit,
            kept: VecDeque::new(),
            total: 0,
        }
    }

    #[cfg(test)]
    pub fn total(&self) -> u64 {
        self.total
    }

    /// Absolute offset of the oldest byte kept.
    pub fn start(&self) -> u64 {
        self.total - self.kept.len() as u64
    }

    /// Appends `bytes`, forgetting the oldest beyond the limit.
    pub fn append(&mut self, bytes: &[u8]) {
        self.total += bytes.len() as u64;
        let incoming = &bytes[bytes.len().saturating_sub(self.limit)..];
        let overflow = (self.kept.len() + incoming.len()).saturating_sub(self.limit);
        self.kept.drain(..overflow.min(self.kept.len()));
        self.kept.extend(incoming);
    }

    /// Up to `max_len` kept bytes from `offset`, clamped into
    /// `[start, total]`; returns the offset used.
    pub fn read(&self, offset: u64, max_len: usize) -> (u64, Vec<u8>) {
        let offset = offset.clamp(self.start(), self.total);
        let skip = (offset - self.start()) as usize;
        let len = (self.kept.len() - skip).min(max_len);
        (offset, self.kept.range(skip..skip + len).copied().collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_exactly_the_last_limit_bytes_for_any_chunking() {
        for limit in [0usize, 1, 4, 9, 32] {
            for chunk in [1usize, 3, 8, 50] {
                let mut tail = Tail::new(limit);
                let mut all = Vec::new();
                for round in 0..15u8 {
                    let bytes: Vec<u8> = (0..chunk)
                        .map(|i| round ^ (i as u8).wrapping_mul(7))
                        .collect();
                    tail.append(&bytes);
                    all.extend_from_slice(&bytes);
                    let want = &all[all.len().saturating_sub(limit)..];
                    assert_eq!(tail.total(), all.len() as u64);
                    let (offset, got) = tail.read(0, usize::MAX);
                    assert_eq!(offset, (all.len() - want.len()) as u64);
                    assert_eq!(got, want, "limit {limit} chunk {chunk} round {round}");
                    for skip in 0..want.len() {
                        let (at, got) = tail.read(offset + skip as u64, 2);
                        assert_eq!(at, offset + skip as u64);
                        assert_eq!(got, &want[skip..(skip + 2).min(want.len())]);
                    }
                }
            }
        }
    }

    #[test]
    fn offsets_clamp_into_the_kept_range() {
        let mut tail = Tail::new(3);
        tail.append(b"abcdef");
        assert_eq!(tail.read(0, 9), (3, b"def".to_vec()));
        assert_eq!(tail.read(99, 9), (6, Vec::new()));
        assert_eq!(tail.read(4, 1), (4, b"e".to_vec()));
    }
}
