//! Reads: whole UTF-8 files and streamed text or bytes.

use std::fs::{File, Metadata, OpenOptions};
use std::io::Read;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

use dsh_plugin_api::fs::{ReadStream, TextFile};
use dsh_plugin_api::stream::{ByteStream, TextStream};
use dsh_plugin_api::{ErrorKind, Result, Text};
use rustix::fs::OFlags;
use rustix::io::Errno;

use crate::blocking::{self, INLINE_LIMIT};
use crate::chunks::{self, ByteChunks, Source, TextChunks};
use crate::errors::Op;
use crate::version::version_of;
use dsh_provider_kit::utf8::into_text;

/// Opens `path` for reading and checks it is a regular file.
///
/// Opened non-blocking so a FIFO without a writer cannot hang the open;
/// FIFOs, sockets and devices are then refused (`InvalidInput`) because
/// their reads can block forever. A directory is `IsADirectory`.
pub(crate) fn open_regular(op: Op<'_>, path: &Path) -> Result<(File, Metadata)> {
    let file = OpenOptions::new()
        .read(true)
        .custom_flags(OFlags::NONBLOCK.bits() as i32)
        .open(path)
        .map_err(|err| op.io(&err))?;
    check_regular(op, file)
}

/// `file` (opened non-blocking) and its metadata if it is a regular file;
/// the refusals of [`open_regular`] otherwise.
pub(crate) fn check_regular(op: Op<'_>, file: File) -> Result<(File, Metadata)> {
    let meta = file.metadata().map_err(|err| op.io(&err))?;
    if meta.is_dir() {
        return Err(op.error(ErrorKind::IsADirectory, "is a directory"));
    }
    if !meta.is_file() {
        return Err(op.error(
            ErrorKind::InvalidInput,
            format_args!(
                "not a regular file (a {}), refusing to read it",
                other_kind_name(&meta)
            ),
        ));
    }
    Ok((file, meta))
}

fn other_kind_name(meta: &Metadata) -> &'static str {
    use std::os::unix::fs::FileTypeExt;
    let file_type = meta.file_type();
    if file_type.is_fifo() {
        "FIFO"
    } else if file_type.is_socket() {
        "socket"
    } else if file_type.is_char_device() {
        "character device"
    } else if file_type.is_block_device() {
        "block device"
    } else {
        "special file"
    }
}

/// The whole content of an open file of `size` bytes at open time. Reads
/// exactly that much into an exact-size buffer, then one probe read checks
/// for end of file (a file that grew meanwhile is read to its new end).
/// Avoids `read_to_end`'s own `fstat` + `lseek` size probing: the size is
/// already known.
pub fn read_all(op: Op<'_>, file: &File, size: u64) -> Result<Vec<u8>> {
    let size = usize::try_from(size).unwrap_or(usize::MAX);
    let mut content = Vec::new();
    content.try_reserve_exact(size).map_err(|_| {
        op.error(
            ErrorKind::Io,
            format_args!("the file is too large to read into memory ({size} bytes)"),
        )
    })?;
    while content.len() < size {
        let remaining = size - content.len();
        if read_into_spare(op, file, &mut content, remaining)? == 0 {
            // Shrunk meanwhile: what is there is the content.
            return Ok(content);
        }
    }
    // Probe for growth with a small read before reserving more.
    let mut probe = [0_u8; 64];
    loop {
        let read = loop {
            match (&*file).read(&mut probe) {
                Err(err) if err.kind() == std::io::ErrorKind::Interrupted => continue,
                other => break other.map_err(|err| op.io(&err))?,
            }
        };
        if read == 0 {
            return Ok(content);
        }
        content.extend_from_slice(&probe[..read]);
        while read_into_spare(op, file, &mut content, 64 * 1024)? != 0 {}
    }
}

/// One `read(2)` of up to `max` bytes into `buf`'s spare capacity (reserved
/// here, never zero-filled); `Ok(0)` is end of file.
pub(crate) fn read_into_spare(
    op: Op<'_>,
    file: &File,
    buf: &mut Vec<u8>,
    max: usize,
) -> Result<usize> {
    buf.reserve(max);
    let start = buf.len();
    let spare = &mut buf.spare_capacity_mut()[..max];
    let read = loop {
        match rustix::io::read(file, &mut *spare) {
            Ok((filled, _)) => break filled.len(),
            Err(Errno::INTR) => continue,
            Err(errno) => return Err(op.io(&errno.into())),
        }
    };
    // SAFETY: `read(2)` initialised the first `read` bytes of the spare
    // capacity, which starts at `start`.
    unsafe { buf.set_len(start + read) };
    Ok(read)
}

/// Reads and decodes an open file: inline when small, through
/// [`blocking::run`] when large.
pub(crate) async fn read_text_content(op: Op<'_>, file: File, size: u64) -> Result<Text> {
    if size <= INLINE_LIMIT {
        into_text(&op, read_all(op, &file, size)?)
    } else {
        let owned = op.to_owned();
        blocking::run(op, move || {
            into_text(&owned.op(), read_all(owned.op(), &file, size)?)
        })
        .await?
    }
}

/// `read_text`: the version is taken from the open file *before* its
/// content is read, so if the file changes during the read the version is
/// older than the text and a guarded write with it fails safely.
pub(crate) async fn read_text(op: Op<'_>, path: &Path) -> Result<TextFile> {
    let (file, meta) = open_regular(op, path)?;
    let version = version_of(&meta);
    let text = read_text_content(op, file, meta.len()).await?;
    Ok(TextFile { text, version })
}

/// `stream_text`: the binary check reads the first chunk before returning.
pub(crate) async fn stream_text(op: Op<'_>, path: &Path) -> Result<ReadStream<TextStream>> {
    let (file, meta) = open_regular(op, path)?;
    let version = version_of(&meta);
    let size = meta.len();
    let producer = TextChunks::open(Source::new(file, op.to_owned()))?;
    Ok(ReadStream {
        version,
        size,
        chunks: chunks::into_stream(producer),
    })
}

/// `read_bytes`: any content, as raw chunks.
pub(crate) async fn read_bytes(op: Op<'_>, path: &Path) -> Result<ReadStream<ByteStream>> {
    let (file, meta) = open_regular(op, path)?;
    let version = version_of(&meta);
    let size = meta.len();
    let producer = ByteChunks::new(Source::new(file, op.to_owned()));
    Ok(ReadStream {
        version,
        size,
        chunks: chunks::into_stream(producer),
    })
}
