//! `read_file` of an image: a PNG, JPEG, GIF or WebP file, known by its
//! first bytes, read whole (bounded) for a client that shows images.

use base64::Engine;
use dsh_plugin_api::Result;
use futures::StreamExt;

use super::errors::{invalid, read_error};
use super::{Files, ReadFileResult};

const TOOL: &str = "read_file";

/// The largest image `read_file` returns (3 MiB; 4 MiB as base64).
pub const READ_MAX_IMAGE_BYTES: u64 = 3 * 1024 * 1024;

/// The MIME type of an image whose content starts with `head`, by its
/// magic bytes: PNG, JPEG, GIF or WebP.
fn image_type(head: &[u8]) -> Option<&'static str> {
    if head.starts_with(b"\x89PNG\r\n\x1a\n") {
        Some("image/png")
    } else if head.starts_with(b"\xff\xd8\xff") {
        Some("image/jpeg")
    } else if head.starts_with(b"GIF87a") || head.starts_with(b"GIF89a") {
        Some("image/gif")
    } else if head.len() >= 12 && head.starts_with(b"RIFF") && &head[8..12] == b"WEBP" {
        Some("image/webp")
    } else {
        None
    }
}

impl Files {
    /// The image at `path` (its whole content, base64, and MIME type) if its
    /// first bytes say it is one; `None` if they do not. An image over
    /// [`READ_MAX_IMAGE_BYTES`] is `InvalidInput`.
    pub(super) async fn read_image(&self, path: &str) -> Result<Option<ReadFileResult>> {
        let stream = self
            .fs
            .read_bytes(path)
            .await
            .map_err(|err| read_error(TOOL, path, err))?;
        let mut chunks = stream.chunks;
        let mut data = Vec::new();
        let mut mime = None;
        while let Some(chunk) = chunks.next().await {
            data.extend_from_slice(&chunk.map_err(|err| read_error(TOOL, path, err))?);
            if mime.is_none() {
                if data.len() < 12 {
                    continue;
                }
                mime = image_type(&data);
                if mime.is_none() {
                    return Ok(None);
                }
            }
            let size = stream.size.max(data.len() as u64);
            if size > READ_MAX_IMAGE_BYTES {
                return Err(invalid(
                    TOOL,
                    path,
                    format!(
                        "an image of {size} bytes is over the {READ_MAX_IMAGE_BYTES}-byte bound \
                         of read_file; scale it down with a command first"
                    ),
                ));
            }
        }
        let Some(mime) = mime.or_else(|| image_type(&data)) else {
            return Ok(None);
        };
        let size = data.len() as u64;
        Ok(Some(ReadFileResult {
            path: path.to_owned(),
            version: stream.version.0,
            content: String::new(),
            start_line: 1,
            lines: 0,
            start_byte: 0,
            end_byte: size,
            size,
            total_lines: None,
            more: false,
            next_offset: None,
            next_byte_offset: None,
            cut_lines: 0,
            mime_type: Some(mime.to_owned()),
            image: Some(base64::engine::general_purpose::STANDARD.encode(&data)),
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn images_are_known_by_their_magic_bytes() {
        assert_eq!(
            image_type(b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR"),
            Some("image/png")
        );
        assert_eq!(
            image_type(b"\xff\xd8\xff\xe0\0\x10JFIF\0"),
            Some("image/jpeg")
        );
        assert_eq!(image_type(b"GIF89a\x01\0\x01\0\0\0"), Some("image/gif"));
        assert_eq!(image_type(b"RIFF\x24\0\0\0WEBPVP8 "), Some("image/webp"));
        assert_eq!(image_type(b"RIFF\x24\0\0\0WAVEfmt "), None);
        assert_eq!(image_type(b"PK\x03\x04\0\0binary"), None);
    }
}
