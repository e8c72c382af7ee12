//! Strict UTF-8 classification of file content.

use dsh_plugin_api::fs::BINARY_SAMPLE_LEN;
use dsh_plugin_api::{ErrorKind, Result};

use crate::errors::Op;

/// Fails with `Binary` when a NUL byte occurs in the first
/// [`BINARY_SAMPLE_LEN`] bytes of `content`.
pub(crate) fn check_not_binary(op: Op<'_>, content: &[u8]) -> Result<()> {
    let sample = &content[..content.len().min(BINARY_SAMPLE_LEN)];
    match memchr::memchr(0, sample) {
        Some(at) => Err(op.error(
            ErrorKind::Binary,
            format_args!("binary content (NUL byte at offset {at})"),
        )),
        None => Ok(()),
    }
}

/// `content` as text without copying: `Binary` first (NUL in the sample),
/// then `InvalidUtf8` naming the offset of the first invalid sequence.
pub(crate) fn into_text(op: Op<'_>, content: Vec<u8>) -> Result<String> {
    check_not_binary(op, &content)?;
    String::from_utf8(content).map_err(|err| invalid(op, err.utf8_error().valid_up_to() as u64))
}

/// The `InvalidUtf8` error for an invalid sequence at byte `offset`.
pub(crate) fn invalid(op: Op<'_>, offset: u64) -> dsh_plugin_api::Error {
    op.error(
        ErrorKind::InvalidUtf8,
        format_args!("content is not valid UTF-8 (invalid sequence at byte offset {offset})"),
    )
}

/// How many bytes at the end of `bytes` form the start of a multi-byte
/// sequence that the following bytes may complete (0 to 3). Bytes that can
/// never become valid are left in place for validation to report.
pub(crate) fn incomplete_suffix_len(bytes: &[u8]) -> usize {
    let len = bytes.len();
    for back in 1..=len.min(3) {
        let byte = bytes[len - back];
        if byte & 0b1100_0000 == 0b1000_0000 {
            // A continuation byte: its lead byte is further back.
            continue;
        }
        let needed = match byte {
            0xC2..=0xDF => 2,
            0xE0..=0xEF => 3,
            0xF0..=0xF4 => 4,
            _ => return 0,
        };
        return if needed > back { back } else { 0 };
    }
    0
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;

    fn op() -> Op<'static> {
        Op::new("read_text", Path::new("/w/f"))
    }

    #[test]
    fn incomplete_suffixes_are_found_for_every_split_point() {
        for text in ["é", "日", "😀"] {
            let bytes = text.as_bytes();
            for cut in 1..bytes.len() {
                assert_eq!(
                    incomplete_suffix_len(&bytes[..cut]),
                    cut,
                    "{text} cut {cut}"
                );
            }
            assert_eq!(incomplete_suffix_len(bytes), 0, "{text} complete");
            let mut prefixed = b"abc".to_vec();
            prefixed.extend_from_slice(&bytes[..1]);
            assert_eq!(incomplete_suffix_len(&prefixed), 1);
        }
        assert_eq!(incomplete_suffix_len(b""), 0);
        assert_eq!(incomplete_suffix_len(b"ascii"), 0);
        // Never-valid bytes are not held back.
        assert_eq!(incomplete_suffix_len(&[b'a', 0xFF]), 0);
        assert_eq!(incomplete_suffix_len(&[0x80, 0x80, 0x80]), 0);
    }

    #[test]
    fn binary_wins_over_invalid_utf8_and_names_the_offset() {
        let err = into_text(op(), vec![b'a', 0xFF, 0, b'b']).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Binary);
        assert!(err.message().contains("offset 2"), "{err}");
    }

    #[test]
    fn a_nul_after_the_sample_is_text() {
        let mut content = vec![b'a'; BINARY_SAMPLE_LEN];
        content.push(0);
        assert_eq!(
            into_text(op(), content).unwrap().len(),
            BINARY_SAMPLE_LEN + 1
        );
    }

    #[test]
    fn invalid_sequences_are_reported_never_replaced() {
        let err = into_text(op(), b"ok \xC3\x28".to_vec()).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::InvalidUtf8);
        assert!(err.message().contains("byte offset 3"), "{err}");
    }
}
