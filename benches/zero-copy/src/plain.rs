//! The work behind every entry point, as plain Rust: what an in-process
//! provider does, and what the exported functions wrap.

use std::fs::File;
use std::io;
use std::os::fd::AsRawFd;
use std::path::Path;

/// The whole file, read into one fresh buffer (as `read_text` does).
pub fn read_file(path: &Path) -> io::Result<Vec<u8>> {
    std::fs::read(path)
}

/// Writes `content` to `path`, replacing it; returns the length written.
pub fn write_file(path: &Path, content: &[u8]) -> io::Result<u64> {
    std::fs::write(path, content)?;
    Ok(content.len() as u64)
}

/// A token of `content` that depends on every call (its length, first and
/// last byte), so a receiver's conversion cannot be optimised away.
pub fn touch(content: &[u8]) -> u64 {
    let edge = |byte: Option<&u8>| u64::from(byte.copied().unwrap_or(0));
    content.len() as u64 ^ edge(content.first()) ^ (edge(content.last()) << 8)
}

/// A file read front to back in chunks, each into a fresh, uninitialised
/// buffer handed over without a copy (as fs-local's streams and
/// subprocess-local's pipes do).
#[derive(Debug)]
pub struct ChunkFile {
    file: File,
    chunk_len: usize,
}

impl ChunkFile {
    /// Opens `path`; chunks are at most `chunk_len` bytes (at least 1).
    pub fn open(path: &Path, chunk_len: usize) -> io::Result<ChunkFile> {
        Ok(ChunkFile {
            file: File::open(path)?,
            chunk_len: chunk_len.max(1),
        })
    }

    /// The next chunk; `None` at end of file.
    pub fn next_chunk(&mut self) -> io::Result<Option<Vec<u8>>> {
        let mut chunk = Vec::with_capacity(self.chunk_len);
        loop {
            // SAFETY: read(2) writes at most `chunk_len` bytes into the
            // vector's spare capacity, which is that large.
            let read = unsafe {
                libc::read(
                    self.file.as_raw_fd(),
                    chunk.spare_capacity_mut().as_mut_ptr().cast(),
                    self.chunk_len,
                )
            };
            match read {
                0 => return Ok(None),
                read if read > 0 => {
                    // SAFETY: the kernel initialised `read` bytes.
                    unsafe { chunk.set_len(read as usize) };
                    return Ok(Some(chunk));
                }
                _ => {
                    let err = io::Error::last_os_error();
                    if err.kind() != io::ErrorKind::Interrupted {
                        return Err(err);
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunks_cover_the_file_exactly() {
        let dir = std::env::temp_dir().join(format!("dsh-zero-copy-plain-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("dir");
        let path = dir.join("data");
        let content: Vec<u8> = (0..10_000u32).map(|i| i as u8).collect();
        assert_eq!(write_file(&path, &content).expect("write"), 10_000);
        let mut chunks = ChunkFile::open(&path, 4096).expect("open");
        let mut read = Vec::new();
        let mut sizes = Vec::new();
        while let Some(chunk) = chunks.next_chunk().expect("chunk") {
            sizes.push(chunk.len());
            read.extend_from_slice(&chunk);
        }
        assert_eq!(sizes, [4096, 4096, 1808]);
        assert_eq!(read, content);
        assert_eq!(read_file(&path).expect("read"), content);
        std::fs::remove_dir_all(&dir).expect("cleanup");
    }

    #[test]
    fn a_missing_file_is_not_found() {
        let err = ChunkFile::open(Path::new("/nonexistent/dsh-zero-copy"), 1).expect_err("missing");
        assert_eq!(err.kind(), io::ErrorKind::NotFound);
    }

    #[test]
    fn touch_depends_on_length_and_edges() {
        assert_eq!(touch(&[]), 0);
        assert_ne!(touch(&[1, 2, 3]), touch(&[1, 2, 4]));
        assert_ne!(touch(&[1, 2]), touch(&[1, 2, 2]));
    }
}
