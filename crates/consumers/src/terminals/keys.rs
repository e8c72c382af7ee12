//! Named keys and the bytes an xterm-compatible terminal sends for them.
//!
//! Names are matched case-insensitively; `Ctrl-C`, `Ctrl+C`, `C-c` and
//! `^C` are the same key. Cursor keys follow the screen's cursor-key mode:
//! a program that switched it to "application" (vim, less, …) gets the
//! `ESC O` forms, as a real terminal would send them.

/// The names a model may use, for the error that lists them.
pub const KNOWN_KEYS: &str = "Enter, Tab, Shift-Tab, Escape, Backspace, Space, Up, Down, Left, Right, \
     Home, End, PageUp, PageDown, Insert, Delete, F1 … F12, Ctrl-A … Ctrl-Z, Ctrl-@, Ctrl-[, \
     Ctrl-\\, Ctrl-], Ctrl-^, Ctrl-_, Alt-<character> (e.g. Alt-b)";

/// The bytes for the key called `name`, or `None` for an unknown name.
/// `application_cursor` is the screen's cursor-key mode.
pub(crate) fn key_bytes(name: &str, application_cursor: bool) -> Option<Vec<u8>> {
    let name = name.trim();
    let lower = name.to_ascii_lowercase();
    if let Some(key) = ["ctrl-", "ctrl+", "c-", "^"]
        .iter()
        .find_map(|prefix| lower.strip_prefix(prefix))
    {
        return control(key).map(|byte| vec![byte]);
    }
    if let Some(key) = ["alt-", "alt+", "m-", "meta-"].iter().find_map(|prefix| {
        name.get(prefix.len()..)
            .filter(|_| lower.starts_with(prefix))
    }) {
        let mut chars = key.chars();
        let (Some(c), None) = (chars.next(), chars.next()) else {
            return None;
        };
        let mut bytes = vec![0x1b];
        bytes.extend_from_slice(c.encode_utf8(&mut [0; 4]).as_bytes());
        return Some(bytes);
    }
    let cursor = |normal: &'static str, application: &'static str| {
        if application_cursor {
            application
        } else {
            normal
        }
    };
    let bytes: &str = match lower.as_str() {
        "enter" | "return" => "\r",
        "tab" => "\t",
        "shift-tab" | "shift+tab" | "backtab" => "\x1b[Z",
        "escape" | "esc" => "\x1b",
        "backspace" => "\x7f",
        "space" => " ",
        "up" => cursor("\x1b[A", "\x1bOA"),
        "down" => cursor("\x1b[B", "\x1bOB"),
        "right" => cursor("\x1b[C", "\x1bOC"),
        "left" => cursor("\x1b[D", "\x1bOD"),
        "home" => cursor("\x1b[H", "\x1bOH"),
        "end" => cursor("\x1b[F", "\x1bOF"),
        "pageup" | "page-up" | "pgup" => "\x1b[5~",
        "pagedown" | "page-down" | "pgdn" => "\x1b[6~",
        "insert" => "\x1b[2~",
        "delete" | "del" => "\x1b[3~",
        "f1" => "\x1bOP",
        "f2" => "\x1bOQ",
        "f3" => "\x1bOR",
        "f4" => "\x1bOS",
        "f5" => "\x1b[15~",
        "f6" => "\x1b[17~",
        "f7" => "\x1b[18~",
        "f8" => "\x1b[19~",
        "f9" => "\x1b[20~",
        "f10" => "\x1b[21~",
        "f11" => "\x1b[23~",
        "f12" => "\x1b[24~",
        _ => return None,
    };
    Some(bytes.as_bytes().to_vec())
}

/// The control character for `Ctrl-<key>`.
fn control(key: &str) -> Option<u8> {
    let &[byte] = key.as_bytes() else {
        return match key {
            "space" => Some(0),
            _ => None,
        };
    };
    match byte {
        b'a'..=b'z' => Some(byte - b'a' + 1),
        b'@' | b'2' => Some(0),
        b'[' => Some(0x1b),
        b'\\' => Some(0x1c),
        b']' => Some(0x1d),
        b'^' => Some(0x1e),
        b'_' => Some(0x1f),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn control_keys_in_every_spelling() {
        for name in ["Ctrl-C", "ctrl+c", "C-c", "^C", " CTRL-c "] {
            assert_eq!(key_bytes(name, false), Some(vec![3]), "{name}");
        }
        assert_eq!(key_bytes("Ctrl-A", false), Some(vec![1]));
        assert_eq!(key_bytes("Ctrl-Z", false), Some(vec![26]));
        assert_eq!(key_bytes("Ctrl-D", false), Some(vec![4]));
        assert_eq!(key_bytes("Ctrl-\\", false), Some(vec![0x1c]));
        assert_eq!(key_bytes("Ctrl-@", false), Some(vec![0]));
        assert_eq!(key_bytes("Ctrl-Space", false), Some(vec![0]));
        assert_eq!(key_bytes("Ctrl-[", false), Some(vec![0x1b]));
        assert_eq!(key_bytes("Ctrl-1", false), None);
    }

    #[test]
    fn named_keys_and_cursor_modes() {
        assert_eq!(key_bytes("Enter", false), Some(b"\r".to_vec()));
        assert_eq!(key_bytes("escape", false), Some(b"\x1b".to_vec()));
        assert_eq!(key_bytes("Backspace", false), Some(b"\x7f".to_vec()));
        assert_eq!(key_bytes("Up", false), Some(b"\x1b[A".to_vec()));
        assert_eq!(key_bytes("Up", true), Some(b"\x1bOA".to_vec()));
        assert_eq!(key_bytes("PageDown", true), Some(b"\x1b[6~".to_vec()));
        assert_eq!(key_bytes("F12", false), Some(b"\x1b[24~".to_vec()));
        assert_eq!(key_bytes("Alt-b", false), Some(b"\x1bb".to_vec()));
        assert_eq!(key_bytes("Alt-B", false), Some(b"\x1bB".to_vec()));
        assert_eq!(key_bytes("Alt-bb", false), None);
        assert_eq!(key_bytes("Hyper-X", false), None);
        assert_eq!(key_bytes("", false), None);
    }
}
