//! Strict UTF-8 classification of file content, as `read_text` and
//! `read_text_stream` promise it: the binary sample first, then decoding
//! that reports the first invalid sequence by its byte offset and never
//! replaces it, whole or incrementally across chunk boundaries.

use dsh_plugin_api::fs::BINARY_SAMPLE_LEN;
use dsh_plugin_api::{Bytes, Error, ErrorKind, Result, Text};

use crate::ErrorContext;

/// Fails with `Binary` when a NUL byte occurs in the first
/// [`BINARY_SAMPLE_LEN`] bytes of `content`, naming its offset.
pub fn check_not_binary(op: &impl ErrorContext, content: &[u8]) -> Result<()> {
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
/// (`Text::into_string` turns the result into a `String` without a copy
/// when `content` was a `Vec`.)
pub fn into_text(op: &impl ErrorContext, content: impl Into<Bytes>) -> Result<Text> {
    let content = content.into();
    check_not_binary(op, &content)?;
    match std::str::from_utf8(&content) {
        // SAFETY: validated just above.
        Ok(_) => Ok(unsafe { Text::from_utf8_unchecked(content) }),
        Err(err) => Err(invalid(op, err.valid_up_to() as u64)),
    }
}

/// The first `len` bytes of `bytes`, validated by the caller, as text.
fn validated(bytes: &Bytes, len: usize) -> Text {
    debug_assert!(std::str::from_utf8(&bytes[..len]).is_ok());
    // SAFETY: every caller passes a prefix `std::str::from_utf8` accepted
    // (`valid_up_to`, or the whole of a valid buffer).
    unsafe { Text::from_utf8_unchecked(bytes.slice(..len)) }
}

/// The `InvalidUtf8` error for an invalid (or cut-short) sequence at byte
/// `offset` of the content.
pub fn invalid(op: &impl ErrorContext, offset: u64) -> Error {
    op.error(
        ErrorKind::InvalidUtf8,
        format_args!("content is not valid UTF-8 (invalid sequence at byte offset {offset})"),
    )
}

/// Decodes a byte stream chunk by chunk, carrying a sequence cut by a chunk
/// boundary (at most 3 bytes) into the next chunk, and counting offsets from
/// the stream's start. Bytes that can never become valid are reported at
/// once, never held back.
///
/// Chunks are either handed over as they come ([`Decoder::push`], which
/// copies a chunk that follows a cut sequence), or read into a buffer the
/// decoder lends ([`Decoder::next_buffer`]), which already holds the cut
/// sequence, so nothing is copied. The text handed out shares the chunk's
/// buffer (a [`Text`] over a slice of it): decoding never copies otherwise.
#[derive(Debug, Default)]
pub struct Decoder {
    /// The start of a multi-byte sequence cut by the last chunk boundary.
    carry: Vec<u8>,
    /// How many carried bytes [`Decoder::next_buffer`] lent out at the front
    /// of a buffer not pushed yet.
    lent: usize,
    /// Bytes consumed before `carry` (or before the lent bytes).
    offset: u64,
}

/// What one chunk decoded to.
#[derive(Debug, PartialEq, Eq)]
pub enum Decoded {
    /// Text (never empty); more may follow.
    Text(Text),
    /// Nothing complete yet (the chunk only extended a cut sequence, or was
    /// empty).
    Pending,
    /// The valid text before an invalid sequence (possibly empty), and the
    /// sequence's absolute byte offset. Decoding ends here.
    Invalid { text: Text, offset: u64 },
}

impl Decoder {
    /// A buffer to read the next chunk into: the carried start of a cut
    /// sequence (if any), with room for `capacity` more bytes. Append the
    /// chunk's bytes and hand the buffer to [`Decoder::push`]; at the end of
    /// the stream, [`Decoder::finish`] still counts the lent bytes, so an
    /// unfilled buffer may simply be dropped.
    pub fn next_buffer(&mut self, capacity: usize) -> Vec<u8> {
        let mut buffer = std::mem::take(&mut self.carry);
        self.lent = buffer.len();
        buffer.reserve(capacity);
        buffer
    }

    /// Decodes the next chunk (or a buffer from [`Decoder::next_buffer`]).
    /// The text handed out is a slice of the chunk, not a copy.
    pub fn push(&mut self, chunk: impl Into<Bytes>) -> Decoded {
        let chunk = chunk.into();
        self.lent = 0;
        let bytes = if self.carry.is_empty() {
            chunk
        } else {
            let mut joined = std::mem::take(&mut self.carry);
            joined.extend_from_slice(&chunk);
            Bytes::from(joined)
        };
        let start = self.offset;
        let complete = match std::str::from_utf8(&bytes) {
            Ok(_) => bytes.len(),
            // An incomplete sequence at the very end: keep it for the next
            // chunk.
            Err(err) if err.error_len().is_none() => {
                self.carry = bytes[err.valid_up_to()..].to_vec();
                err.valid_up_to()
            }
            Err(err) => {
                let valid = err.valid_up_to();
                return Decoded::Invalid {
                    text: validated(&bytes, valid),
                    offset: start + valid as u64,
                };
            }
        };
        self.offset = start + complete as u64;
        if complete == 0 {
            return Decoded::Pending;
        }
        Decoded::Text(validated(&bytes, complete))
    }

    /// At the end of the stream: the offset of a sequence the end cut
    /// short, if one is pending.
    pub fn finish(&self) -> Option<u64> {
        (!self.carry.is_empty() || self.lent > 0).then_some(self.offset)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::TestOp;

    const READ_TEXT: TestOp = TestOp {
        name: "read_text",
        subject: "/w/f",
    };

    #[test]
    fn binary_wins_over_invalid_utf8_and_names_the_offset() {
        let err = into_text(&READ_TEXT, vec![b'a', 0xFF, 0, b'b']).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Binary);
        assert!(err.message().contains("offset 2"), "{err}");
        assert_eq!(err.subject(), Some("/w/f"));
    }

    #[test]
    fn a_nul_after_the_sample_is_text() {
        let mut late = vec![b'a'; BINARY_SAMPLE_LEN];
        late.push(0);
        assert_eq!(
            into_text(&READ_TEXT, late).unwrap().len(),
            BINARY_SAMPLE_LEN + 1
        );
    }

    #[test]
    fn invalid_sequences_are_reported_never_replaced() {
        let err = into_text(&READ_TEXT, b"ok \xC3\x28".to_vec()).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::InvalidUtf8);
        assert!(err.message().starts_with("read_text: "), "{err}");
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
                text: Text::new(),
                offset: 1
            }
        );
        // A sequence cut by the end of the stream.
        let mut decoder = Decoder::default();
        assert_eq!(decoder.push(b"ok\xe2".to_vec()), Decoded::Text("ok".into()));
        assert_eq!(decoder.finish(), Some(2));
    }

    #[test]
    fn lent_buffers_start_with_the_cut_sequence() {
        let mut decoder = Decoder::default();
        assert_eq!(
            decoder.push(b"a\xe6\x97".to_vec()),
            Decoded::Text("a".into())
        );
        let mut buffer = decoder.next_buffer(8);
        assert_eq!(buffer, b"\xe6\x97");
        assert_eq!(decoder.finish(), Some(1), "lent bytes are still pending");
        buffer.extend_from_slice(b"\xa5b\xff");
        assert_eq!(
            decoder.push(buffer),
            Decoded::Invalid {
                text: "日b".into(),
                offset: 5
            }
        );
        // An unfilled buffer dropped at the end of the stream.
        let mut decoder = Decoder::default();
        assert_eq!(decoder.push(b"ok\xe2".to_vec()), Decoded::Text("ok".into()));
        drop(decoder.next_buffer(8));
        assert_eq!(decoder.finish(), Some(2));
        let mut decoder = Decoder::default();
        assert_eq!(decoder.push(b"x".to_vec()), Decoded::Text("x".into()));
        assert!(decoder.next_buffer(4).is_empty());
        assert_eq!(decoder.finish(), None);
    }

    #[test]
    fn decoded_text_shares_the_chunk_buffer() {
        let chunk = Bytes::from_static(b"abc\xe6\x97");
        let mut decoder = Decoder::default();
        match decoder.push(chunk.clone()) {
            Decoded::Text(text) => {
                assert_eq!(text, "abc");
                assert_eq!(text.as_ptr(), chunk.as_ptr(), "no copy");
            }
            other => panic!("expected text, got {other:?}"),
        }
        let whole = Bytes::from_static(b"no carry");
        let text = into_text(&READ_TEXT, whole.clone()).unwrap();
        assert_eq!(text.as_ptr(), whole.as_ptr());
    }

    #[test]
    fn never_valid_bytes_are_not_held_back() {
        let mut decoder = Decoder::default();
        assert_eq!(
            decoder.push(vec![b'a', 0xFF]),
            Decoded::Invalid {
                text: "a".into(),
                offset: 1
            }
        );
        let mut decoder = Decoder::default();
        assert_eq!(
            decoder.push(vec![0x80, 0x80, 0x80]),
            Decoded::Invalid {
                text: Text::new(),
                offset: 0
            }
        );
    }
}
