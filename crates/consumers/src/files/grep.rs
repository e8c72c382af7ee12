//! `grep`: lines matching a regex in a file or a tree, through the seam's
//! `search`, `.gitignore`-aware and bounded in matches, output, bytes
//! scanned and files.

use dsh_plugin_api::Result;
use dsh_plugin_api::fs::{
    SearchEvent, SearchLimit, SearchLimits, SearchLine, SearchMode, SearchSpec,
};
use dsh_provider_kit::world;
use futures::StreamExt;

use super::errors::{from_seam, invalid};
use super::walk::{WALK_MAX_DEPTH, WALK_MAX_VISITED};
use super::{Files, count};
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
/// Characters of a line returned (500); a longer line is shown around its
/// match, with markers for what was left out on either side.
pub const GREP_MAX_LINE_CHARS: usize = 500;

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
    /// The most matching lines (files, in the file modes) to return.
    /// Default 100, at most 1000.
    #[serde(default)]
    pub max_matches: Option<u64>,
    /// Lines of context to return before and after each match. Default 0,
    /// at most 10. Only in `lines` mode.
    #[serde(default)]
    pub context: Option<u64>,
    /// What to return: matching lines (default), the files with a match, or
    /// each such file's count of matching lines.
    #[serde(default)]
    pub mode: Option<GrepMode>,
    /// Only search files of this ripgrep file type (`rust`, `py`, `js`,
    /// …); an unknown name is refused.
    #[serde(default)]
    pub file_type: Option<String>,
}

/// What `grep` returns, as ripgrep's output modes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum GrepMode {
    /// Matching lines (and context), in [`GrepResult::matches`].
    #[default]
    Lines,
    /// The files with at least one match, in [`GrepResult::files`]
    /// (`rg -l`); each file is read only up to its first match.
    FilesWithMatches,
    /// The files with matches and how many lines match in each, in
    /// [`GrepResult::files`] (`rg -c`).
    Count,
}

/// A file with matches (modes `files_with_matches` and `count`).
#[derive(Debug, Clone, serde::Serialize, schemars::JsonSchema)]
pub struct GrepFile {
    /// The file, named as [`GrepLine::path`] names it.
    pub path: String,
    /// In `count` mode: how many of its lines match.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub matches: Option<u64>,
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
    /// `max_matches` were returned (files, in the file modes) and at least
    /// one more exists.
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
    /// their context lines when `context` was asked; empty in the file
    /// modes.
    pub matches: Vec<GrepLine>,
    /// The files with matches, in the same order (modes
    /// `files_with_matches` and `count`; else empty).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub files: Vec<GrepFile>,
    /// Matches found: in `lines` mode how many of `matches` are matches
    /// (not context), in `count` mode the sum of `files`' counts, in
    /// `files_with_matches` mode how many files are listed.
    pub match_count: usize,
    /// Whether the search stopped early (see `stopped_by`): more matches
    /// exist or may exist.
    pub more: bool,
    /// The bound that stopped the search, if one did.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stopped_by: Option<GrepLimit>,
    /// Files read.
    pub files_searched: usize,
    /// Files skipped: binary or unreadable.
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
        for file in &self.files {
            match file.matches {
                // As `rg -c`.
                Some(count) => text.push_str(&format!("{}:{count}\n", file.path)),
                None => text.push_str(&format!("{}\n", file.path)),
            }
        }
        let (found, more) = match (self.files.first(), self.files.len()) {
            (Some(GrepFile { matches: None, .. }), files) => {
                (format!("{files} files with matches"), "more files match")
            }
            (Some(_), files) => (
                format!("{} matches in {files} files", self.match_count),
                "more files match",
            ),
            (None, _) => (
                format!("{} matches", self.match_count),
                "more matches exist",
            ),
        };
        text.push_str(&format!("[{found}; {} files searched", self.files_searched));
        let stopped = match self.stopped_by {
            None => None,
            Some(GrepLimit::MaxMatches) => {
                Some(format!("{more}: raise max_matches or narrow the search"))
            }
            Some(GrepLimit::OutputBytes) => {
                Some("output limit reached: narrow the search or lower context".to_owned())
            }
            Some(GrepLimit::BytesScanned) => {
                Some("stopped after 256 MiB read: narrow path or glob".to_owned())
            }
            Some(GrepLimit::Files) => {
                Some("stopped after 10000 files: narrow path or glob".to_owned())
            }
            Some(GrepLimit::EntriesVisited) => {
                Some("stopped after 50000 entries: narrow path".to_owned())
            }
        };
        if let Some(stopped) = stopped {
            text.push_str(&format!("; {stopped}"));
        }
        if self.files_skipped > 0 {
            text.push_str(&format!(
                "; {} files skipped (binary or unreadable)",
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
    /// `request.path` (or, by `request.mode`, the files with matches and
    /// their counts), through the seam's `search` (native where the
    /// provider has one, else `dsh_provider_kit::world`'s composition);
    /// binary files are skipped (and counted), as are symlinks and what
    /// `.gitignore` ignores. The search stops at the first bound it meets
    /// (see [`GrepLimit`]). Dropping the future stops it.
    pub async fn grep(&self, request: GrepRequest) -> Result<GrepResult> {
        let path = request.path.unwrap_or_else(|| ".".to_owned());
        let max_matches = request
            .max_matches
            .unwrap_or(GREP_DEFAULT_MAX_MATCHES)
            .min(GREP_MAX_MATCHES);
        if max_matches == 0 {
            return Err(invalid(TOOL, &path, "max_matches must be at least 1"));
        }
        let context = request.context.unwrap_or(0).min(GREP_MAX_CONTEXT);
        let mode = match request.mode.unwrap_or_default() {
            GrepMode::Lines => SearchMode::Lines {
                context: u32::try_from(context).unwrap_or(0),
            },
            _ if request.context.is_some() => {
                return Err(invalid(
                    TOOL,
                    &path,
                    "context shows lines around matches: give it only in lines mode",
                ));
            }
            GrepMode::FilesWithMatches => SearchMode::FilesWithMatches,
            GrepMode::Count => SearchMode::Count,
        };
        let spec = SearchSpec {
            pattern: request.pattern,
            case_insensitive: request.case_insensitive.unwrap_or(false),
            mode,
            globs: request.glob.into_iter().collect(),
            types: request.file_type.into_iter().collect(),
            gitignore: true,
            max_depth: WALK_MAX_DEPTH,
            beneath: false,
            limits: SearchLimits {
                max_matches,
                max_bytes_scanned: GREP_MAX_BYTES_SCANNED,
                max_files: GREP_MAX_FILES as u64,
                max_output_bytes: GREP_MAX_OUTPUT_BYTES as u64,
                max_entries: WALK_MAX_VISITED,
                max_line_chars: GREP_MAX_LINE_CHARS as u32,
            },
        };
        let mut events = world::search(&self.fs, &path, spec)
            .await
            .map_err(|err| from_seam(TOOL, &path, err))?;
        let mut matches = Vec::new();
        let mut files = Vec::new();
        let mut match_count = 0;
        // The seam bounds its own output; the markers added here count too.
        // Past the bound lines are dropped (the seam stops soon after: its
        // bound is the same without the markers).
        let mut shown_bytes = 0;
        let mut over = false;
        let mut summary = loop {
            match events.next().await {
                Some(Ok(SearchEvent::Line(line))) => {
                    let text = shown_text(&line);
                    shown_bytes += line.path.len() + text.len();
                    over |= shown_bytes > GREP_MAX_OUTPUT_BYTES;
                    if over {
                        continue;
                    }
                    match_count += usize::from(!line.context);
                    matches.push(GrepLine {
                        text,
                        path: line.path,
                        line: line.line,
                        context: line.context,
                    });
                }
                Some(Ok(SearchEvent::End(summary))) => break summary,
                Some(Ok(SearchEvent::File { path, matches })) => {
                    shown_bytes += path.len();
                    over |= shown_bytes > GREP_MAX_OUTPUT_BYTES;
                    if over {
                        continue;
                    }
                    let counted = mode == SearchMode::Count;
                    match_count += if counted { count(matches) } else { 1 };
                    files.push(GrepFile {
                        path,
                        matches: counted.then_some(matches),
                    });
                }
                Some(Err(err)) => return Err(from_seam(TOOL, &path, err)),
                None => {
                    return Err(invalid(TOOL, &path, "the search ended without its summary"));
                }
            }
        };
        if over {
            summary.stopped_by = Some(SearchLimit::OutputBytes);
        }
        Ok(GrepResult {
            more: summary.stopped_by.is_some(),
            matches,
            files,
            match_count,
            stopped_by: summary.stopped_by.map(GrepLimit::from),
            files_searched: count(summary.files_searched),
            files_skipped: count(summary.files_skipped),
            ignored: count(summary.ignored),
        })
    }
}

impl From<SearchLimit> for GrepLimit {
    fn from(value: SearchLimit) -> Self {
        match value {
            SearchLimit::Matches => GrepLimit::MaxMatches,
            SearchLimit::OutputBytes => GrepLimit::OutputBytes,
            SearchLimit::BytesScanned => GrepLimit::BytesScanned,
            SearchLimit::Files => GrepLimit::Files,
            SearchLimit::Entries => GrepLimit::EntriesVisited,
        }
    }
}

/// The text shown for `line`: the window the seam returned, with markers
/// saying how many bytes were left out on either side.
fn shown_text(line: &SearchLine) -> String {
    let mut text = String::new();
    if line.offset > 0 {
        text.push_str(&format!("[... {} bytes] ", line.offset));
    }
    text.push_str(&line.text);
    let rest = line.len - line.offset - line.text.len() as u64;
    if rest > 0 {
        text.push_str(&format!(" [... {rest} more bytes]"));
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(text: &str, offset: u64, len: u64) -> SearchLine {
        SearchLine {
            path: "a".into(),
            line: 1,
            text: text.into(),
            offset,
            len,
            context: false,
        }
    }

    #[test]
    fn cut_lines_say_what_was_left_out() {
        assert_eq!(shown_text(&line("fn main() {}", 0, 12)), "fn main() {}");
        assert_eq!(
            shown_text(&line("NEEDLE", 9920, 20_006)),
            "[... 9920 bytes] NEEDLE [... 10080 more bytes]"
        );
    }
}
