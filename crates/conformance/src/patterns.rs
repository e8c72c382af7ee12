//! Deterministic content for cases: multibyte text whose characters straddle
//! any power-of-two chunk boundary, and binary data with every byte value.

/// Repeating 4-, 3- and 2-byte characters (period 9 bytes): chunk
/// boundaries at 4096, 8192, 32768 and 131072 bytes fall inside a
/// character, and with a one-byte `shift` those at 8192, 16384 and 65536
/// do, so a decoder that is not chunk-boundary safe is caught.
const CYCLE: &str = "😀名é";

/// UTF-8 text of at least `min_len` bytes: `shift` ASCII bytes, then the
/// multibyte cycle, ending with a newline.
pub(crate) fn multibyte_text(min_len: usize, shift: usize) -> String {
    let mut text = "x".repeat(shift);
    while text.len() < min_len {
        text.push_str(CYCLE);
    }
    text.push('\n');
    text
}

/// `len` bytes: every byte value 0..=255 once, then pseudo-random bytes
/// (xorshift64 from `seed`), so NUL, 0xFF, lone UTF-8 continuation bytes and
/// newlines all occur.
pub(crate) fn binary(len: usize, seed: u64) -> Vec<u8> {
    let mut out: Vec<u8> = (0..=255u8).take(len).collect();
    let mut state = seed | 1;
    while out.len() < len {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        out.extend_from_slice(&state.to_le_bytes()[..(len - out.len()).min(8)]);
    }
    out
}

/// Decodes a `file:` URI's percent-encoded path back to bytes; `None` if a
/// `%` is not followed by two hex digits.
pub(crate) fn percent_decode(encoded: &str) -> Option<Vec<u8>> {
    let bytes = encoded.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = bytes.get(i + 1..i + 3)?;
            let text = std::str::from_utf8(hex).ok()?;
            out.push(u8::from_str_radix(text, 16).ok()?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn multibyte_text_splits_characters_at_power_of_two_boundaries() {
        let text = multibyte_text(200_000, 0);
        assert!(text.len() >= 200_000);
        for boundary in [4096, 8192, 32768, 131_072] {
            assert!(!text.is_char_boundary(boundary), "{boundary}");
        }
        let shifted = multibyte_text(200_000, 1);
        for boundary in [8192, 16384, 65536] {
            assert!(!shifted.is_char_boundary(boundary), "{boundary}");
        }
    }

    #[test]
    fn binary_has_every_byte_and_is_deterministic() {
        let data = binary(4096, 7);
        assert_eq!(data.len(), 4096);
        assert_eq!(&data[..256], &(0..=255u8).collect::<Vec<_>>()[..]);
        assert_eq!(data, binary(4096, 7));
        assert_ne!(data, binary(4096, 8));
        assert_eq!(binary(3, 1), vec![0, 1, 2]);
        assert_eq!(binary(300, 1).len(), 300);
    }

    #[test]
    fn percent_decoding_is_strict() {
        assert_eq!(percent_decode("/a%20b%0A").unwrap(), b"/a b\n");
        assert_eq!(percent_decode("/%C3%A9").unwrap(), "/é".as_bytes());
        assert!(percent_decode("/a%2").is_none());
        assert!(percent_decode("/a%zz").is_none());
    }
}
