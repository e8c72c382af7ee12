//! Unified diffs of an edit, bounded in size and time.

use std::time::Duration;

use similar::TextDiff;

/// The most bytes of diff an edit returns (32 KiB of hunks, for all its
/// files); the rest is left out at a line boundary, with a line saying how
/// many bytes.
pub const DIFF_MAX_BYTES: usize = 32 * 1024;

/// How long the diff algorithm may search before it settles for a coarser
/// (still correct) diff.
const DIFF_TIMEOUT: Duration = Duration::from_millis(500);

/// The unified diff (3 lines of context) from `old` to `new`, both shown as
/// `path`, at most `budget` bytes of it (headers included; past them, at
/// least the marker saying how much was left out); empty when nothing
/// changed.
/// Line endings are compared and shown as LF, so a CRLF file's diff reads
/// like any other.
pub(super) fn unified(path: &str, old: &str, new: &str, budget: usize) -> String {
    let (old, new) = (old.replace("\r\n", "\n"), new.replace("\r\n", "\n"));
    let diff = TextDiff::configure()
        .timeout(DIFF_TIMEOUT)
        .diff_lines(&old, &new);
    let header = format!("--- {path}\n+++ {path}\n");
    let budget = budget.saturating_sub(header.len());
    let mut hunks = String::new();
    let mut left_out = 0_usize;
    for hunk in diff.unified_diff().iter_hunks() {
        let hunk = hunk.to_string();
        let room = budget.saturating_sub(hunks.len());
        if left_out == 0 && hunk.len() <= room {
            hunks.push_str(&hunk);
        } else if left_out == 0 {
            let fits = hunk[..hunk.floor_char_boundary(room)]
                .rfind('\n')
                .map_or(0, |newline| newline + 1);
            hunks.push_str(&hunk[..fits]);
            left_out = hunk.len() - fits;
        } else {
            left_out += hunk.len();
        }
    }
    if hunks.is_empty() && left_out == 0 {
        return hunks;
    }
    if left_out > 0 {
        hunks.push_str(&format!("[... diff cut: {left_out} more bytes left out]\n"));
    }
    header + &hunks
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_change_is_one_hunk_with_context() {
        let diff = unified("f.txt", "a\nb\nc\n", "a\nB\nc\n", DIFF_MAX_BYTES);
        assert_eq!(
            diff,
            "--- f.txt\n+++ f.txt\n@@ -1,3 +1,3 @@\n a\n-b\n+B\n c\n"
        );
        assert_eq!(unified("f.txt", "same\n", "same\n", DIFF_MAX_BYTES), "");
    }

    #[test]
    fn crlf_is_shown_as_lf() {
        let diff = unified("f", "a\r\nb\r\n", "a\r\nc\r\n", DIFF_MAX_BYTES);
        assert!(!diff.contains('\r'), "{diff:?}");
        assert!(diff.contains("-b\n+c\n"), "{diff}");
    }

    #[test]
    fn big_diffs_are_bounded() {
        let old: String = (0..20_000).map(|n| format!("line {n}\n")).collect();
        let new = old.replace("line ", "LINE ");
        let diff = unified("f", &old, &new, DIFF_MAX_BYTES);
        assert!(diff.len() <= DIFF_MAX_BYTES + 200, "{}", diff.len());
        assert!(diff.contains("more bytes left out"), "{diff}");
        assert!(
            diff.contains("-line 0\n"),
            "the first lines are shown: {diff}"
        );
    }
}
