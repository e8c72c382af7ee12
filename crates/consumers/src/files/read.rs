//! `read_file`: a window of a text file — lines, or a byte window — with
//! the file's version, read through the seam's text stream and only as far
//! as the window (plus a bounded look-ahead to count the lines).

use dsh_plugin_api::{ErrorKind, Result};

use super::Files;
use super::errors::{invalid, read_error};
use super::text_cursor::{Line, TextCursor};
use crate::Outcome;

const TOOL: &str = "read_file";

/// Lines returned when `limit` is not given.
pub const READ_DEFAULT_LIMIT: u64 = 2000;
/// Bytes of text returned when `max_bytes` is not given (50 KiB).
pub const READ_DEFAULT_MAX_BYTES: u64 = 50 * 1024;
/// The most bytes of text one call returns, whatever `max_bytes` asks
/// (256 KiB); larger requests are lowered to it.
pub const READ_MAX_BYTES: u64 = 256 * 1024;
/// Characters of one line shown in line mode; the rest is cut with a
/// marker saying how many bytes were left out and the `byte_offset` that
/// continues the line.
pub const READ_MAX_LINE_CHARS: usize = 2000;
/// How far past the window a read keeps counting lines so it can report
/// `total_lines` (4 MiB); beyond that the total is left unknown rather than
/// read.
pub const READ_COUNT_AHEAD_BYTES: u64 = 4 * 1024 * 1024;

/// Bytes of a line the reader keeps: enough for [`READ_MAX_LINE_CHARS`]
/// characters of any width.
const KEEP_LINE_BYTES: usize = READ_MAX_LINE_CHARS * 4;

/// Arguments of `read_file`.
#[derive(Debug, Clone, serde::Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ReadFileRequest {
    /// The file to read: an absolute path, or one relative to the world's
    /// working directory.
    pub path: String,
    /// The first line to return, 1-based. Default 1. Not together with
    /// `byte_offset`.
    #[serde(default)]
    pub offset: Option<u64>,
    /// The most lines to return. Default 2000. Not together with
    /// `byte_offset`.
    #[serde(default)]
    pub limit: Option<u64>,
    /// Read a byte window instead of lines: the 0-based byte offset of the
    /// first byte to return (moved forward to a character boundary). The
    /// window's text is returned exactly, lines are not cut: use it to
    /// read the rest of a cut line.
    #[serde(default)]
    pub byte_offset: Option<u64>,
    /// The most bytes of text to return. Default 51200 (50 KiB), at most
    /// 262144 (256 KiB). In line mode only whole lines are returned, except
    /// that the first line is cut to fit.
    #[serde(default)]
    pub max_bytes: Option<u64>,
    /// Prefix each line of `content` with its number, right-aligned in six
    /// columns, and a tab, as `cat -n` does; the prefixes count toward
    /// `max_bytes`. Line mode only. Default false.
    #[serde(default)]
    pub line_numbers: Option<bool>,
}

/// What `read_file` returns.
#[derive(Debug, Clone, serde::Serialize, schemars::JsonSchema)]
pub struct ReadFileResult {
    /// The path, as given.
    pub path: String,
    /// The file's version when it was read; pass it as `if_version` to
    /// `write_file` or `edit_file` to change exactly this state.
    pub version: String,
    /// The text: whole lines with their line endings (a line longer than
    /// 2000 characters cut with a marker; with `line_numbers`, each after
    /// its number), or in byte mode the window's exact text.
    pub content: String,
    /// The 1-based number of the line `content` starts on.
    pub start_line: u64,
    /// How many lines `content` holds (or touches, in byte mode).
    pub lines: u64,
    /// The byte offset in the file where `content` starts.
    pub start_byte: u64,
    /// The byte offset in the file just past `content`'s last line (byte
    /// mode: its last byte).
    pub end_byte: u64,
    /// The file's size in bytes.
    pub size: u64,
    /// How many lines the file has, when known: the read reached the end,
    /// or the end lay within 4 MiB after the window.
    pub total_lines: Option<u64>,
    /// Whether the file continues after the window.
    pub more: bool,
    /// In line mode, when `more`: the `offset` that continues the read.
    pub next_offset: Option<u64>,
    /// When `more`: the `byte_offset` that continues the read.
    pub next_byte_offset: Option<u64>,
    /// How many lines of `content` were cut (line mode).
    pub cut_lines: u64,
    /// For an image (PNG, JPEG, GIF or WebP, known by its first bytes): its
    /// MIME type. `content` is then empty and the window arguments do not
    /// apply: the whole image is read, at most 3 MiB.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mime_type: Option<String>,
    /// The image's bytes, base64 (standard, padded). Not serialized: an MCP
    /// client gets them as the result's image content ([`Outcome::image`]).
    #[serde(skip)]
    pub image: Option<String>,
}

impl Outcome for ReadFileResult {
    fn text(&self) -> String {
        if let Some(mime) = &self.mime_type {
            return format!(
                "[{}: {mime}, {} bytes; version {}]",
                self.path, self.size, self.version
            );
        }
        let mut text = self.content.clone();
        if !text.is_empty() && !text.ends_with('\n') {
            text.push('\n');
        }
        let lines = match self.lines {
            0 => "no lines".to_owned(),
            n => format!("lines {}-{}", self.start_line, self.start_line + n - 1),
        };
        let total = match self.total_lines {
            Some(total) => format!("of {total}"),
            None => "(total not counted)".to_owned(),
        };
        text.push_str(&format!(
            "[{}: {lines} {total}, bytes {}-{} of {}; version {}",
            self.path, self.start_byte, self.end_byte, self.size, self.version
        ));
        if self.cut_lines > 0 {
            text.push_str(&format!("; {} long lines cut", self.cut_lines));
        }
        match (self.next_offset, self.next_byte_offset) {
            (Some(line), _) => text.push_str(&format!("; continue with offset={line}")),
            (None, Some(byte)) => text.push_str(&format!("; continue with byte_offset={byte}")),
            (None, None) => text.push_str("; end of file"),
        }
        text.push(']');
        text
    }

    fn image(&self) -> Option<(&str, &str)> {
        Some((self.mime_type.as_deref()?, self.image.as_deref()?))
    }
}

/// The window a request asks for, checked.
enum Window {
    Lines {
        offset: u64,
        limit: u64,
        numbered: bool,
    },
    Bytes {
        start: u64,
    },
}

impl Files {
    /// `read_file`: a window of the text file at `request.path`.
    ///
    /// Reads the seam's text stream only up to the window, then at most
    /// [`READ_COUNT_AHEAD_BYTES`] further to count lines, so a file of any
    /// size takes bounded time and memory. An image (PNG, JPEG, GIF, WebP:
    /// binary content with one's first bytes) is returned whole, base64, if
    /// it is at most [`READ_MAX_IMAGE_BYTES`](super::READ_MAX_IMAGE_BYTES)
    /// bytes (else `InvalidInput`). Refuses other binary content (`Binary`,
    /// with a hint), invalid UTF-8 up to the window's end (`InvalidUtf8`,
    /// never replacement characters), directories
    /// (`IsADirectory`) and an `offset` past the end (`InvalidInput`).
    /// Dropping the future stops the read.
    pub async fn read_file(&self, request: ReadFileRequest) -> Result<ReadFileResult> {
        let path = request.path.as_str();
        let (window, max_bytes) = checked_window(&request)?;
        let stream = match self.fs.stream_text(path).await {
            Ok(stream) => stream,
            Err(err) if err.kind() == ErrorKind::Binary => {
                return match self.read_image(path).await? {
                    Some(image) => Ok(image),
                    None => Err(read_error(TOOL, path, err)),
                };
            }
            Err(err) => return Err(read_error(TOOL, path, err)),
        };
        let version = stream.version.0;
        let size = stream.size;
        let mut cursor = TextCursor::new(stream.chunks);
        let read = match window {
            Window::Lines {
                offset,
                limit,
                numbered,
            } => read_lines(&mut cursor, offset, limit, numbered, max_bytes, path).await?,
            Window::Bytes { start } => {
                if start > size {
                    return Err(invalid(
                        TOOL,
                        path,
                        format!("byte_offset {start} is past the end: the file has {size} bytes"),
                    ));
                }
                read_bytes(&mut cursor, start, max_bytes, path).await?
            }
        };
        let total_lines = cursor.count_lines_to_end(READ_COUNT_AHEAD_BYTES).await;
        if read.lines == 0
            && let Window::Lines { offset, .. } = window
            && offset > 1
        {
            let has = total_lines.map_or_else(String::new, |n| format!(": the file has {n} lines"));
            return Err(invalid(
                TOOL,
                path,
                format!("offset {offset} is past the end{has}"),
            ));
        }
        let more = read.end < size;
        let next_offset = match window {
            Window::Lines { .. } if more => Some(read.start_line + read.lines),
            _ => None,
        };
        Ok(ReadFileResult {
            path: request.path,
            version,
            content: read.content,
            start_line: read.start_line,
            lines: read.lines,
            start_byte: read.start,
            end_byte: read.end,
            size,
            total_lines,
            more,
            next_offset,
            next_byte_offset: more.then_some(read.end),
            cut_lines: read.cut_lines,
            mime_type: None,
            image: None,
        })
    }
}

/// What one window read.
struct WindowRead {
    content: String,
    start_line: u64,
    lines: u64,
    start: u64,
    end: u64,
    cut_lines: u64,
}

fn checked_window(request: &ReadFileRequest) -> Result<(Window, usize)> {
    let path = request.path.as_str();
    let max_bytes = request.max_bytes.unwrap_or(READ_DEFAULT_MAX_BYTES);
    if max_bytes == 0 {
        return Err(invalid(TOOL, path, "max_bytes must be at least 1"));
    }
    let max_bytes = usize::try_from(max_bytes.min(READ_MAX_BYTES)).unwrap_or(usize::MAX);
    let window = match request.byte_offset {
        Some(_) if request.offset.is_some() || request.limit.is_some() => {
            return Err(invalid(
                TOOL,
                path,
                "byte_offset reads a byte window; give it without offset and limit",
            ));
        }
        Some(_) if request.line_numbers == Some(true) => {
            return Err(invalid(
                TOOL,
                path,
                "line_numbers numbers whole lines; give it without byte_offset",
            ));
        }
        Some(start) => Window::Bytes { start },
        None => {
            let offset = request.offset.unwrap_or(1);
            let limit = request.limit.unwrap_or(READ_DEFAULT_LIMIT);
            if offset == 0 {
                return Err(invalid(
                    TOOL,
                    path,
                    "offset is 1-based: the first line is 1",
                ));
            }
            if limit == 0 {
                return Err(invalid(TOOL, path, "limit must be at least 1"));
            }
            Window::Lines {
                offset,
                limit,
                numbered: request.line_numbers.unwrap_or(false),
            }
        }
    };
    Ok((window, max_bytes))
}

/// Whole lines from line `offset`: at most `limit` lines and `max_bytes`
/// bytes (the first line cut to fit), each after its number if `numbered`.
async fn read_lines(
    cursor: &mut TextCursor,
    offset: u64,
    limit: u64,
    numbered: bool,
    max_bytes: usize,
    path: &str,
) -> Result<WindowRead> {
    while cursor.line_number() < offset {
        let skipped = cursor
            .next_line(0)
            .await
            .map_err(|err| read_error(TOOL, path, err))?;
        if skipped.is_none() {
            break;
        }
    }
    let (start_line, start) = (cursor.line_number(), cursor.offset());
    let mut read = WindowRead {
        content: String::new(),
        start_line,
        lines: 0,
        start,
        end: start,
        cut_lines: 0,
    };
    while read.lines < limit {
        let line = cursor
            .next_line(KEEP_LINE_BYTES)
            .await
            .map_err(|err| read_error(TOOL, path, err))?;
        let Some(line) = line else { break };
        let first = read.lines == 0;
        let number = if numbered {
            // As `cat -n`.
            format!("{:>6}\t", start_line + read.lines)
        } else {
            String::new()
        };
        let room = max_bytes.saturating_sub(number.len());
        let (shown, cut) = shown_line(&line, if first { room } else { usize::MAX });
        if !first && read.content.len() + number.len() + shown.len() > max_bytes {
            break;
        }
        read.content.push_str(&number);
        read.content.push_str(&shown);
        read.lines += 1;
        read.cut_lines += u64::from(cut);
        read.end = line.end();
    }
    Ok(read)
}

/// The window of up to `max_bytes` bytes from byte `start`.
async fn read_bytes(
    cursor: &mut TextCursor,
    start: u64,
    max_bytes: usize,
    path: &str,
) -> Result<WindowRead> {
    cursor
        .skip_to(start)
        .await
        .map_err(|err| read_error(TOOL, path, err))?;
    let (start_line, start) = (cursor.line_number(), cursor.offset());
    let content = cursor
        .take(max_bytes)
        .await
        .map_err(|err| read_error(TOOL, path, err))?;
    let newlines = content.matches('\n').count() as u64;
    let lines = newlines + u64::from(!content.is_empty() && !content.ends_with('\n'));
    Ok(WindowRead {
        content,
        start_line,
        lines,
        start,
        end: cursor.offset(),
        cut_lines: 0,
    })
}

/// `line` as shown: at most [`READ_MAX_LINE_CHARS`] characters and
/// `max_bytes` bytes of content (at least one character), a marker where it
/// was cut, then its ending; and whether it was cut.
fn shown_line(line: &Line, max_bytes: usize) -> (String, bool) {
    let kept = line.kept.as_str();
    let by_chars = kept
        .char_indices()
        .nth(READ_MAX_LINE_CHARS)
        .map_or(kept.len(), |(at, _)| at);
    let mut end = by_chars.min(kept.floor_char_boundary(max_bytes));
    if end == 0 && !kept.is_empty() {
        end = kept.ceil_char_boundary(1);
    }
    let mut shown = kept[..end].to_owned();
    let cut = (end as u64) < line.len;
    if cut {
        let rest = line.len - end as u64;
        let at = line.start + end as u64;
        shown.push_str(&format!(
            " [... line cut: {rest} more bytes; read_file byte_offset={at} continues it]"
        ));
    }
    shown.push_str(line.ending.as_str());
    (shown, cut)
}
