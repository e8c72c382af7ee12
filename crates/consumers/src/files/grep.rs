//! `grep`: lines matching a regex in a file or a tree, read through the
//! seam's text stream, `.gitignore`-aware and bounded in matches, output,
//! bytes scanned and files.

use std::collections::VecDeque;
use std::ops::Range;

use dsh_plugin_api::fs::{FileKind, FsProvider};
use dsh_plugin_api::{ErrorKind, Result};
use regex::{Regex, RegexBuilder};

use super::Files;
use super::errors::{from_seam, invalid};
use super::glob::PathGlob;
use super::text_cursor::TextCursor;
use super::walk::{WALK_MAX_DEPTH, WALK_MAX_VISITED, Walk};
use crate::Outcome;

const TOOL: &str = "grep";

/// Matches returned when `max_matches` is not given.
pub const GREP_DEFAULT_MAX_MATCHES: u64 = 100;
/// The most matches returned (1,000); larger `max_matches` are lowered to
/// it.
pub const GREP_MAX_MATCHES: u64 = 1000;
/// The most context lines around a match (10); larger `context`s are
/// lowered to it.
pub const GREP_MAX_CONTEXT: u64 = 10;
/// The most bytes of lines returned (64 KiB, paths and text), context
/// included.
pub const GREP_MAX_OUTPUT_BYTES: usize = 64 * 1024;
/// The most bytes read in one search (256 MiB).
pub const GREP_MAX_BYTES_SCANNED: u64 = 256 * 1024 * 1024;
/// The most files read in one search (10,000).
pub const GREP_MAX_FILES: usize = 10_000;
/// Bytes of one line that are searched (1 MiB); the rest of a longer line
/// is skipped.
pub const GREP_MAX_LINE_BYTES: usize = 1024 * 1024;
/// Characters of a line returned (500); a longer line is shown around its
/// match, with markers for what was left out on either side.
pub const GREP_MAX_LINE_CHARS: usize = 500;

/// How big a compiled regex may grow (bounds the memory a pattern takes).
const REGEX_SIZE_LIMIT: usize = 8 * 1024 * 1024;
/// Bytes shown before a match that lies beyond a long line's shown prefix.
const MATCH_LEAD_BYTES: usize = 80;

/// Arguments of `grep`.
#[derive(Debug, Clone, serde::Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct GrepRequest {
    /// A regular expression (Rust `regex` syntax, like ripgrep's), matched
    /// against each line on its own.
    pub pattern: String,
    /// The file or directory to search: an absolute path, or one relative
    /// to the world's working directory. Default `.` (the working
    /// directory). A directory is searched recursively, skipping what
    /// `.gitignore` ignores, binary files and symlinks.
    #[serde(default)]
    pub path: Option<String>,
    /// Only search files matching this glob (`*.rs`: names at any depth;
    /// `src/**/*.rs`: paths below `path`).
    #[serde(default)]
    pub glob: Option<String>,
    /// Match letters case-insensitively. Default false.
    #[serde(default)]
    pub case_insensitive: Option<bool>,
    /// The most matching lines to return. Default 100, at most 1000.
    #[serde(default)]
    pub max_matches: Option<u64>,
    /// Lines of context to return before and after each match. Default 0,
    /// at most 10.
    #[serde(default)]
    pub context: Option<u64>,
}

/// One line returned: a match, or context around one.
#[derive(Debug, Clone, serde::Serialize, schemars::JsonSchema)]
pub struct GrepLine {
    /// The file: `path` as given joined with the path below it (or `path`
    /// itself when it is a file).
    pub path: String,
    /// The 1-based line number.
    pub line: u64,
    /// The line without its ending; a line over 500 characters is cut
    /// (around its match) with `[... N bytes]` markers.
    pub text: String,
    /// Whether this is a context line rather than a match.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub context: bool,
}

/// The bound that ended a search early.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum GrepLimit {
    /// `max_matches` were returned and at least one more match exists.
    MaxMatches,
    /// The returned lines reached 64 KiB.
    OutputBytes,
    /// 256 MiB were read.
    BytesScanned,
    /// 10,000 files were read.
    Files,
    /// The walk visited 50,000 entries.
    EntriesVisited,
}

/// What `grep` returns.
#[derive(Debug, Clone, serde::Serialize, schemars::JsonSchema)]
pub struct GrepResult {
    /// Matching lines in file order (files breadth-first, by name), with
    /// their context lines when `context` was asked.
    pub matches: Vec<GrepLine>,
    /// How many of `matches` are matches (not context).
    pub match_count: usize,
    /// Whether the search stopped early (see `stopped_by`): more matches
    /// exist or may exist.
    pub more: bool,
    /// The bound that stopped the search, if one did.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stopped_by: Option<GrepLimit>,
    /// Files read.
    pub files_searched: usize,
    /// Files skipped: binary, not UTF-8, or unreadable.
    pub files_skipped: usize,
    /// Entries skipped because `.gitignore` ignores them.
    pub ignored: usize,
}

impl Outcome for GrepResult {
    fn text(&self) -> String {
        let mut text = String::new();
        // As grep does: with context, `--` separates lines that are not
        // adjacent.
        let with_context = self.matches.iter().any(|line| line.context);
        let mut previous: Option<(&str, u64)> = None;
        for line in &self.matches {
            if let Some((path, number)) = previous
                && with_context
                && (path != line.path || number + 1 != line.line)
            {
                text.push_str("--\n");
            }
            let separator = if line.context { '-' } else { ':' };
            text.push_str(&format!(
                "{}{separator}{}{separator}{}\n",
                line.path, line.line, line.text
            ));
            previous = Some((&line.path, line.line));
        }
        text.push_str(&format!(
            "[{} matches; {} files searched",
            self.match_count, self.files_searched
        ));
        let stopped = match self.stopped_by {
            None => None,
            Some(GrepLimit::MaxMatches) => {
                Some("more matches exist: raise max_matches or narrow the search")
            }
            Some(GrepLimit::OutputBytes) => {
                Some("output limit reached: narrow the search or lower context")
            }
            Some(GrepLimit::BytesScanned) => {
                Some("stopped after 256 MiB read: narrow path or glob")
            }
            Some(GrepLimit::Files) => Some("stopped after 10000 files: narrow path or glob"),
            Some(GrepLimit::EntriesVisited) => Some("stopped after 50000 entries: narrow path"),
        };
        if let Some(stopped) = stopped {
            text.push_str(&format!("; {stopped}"));
        }
        if self.files_skipped > 0 {
            text.push_str(&format!(
                "; {} files skipped (binary, not UTF-8 or unreadable)",
                self.files_skipped
            ));
        }
        if self.ignored > 0 {
            text.push_str(&format!("; {} ignored by .gitignore", self.ignored));
        }
        text.push(']');
        text
    }
}

impl Files {
    /// `grep`: the lines matching `request.pattern` in the file or tree at
    /// `request.path`. Files are read through the seam's text stream one
    /// at a time, line by line; binary and non-UTF-8 files are skipped
    /// (and counted), as are symlinks and what `.gitignore` ignores. The
    /// search stops at the first bound it meets (see [`GrepLimit`]).
    /// Dropping the future stops it.
    pub async fn grep(&self, request: GrepRequest) -> Result<GrepResult> {
        let path = request.path.unwrap_or_else(|| ".".to_owned());
        let regex = RegexBuilder::new(&request.pattern)
            .case_insensitive(request.case_insensitive.unwrap_or(false))
            .size_limit(REGEX_SIZE_LIMIT)
            .build()
            .map_err(|err| invalid(TOOL, &path, format!("invalid regex: {err}")))?;
        let glob = match &request.glob {
            Some(pattern) => Some(PathGlob::new(TOOL, &path, pattern)?),
            None => None,
        };
        let max_matches = request
            .max_matches
            .unwrap_or(GREP_DEFAULT_MAX_MATCHES)
            .min(GREP_MAX_MATCHES);
        if max_matches == 0 {
            return Err(invalid(TOOL, &path, "max_matches must be at least 1"));
        }
        let context = request.context.unwrap_or(0).min(GREP_MAX_CONTEXT);
        let mut search = Search {
            fs: self.fs.as_ref(),
            regex,
            max_matches: usize::try_from(max_matches).unwrap_or(usize::MAX),
            context: usize::try_from(context).unwrap_or(0),
            lines: Vec::new(),
            match_count: 0,
            output_bytes: 0,
            scanned: 0,
            files_searched: 0,
            files_skipped: 0,
            stopped_by: None,
        };
        let metadata = self
            .fs
            .stat(&path)
            .await
            .map_err(|err| from_seam(TOOL, &path, err))?;
        let mut ignored = 0;
        if metadata.kind == FileKind::Directory {
            let mut walk = Walk::open(
                self.fs.as_ref(),
                TOOL,
                &path,
                WALK_MAX_DEPTH,
                WALK_MAX_VISITED,
            )
            .await?;
            while search.stopped_by.is_none() {
                let Some(found) = walk.next().await? else {
                    if !walk.complete() {
                        search.stopped_by = Some(GrepLimit::EntriesVisited);
                    }
                    break;
                };
                if found.entry.metadata.kind != FileKind::File
                    || glob
                        .as_ref()
                        .is_some_and(|glob| !glob.matches(&found.relative))
                {
                    continue;
                }
                if search.files_searched + search.files_skipped == GREP_MAX_FILES {
                    search.stopped_by = Some(GrepLimit::Files);
                    break;
                }
                search.file(&found.path).await?;
            }
            ignored = walk.ignored();
        } else {
            search.file(&path).await?;
        }
        Ok(GrepResult {
            more: search.stopped_by.is_some(),
            matches: search.lines,
            match_count: search.match_count,
            stopped_by: search.stopped_by,
            files_searched: search.files_searched,
            files_skipped: search.files_skipped,
            ignored,
        })
    }
}

/// One search in progress.
struct Search<'a> {
    fs: &'a dyn FsProvider,
    regex: Regex,
    max_matches: usize,
    context: usize,
    lines: Vec<GrepLine>,
    match_count: usize,
    output_bytes: usize,
    scanned: u64,
    files_searched: usize,
    files_skipped: usize,
    stopped_by: Option<GrepLimit>,
}

impl Search<'_> {
    /// Searches the file at `path` (as the seam names it), line by line,
    /// until its end or a bound.
    async fn file(&mut self, path: &str) -> Result<()> {
        let stream = match self.fs.stream_text(path).await {
            Ok(stream) => stream,
            Err(err) if skippable(err.kind()) => {
                self.files_skipped += 1;
                return Ok(());
            }
            Err(err) => return Err(from_seam(TOOL, path, err)),
        };
        self.files_searched += 1;
        let size = stream.size;
        let mut cursor = TextCursor::new(stream.chunks);
        cursor.limit_to(GREP_MAX_BYTES_SCANNED.saturating_sub(self.scanned));
        let mut before: VecDeque<GrepLine> = VecDeque::new();
        let mut after = 0;
        let read = loop {
            let line = match cursor.next_line(GREP_MAX_LINE_BYTES).await {
                Ok(Some(line)) => line,
                Ok(None) => break Ok(()),
                // Not text after all: what matched before stays.
                Err(err) if err.kind() == ErrorKind::InvalidUtf8 => break Ok(()),
                Err(err) => break Err(from_seam(TOOL, path, err)),
            };
            let found = self.regex.find(&line.kept).map(|found| found.range());
            let is_match = found.is_some();
            if is_match && self.match_count == self.max_matches {
                self.stopped_by = Some(GrepLimit::MaxMatches);
                break Ok(());
            }
            if is_match || after > 0 || self.context > 0 {
                let shown = GrepLine {
                    path: path.to_owned(),
                    line: line.number,
                    text: shown_text(&line.kept, line.len, found),
                    context: !is_match,
                };
                if is_match {
                    let context = std::mem::take(&mut before);
                    if !context.into_iter().all(|line| self.emit(line)) || !self.emit(shown) {
                        break Ok(());
                    }
                    self.match_count += 1;
                    after = self.context;
                } else if after > 0 {
                    if !self.emit(shown) {
                        break Ok(());
                    }
                    after -= 1;
                } else {
                    before.push_back(shown);
                    if before.len() > self.context {
                        before.pop_front();
                    }
                }
            }
        };
        self.scanned += cursor.offset();
        if self.stopped_by.is_none()
            && self.scanned >= GREP_MAX_BYTES_SCANNED
            && cursor.offset() < size
        {
            self.stopped_by = Some(GrepLimit::BytesScanned);
        }
        read
    }

    /// Adds `line` to the result unless that would pass
    /// [`GREP_MAX_OUTPUT_BYTES`] (then the search stops); whether it was
    /// added.
    fn emit(&mut self, line: GrepLine) -> bool {
        let bytes = line.path.len() + line.text.len();
        if self.output_bytes + bytes > GREP_MAX_OUTPUT_BYTES {
            self.stopped_by = Some(GrepLimit::OutputBytes);
            return false;
        }
        self.output_bytes += bytes;
        self.lines.push(line);
        true
    }
}

/// Errors opening a file that skip it rather than end the search.
fn skippable(kind: ErrorKind) -> bool {
    matches!(
        kind,
        ErrorKind::Binary
            | ErrorKind::InvalidUtf8
            | ErrorKind::NotFound
            | ErrorKind::PermissionDenied
            | ErrorKind::IsADirectory
            | ErrorKind::InvalidInput
    )
}

/// The text shown for a line whose first bytes are `kept` out of `len`: at
/// most [`GREP_MAX_LINE_CHARS`] characters, from the start or, when the
/// match (`found`, a byte range in `kept`) lies beyond that, from a little
/// before the match; markers say how many bytes were left out on each side.
fn shown_text(kept: &str, len: u64, found: Option<Range<usize>>) -> String {
    let window_end = |from: usize| {
        kept[from..]
            .char_indices()
            .nth(GREP_MAX_LINE_CHARS)
            .map_or(kept.len(), |(at, _)| from + at)
    };
    let mut start = 0;
    let mut end = window_end(0);
    if let Some(found) = found
        && found.end > end
    {
        start = kept.floor_char_boundary(found.start.saturating_sub(MATCH_LEAD_BYTES));
        end = window_end(start);
    }
    let mut text = String::new();
    if start > 0 {
        text.push_str(&format!("[... {start} bytes] "));
    }
    text.push_str(&kept[start..end]);
    let rest = len - end as u64;
    if rest > 0 {
        text.push_str(&format!(" [... {rest} more bytes]"));
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_lines_are_shown_whole() {
        assert_eq!(shown_text("fn main() {}", 12, Some(0..2)), "fn main() {}");
    }

    #[test]
    fn long_lines_are_cut_around_their_match() {
        let line = format!("{}NEEDLE{}", "a".repeat(10_000), "b".repeat(10_000));
        let at = line.find("NEEDLE").expect("needle");
        let shown = shown_text(&line, line.len() as u64, Some(at..at + 6));
        assert!(
            shown.starts_with(&format!("[... {} bytes] ", at - MATCH_LEAD_BYTES)),
            "{shown}"
        );
        assert!(shown.contains("NEEDLE"), "{shown}");
        assert!(shown.ends_with(" more bytes]"), "{shown}");
        assert!(
            shown.chars().count() < GREP_MAX_LINE_CHARS + 60,
            "{}",
            shown.len()
        );
        let head = shown_text(&line, line.len() as u64 + 5, None);
        assert!(head.starts_with("aaa"), "{head}");
        let rest = line.len() + 5 - GREP_MAX_LINE_CHARS;
        assert!(
            head.ends_with(&format!(" [... {rest} more bytes]")),
            "{head}"
        );
    }
}
