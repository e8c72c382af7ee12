//! Strict UTF-8 classification of file content: the binary sample, whole
//! decoding, and incremental decoding across chunk boundaries.

use dsh_plugin_api::fs::BINARY_SAMPLE_LEN;
use dsh_plugin_api::{Error, ErrorKind, Result};

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
pub(crate) fn invalid(op: Op<'_>, offset: u64) -> Error {
    op.error(
        ErrorKind::InvalidUtf8,
        format_args!("content is not valid UTF-8 (invalid sequence at byte offset {offset})"),
    )
}

/// Decodes a byte stream chunk by chunk, carrying a sequence cut by a chunk
/// boundary (at most 3 bytes) into the next chunk.
#[derive(Debug, Default)]
pub(crate) struct Decoder {
    /// The start of a multi-byte sequence cut by the last chunk boundary.
    carry: Vec<u8>,
    /// Bytes consumed before `carry`.
    offset: u64,
}

/// What one chunk decoded to.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Decoded {
    /// Text (never empty); more may follow.
    Text(String),
    /// Nothing complete yet (the chunk only extended a cut sequence).
    Pending,
    /// The valid text before an invalid sequence (possibly empty), and the
    /// sequence's absolute byte offset. Decoding ends here.
    Invalid { text: String, offset: u64 },
}

impl Decoder {
    /// Decodes the next chunk.
    pub(crate) fn push(&mut self, chunk: Vec<u8>) -> Decoded {
        let mut bytes = if self.carry.is_empty() {
            chunk
        } else {
            let mut joined = std::mem::take(&mut self.carry);
            joined.extend_from_slice(&chunk);
            joined
        };
        let start = self.offset;
        match std::str::from_utf8(&bytes) {
            Ok(_) => {}
            // An incomplete sequence at the very end: keep it for the next
            // chunk.
            Err(err) if err.error_len().is_none() => {
                self.carry = bytes.split_off(err.valid_up_to());
            }
            Err(err) => {
                let valid = err.valid_up_to();
                bytes.truncate(valid);
                let text = String::from_utf8(bytes).expect("validated prefix");
                return Decoded::Invalid {
                    text,
                    offset: start + valid as u64,
                };
            }
        }
        self.offset = start + bytes.len() as u64;
        if bytes.is_empty() {
            return Decoded::Pending;
        }
        Decoded::Text(String::from_utf8(bytes).expect("validated text"))
    }

    /// At the end of the stream: the offset of a sequence the end cut
    /// short, if one is pending.
    pub(crate) fn finish(&self) -> Option<u64> {
        (!self.carry.is_empty()).then_some(self.offset)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn op() -> Op<'static> {
        Op::new("read_text", "/w/f")
    }

    #[test]
    fn binary_wins_over_invalid_utf8_and_names_the_offset() {
        let err = into_text(op(), vec![b'a', 0xFF, 0, b'b']).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Binary);
        assert!(err.message().contains("offset 2"), "{err}");
        let mut late = vec![b'a'; BINARY_SAMPLE_LEN];
        late.push(0);
        assert_eq!(into_text(op(), late).unwrap().len(), BINARY_SAMPLE_LEN + 1);
        let err = into_text(op(), b"ok \xC3\x28".to_vec()).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::InvalidUtf8);
        assert!(err.message().contains("byte offset 3"), "{err}");
    }

    #[test]
    fn every_split_of_multibyte_text_decodes_exactly() {
        let text = "aé日😀b";
        let bytes = text.as_bytes();
        for cut in 0..=bytes.len() {
            for second in cut..=bytes.len() {
                let mut decoder = Decoder::default();
                let mut out = String::new();
                for part in [&bytes[..cut], &bytes[cut..second], &bytes[second..]] {
                    match decoder.push(part.to_vec()) {
                        Decoded::Text(chunk) => out.push_str(&chunk),
                        Decoded::Pending => {}
                        Decoded::Invalid { .. } => panic!("valid text at {cut}/{second}"),
                    }
                }
                assert_eq!(decoder.finish(), None);
                assert_eq!(out, text, "cuts {cut}/{second}");
            }
        }
    }

    #[test]
    fn invalid_sequences_end_decoding_with_their_offset() {
        let mut decoder = Decoder::default();
        assert_eq!(decoder.push(b"abc".to_vec()), Decoded::Text("abc".into()));
        assert_eq!(
            decoder.push(b"de\xffz".to_vec()),
            Decoded::Invalid {
                text: "de".into(),
                offset: 5
            }
        );
        // A cut sequence that the next chunk does not complete.
        let mut decoder = Decoder::default();
        assert_eq!(
            decoder.push(b"x\xe2\x82".to_vec()),
            Decoded::Text("x".into())
        );
        assert_eq!(
            decoder.push(b"y".to_vec()),
            Decoded::Invalid {
                text: String::new(),
                offset: 1
            }
        );
        // A sequence cut by the end of the stream.
        let mut decoder = Decoder::default();
        assert_eq!(decoder.push(b"ok\xe2".to_vec()), Decoded::Text("ok".into()));
        assert_eq!(decoder.finish(), Some(2));
    }
}
