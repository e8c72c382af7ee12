//! Output bytes as text a model can read: UTF-8, with invalid sequences
//! replaced by U+FFFD, and cuts that never split a character.
//!
//! Output is read in pieces (by cursor, head and tail), so a piece may end
//! — or start — inside a multibyte character. A piece that may be followed
//! by more bytes stops before an incomplete character at its end, leaving
//! it whole for the next piece; so reading a stream piece by piece loses
//! nothing of valid UTF-8. Only a piece that starts inside a character (a
//! cursor chosen by hand, a tail cut from the middle) or a piece too short
//! to hold one character decodes the cut bytes lossily.

/// How many bytes at the end of `bytes` are an incomplete UTF-8 character:
/// a lead byte followed by fewer continuation bytes than it announces.
/// Zero when the end is complete (or not UTF-8 at all: that is invalid,
/// not incomplete, and waiting would not help).
fn incomplete_suffix(bytes: &[u8]) -> usize {
    for back in 1..=bytes.len().min(4) {
        let byte = bytes[bytes.len() - back];
        if byte & 0xC0 == 0x80 {
            continue;
        }
        let width = match byte {
            0xC2..=0xDF => 2,
            0xE0..=0xEF => 3,
            0xF0..=0xF4 => 4,
            _ => return 0,
        };
        return if back < width { back } else { 0 };
    }
    0
}

/// Decodes one piece of a longer output. When `more_may_follow`, an
/// incomplete character at the end is left out (unless it is the whole
/// piece). Returns the text and how many bytes of `bytes` it covers.
pub(crate) fn decode_piece(bytes: &[u8], more_may_follow: bool) -> (String, usize) {
    let mut end = bytes.len();
    if more_may_follow {
        let cut = incomplete_suffix(bytes);
        if cut < end {
            end -= cut;
        }
    }
    (String::from_utf8_lossy(&bytes[..end]).into_owned(), end)
}

/// How many leading bytes of `bytes` are continuation bytes (the rest of
/// a character cut at the piece's start): at most 3, so invalid runs are
/// not swallowed whole.
pub(crate) fn cut_character_start(bytes: &[u8]) -> usize {
    bytes
        .iter()
        .take(3)
        .take_while(|byte| **byte & 0xC0 == 0x80)
        .count()
}

/// The last at most `max` bytes of `text`, starting on a character
/// boundary.
pub(crate) fn text_tail(text: &str, max: usize) -> &str {
    let mut start = text.len().saturating_sub(max);
    while !text.is_char_boundary(start) {
        start += 1;
    }
    &text[start..]
}

/// `argv` as a shell would need it typed, for listings.
pub(crate) fn quote_argv(argv: &[String]) -> String {
    let plain = |arg: &str| {
        !arg.is_empty()
            && arg
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"_-./,:=+@%".contains(&b))
    };
    argv.iter()
        .map(|arg| {
            if plain(arg) {
                arg.clone()
            } else {
                format!("'{}'", arg.replace('\'', r"'\''"))
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_incomplete_character_at_the_end_waits_for_the_next_piece() {
        let text = "aé€😀";
        let bytes = text.as_bytes();
        // Every cut of the whole string: the two pieces decode to the
        // original exactly.
        for cut in 0..=bytes.len() {
            let (first, used) = decode_piece(&bytes[..cut], true);
            let (second, rest) = decode_piece(&bytes[used..], false);
            assert_eq!(format!("{first}{second}"), text, "cut at {cut}");
            assert_eq!(used + rest, bytes.len());
        }
    }

    #[test]
    fn the_last_piece_and_invalid_bytes_decode_lossily() {
        assert_eq!(decode_piece(b"ab\xE2\x82", false), ("ab\u{FFFD}".into(), 4));
        // Invalid, not incomplete: nothing to wait for.
        assert_eq!(decode_piece(b"ab\xFF", true), ("ab\u{FFFD}".into(), 3));
        assert_eq!(decode_piece(b"ab\x82", true), ("ab\u{FFFD}".into(), 3));
        // A piece that is only an incomplete character is not held back
        // forever.
        assert_eq!(decode_piece(b"\xE2\x82", true), ("\u{FFFD}".into(), 2));
    }

    #[test]
    fn a_cut_start_skips_at_most_three_continuation_bytes() {
        assert_eq!(cut_character_start("€x".as_bytes()), 0);
        assert_eq!(cut_character_start(&"€x".as_bytes()[1..]), 2);
        assert_eq!(cut_character_start(b"\x80\x80\x80\x80"), 3);
        assert_eq!(text_tail("aé€", 3), "€");
        assert_eq!(text_tail("aé€", 4), "€");
        assert_eq!(text_tail("aé€", 5), "é€");
        assert_eq!(text_tail("ab", 10), "ab");
    }

    #[test]
    fn argv_reads_as_typed() {
        let argv = ["ls", "-l", "a b", "it's", ""].map(String::from);
        assert_eq!(quote_argv(&argv), r"ls -l 'a b' 'it'\''s' ''");
    }
}
