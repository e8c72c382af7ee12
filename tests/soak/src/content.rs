//! File contents the soak writes and later checks: large ones generated from a seed (so the
//! model keeps 16 bytes, not megabytes, and regenerates them to compare), small text ones kept
//! as they are (so `fs edit` can change them).

use rand::rngs::StdRng;
use rand::{Rng, RngCore, SeedableRng};
use sha2::{Digest, Sha256};

/// One file's expected content.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Content {
    /// `len` pseudo-random bytes from `seed`.
    Generated { seed: u64, len: usize },
    /// These lines of text.
    Text(String),
}

impl Content {
    /// A random size, mostly small, sometimes a few hundred KiB, rarely 1–4 MiB.
    pub fn random_generated(rng: &mut impl Rng) -> Content {
        let len = match rng.random_range(0..100) {
            0..5 => rng.random_range(1 << 20..=4 << 20),
            5..30 => rng.random_range(4096..256 * 1024),
            _ => rng.random_range(0..4096),
        };
        Content::Generated {
            seed: rng.random(),
            len,
        }
    }

    /// A few numbered lines, each with a token unique to this file (`fs edit` replaces one).
    pub fn random_text(rng: &mut impl Rng, tag: u64) -> Content {
        let lines = rng.random_range(1..40);
        let text = (0..lines)
            .map(|line| {
                format!(
                    "line {line} token-{tag}-{line} {:08x}\n",
                    rng.random::<u32>()
                )
            })
            .collect();
        Content::Text(text)
    }

    pub fn len(&self) -> usize {
        match self {
            Content::Generated { len, .. } => *len,
            Content::Text(text) => text.len(),
        }
    }

    pub fn bytes(&self) -> Vec<u8> {
        match self {
            Content::Generated { seed, len } => {
                let mut bytes = vec![0; *len];
                StdRng::seed_from_u64(*seed).fill_bytes(&mut bytes);
                bytes
            }
            Content::Text(text) => text.as_bytes().to_vec(),
        }
    }

    /// The content's SHA-256 in lowercase hex, as `sha256sum` prints it.
    pub fn sha256(&self) -> String {
        sha256_hex(&self.bytes())
    }
}

/// SHA-256 of `bytes` in lowercase hex.
pub fn sha256_hex(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .map(|byte| format!("{byte:02x}"))
        .collect()
}

/// Where `got` departs from `want`, for a failure report; `None` when they are equal.
pub fn difference(want: &[u8], got: &[u8]) -> Option<String> {
    if want == got {
        return None;
    }
    let at = want
        .iter()
        .zip(got)
        .position(|(a, b)| a != b)
        .unwrap_or(want.len().min(got.len()));
    Some(format!(
        "expected {} bytes, got {}; first difference at byte {at}",
        want.len(),
        got.len()
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generated_content_is_the_same_every_time_and_as_long_as_said() {
        let content = Content::Generated { seed: 7, len: 5000 };
        assert_eq!(content.bytes(), content.bytes());
        assert_eq!(content.bytes().len(), 5000);
        assert_ne!(
            content.bytes(),
            Content::Generated { seed: 8, len: 5000 }.bytes()
        );
    }

    #[test]
    fn hashes_are_sha256sum_s() {
        assert_eq!(
            sha256_hex(b"abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
        assert_eq!(Content::Text("abc".to_owned()).sha256(), sha256_hex(b"abc"));
    }

    #[test]
    fn text_has_a_unique_token_per_line() {
        let mut rng = StdRng::seed_from_u64(1);
        let Content::Text(text) = Content::random_text(&mut rng, 9) else {
            panic!("text")
        };
        for (line, _) in text.lines().enumerate() {
            assert_eq!(text.matches(&format!("token-9-{line} ")).count(), 1);
        }
    }

    #[test]
    fn differences_name_the_first_differing_byte() {
        assert_eq!(difference(b"abc", b"abc"), None);
        assert_eq!(
            difference(b"abc", b"abX").unwrap(),
            "expected 3 bytes, got 3; first difference at byte 2"
        );
        assert_eq!(
            difference(b"abc", b"ab").unwrap(),
            "expected 3 bytes, got 2; first difference at byte 2"
        );
    }
}
