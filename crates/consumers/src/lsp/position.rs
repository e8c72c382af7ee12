//! Positions as people and tools give them — 1-based lines and 1-based columns counted in
//! characters — and as the server counts them: 0-based, in the unit of the position encoding it
//! chose (UTF-16 code units unless it picked UTF-8 or UTF-32).

use dsh_plugin_api::{Error, Result};
use lsp_types::{Position, PositionEncodingKind};
use serde::{Deserialize, Serialize};

/// A place in a text: 1-based line, 1-based column in characters.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct TextPosition {
    pub line: u32,
    pub column: u32,
}

/// The unit a server counts columns in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Encoding {
    Utf8,
    Utf16,
    Utf32,
}

impl Encoding {
    /// What the server announced (`positionEncoding`; UTF-16 when it says nothing).
    pub fn of(kind: Option<&PositionEncodingKind>) -> Encoding {
        match kind.map(PositionEncodingKind::as_str) {
            Some("utf-8") => Encoding::Utf8,
            Some("utf-32") => Encoding::Utf32,
            _ => Encoding::Utf16,
        }
    }

    fn units(self, c: char) -> u32 {
        match self {
            Encoding::Utf8 => c.len_utf8() as u32,
            Encoding::Utf16 => c.len_utf16() as u32,
            Encoding::Utf32 => 1,
        }
    }
}

/// `at` in `text` as the server counts it. A line past the end is `InvalidInput`; a column
/// past its line's end means the line's end.
pub fn to_lsp(text: &str, at: TextPosition, encoding: Encoding) -> Result<Position> {
    if at.line == 0 || at.column == 0 {
        return Err(Error::invalid_input(format!(
            "position {}:{}: lines and columns count from 1",
            at.line, at.column
        )));
    }
    let line = text.split('\n').nth(at.line as usize - 1).ok_or_else(|| {
        Error::invalid_input(format!(
            "line {} is past the end ({} lines)",
            at.line,
            text.split('\n').count()
        ))
    })?;
    let character = line
        .trim_end_matches('\r')
        .chars()
        .take(at.column as usize - 1)
        .map(|c| encoding.units(c))
        .sum();
    Ok(Position {
        line: at.line - 1,
        character,
    })
}

/// The server's `position` in `text`, 1-based in characters (a column inside a character, or
/// past the line's end, is clamped).
pub fn from_lsp(text: &str, position: Position, encoding: Encoding) -> TextPosition {
    let line = text.split('\n').nth(position.line as usize).unwrap_or("");
    let mut units = 0;
    let mut column = 1;
    for c in line.trim_end_matches('\r').chars() {
        if units >= position.character {
            break;
        }
        units += encoding.units(c);
        column += 1;
    }
    TextPosition {
        line: position.line.saturating_add(1),
        column,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn columns_count_characters_and_servers_count_their_units() {
        let text = "ab\n\u{e9}\u{1F600}x\r\nlast";
        let at = TextPosition { line: 2, column: 3 };
        for (encoding, character) in [
            (Encoding::Utf8, 6),
            (Encoding::Utf16, 3),
            (Encoding::Utf32, 2),
        ] {
            let position = to_lsp(text, at, encoding).unwrap();
            assert_eq!(position, Position { line: 1, character }, "{encoding:?}");
            assert_eq!(from_lsp(text, position, encoding), at, "{encoding:?}");
        }
        // Past a line's end: its end.
        let end = to_lsp(
            text,
            TextPosition {
                line: 1,
                column: 99,
            },
            Encoding::Utf16,
        )
        .unwrap();
        assert_eq!(
            end,
            Position {
                line: 0,
                character: 2
            }
        );
        assert!(to_lsp(text, TextPosition { line: 9, column: 1 }, Encoding::Utf16).is_err());
        assert!(to_lsp(text, TextPosition { line: 0, column: 1 }, Encoding::Utf16).is_err());
        assert_eq!(
            Encoding::of(Some(&PositionEncodingKind::UTF8)),
            Encoding::Utf8
        );
        assert_eq!(Encoding::of(None), Encoding::Utf16);
    }
}
