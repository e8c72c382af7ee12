//! The bounded tail of one collected output stream, as
//! `OutputMode::Collect { limit }` promises it: the last `limit` bytes,
//! addressed by absolute stream offset, in at most `limit` bytes of memory
//! whatever the stream's size.

/// The last `limit` bytes of a stream, addressed by absolute stream offset.
///
/// Storage grows with the output up to `limit` bytes and never beyond.
#[derive(Debug)]
pub struct Tail {
    limit: usize,
    /// Ring storage; once full, `data.len() == limit` and `head` is the
    /// index of the oldest byte.
    data: Vec<u8>,
    head: usize,
    /// Bytes ever pushed.
    total: u64,
}

impl Tail {
    /// An empty tail keeping at most `limit` bytes.
    pub fn new(limit: usize) -> Tail {
        Tail {
            limit,
            data: Vec::new(),
            head: 0,
            total: 0,
        }
    }

    /// Bytes ever pushed (the stream's length so far).
    pub fn total(&self) -> u64 {
        self.total
    }

    /// The absolute offset of the oldest retained byte.
    pub fn start(&self) -> u64 {
        self.total - self.data.len() as u64
    }

    /// Appends `bytes`, dropping the oldest bytes beyond the limit.
    pub fn push(&mut self, bytes: &[u8]) {
        self.total += bytes.len() as u64;
        if self.limit == 0 {
            return;
        }
        // Only the last `limit` bytes of a large chunk can survive.
        let bytes = &bytes[bytes.len().saturating_sub(self.limit)..];
        let room = self.limit - self.data.len();
        if room > 0 {
            // Still filling: the ring has not wrapped, head is 0.
            let take = room.min(bytes.len());
            self.data.extend_from_slice(&bytes[..take]);
            self.overwrite(&bytes[take..]);
        } else {
            self.overwrite(bytes);
        }
    }

    /// Writes over the oldest bytes of a full ring.
    fn overwrite(&mut self, mut bytes: &[u8]) {
        while !bytes.is_empty() {
            let run = (self.limit - self.head).min(bytes.len());
            self.data[self.head..self.head + run].copy_from_slice(&bytes[..run]);
            self.head = (self.head + run) % self.limit;
            bytes = &bytes[run..];
        }
    }

    /// Up to `max_len` retained bytes from absolute `offset`, which is
    /// clamped into `[start, total]`; returns the offset actually used.
    pub fn read(&self, offset: u64, max_len: usize) -> (u64, Vec<u8>) {
        let offset = offset.clamp(self.start(), self.total);
        let skip = (offset - self.start()) as usize;
        let len = (self.data.len() - skip).min(max_len);
        let mut out = Vec::with_capacity(len);
        // Logical index i lives at (head + i) % data.len() once wrapped;
        // before wrapping head is 0 and this is the identity.
        let first = (self.head + skip) % self.data.len().max(1);
        let run = len.min(self.data.len() - first);
        out.extend_from_slice(&self.data[first..first + run]);
        out.extend_from_slice(&self.data[..len - run]);
        (offset, out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The reference: everything pushed, cut to the last `limit` bytes.
    fn model(pushed: &[u8], limit: usize) -> Vec<u8> {
        pushed[pushed.len().saturating_sub(limit)..].to_vec()
    }

    #[test]
    fn matches_the_model_for_every_chunking() {
        for limit in [0, 1, 3, 4, 7, 9, 16, 32] {
            for chunk in [1, 2, 3, 5, 8, 16, 40, 50] {
                let mut tail = Tail::new(limit);
                let mut pushed = Vec::new();
                for round in 0..20u8 {
                    let bytes: Vec<u8> = (0..chunk as u8)
                        .map(|i| round.wrapping_mul(31).wrapping_add(i))
                        .collect();
                    tail.push(&bytes);
                    pushed.extend_from_slice(&bytes);
                    let expected = model(&pushed, limit);
                    assert_eq!(tail.total(), pushed.len() as u64);
                    assert_eq!(tail.start(), (pushed.len() - expected.len()) as u64);
                    let (offset, bytes) = tail.read(0, usize::MAX);
                    assert_eq!(offset, tail.start());
                    assert_eq!(bytes, expected, "limit {limit} chunk {chunk} round {round}");
                    // Every window reads the model's bytes.
                    for skip in 0..expected.len() {
                        let (offset, bytes) = tail.read(tail.start() + skip as u64, 3);
                        assert_eq!(offset, tail.start() + skip as u64);
                        let end = (skip + 3).min(expected.len());
                        assert_eq!(bytes, expected[skip..end]);
                    }
                }
            }
        }
    }

    #[test]
    fn offsets_are_clamped_into_the_kept_range() {
        let mut tail = Tail::new(4);
        tail.push(b"abcdefgh");
        assert_eq!(tail.read(0, 10), (4, b"efgh".to_vec()));
        assert_eq!(tail.read(100, 10), (8, Vec::new()));
        assert_eq!(tail.read(6, 10), (6, b"gh".to_vec()));
        assert_eq!(tail.read(5, 1), (5, b"f".to_vec()));
    }
}
