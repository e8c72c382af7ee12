//! Reads: whole UTF-8 files and streamed text or bytes, as `Stat` then a
//! `/files` download — or, text of up to 1 MiB while the sandbox helper's
//! process runs, one `read_many` of that process ([`crate::native`]).
//!
//! Against an envd that acts as root, the content is read by the world's
//! user's own process instead of `/files` ([`crate::as_user`]), so the
//! kernel checks that user's rights on the file actually opened.
//!
//! The version is taken from the `Stat` that precedes the download, so if
//! the file changes in between, the version is older than the content and
//! a write guarded by it fails safely (`Conflict`) instead of overwriting a
//! change the caller never saw. The download reads the resolved target of
//! a symlink, the file the version describes.

use dsh_plugin_api::fs::{FileKind, ReadStream, TextFile};
use dsh_plugin_api::stream::{ByteStream, TextStream};
use dsh_plugin_api::{ErrorKind, Result};
use futures::StreamExt;

use crate::chunks::{Pieces, byte_stream, text_stream};
use crate::errors::Op;
use crate::identity::EnvdFileAccess;
use crate::lookup::Followed;
use crate::meta::{kind_of, other_kind_name};
use crate::version::version_of;
use crate::world::{EnvdTransport, World};
use dsh_provider_kit::utf8::into_text;

impl<T: EnvdTransport> World<T> {
    /// The regular file `path` leads to. A directory is `IsADirectory`;
    /// FIFOs, sockets and devices are refused (`InvalidInput`), because
    /// reading them can block forever or never end.
    ///
    /// Whether the world's user may read it is decided when the content
    /// is opened ([`World::download`]), by envd acting as that user or by
    /// that user's own process.
    pub(crate) async fn open_regular(&self, op: Op<'_>, path: &str) -> Result<Followed> {
        let followed = self.stat_followed(op, path).await?;
        match kind_of(&followed.entry) {
            FileKind::File => Ok(followed),
            FileKind::Directory => Err(op.error(ErrorKind::IsADirectory, "is a directory")),
            _ => Err(op.error(
                ErrorKind::InvalidInput,
                format_args!(
                    "not a regular file (a {}), refusing to read it",
                    other_kind_name(&followed.entry)
                ),
            )),
        }
    }

    /// The content of the file at `path`, streamed; failures (including a
    /// connection that breaks off because the sandbox went away) end the
    /// stream as errors of `op`. Against an envd acting as root it is read
    /// by the world's user's own process instead
    /// ([`World::download_as_user`]).
    pub(crate) async fn download(&self, op: Op<'_>, path: &str) -> Result<Pieces> {
        if self.envd_file_access(op).await? == EnvdFileAccess::AsRoot {
            return self.download_as_user(op, path).await;
        }
        let download = self
            .envd
            .download(path, &self.download_options())
            .await
            .map_err(|err| op.remote(&err))?;
        let owned = op.to_owned();
        Ok(download
            .map(move |piece| piece.map_err(|err| owned.op().remote(&err)))
            .boxed())
    }

    /// The regular file `path` leads to ([`World::open_regular`]) and its
    /// content ([`World::download`]). Against an envd acting as root the
    /// user's reading process starts beside the `Stat` (it refuses what is
    /// not a regular file itself, so nothing it could open blocks).
    async fn open_content(&self, op: Op<'_>, path: &str) -> Result<(Followed, Pieces)> {
        if self.envd_file_access(op).await? == EnvdFileAccess::AsRoot {
            let (file, content) =
                futures::future::join(self.open_regular(op, path), self.download_as_user(op, path))
                    .await;
            return Ok((file?, content?));
        }
        let file = self.open_regular(op, path).await?;
        let pieces = self.download(op, &file.path).await?;
        Ok((file, pieces))
    }

    /// `read_text`: through the sandbox helper when its process runs
    /// ([`World::read_text_native`]), else `Stat` and download.
    pub(crate) async fn read_text(&self, op: Op<'_>, path: &str) -> Result<TextFile> {
        if let Some(file) = self.read_text_native(path).await {
            return Ok(file);
        }
        let (file, mut pieces) = self.open_content(op, path).await?;
        let version = version_of(&file.entry);
        let mut content = Vec::new();
        content
            .try_reserve_exact(usize::try_from(file.entry.size).unwrap_or(usize::MAX))
            .map_err(|_| {
                op.error(
                    ErrorKind::Io,
                    format_args!(
                        "the file is too large to read into memory ({} bytes)",
                        file.entry.size
                    ),
                )
            })?;
        while let Some(piece) = pieces.next().await {
            content.extend_from_slice(&piece?);
        }
        let text = into_text(&op, content)?;
        Ok(TextFile { text, version })
    }

    /// `stream_text`: a file the sandbox helper reads whole
    /// ([`World::read_text_native`]) streamed from memory, else `Stat` and
    /// download.
    pub(crate) async fn stream_text(
        &self,
        op: Op<'_>,
        path: &str,
    ) -> Result<ReadStream<TextStream>> {
        if let Some(file) = self.read_text_native(path).await {
            let size = file.text.len() as u64;
            let whole = file.text.into_bytes();
            let pieces: Pieces = futures::stream::once(async { Ok(whole) }).boxed();
            return Ok(ReadStream {
                version: file.version,
                size,
                chunks: text_stream(op.to_owned(), pieces).await?,
            });
        }
        let (file, pieces) = self.open_content(op, path).await?;
        let chunks = text_stream(op.to_owned(), pieces).await?;
        Ok(ReadStream {
            version: version_of(&file.entry),
            size: file.entry.size,
            chunks,
        })
    }

    /// `read_bytes`.
    pub(crate) async fn read_bytes(
        &self,
        op: Op<'_>,
        path: &str,
    ) -> Result<ReadStream<ByteStream>> {
        let (file, pieces) = self.open_content(op, path).await?;
        Ok(ReadStream {
            version: version_of(&file.entry),
            size: file.entry.size,
            chunks: byte_stream(pieces),
        })
    }
}
