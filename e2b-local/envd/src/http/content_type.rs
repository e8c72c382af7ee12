//! `Content-Type` of downloads as Go's `net/http` picks it: by extension (Go's built-in table,
//! then the system's `/etc/mime.types`, `text/*` types with `charset=utf-8`), else by sniffing
//! the first 512 bytes (a subset of the WHATWG signatures Go's `DetectContentType` knows).

use std::collections::HashMap;
use std::sync::OnceLock;

const BUILTIN: &[(&str, &str)] = &[
    (".avif", "image/avif"),
    (".css", "text/css; charset=utf-8"),
    (".gif", "image/gif"),
    (".htm", "text/html; charset=utf-8"),
    (".html", "text/html; charset=utf-8"),
    (".jpeg", "image/jpeg"),
    (".jpg", "image/jpeg"),
    (".js", "text/javascript; charset=utf-8"),
    (".json", "application/json"),
    (".mjs", "text/javascript; charset=utf-8"),
    (".pdf", "application/pdf"),
    (".png", "image/png"),
    (".svg", "image/svg+xml"),
    (".wasm", "application/wasm"),
    (".webp", "image/webp"),
    (".xml", "text/xml; charset=utf-8"),
];

fn table() -> &'static HashMap<String, String> {
    static TABLE: OnceLock<HashMap<String, String>> = OnceLock::new();
    TABLE.get_or_init(|| {
        let mut table = HashMap::new();
        if let Ok(system) = std::fs::read_to_string("/etc/mime.types") {
            for line in system.lines() {
                let line = line.split('#').next().unwrap_or("");
                let mut fields = line.split_whitespace();
                let Some(mime) = fields.next() else {
                    continue;
                };
                let mime = if mime.starts_with("text/") && !mime.contains("charset") {
                    format!("{mime}; charset=utf-8")
                } else {
                    mime.to_owned()
                };
                for ext in fields {
                    table
                        .entry(format!(".{}", ext.to_ascii_lowercase()))
                        .or_insert_with(|| mime.clone());
                }
            }
        }
        // The built-in table wins over the system's.
        for (ext, mime) in BUILTIN {
            table.insert((*ext).to_owned(), (*mime).to_owned());
        }
        table
    })
}

/// The type registered for the extension of `name` (case-insensitive), if any.
pub(crate) fn by_extension(name: &str) -> Option<&'static str> {
    let base = name.rsplit('/').next().unwrap_or(name);
    let dot = base.rfind('.')?;
    let ext = base[dot..].to_ascii_lowercase();
    table().get(&ext).map(String::as_str)
}

/// Go's `DetectContentType` for the signatures that matter here; binary data falls back to
/// `application/octet-stream`, text to `text/plain; charset=utf-8`.
pub(crate) fn sniff(data: &[u8]) -> &'static str {
    let data = &data[..data.len().min(512)];
    let trimmed = {
        let start = data
            .iter()
            .position(|b| !matches!(b, b'\t' | b'\n' | b'\x0c' | b'\r' | b' '))
            .unwrap_or(data.len());
        &data[start..]
    };
    const HTML_TAGS: &[&[u8]] = &[
        b"<!DOCTYPE HTML",
        b"<HTML",
        b"<HEAD",
        b"<SCRIPT",
        b"<IFRAME",
        b"<H1",
        b"<DIV",
        b"<FONT",
        b"<TABLE",
        b"<A",
        b"<STYLE",
        b"<TITLE",
        b"<B",
        b"<BODY",
        b"<BR",
        b"<P",
        b"<!--",
    ];
    for tag in HTML_TAGS {
        if trimmed.len() > tag.len()
            && trimmed[..tag.len()].eq_ignore_ascii_case(tag)
            && matches!(trimmed[tag.len()], b' ' | b'>')
        {
            return "text/html; charset=utf-8";
        }
    }
    if trimmed.starts_with(b"<?xml") {
        return "text/xml; charset=utf-8";
    }
    const SIGNATURES: &[(&[u8], &str)] = &[
        (b"%PDF-", "application/pdf"),
        (b"%!PS-Adobe-", "application/postscript"),
        (b"GIF87a", "image/gif"),
        (b"GIF89a", "image/gif"),
        (b"\x89PNG\x0d\x0a\x1a\x0a", "image/png"),
        (b"\xff\xd8\xff", "image/jpeg"),
        (b"BM", "image/bmp"),
        (b"\x00\x00\x01\x00", "image/x-icon"),
        (b"\x00\x00\x02\x00", "image/x-icon"),
        (b"OggS\x00", "application/ogg"),
        (b"ID3", "audio/mpeg"),
        (b"PK\x03\x04", "application/zip"),
        (b"\x1f\x8b\x08", "application/x-gzip"),
        (b"Rar!\x1a\x07\x00", "application/x-rar-compressed"),
        (b"Rar!\x1a\x07\x01\x00", "application/x-rar-compressed"),
        (b"\x00asm", "application/wasm"),
        (b"\xfe\xff", "text/plain; charset=utf-16be"),
        (b"\xff\xfe", "text/plain; charset=utf-16le"),
        (b"\xef\xbb\xbf", "text/plain; charset=utf-8"),
    ];
    for (signature, mime) in SIGNATURES {
        if data.starts_with(signature) {
            return mime;
        }
    }
    if data.len() >= 14 && data.starts_with(b"RIFF") && &data[8..14] == b"WEBPVP" {
        return "image/webp";
    }
    let binary = data
        .iter()
        .any(|b| matches!(b, 0x00..=0x08 | 0x0b | 0x0e..=0x1a | 0x1c..=0x1f));
    if binary {
        "application/octet-stream"
    } else {
        "text/plain; charset=utf-8"
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn extensions_and_sniffing() {
        assert_eq!(
            by_extension("/a/b/page.HTML"),
            Some("text/html; charset=utf-8")
        );
        assert_eq!(by_extension("data.json"), Some("application/json"));
        assert_eq!(by_extension("noext"), None);
        assert_eq!(sniff(b"hello world\n"), "text/plain; charset=utf-8");
        assert_eq!(sniff(b"  <html><body>"), "text/html; charset=utf-8");
        assert_eq!(sniff(b"\x89PNG\x0d\x0a\x1a\x0a...."), "image/png");
        assert_eq!(sniff(b"\x00\x01\x02"), "application/octet-stream");
        assert_eq!(sniff(b""), "text/plain; charset=utf-8");
    }
}
