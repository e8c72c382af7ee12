//! A reading position in a streamed text file: lines, byte windows and line
//! counts taken from the seam's text stream as it arrives, holding at most
//! one chunk plus what the caller keeps (so a file of any size is read in
//! bounded memory, and only as far as the caller asks).

use dsh_plugin_api::stream::TextStream;
use dsh_plugin_api::{Result, Text};
use futures::StreamExt;

/// How a line ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Ending {
    Lf,
    CrLf,
    /// The last line of a file without a final newline.
    Eof,
}

impl Ending {
    pub(super) fn as_str(self) -> &'static str {
        match self {
            Ending::Lf => "\n",
            Ending::CrLf => "\r\n",
            Ending::Eof => "",
        }
    }
}

/// One line of the file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Line {
    /// 1-based line number.
    pub number: u64,
    /// Byte offset of the line's first byte in the file.
    pub start: u64,
    /// The first bytes of the line's content (at most what the reader was
    /// asked to keep, ending on a character boundary), without its ending.
    pub kept: String,
    /// The content's whole length in bytes, without its ending.
    pub len: u64,
    pub ending: Ending,
}

impl Line {
    /// Byte offset just past the line's ending.
    pub(super) fn end(&self) -> u64 {
        self.start + self.len + self.ending.as_str().len() as u64
    }
}

/// A position in a text stream (see the module docs). Dropping it drops
/// the stream, which cancels the read.
pub(super) struct TextCursor {
    chunks: TextStream,
    chunk: Text,
    /// Bytes of `chunk` already consumed.
    at: usize,
    /// Bytes consumed from the start of the file.
    offset: u64,
    /// Newlines consumed from the start of the file.
    newlines: u64,
    /// Whether the last byte consumed ended a line (true before any).
    at_line_start: bool,
    ended: bool,
}

impl TextCursor {
    /// A cursor at the start of `chunks`.
    pub(super) fn new(chunks: TextStream) -> TextCursor {
        TextCursor {
            chunks,
            chunk: Text::from(""),
            at: 0,
            offset: 0,
            newlines: 0,
            at_line_start: true,
            ended: false,
        }
    }

    /// The byte offset of the position.
    pub(super) fn offset(&self) -> u64 {
        self.offset
    }

    /// The 1-based number of the line the position is on.
    pub(super) fn line_number(&self) -> u64 {
        self.newlines + 1
    }

    /// The next line, keeping at most `keep` bytes of its content (the
    /// rest is consumed and counted), or `None` at the end of the file.
    pub(super) async fn next_line(&mut self, keep: usize) -> Result<Option<Line>> {
        let (number, start) = (self.line_number(), self.offset);
        let mut kept = String::new();
        let mut len = 0_u64;
        let mut cut = false;
        let mut last_cr = false;
        loop {
            if !self.fill().await? {
                if len == 0 {
                    return Ok(None);
                }
                let ending = Ending::Eof;
                return Ok(Some(Line {
                    number,
                    start,
                    kept,
                    len,
                    ending,
                }));
            }
            let rest = &self.chunk[self.at..];
            let newline = rest.find('\n');
            let piece = &rest[..newline.unwrap_or(rest.len())];
            if !cut {
                let room = keep - kept.len();
                let end = if piece.len() <= room {
                    piece.len()
                } else {
                    cut = true;
                    piece.floor_char_boundary(room)
                };
                kept.push_str(&piece[..end]);
            }
            if !piece.is_empty() {
                last_cr = piece.ends_with('\r');
            }
            let piece_len = piece.len();
            len += piece_len as u64;
            self.consume(piece_len + usize::from(newline.is_some()));
            if newline.is_some() {
                let ending = if last_cr {
                    // The CR belongs to the ending, not the content.
                    len -= 1;
                    if kept.len() as u64 > len {
                        kept.pop();
                    }
                    Ending::CrLf
                } else {
                    Ending::Lf
                };
                return Ok(Some(Line {
                    number,
                    start,
                    kept,
                    len,
                    ending,
                }));
            }
        }
    }

    /// Consumes the file up to byte `target` (or its end), then on to the
    /// next character boundary.
    pub(super) async fn skip_to(&mut self, target: u64) -> Result<()> {
        while self.offset < target && self.fill().await? {
            let available = self.chunk.len() - self.at;
            let wanted = usize::try_from(target - self.offset)
                .unwrap_or(usize::MAX)
                .min(available);
            let n = self.chunk.ceil_char_boundary(self.at + wanted) - self.at;
            self.consume(n);
        }
        Ok(())
    }

    /// Consumes and returns up to `max_bytes` bytes of text ending on a
    /// character boundary — at least one character unless at the end.
    pub(super) async fn take(&mut self, max_bytes: usize) -> Result<String> {
        let mut out = String::new();
        while out.len() < max_bytes && self.fill().await? {
            let rest = &self.chunk[self.at..];
            let room = max_bytes - out.len();
            let whole = rest.len() <= room;
            let mut n = if whole {
                rest.len()
            } else {
                rest.floor_char_boundary(room)
            };
            if n == 0 {
                if !out.is_empty() {
                    break;
                }
                n = rest.ceil_char_boundary(1);
            }
            out.push_str(&rest[..n]);
            self.consume(n);
            if !whole {
                break;
            }
        }
        Ok(out)
    }

    /// Reads on to the end of the file, at most `budget` more bytes, and
    /// returns the file's total line count if the end was reached (a last
    /// line without a newline counts). A read error ends the count unknown.
    pub(super) async fn count_lines_to_end(&mut self, budget: u64) -> Option<u64> {
        let limit = self.offset.saturating_add(budget);
        loop {
            match self.fill().await {
                Ok(true) if self.offset < limit => self.consume(self.chunk.len() - self.at),
                Ok(true) | Err(_) => return None,
                Ok(false) => return Some(self.newlines + u64::from(!self.at_line_start)),
            }
        }
    }

    /// Makes unread text available in `chunk`; false at the end.
    async fn fill(&mut self) -> Result<bool> {
        while self.at == self.chunk.len() {
            if self.ended {
                return Ok(false);
            }
            match self.chunks.next().await {
                Some(chunk) => {
                    self.chunk = chunk?;
                    self.at = 0;
                }
                None => self.ended = true,
            }
        }
        Ok(true)
    }

    /// Consumes the next `n` bytes of `chunk`.
    fn consume(&mut self, n: usize) {
        let piece = &self.chunk.as_bytes()[self.at..self.at + n];
        self.newlines += piece.iter().filter(|&&byte| byte == b'\n').count() as u64;
        if let Some(&last) = piece.last() {
            self.at_line_start = last == b'\n';
        }
        self.offset += n as u64;
        self.at += n;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A cursor over `chunks` as the seam would stream them.
    fn cursor(chunks: &[&'static str]) -> TextCursor {
        let chunks: Vec<Result<Text>> = chunks.iter().map(|c| Ok(Text::from(*c))).collect();
        TextCursor::new(Box::pin(futures::stream::iter(chunks)))
    }

    fn lines(mut cursor: TextCursor, keep: usize) -> Vec<Line> {
        futures::executor::block_on(async {
            let mut out = Vec::new();
            while let Some(line) = cursor.next_line(keep).await.expect("line") {
                out.push(line);
            }
            out
        })
    }

    #[test]
    fn lines_span_chunks_and_keep_their_endings() {
        let got = lines(cursor(&["ab", "c\r", "\nd\n", "e"]), 100);
        let kept: Vec<&str> = got.iter().map(|l| l.kept.as_str()).collect();
        assert_eq!(kept, ["abc", "d", "e"]);
        let endings: Vec<Ending> = got.iter().map(|l| l.ending).collect();
        assert_eq!(endings, [Ending::CrLf, Ending::Lf, Ending::Eof]);
        assert_eq!(
            got.iter()
                .map(|l| (l.number, l.start, l.len))
                .collect::<Vec<_>>(),
            [(1, 0, 3), (2, 5, 1), (3, 7, 1)]
        );
        assert_eq!(got[0].end(), 5);
    }

    #[test]
    fn long_lines_keep_a_prefix_on_a_character_boundary() {
        let got = lines(cursor(&["héllo wörld\n", "x\n"]), 2);
        assert_eq!(got[0].kept, "h");
        assert_eq!(got[0].len, "héllo wörld".len() as u64);
        assert_eq!(got[1].kept, "x");
    }

    #[test]
    fn byte_windows_start_and_end_on_character_boundaries() {
        futures::executor::block_on(async {
            let mut c = cursor(&["aé", "b\ncd"]);
            c.skip_to(2).await.expect("skip");
            assert_eq!(c.offset(), 3, "moved past the middle of é");
            assert_eq!(c.take(3).await.expect("take"), "b\nc");
            assert_eq!(c.line_number(), 2);
            assert_eq!(c.count_lines_to_end(100).await, Some(2));
        });
    }

    #[test]
    fn line_counts_need_the_end_within_the_budget() {
        futures::executor::block_on(async {
            assert_eq!(cursor(&[]).count_lines_to_end(0).await, Some(0));
            assert_eq!(
                cursor(&["a\n", "b\n"]).count_lines_to_end(10).await,
                Some(2)
            );
            assert_eq!(cursor(&["a\n", "b\n"]).count_lines_to_end(1).await, None);
        });
    }
}
