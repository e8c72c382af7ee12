//! Literal text edits with line-ending-insensitive matching.
//!
//! Matching runs on an LF-normalised view of the text (every CRLF seen as
//! LF, on both sides), but replacements are spliced into the *original*
//! text: bytes outside the matched ranges are kept exactly, including any
//! minority line endings, and the inserted text takes the file's dominant
//! line ending.

use dsh_plugin_api::fs::Edit;

/// The line ending new text is stored with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum LineEnding {
    Lf,
    CrLf,
}

/// Why a list of edits could not be applied (nothing is stored then).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum EditFailure {
    /// No edits were given.
    Empty,
    /// Edit `index` (0-based) has an empty `old` text.
    EmptyOld { index: usize, total: usize },
    /// Edit `index`'s `old` text does not occur.
    NoMatch { index: usize, total: usize },
    /// Edit `index`'s `old` text occurs `count` > 1 times without
    /// `replace_all`.
    Ambiguous {
        index: usize,
        total: usize,
        count: usize,
    },
}

impl std::fmt::Display for EditFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match *self {
            EditFailure::Empty => f.write_str("no edits were given"),
            EditFailure::EmptyOld { index, total } => write!(
                f,
                "edit {} of {total}: the text to replace is empty",
                index + 1
            ),
            EditFailure::NoMatch { index, total } => write!(
                f,
                "edit {} of {total}: the text to replace matches 0 times (expected exactly 1)",
                index + 1
            ),
            EditFailure::Ambiguous {
                index,
                total,
                count,
            } => write!(
                f,
                "edit {} of {total}: the text to replace matches {count} times (expected exactly 1; \
                 add surrounding context to make it unique, or replace all)",
                index + 1
            ),
        }
    }
}

/// The edited text and how many replacements were made in total.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Applied {
    pub text: String,
    pub replacements: usize,
}

/// Checks the edit list itself (not against any text).
pub(crate) fn validate(edits: &[Edit]) -> Result<(), EditFailure> {
    if edits.is_empty() {
        return Err(EditFailure::Empty);
    }
    let total = edits.len();
    match edits.iter().position(|edit| edit.old.is_empty()) {
        Some(index) => Err(EditFailure::EmptyOld { index, total }),
        None => Ok(()),
    }
}

/// The dominant line ending of `text`: CRLF when CRLF pairs outnumber lone
/// LFs, LF otherwise (including text without line breaks).
pub(crate) fn dominant_ending(text: &str) -> LineEnding {
    let bytes = text.as_bytes();
    let mut crlf = 0_usize;
    let mut lf = 0_usize;
    for at in memchr::memchr_iter(b'\n', bytes) {
        if at > 0 && bytes[at - 1] == b'\r' {
            crlf += 1;
        } else {
            lf += 1;
        }
    }
    if crlf > lf {
        LineEnding::CrLf
    } else {
        LineEnding::Lf
    }
}

/// Applies `edits` in order to `original`.
pub(crate) fn apply(original: &str, edits: &[Edit]) -> Result<Applied, EditFailure> {
    validate(edits)?;
    let ending = dominant_ending(original);
    let total = edits.len();
    let mut text = original.to_owned();
    let mut replacements = 0;
    for (index, edit) in edits.iter().enumerate() {
        let view = Normalized::new(&text);
        let old = normalize(&edit.old);
        let matches: Vec<usize> = view
            .text
            .match_indices(old.as_str())
            .map(|(at, _)| at)
            .collect();
        match matches.len() {
            0 => return Err(EditFailure::NoMatch { index, total }),
            1 => {}
            count if !edit.replace_all => {
                return Err(EditFailure::Ambiguous {
                    index,
                    total,
                    count,
                });
            }
            _ => {}
        }
        let new = with_ending(&normalize(&edit.new), ending);
        let mut out = String::with_capacity(text.len() + matches.len() * new.len());
        let mut copied = 0;
        for &at in &matches {
            let (start, end) = view.original_range(at, at + old.len());
            out.push_str(&text[copied..start]);
            out.push_str(&new);
            copied = end;
        }
        out.push_str(&text[copied..]);
        replacements += matches.len();
        text = out;
    }
    Ok(Applied { text, replacements })
}

/// `text` with every CRLF replaced by LF (lone CRs are kept).
fn normalize(text: &str) -> String {
    if text.contains("\r\n") {
        text.replace("\r\n", "\n")
    } else {
        text.to_owned()
    }
}

/// LF-only `text` with its line endings set to `ending`.
fn with_ending(text: &str, ending: LineEnding) -> String {
    match ending {
        LineEnding::Lf => text.to_owned(),
        LineEnding::CrLf => text.replace('\n', "\r\n"),
    }
}

/// An LF-normalised view of a text and the way back to original offsets.
struct Normalized {
    text: String,
    /// Sorted offsets (in `text`) of each LF whose CR was removed.
    removed_cr_before: Vec<usize>,
}

impl Normalized {
    fn new(original: &str) -> Normalized {
        let bytes = original.as_bytes();
        let mut text = String::with_capacity(original.len());
        let mut removed_cr_before = Vec::new();
        let mut copied = 0;
        for at in memchr::memchr_iter(b'\n', bytes) {
            if at > 0 && bytes[at - 1] == b'\r' {
                // Copy up to (not including) the CR; the LF follows later.
                text.push_str(&original[copied..at - 1]);
                removed_cr_before.push(text.len());
                copied = at;
            }
        }
        text.push_str(&original[copied..]);
        Normalized {
            text,
            removed_cr_before,
        }
    }

    /// The original byte range of the normalised range `start..end`. A
    /// range starting at a CRLF's LF includes its CR; a range ending just
    /// before a CRLF's LF excludes the CR (it belongs to the LF).
    fn original_range(&self, start: usize, end: usize) -> (usize, usize) {
        let before = |offset: usize| self.removed_cr_before.partition_point(|&at| at < offset);
        (start + before(start), end + before(end))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn edit(old: &str, new: &str) -> Edit {
        Edit {
            old: old.into(),
            new: new.into(),
            replace_all: false,
        }
    }

    fn all(old: &str, new: &str) -> Edit {
        Edit {
            replace_all: true,
            ..edit(old, new)
        }
    }

    #[test]
    fn a_unique_match_is_replaced() {
        let applied = apply("let a = 1;\nlet b = 2;\n", &[edit("b = 2", "b = 3")]).unwrap();
        assert_eq!(applied.text, "let a = 1;\nlet b = 3;\n");
        assert_eq!(applied.replacements, 1);
    }

    #[test]
    fn edits_apply_in_order_on_the_previous_result() {
        let applied = apply("one", &[edit("one", "two"), edit("two", "three")]).unwrap();
        assert_eq!(applied.text, "three");
        assert_eq!(applied.replacements, 2);
    }

    #[test]
    fn zero_and_several_matches_fail_naming_the_edit_and_count() {
        let failure = apply("a a a", &[edit("a", "b"), edit("zzz", "y")]).unwrap_err();
        assert_eq!(
            failure,
            EditFailure::Ambiguous {
                index: 0,
                total: 2,
                count: 3
            }
        );
        assert!(
            failure
                .to_string()
                .starts_with("edit 1 of 2: the text to replace matches 3 times")
        );
        let failure = apply("a a a", &[all("a", "b"), edit("zzz", "y")]).unwrap_err();
        assert_eq!(failure, EditFailure::NoMatch { index: 1, total: 2 });
        assert!(failure.to_string().contains("edit 2 of 2"), "{failure}");
        assert!(failure.to_string().contains("matches 0 times"), "{failure}");
    }

    #[test]
    fn replace_all_counts_every_occurrence() {
        let applied = apply("x.x.x", &[all("x", "yy")]).unwrap();
        assert_eq!(applied.text, "yy.yy.yy");
        assert_eq!(applied.replacements, 3);
    }

    #[test]
    fn empty_lists_and_empty_old_text_are_refused() {
        assert_eq!(apply("a", &[]).unwrap_err(), EditFailure::Empty);
        assert_eq!(
            apply("a", &[edit("a", "b"), edit("", "c")]).unwrap_err(),
            EditFailure::EmptyOld { index: 1, total: 2 }
        );
    }

    #[test]
    fn crlf_files_match_lf_edits_and_keep_crlf() {
        let original = "fn main() {\r\n    old();\r\n}\r\n";
        let applied = apply(
            original,
            &[edit("{\n    old();\n}", "{\n    new();\n    more();\n}")],
        )
        .unwrap();
        assert_eq!(
            applied.text,
            "fn main() {\r\n    new();\r\n    more();\r\n}\r\n"
        );
        // CRLF in the edit itself is normalised too.
        let applied = apply(original, &[edit("old();\r\n}", "x();\r\n}")]).unwrap();
        assert_eq!(applied.text, "fn main() {\r\n    x();\r\n}\r\n");
    }

    #[test]
    fn a_match_starting_or_ending_at_a_line_break_takes_the_whole_crlf() {
        let applied = apply("a\r\nb\r\nc", &[edit("\nb\n", "\nB\n")]).unwrap();
        assert_eq!(applied.text, "a\r\nB\r\nc");
        let applied = apply("a\r\nb\r\nc", &[edit("b", "B")]).unwrap();
        assert_eq!(applied.text, "a\r\nB\r\nc");
        let applied = apply("a\r\nb", &[edit("a\n", "")]).unwrap();
        assert_eq!(applied.text, "b");
    }

    #[test]
    fn untouched_minority_line_endings_are_kept_exactly() {
        // Dominant LF, one CRLF line that the edit does not touch.
        let original = "one\ntwo\r\nthree\nfour\n";
        let applied = apply(original, &[edit("four", "4\n5")]).unwrap();
        assert_eq!(applied.text, "one\ntwo\r\nthree\n4\n5\n");
    }

    #[test]
    fn lone_carriage_returns_are_literal() {
        let applied = apply("a\rb\r\nc\r\n", &[edit("a\rb", "x")]).unwrap();
        assert_eq!(applied.text, "x\r\nc\r\n");
    }

    #[test]
    fn dominance_is_a_majority_and_ties_go_to_lf() {
        assert_eq!(dominant_ending("a\r\nb\r\nc\n"), LineEnding::CrLf);
        assert_eq!(dominant_ending("a\r\nb\n"), LineEnding::Lf);
        assert_eq!(dominant_ending("no breaks"), LineEnding::Lf);
    }

    #[test]
    fn multibyte_text_is_spliced_on_character_boundaries() {
        let applied = apply("héllo\r\nwörld\r\n", &[edit("wörld", "日本")]).unwrap();
        assert_eq!(applied.text, "héllo\r\n日本\r\n");
    }
}
