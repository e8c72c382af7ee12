//! Literal text edits with line-ending-insensitive matching — the contract
//! of [`dsh_plugin_api::fs::Edit`].
//!
//! Matching runs on a view of the text with every CRLF seen as LF (on both
//! sides), but replacements are spliced into the *original* text: bytes
//! outside the matched ranges are kept exactly, minority line endings and
//! lone CRs included, and inserted text takes the file's dominant line
//! ending. A match that starts at a CRLF's LF takes the CR with it; one that
//! ends just before a CRLF's LF leaves the CR (it belongs to the LF).
//!
//! [`apply`] applies edits in order, each to the previous one's result (the
//! seam's `edit`); [`patch`] applies them as hunks of one patch, each matched
//! in the original text, refusing hunks that overlap. Either way each edit
//! must match exactly once unless it asks to replace all, and nothing is
//! applied when any edit fails.

use dsh_plugin_api::fs::Edit;

/// Why a list of edits could not be applied (nothing is stored then). Its
/// `Display` is the detail of an `InvalidInput` error (`Empty`, `EmptyOld`)
/// or a no-match error, naming the edit as "edit N of M".
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EditFailure {
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
    /// A match of edit `second` overlaps one of edit `first` (0-based,
    /// `first < second`) in the original text ([`patch`] only).
    Overlap {
        first: usize,
        second: usize,
        total: usize,
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
            EditFailure::Overlap {
                first,
                second,
                total,
            } => write!(
                f,
                "edits {} and {} of {total}: their texts overlap in the file (make them one edit)",
                first + 1,
                second + 1
            ),
        }
    }
}

impl std::error::Error for EditFailure {}

/// The edited text and how many replacements were made in total.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Applied {
    pub text: String,
    pub replacements: usize,
}

/// Checks the edit list itself, before any file is touched: not empty, no
/// edit with an empty `old` text.
pub fn validate(edits: &[Edit]) -> Result<(), EditFailure> {
    if edits.is_empty() {
        return Err(EditFailure::Empty);
    }
    let total = edits.len();
    match edits.iter().position(|edit| edit.old.is_empty()) {
        Some(index) => Err(EditFailure::EmptyOld { index, total }),
        None => Ok(()),
    }
}

/// Whether CRLF is the dominant line ending of `text`: CRLF pairs outnumber
/// lone LFs (ties, and text without line breaks, are LF).
pub fn crlf_dominant(text: &str) -> bool {
    let bytes = text.as_bytes();
    let (mut crlf, mut lf) = (0_usize, 0_usize);
    for at in memchr::memchr_iter(b'\n', bytes) {
        if at > 0 && bytes[at - 1] == b'\r' {
            crlf += 1;
        } else {
            lf += 1;
        }
    }
    crlf > lf
}

/// Applies `edits` in order (each sees the previous one's result) to
/// `original`, after [`validate`]. The dominant line ending is that of
/// `original`.
pub fn apply(original: &str, edits: &[Edit]) -> Result<Applied, EditFailure> {
    validate(edits)?;
    let crlf = crlf_dominant(original);
    let total = edits.len();
    let mut text = original.to_owned();
    let mut replacements = 0;
    for (index, edit) in edits.iter().enumerate() {
        let view = LfView::of(&text);
        let matches = view.matches(edit, index, total)?;
        replacements += matches.len();
        let new = with_ending(&edit.new, crlf);
        let spliced: Vec<(Match, &str)> =
            matches.into_iter().map(|at| (at, new.as_str())).collect();
        text = view.splice(&text, &spliced);
    }
    Ok(Applied { text, replacements })
}

/// The edited text of a patch and how many replacements each edit made.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Patched {
    pub text: String,
    /// Per edit, in the order given.
    pub replacements: Vec<usize>,
}

/// Applies `edits` to `original` as the hunks of one patch, after
/// [`validate`]: each is matched in `original` (not in another edit's
/// result, so the order does not matter and no edit sees another's text),
/// each match must be unique unless the edit replaces all, and no two
/// matches may overlap ([`EditFailure::Overlap`]; touching is fine). The
/// dominant line ending is that of `original`.
pub fn patch(original: &str, edits: &[Edit]) -> Result<Patched, EditFailure> {
    validate(edits)?;
    let crlf = crlf_dominant(original);
    let total = edits.len();
    let view = LfView::of(original);
    let mut found: Vec<(Match, usize)> = Vec::new();
    let mut replacements = Vec::with_capacity(total);
    for (index, edit) in edits.iter().enumerate() {
        let matches = view.matches(edit, index, total)?;
        replacements.push(matches.len());
        found.extend(matches.into_iter().map(|at| (at, index)));
    }
    found.sort_by_key(|(at, _)| at.start);
    if let Some(pair) = found
        .windows(2)
        .find(|pair| pair[1].0.start < pair[0].0.end)
    {
        let (a, b) = (pair[0].1, pair[1].1);
        return Err(EditFailure::Overlap {
            first: a.min(b),
            second: a.max(b),
            total,
        });
    }
    let news: Vec<String> = edits
        .iter()
        .map(|edit| with_ending(&edit.new, crlf))
        .collect();
    let spliced: Vec<(Match, &str)> = found
        .into_iter()
        .map(|(at, index)| (at, news[index].as_str()))
        .collect();
    Ok(Patched {
        text: view.splice(original, &spliced),
        replacements,
    })
}

/// `new` with the file's dominant line ending.
fn with_ending(new: &str, crlf: bool) -> String {
    let new = new.replace("\r\n", "\n");
    if crlf { new.replace('\n', "\r\n") } else { new }
}

/// A match, as a range of offsets in an [`LfView`]'s text.
#[derive(Debug, Clone, Copy)]
struct Match {
    start: usize,
    end: usize,
}

/// A text with its CRLFs seen as LFs, and the way back to original offsets.
struct LfView {
    text: String,
    /// Ascending offsets, in `text`, of the LFs whose CR was dropped.
    dropped_cr_at: Vec<usize>,
}

impl LfView {
    fn of(original: &str) -> LfView {
        if !original.contains("\r\n") {
            return LfView {
                text: original.to_owned(),
                dropped_cr_at: Vec::new(),
            };
        }
        let mut text = String::with_capacity(original.len());
        let mut dropped_cr_at = Vec::new();
        for (index, piece) in original.split("\r\n").enumerate() {
            if index > 0 {
                dropped_cr_at.push(text.len());
                text.push('\n');
            }
            text.push_str(piece);
        }
        LfView {
            text,
            dropped_cr_at,
        }
    }

    /// The matches of edit `index` of `total` (non-overlapping, in order),
    /// checked against its `replace_all`.
    fn matches(&self, edit: &Edit, index: usize, total: usize) -> Result<Vec<Match>, EditFailure> {
        let old = edit.old.replace("\r\n", "\n");
        let matches: Vec<Match> = self
            .text
            .match_indices(old.as_str())
            .map(|(start, _)| Match {
                start,
                end: start + old.len(),
            })
            .collect();
        match matches.len() {
            0 => Err(EditFailure::NoMatch { index, total }),
            count if count > 1 && !edit.replace_all => Err(EditFailure::Ambiguous {
                index,
                total,
                count,
            }),
            _ => Ok(matches),
        }
    }

    /// `original` (the text this view is of) with each match, sorted and
    /// not overlapping, replaced by its text.
    fn splice(&self, original: &str, replacements: &[(Match, &str)]) -> String {
        let added: usize = replacements.iter().map(|(_, new)| new.len()).sum();
        let mut out = String::with_capacity(original.len() + added);
        let mut copied = 0;
        for (at, new) in replacements {
            let (from, to) = (self.original(at.start), self.original(at.end));
            out.push_str(&original[copied..from]);
            out.push_str(new);
            copied = to;
        }
        out.push_str(&original[copied..]);
        out
    }

    /// The original offset of view offset `at`: shifted by the CRs dropped
    /// strictly before it (so an offset at a CRLF's LF lands on its CR).
    fn original(&self, at: usize) -> usize {
        at + self.dropped_cr_at.partition_point(|&lf| lf < at)
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
    fn edits_apply_in_order_and_count() {
        let applied = apply("one", &[edit("one", "two"), edit("two", "three")]).unwrap();
        assert_eq!(applied.text, "three");
        assert_eq!(applied.replacements, 2);
        let applied = apply("x.x.x", &[all("x", "yy")]).unwrap();
        assert_eq!(applied.text, "yy.yy.yy");
        assert_eq!(applied.replacements, 3);
    }

    #[test]
    fn zero_and_several_matches_name_the_edit_and_count() {
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
    fn empty_lists_and_empty_old_text_are_refused() {
        assert_eq!(apply("a", &[]).unwrap_err(), EditFailure::Empty);
        assert_eq!(
            apply("a", &[edit("a", "b"), edit("", "c")]).unwrap_err(),
            EditFailure::EmptyOld { index: 1, total: 2 }
        );
        assert_eq!(
            validate(&[]).unwrap_err().to_string(),
            "no edits were given"
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
    fn matches_at_line_breaks_take_or_leave_the_cr_with_its_lf() {
        assert_eq!(
            apply("a\r\nb\r\nc", &[edit("\nb\n", "\nB\n")])
                .unwrap()
                .text,
            "a\r\nB\r\nc"
        );
        assert_eq!(
            apply("a\r\nb\r\nc", &[edit("b", "B")]).unwrap().text,
            "a\r\nB\r\nc"
        );
        assert_eq!(apply("a\r\nb", &[edit("a\n", "")]).unwrap().text, "b");
    }

    #[test]
    fn minority_endings_and_lone_crs_are_kept() {
        let applied = apply("one\ntwo\r\nthree\nfour\n", &[edit("four", "4\n5")]).unwrap();
        assert_eq!(applied.text, "one\ntwo\r\nthree\n4\n5\n");
        assert_eq!(
            apply("a\rb\r\nc\r\n", &[edit("a\rb", "x")]).unwrap().text,
            "x\r\nc\r\n"
        );
    }

    #[test]
    fn dominance_is_a_majority_and_ties_go_to_lf() {
        assert!(crlf_dominant("a\r\nb\r\nc\n"));
        assert!(!crlf_dominant("a\r\nb\n"));
        assert!(!crlf_dominant("no breaks"));
    }

    #[test]
    fn a_patch_matches_every_hunk_in_the_original_text() {
        // In order, the second edit would see the first one's "b" and fail as ambiguous.
        let patched = patch("a b\n", &[edit("a", "b"), edit("b", "c")]).unwrap();
        assert_eq!(patched.text, "b c\n");
        assert_eq!(patched.replacements, vec![1, 1]);
        // Given in any order, spliced where they are; touching hunks are fine.
        let patched = patch(
            "one two three",
            &[edit("three", "3"), all("o", "0"), edit("wo", "W")],
        );
        assert_eq!(
            patched.unwrap_err(),
            EditFailure::Overlap {
                first: 1,
                second: 2,
                total: 3
            },
            "two's o lies in both"
        );
        let patched = patch(
            "one two three",
            &[edit("three", "3"), edit("one", "1"), edit(" two ", "-")],
        )
        .unwrap();
        assert_eq!(patched.text, "1-3");
        assert_eq!(patched.replacements, vec![1, 1, 1]);
    }

    #[test]
    fn a_patch_refuses_overlaps_and_names_the_edits() {
        let failure = patch("abcdef", &[edit("abc", "x"), edit("zz", "y")]).unwrap_err();
        assert_eq!(failure, EditFailure::NoMatch { index: 1, total: 2 });
        let failure = patch("abcdef", &[edit("def", "x"), edit("cd", "y")]).unwrap_err();
        assert_eq!(
            failure,
            EditFailure::Overlap {
                first: 0,
                second: 1,
                total: 2
            }
        );
        assert_eq!(
            failure.to_string(),
            "edits 1 and 2 of 2: their texts overlap in the file (make them one edit)"
        );
        // The same text twice is the same place twice.
        assert!(matches!(
            patch("abc", &[edit("b", "x"), edit("b", "y")]).unwrap_err(),
            EditFailure::Overlap { .. }
        ));
        assert!(matches!(
            patch("a a", &[edit("a", "x")]).unwrap_err(),
            EditFailure::Ambiguous { count: 2, .. }
        ));
    }

    #[test]
    fn a_patch_keeps_crlf_and_splices_in_the_original() {
        let patched = patch(
            "fn a() {\r\n    1\r\n}\r\nfn b() {\r\n    2\r\n}\r\n",
            &[
                edit("fn b() {\n    2", "fn b() {\n    two\n    more"),
                edit("1\n}", "one\n}"),
            ],
        )
        .unwrap();
        assert_eq!(
            patched.text,
            "fn a() {\r\n    one\r\n}\r\nfn b() {\r\n    two\r\n    more\r\n}\r\n"
        );
    }

    #[test]
    fn multibyte_text_is_spliced_on_character_boundaries() {
        let applied = apply("héllo\r\nwörld\r\n", &[edit("wörld", "日本")]).unwrap();
        assert_eq!(applied.text, "héllo\r\n日本\r\n");
    }
}
