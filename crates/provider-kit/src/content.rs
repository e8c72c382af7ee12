//! What a write stores: one type for `FsProvider::write` (the whole
//! content) and `FsProvider::write_stream` (chunks as they arrive), so a
//! provider implements both with one staging path.

use dsh_plugin_api::Bytes;
use dsh_plugin_api::stream::ByteStream;

/// The content of one write.
pub enum WriteContent {
    /// The whole content, at once (`write`).
    Whole(Bytes),
    /// Chunks to stage as they arrive (`write_stream`); the size is not
    /// known until the stream ends.
    Stream(ByteStream),
}

impl WriteContent {
    /// The content's size when it is known up front (`Whole` only).
    pub fn known_len(&self) -> Option<u64> {
        match self {
            WriteContent::Whole(bytes) => Some(bytes.len() as u64),
            WriteContent::Stream(_) => None,
        }
    }
}

impl std::fmt::Debug for WriteContent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            WriteContent::Whole(bytes) => write!(f, "Whole({} bytes)", bytes.len()),
            WriteContent::Stream(_) => f.write_str("Stream"),
        }
    }
}
