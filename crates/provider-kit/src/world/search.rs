//! The search engine: the files a [`Walker`] yields (or the one file a root
//! is), searched with ripgrep's own crates (`grep-regex`'s matcher,
//! `grep-searcher`'s line and context handling) and bounded as the seam
//! says. One engine serves the composition over the seam and every native
//! path, so their results are the same by construction.

use std::collections::VecDeque;
use std::io;
use std::path::Path;

use dsh_plugin_api::fs::{
    BINARY_SAMPLE_LEN, FileKind, SearchEvent, SearchLimit, SearchLimits, SearchLine, SearchMode,
    SearchSpec, SearchStream, SearchSummary, WalkSpec,
};
use dsh_plugin_api::{Error, ErrorKind, Result};
use grep_matcher::Matcher;
use grep_regex::{RegexMatcher, RegexMatcherBuilder};
use grep_searcher::{
    BinaryDetection, Searcher, SearcherBuilder, Sink, SinkContext, SinkContextKind, SinkMatch,
};
use ignore::types::{Types, TypesBuilder};

use super::walker::{Tree, WalkPlan, Walker};

/// How big a compiled regex may grow (bounds the memory a pattern takes).
const REGEX_SIZE_LIMIT: usize = 8 * 1024 * 1024;
/// Bytes shown before a match that lies beyond a long line's window.
const MATCH_LEAD_BYTES: usize = 80;

/// A checked search: matcher, searcher and filters built once.
pub(crate) struct SearchPlan {
    matcher: RegexMatcher,
    searcher: Searcher,
    types: Option<Types>,
    mode: SearchMode,
    limits: SearchLimits,
    /// `None` once the walk started.
    walk: Option<WalkPlan>,
}

impl SearchPlan {
    /// Checks `spec` for `operation`: an invalid pattern, glob, type name
    /// or a zero bound is `InvalidInput`.
    pub(crate) fn new(operation: &str, spec: &SearchSpec) -> Result<SearchPlan> {
        let invalid = |detail: String| Error::invalid_input(format!("{operation}: {detail}"));
        let limits = spec.limits;
        if limits.max_matches == 0 {
            return Err(invalid("max_matches must be at least 1".into()));
        }
        let matcher = RegexMatcherBuilder::new()
            .case_insensitive(spec.case_insensitive)
            .size_limit(REGEX_SIZE_LIMIT)
            .line_terminator(Some(b'\n'))
            .build(&spec.pattern)
            .map_err(|err| invalid(format!("invalid regex: {err}")))?;
        let context = match spec.mode {
            SearchMode::Lines { context } => usize::try_from(context).unwrap_or(usize::MAX),
            SearchMode::FilesWithMatches | SearchMode::Count => 0,
        };
        let searcher = SearcherBuilder::new()
            .line_number(true)
            .binary_detection(BinaryDetection::none())
            .before_context(context)
            .after_context(context)
            .build();
        let types = if spec.types.is_empty() {
            None
        } else {
            let mut builder = TypesBuilder::new();
            builder.add_defaults();
            for name in &spec.types {
                builder.select(name);
            }
            Some(
                builder
                    .build()
                    .map_err(|err| invalid(format!("file types: {err}")))?,
            )
        };
        let walk = WalkPlan::new(
            operation,
            &WalkSpec {
                max_depth: spec.max_depth,
                max_entries: limits.max_entries,
                globs: spec.globs.clone(),
                gitignore: spec.gitignore,
                beneath: spec.beneath,
            },
        )?;
        Ok(SearchPlan {
            matcher,
            searcher,
            types,
            mode: spec.mode,
            limits,
            walk: Some(walk),
        })
    }
}

/// A search in progress: its walk (none when the root is a file), what it
/// found so far and what is left to hand out.
pub(crate) struct Search {
    plan: SearchPlan,
    walker: Option<Walker>,
    /// The root as the caller spelled it.
    root: String,
    root_is_file: bool,
    state: Found,
    scanned: u64,
    done: bool,
}

/// What a search found so far and has yet to hand out.
struct Found {
    limits: SearchLimits,
    ready: VecDeque<SearchEvent>,
    summary: SearchSummary,
    /// Matching lines (`Lines`) or files reported.
    matches: u64,
    output_bytes: u64,
}

impl Found {
    /// Counts `bytes` more of output unless that passes the bound (then
    /// the search stops); whether they fit.
    fn admit_output(&mut self, bytes: u64) -> bool {
        if self.output_bytes + bytes > self.limits.max_output_bytes {
            self.summary.stopped_by = Some(SearchLimit::OutputBytes);
            return false;
        }
        self.output_bytes += bytes;
        true
    }
}

impl Search {
    /// Starts a search of what `tree` reaches as `root`: a directory is
    /// walked (its listing errors are the call's), a file searched alone.
    pub(crate) async fn open(
        tree: &mut dyn Tree,
        operation: &'static str,
        root: &str,
        mut plan: SearchPlan,
    ) -> Result<Search> {
        let (absolute, is_dir) = tree.root().await?;
        let walk = plan.walk.take();
        let walker = match walk {
            Some(walk) if is_dir => {
                Some(Walker::open(tree, operation, root, absolute, walk).await?)
            }
            _ => None,
        };
        Ok(Search {
            state: Found {
                limits: plan.limits,
                ready: VecDeque::new(),
                summary: SearchSummary::default(),
                matches: 0,
                output_bytes: 0,
            },
            plan,
            root_is_file: walker.is_none(),
            walker,
            root: root.to_owned(),
            scanned: 0,
            done: false,
        })
    }

    /// The next event, `End` last, then `None`.
    pub(crate) async fn next(&mut self, tree: &mut dyn Tree) -> Result<Option<SearchEvent>> {
        loop {
            if let Some(event) = self.state.ready.pop_front() {
                return Ok(Some(event));
            }
            if self.done {
                return Ok(None);
            }
            if self.state.summary.stopped_by.is_some() {
                self.finish();
                continue;
            }
            if self.root_is_file {
                self.root_is_file = false;
                let root = self.root.clone();
                self.file(tree, "", &root).await?;
                continue;
            }
            let Some(walker) = self.walker.as_mut() else {
                self.finish();
                continue;
            };
            let Some(entry) = walker.next(tree).await? else {
                if !walker.summary().complete {
                    self.state.summary.stopped_by = Some(SearchLimit::Entries);
                }
                self.finish();
                continue;
            };
            if entry.metadata.kind != FileKind::File
                || self.plan.types.as_ref().is_some_and(|types| {
                    !types
                        .matched(Path::new(&entry.relative), false)
                        .is_whitelist()
                })
            {
                continue;
            }
            self.file(tree, &entry.relative, &entry.path).await?;
        }
    }

    /// Queues `End` once: the walk's ignored count and the totals.
    fn finish(&mut self) {
        if let Some(walker) = &self.walker {
            self.state.summary.ignored = walker.summary().ignored;
        }
        self.walker = None;
        self.state
            .ready
            .push_back(SearchEvent::End(self.state.summary));
        self.done = true;
    }

    /// Searches one file (`relative` to the tree's root, `path` as shown),
    /// queueing what it yields; a file that cannot be read or is binary is
    /// skipped and counted.
    async fn file(&mut self, tree: &mut dyn Tree, relative: &str, path: &str) -> Result<()> {
        let limits = self.plan.limits;
        if self.state.summary.files_searched + self.state.summary.files_skipped >= limits.max_files
        {
            self.state.summary.stopped_by = Some(SearchLimit::Files);
            return Ok(());
        }
        let budget = limits.max_bytes_scanned.saturating_sub(self.scanned);
        if budget == 0 {
            self.state.summary.stopped_by = Some(SearchLimit::BytesScanned);
            return Ok(());
        }
        let (bytes, size) = match tree.read(relative, budget).await {
            Ok(read) => read,
            Err(err) if skippable(err.kind()) => {
                self.state.summary.files_skipped += 1;
                return Ok(());
            }
            Err(err) => return Err(err),
        };
        let sample = &bytes[..bytes.len().min(BINARY_SAMPLE_LEN)];
        if memchr::memchr(0, sample).is_some() {
            self.state.summary.files_skipped += 1;
            return Ok(());
        }
        self.state.summary.files_searched += 1;
        self.scanned += bytes.len() as u64;
        let plan = &mut self.plan;
        let mut sink = FileSink {
            found: &mut self.state,
            matcher: &plan.matcher,
            mode: plan.mode,
            path,
            count: 0,
            before: Vec::new(),
        };
        plan.searcher
            .search_slice(&plan.matcher, &bytes, &mut sink)
            .map_err(|err| Error::io(format!("search: {path}: {err}")))?;
        let count = sink.count;
        match self.plan.mode {
            SearchMode::Lines { .. } => {}
            SearchMode::FilesWithMatches | SearchMode::Count if count > 0 => {
                let found = &mut self.state;
                if found.matches == limits.max_matches {
                    found.summary.stopped_by = Some(SearchLimit::Matches);
                } else if found.admit_output(path.len() as u64) {
                    found.matches += 1;
                    found.ready.push_back(SearchEvent::File {
                        path: path.to_owned(),
                        matches: count,
                    });
                }
            }
            SearchMode::FilesWithMatches | SearchMode::Count => {}
        }
        if self.state.summary.stopped_by.is_none() && (bytes.len() as u64) < size {
            self.state.summary.stopped_by = Some(SearchLimit::BytesScanned);
        }
        Ok(())
    }
}

/// The search of one file as `grep-searcher` reports it.
struct FileSink<'a> {
    found: &'a mut Found,
    matcher: &'a RegexMatcher,
    mode: SearchMode,
    path: &'a str,
    /// Matching lines in this file.
    count: u64,
    /// Context lines before the next match, held until it comes (a match
    /// the bounds refuse takes its context with it).
    before: Vec<SearchLine>,
}

impl FileSink<'_> {
    fn line(&self, number: Option<u64>, bytes: &[u8], context: bool) -> SearchLine {
        let line = strip_terminator(bytes);
        let found = if context {
            None
        } else {
            self.matcher.find(line).ok().flatten()
        };
        let text = String::from_utf8_lossy(line);
        let max_chars = usize::try_from(self.found.limits.max_line_chars).unwrap_or(0);
        let (start, end) = window(
            &text,
            max_chars,
            found.map(|found| (found.start(), found.end())),
        );
        SearchLine {
            path: self.path.to_owned(),
            line: number.unwrap_or(0),
            text: text[start..end].to_owned(),
            offset: start as u64,
            len: text.len() as u64,
            context,
        }
    }

    fn emit(&mut self, line: SearchLine) -> bool {
        if !self
            .found
            .admit_output((line.path.len() + line.text.len()) as u64)
        {
            return false;
        }
        self.found.ready.push_back(SearchEvent::Line(line));
        true
    }
}

impl Sink for FileSink<'_> {
    type Error = io::Error;

    fn matched(&mut self, _: &Searcher, found: &SinkMatch<'_>) -> io::Result<bool> {
        match self.mode {
            SearchMode::FilesWithMatches => {
                self.count = 1;
                Ok(false)
            }
            SearchMode::Count => {
                self.count += 1;
                Ok(true)
            }
            SearchMode::Lines { .. } => {
                if self.found.matches == self.found.limits.max_matches {
                    self.found.summary.stopped_by = Some(SearchLimit::Matches);
                    return Ok(false);
                }
                let line = self.line(found.line_number(), found.bytes(), false);
                for context in std::mem::take(&mut self.before) {
                    if !self.emit(context) {
                        return Ok(false);
                    }
                }
                if !self.emit(line) {
                    return Ok(false);
                }
                self.found.matches += 1;
                self.count += 1;
                Ok(true)
            }
        }
    }

    fn context(&mut self, _: &Searcher, context: &SinkContext<'_>) -> io::Result<bool> {
        let line = self.line(context.line_number(), context.bytes(), true);
        match context.kind() {
            SinkContextKind::Before => {
                self.before.push(line);
                Ok(true)
            }
            SinkContextKind::After | SinkContextKind::Other => Ok(self.emit(line)),
        }
    }
}

/// `bytes` without its line terminator (`\n` or `\r\n`).
fn strip_terminator(bytes: &[u8]) -> &[u8] {
    let bytes = bytes.strip_suffix(b"\n").unwrap_or(bytes);
    bytes.strip_suffix(b"\r").unwrap_or(bytes)
}

/// The byte range of `text` shown: at most `max_chars` characters from the
/// start or, when the match (`found`, bytes) ends beyond that, from a
/// little before the match.
fn window(text: &str, max_chars: usize, found: Option<(usize, usize)>) -> (usize, usize) {
    let end_from = |from: usize| {
        text[from..]
            .char_indices()
            .nth(max_chars)
            .map_or(text.len(), |(at, _)| from + at)
    };
    let end = end_from(0);
    match found {
        Some((start, found_end)) if found_end > end => {
            let start =
                text.floor_char_boundary(start.saturating_sub(MATCH_LEAD_BYTES).min(text.len()));
            (start, end_from(start))
        }
        _ => (0, end),
    }
}

/// Errors reading a file that skip it rather than end the search.
fn skippable(kind: ErrorKind) -> bool {
    matches!(
        kind,
        ErrorKind::Binary
            | ErrorKind::InvalidUtf8
            | ErrorKind::NotFound
            | ErrorKind::PermissionDenied
            | ErrorKind::IsADirectory
            | ErrorKind::NotADirectory
            | ErrorKind::InvalidInput
    )
}

/// The search over `tree` as the seam's stream: results, then `End`.
pub(crate) fn search_stream<T: Tree + 'static>(tree: T, search: Search) -> SearchStream {
    let state = Some((tree, search));
    Box::pin(futures::stream::unfold(state, |state| async move {
        let (mut tree, mut search) = state?;
        match search.next(&mut tree).await {
            Ok(Some(event)) => Some((Ok(event), Some((tree, search)))),
            Ok(None) => None,
            Err(err) => Some((Err(err), None)),
        }
    }))
}

#[cfg(test)]
mod tests {
    use super::window;

    #[test]
    fn short_lines_are_shown_whole() {
        assert_eq!(window("fn main() {}", 500, Some((0, 2))), (0, 12));
    }

    #[test]
    fn long_lines_are_cut_around_their_match() {
        let line = format!("{}NEEDLE{}", "a".repeat(10_000), "b".repeat(10_000));
        let at = line.find("NEEDLE").expect("needle");
        let (start, end) = window(&line, 500, Some((at, at + 6)));
        assert_eq!(start, at - 80);
        assert_eq!(end, start + 500);
        assert_eq!(window(&line, 500, None), (0, 500));
        let wide = "é".repeat(1000);
        let (start, end) = window(&wide, 10, Some((1500, 1502)));
        assert!(wide.is_char_boundary(start) && wide[start..end].chars().count() == 10);
    }
}
