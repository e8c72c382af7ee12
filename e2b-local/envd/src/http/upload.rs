//! `POST /files` (docs/e2b-protocol.md §7.3): multipart (`file` parts, `path` query or each part's
//! filename as the full target path) or a raw `application/octet-stream` body, optionally
//! gzip-compressed, written with the acting user's permissions ([`crate::acting_user`]); parents
//! created 0755 and chowned, files opened `O_TRUNC` with mode 0666
//! minus the umask and chowned, `X-Metadata-*` headers stored as `user.e2b.*` xattrs. Bodies are
//! streamed to disk; there is no size limit. ENOSPC answers 507. A refused upload's body is read to
//! its end before the answer goes out ([`drain`]).

use std::collections::BTreeMap;
use std::io::Write as _;
use std::os::fd::AsFd;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use bytes::Bytes;
use flate2::write::GzDecoder;
use futures::{Stream, StreamExt, TryStreamExt};
use http::{Request, Response, StatusCode};
use http_body_util::BodyExt;
use hyper::body::Incoming;
use serde::Serialize;
use tokio::io::AsyncWriteExt;

use super::encoding::{self, Coding};
use super::files_prologue;
use super::response::{Body, json, json_error};
use crate::acting_user::{FileAccess, as_user};
use crate::auth::Operation;
use crate::paths::{base_name, ensure_dirs, expand_and_resolve, parent};
use crate::state::Daemon;
use crate::users::{User, UserDb};
use crate::xattr;

type ChunkStream<'a> =
    std::pin::Pin<Box<dyn Stream<Item = Result<Bytes, std::io::Error>> + Send + 'a>>;

/// The request body as it arrives.
type RawBody = http_body_util::BodyDataStream<Incoming>;

/// One uploaded file in the response.
#[derive(Debug, Serialize)]
struct Uploaded {
    path: String,
    name: String,
    r#type: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    metadata: Option<BTreeMap<String, String>>,
}

/// A failed upload: the status and envd's message.
struct Failure(StatusCode, String);

impl Failure {
    fn bad_request(message: impl Into<String>) -> Self {
        Self(StatusCode::BAD_REQUEST, message.into())
    }
    fn internal(message: impl Into<String>) -> Self {
        Self(StatusCode::INTERNAL_SERVER_ERROR, message.into())
    }
}

fn is_no_space(err: &std::io::Error) -> bool {
    matches!(err.raw_os_error(), Some(libc::ENOSPC) | Some(libc::EDQUOT))
}

pub(crate) async fn post_files(daemon: &Arc<Daemon>, request: Request<Incoming>) -> Response<Body> {
    let (parts, body) = request.into_parts();
    let mut raw = body.into_data_stream();
    let response = upload(daemon, &Request::from_parts(parts, ()), &mut raw).await;
    if !response.status().is_success() {
        drain(&mut raw).await;
    }
    response
}

/// Reads what is left of a refused upload's body and drops it, so that a client still sending
/// gets the answer: an HTTP/1.1 client whose connection is closed under its body (what the front
/// must do with a request body nobody read) sees only a broken pipe, never the 4xx. Stops at the
/// body's end or first error (the client went away).
async fn drain(raw: &mut RawBody) {
    while let Some(Ok(_)) = raw.next().await {}
}

/// The upload itself; `raw` is left where the answer was decided.
async fn upload(daemon: &Arc<Daemon>, request: &Request<()>, raw: &mut RawBody) -> Response<Body> {
    let files = match files_prologue(daemon, request, Operation::Write) {
        Ok(files) => files,
        Err(response) => return *response,
    };
    let coding = match encoding::upload_coding(request.headers()) {
        Ok(coding) => coding,
        Err(message) => return json_error(StatusCode::BAD_REQUEST, message),
    };
    let metadata = metadata_headers(request.headers());
    if let Err(err) = xattr::validate(&metadata) {
        return json_error(StatusCode::BAD_REQUEST, format!("invalid metadata: {err}"));
    }
    let content_type = request
        .headers()
        .get(http::header::CONTENT_TYPE)
        .and_then(|value| value.to_str().ok())
        .unwrap_or("")
        .to_owned();
    let media_type = content_type
        .split(';')
        .next()
        .unwrap_or("")
        .trim()
        .to_ascii_lowercase();
    let content_length = request
        .headers()
        .get(http::header::CONTENT_LENGTH)
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.parse::<u64>().ok());
    let path_param = files.query.get("path").map(str::to_owned);
    let workdir = daemon.default_workdir();
    let body = decoded_body(raw, coding);
    let context = Target {
        users: &daemon.users,
        access: daemon.options.file_access,
        user: &files.user,
        workdir: workdir.as_deref(),
        metadata: &metadata,
        content_length,
    };

    let result = if media_type == "application/octet-stream" {
        match path_param {
            None => Err(Failure::bad_request(
                "path query parameter is required for raw body upload",
            )),
            Some(raw) => match context.resolve(&raw) {
                Ok(path) => context.write(&path, body).await.map(|entry| vec![entry]),
                Err(failure) => Err(failure),
            },
        }
    } else if media_type.starts_with("multipart/") {
        upload_multipart(&context, &content_type, path_param.as_deref(), body).await
    } else {
        Err(Failure::bad_request(format!(
            "unsupported content type: {content_type}, expected multipart/form-data or application/octet-stream"
        )))
    };
    match result {
        Ok(entries) => {
            let mut response = json(StatusCode::OK, &entries);
            // envd lets Go sniff the type of its JSON array, which yields text/plain.
            response.headers_mut().insert(
                http::header::CONTENT_TYPE,
                http::HeaderValue::from_static("text/plain; charset=utf-8"),
            );
            response
        }
        Err(Failure(status, message)) => json_error(status, message),
    }
}

/// `X-Metadata-<Key>: <value>` headers as `key → value` (key lowercased, first value wins).
fn metadata_headers(headers: &http::HeaderMap) -> BTreeMap<String, String> {
    let mut metadata = BTreeMap::new();
    for (name, value) in headers {
        let Some(key) = name.as_str().strip_prefix("x-metadata-") else {
            continue;
        };
        if key.is_empty() {
            continue;
        }
        let value = String::from_utf8_lossy(value.as_bytes()).into_owned();
        metadata.entry(key.to_owned()).or_insert(value);
    }
    metadata
}

/// The request body as a stream of decoded chunks (gunzipped when `Content-Encoding: gzip`).
fn decoded_body(body: &mut RawBody, coding: Coding) -> ChunkStream<'_> {
    let raw = body.map_err(|err| std::io::Error::other(format!("reading request body: {err}")));
    match coding {
        Coding::Identity => Box::pin(raw),
        Coding::Gzip => {
            let decoder = GzDecoder::new(Vec::new());
            Box::pin(futures::stream::try_unfold(
                (Box::pin(raw), Some(decoder)),
                |(mut raw, decoder)| async move {
                    let Some(mut decoder) = decoder else {
                        return Ok(None);
                    };
                    loop {
                        match raw.next().await {
                            Some(chunk) => {
                                decoder.write_all(&chunk?).map_err(gzip_error)?;
                                let out = std::mem::take(decoder.get_mut());
                                if !out.is_empty() {
                                    return Ok(Some((Bytes::from(out), (raw, Some(decoder)))));
                                }
                            }
                            None => {
                                let rest = decoder.finish().map_err(gzip_error)?;
                                return Ok(Some((Bytes::from(rest), (raw, None))));
                            }
                        }
                    }
                },
            ))
        }
    }
}

fn gzip_error(err: std::io::Error) -> std::io::Error {
    std::io::Error::new(
        std::io::ErrorKind::InvalidData,
        format!("error decompressing request body: {err}"),
    )
}

async fn upload_multipart(
    target: &Target<'_>,
    content_type: &str,
    path_param: Option<&str>,
    body: ChunkStream<'_>,
) -> Result<Vec<Uploaded>, Failure> {
    let boundary = multer::parse_boundary(content_type)
        .map_err(|err| Failure::bad_request(format!("error parsing multipart form: {err}")))?;
    let body = from_first_delimiter(body, &boundary).await;
    let mut multipart = multer::Multipart::new(body, boundary);
    let mut uploaded: Vec<Uploaded> = Vec::new();
    loop {
        let field = match multipart.next_field().await {
            Ok(Some(field)) => field,
            Ok(None) => break,
            Err(err) => {
                return Err(Failure::bad_request(format!(
                    "error reading multipart form: {err}"
                )));
            }
        };
        if field.name() != Some("file") {
            continue;
        }
        let raw = match path_param {
            Some(path) => path.to_owned(),
            None => field.file_name().map(str::to_owned).ok_or_else(|| {
                Failure::bad_request(
                    "error getting multipart custom part file name: filename not found in Content-Disposition header",
                )
            })?,
        };
        let path = target.resolve(&raw)?;
        let path_text = path.to_string_lossy().into_owned();
        if uploaded.iter().any(|entry| entry.path == path_text) {
            let others: Vec<&str> = uploaded
                .iter()
                .filter(|entry| entry.path != path_text)
                .map(|entry| entry.path.as_str())
                .collect();
            let mut message = format!(
                "you cannot upload multiple files to the same path '{path_text}' in one upload request, only the first specified file was uploaded"
            );
            if !others.is_empty() {
                message.push_str(&format!(
                    ", also the following files were uploaded: {}",
                    others.join(", ")
                ));
            }
            return Err(Failure::bad_request(message));
        }
        let chunks: ChunkStream<'_> = Box::pin(field.map_err(|err| {
            std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                format!("error reading multipart form: {err}"),
            )
        }));
        uploaded.push(target.write(&path, chunks).await?);
    }
    Ok(uploaded)
}

/// `body` from its first `--<boundary>` on: the bytes before it (a preamble, which the form
/// ignores) are read and dropped here, and the returned stream's first chunk holds the delimiter.
///
/// multer 3.1 fails a valid form with "incomplete multipart stream" when, looking for the first
/// delimiter, it polls the body twice in one call and the second poll brings the rest of the body
/// and its end: it then checks only for the end, not the bytes it just received
/// (rwf2/multer#70, unreleased). With a multi-threaded runtime that is a race between this
/// handler and the connection task receiving a small upload, seen under load. A first chunk that
/// already holds the delimiter never takes that path. A body that fails or ends first is passed on
/// as it is, so multer reports it as before.
async fn from_first_delimiter<'a>(mut body: ChunkStream<'a>, boundary: &str) -> ChunkStream<'a> {
    let delimiter = format!("--{boundary}");
    let finder = memchr::memmem::Finder::new(delimiter.as_bytes());
    // The end of what was read so far that could still begin the delimiter (empty in the usual
    // case, where the first chunk starts with it and is passed on without a copy).
    let mut carried = bytes::BytesMut::new();
    let rest: Option<std::io::Error> = loop {
        match body.next().await {
            Some(Ok(chunk)) => {
                let window = if carried.is_empty() {
                    chunk
                } else {
                    carried.extend_from_slice(&chunk);
                    carried.split().freeze()
                };
                if let Some(at) = finder.find(&window) {
                    let first = futures::stream::once(async move { Ok(window.slice(at..)) });
                    return Box::pin(first.chain(body));
                }
                let keep = window.len().min(delimiter.len() - 1);
                carried.extend_from_slice(&window[window.len() - keep..]);
            }
            Some(Err(err)) => break Some(err),
            None => break None,
        }
    };
    let carried = futures::stream::once(async move { Ok(carried.freeze()) });
    Box::pin(carried.chain(futures::stream::iter(rest.map(Err))))
}

/// Who and where uploads land.
struct Target<'a> {
    users: &'a UserDb,
    /// Whose permissions the user's uploads are prepared with.
    access: FileAccess,
    user: &'a User,
    workdir: Option<&'a Path>,
    metadata: &'a BTreeMap<String, String>,
    content_length: Option<u64>,
}

impl Target<'_> {
    fn resolve(&self, raw: &str) -> Result<PathBuf, Failure> {
        expand_and_resolve(raw, self.user, self.workdir)
            .map_err(|err| Failure::bad_request(format!("error resolving path: {err}")))
    }

    /// Writes one file from `chunks` as envd's `processFile` does.
    /// Parents are made and the file opened with the user's permissions
    /// ([`crate::acting_user`]); the open file is then written by the ordinary blocking pool.
    async fn write(&self, path: &Path, mut chunks: ChunkStream<'_>) -> Result<Uploaded, Failure> {
        let (uid, gid) = (self.user.uid, self.user.gid);
        let prepared = {
            let path = path.to_path_buf();
            as_user(self.users, self.access, self.user, move || {
                prepare(&path, uid, gid)
            })
            .await
            .map_err(|err| Failure::internal(format!("upload task failed: {err}")))??
        };
        let mut file =
            tokio::io::BufWriter::with_capacity(256 << 10, tokio::fs::File::from_std(prepared));
        while let Some(chunk) = chunks.next().await {
            let chunk = chunk.map_err(|err| match err.kind() {
                std::io::ErrorKind::InvalidData => Failure::bad_request(err.to_string()),
                _ => Failure::bad_request(format!("error reading upload body: {err}")),
            })?;
            file.write_all(&chunk)
                .await
                .map_err(|err| self.write_failure(err))?;
        }
        file.flush().await.map_err(|err| self.write_failure(err))?;
        let file = file.into_inner();
        let std_file = file.into_std().await;
        let metadata = self.metadata.clone();
        let path_owned = path.to_path_buf();
        let persisted = tokio::task::spawn_blocking(move || {
            store_metadata(&std_file, &path_owned, &metadata)?;
            Ok::<_, Failure>(xattr::read(&path_owned).unwrap_or_default())
        })
        .await
        .map_err(|err| Failure::internal(format!("upload task failed: {err}")))??;
        Ok(Uploaded {
            path: path.to_string_lossy().into_owned(),
            name: base_name(path),
            r#type: "file",
            metadata: (!persisted.is_empty()).then_some(persisted),
        })
    }

    fn write_failure(&self, err: std::io::Error) -> Failure {
        if is_no_space(&err) {
            let mut message = "not enough disk space available".to_owned();
            if let Some(length) = self.content_length.filter(|length| *length > 0) {
                message = format!("attempted to write {length} bytes: {message}");
            }
            Failure(StatusCode::INSUFFICIENT_STORAGE, message)
        } else {
            Failure::internal(format!("error writing file: {err}"))
        }
    }
}

/// A filesystem failure described by `message`: 403 when the acting user lacks the permission
/// (envd acts as that user), else what `otherwise` makes of it.
fn denied_or(err: &std::io::Error, message: String, otherwise: fn(String) -> Failure) -> Failure {
    // The kind survives the context `ensure_dirs` adds (EACCES and EPERM both map to it).
    if err.kind() == std::io::ErrorKind::PermissionDenied {
        Failure(StatusCode::FORBIDDEN, message)
    } else {
        otherwise(message)
    }
}

/// Parents, directory check, ownership and the truncating open, in envd's order. Runs as the
/// acting user: an existing file it may write but not own (group-writable, say) keeps its owner,
/// since only root may give a file away. Under [`FileAccess::AsRoot`] it runs as root, and such
/// a file is given to the user, as envd does.
fn prepare(path: &Path, uid: u32, gid: u32) -> Result<std::fs::File, Failure> {
    ensure_dirs(&parent(path), uid, gid).map_err(|err| {
        let message = format!("error ensuring directories: {err}");
        if err.kind() == std::io::ErrorKind::NotADirectory {
            Failure::bad_request(message)
        } else {
            denied_or(&err, message, Failure::internal)
        }
    })?;
    let existed = match std::fs::metadata(path) {
        Ok(meta) if meta.is_dir() => {
            return Err(Failure::bad_request(format!(
                "path is a directory: {}",
                path.display()
            )));
        }
        Ok(_) => true,
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => false,
        Err(err) => {
            return Err(denied_or(
                &err,
                format!("error getting file info: {err}"),
                Failure::internal,
            ));
        }
    };
    let mut chowned = false;
    if existed {
        match std::os::unix::fs::chown(path, Some(uid), Some(gid)) {
            Ok(()) => chowned = true,
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => {}
            // Not the user's file: it keeps its owner, and the open decides.
            Err(err) if err.raw_os_error() == Some(libc::EPERM) && uid != 0 => chowned = true,
            Err(err) => {
                return Err(Failure::internal(format!(
                    "error changing file ownership: {err}"
                )));
            }
        }
    }
    let file = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o666)
        .open(path)
        .map_err(|err| {
            if is_no_space(&err) {
                Failure(
                    StatusCode::INSUFFICIENT_STORAGE,
                    format!("not enough inodes available: {err}"),
                )
            } else {
                denied_or(
                    &err,
                    format!("error opening file: {err}"),
                    Failure::internal,
                )
            }
        })?;
    if !chowned {
        std::os::unix::fs::fchown(&file, Some(uid), Some(gid))
            .map_err(|err| Failure::internal(format!("error changing file ownership: {err}")))?;
    }
    Ok(file)
}

/// Replaces the file's metadata; a filesystem without xattrs only loses the metadata.
fn store_metadata(
    file: &std::fs::File,
    path: &Path,
    metadata: &BTreeMap<String, String>,
) -> Result<(), Failure> {
    match xattr::replace(file.as_fd(), metadata) {
        Ok(()) => Ok(()),
        Err(err) if xattr::is_unsupported(&err) => {
            tracing::warn!(path = %path.display(), %err, "filesystem does not support xattrs; metadata not persisted");
            Ok(())
        }
        Err(err) if is_no_space(&err) => Err(Failure(
            StatusCode::INSUFFICIENT_STORAGE,
            format!("not enough space for file metadata: {err}"),
        )),
        Err(err) => Err(Failure::internal(format!(
            "error writing file metadata: {err}"
        ))),
    }
}

#[cfg(test)]
mod tests {
    use std::pin::Pin;
    use std::task::{Context, Poll};

    use super::*;

    const BOUNDARY: &str = "a1b2c3d4e5f6a7b8c9d0e1f2a3b4c5d6";

    fn form(preamble: &str, content: &str) -> Vec<u8> {
        format!(
            "{preamble}--{BOUNDARY}\r\nContent-Disposition: form-data; name=\"file\"; filename=\"index.html\"\r\n\r\n{content}\r\n--{BOUNDARY}--\r\n"
        )
        .into_bytes()
    }

    /// A body that is not ready when first polled and then arrives whole, its end included, in
    /// the next poll: how a small upload reaches a handler that polls just before the connection
    /// task has received it.
    struct LateWhole {
        polled: bool,
        chunks: std::collections::VecDeque<Bytes>,
    }

    impl Stream for LateWhole {
        type Item = Result<Bytes, std::io::Error>;
        fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
            if !self.polled {
                self.polled = true;
                cx.waker().wake_by_ref();
                return Poll::Pending;
            }
            Poll::Ready(self.chunks.pop_front().map(Ok))
        }
    }

    fn late_whole(chunks: &[&[u8]]) -> ChunkStream<'static> {
        Box::pin(LateWhole {
            polled: false,
            chunks: chunks.iter().map(|c| Bytes::copy_from_slice(c)).collect(),
        })
    }

    async fn fields(body: ChunkStream<'_>) -> Result<Vec<Vec<u8>>, multer::Error> {
        let mut multipart =
            multer::Multipart::new(from_first_delimiter(body, BOUNDARY).await, BOUNDARY);
        let mut fields = Vec::new();
        while let Some(field) = multipart.next_field().await? {
            fields.push(field.bytes().await?.to_vec());
        }
        Ok(fields)
    }

    /// `body`, cut in two at every byte and arriving late, yields the one field `content`.
    async fn parses_in_every_split(body: &[u8], content: &[u8]) {
        for split in 0..=body.len() {
            let (head, tail) = body.split_at(split);
            assert_eq!(
                fields(late_whole(&[head, tail])).await.unwrap(),
                vec![content.to_vec()],
                "split at {split}"
            );
        }
    }

    #[tokio::test]
    async fn a_form_arriving_whole_after_a_pending_poll_parses() {
        let body = form("", "<h1>served</h1>\n");
        // Without the priming multer reports this valid form incomplete (rwf2/multer#70).
        let unprimed = multer::Multipart::new(late_whole(&[&body]), BOUNDARY)
            .next_field()
            .await
            .map(|_| ());
        assert!(
            matches!(unprimed, Err(multer::Error::IncompleteStream)),
            "multer no longer fails this way: {unprimed:?}; the priming may be unneeded"
        );
        parses_in_every_split(&body, b"<h1>served</h1>\n").await;
    }

    #[tokio::test]
    async fn a_preamble_is_dropped_in_any_chunking() {
        let preamble = "x".repeat(1000) + "\r\n-";
        let body = form(&preamble, "content");
        parses_in_every_split(&body, b"content").await;
    }

    #[tokio::test]
    async fn a_body_without_a_delimiter_or_failing_first_is_refused_as_before() {
        for body in [&b""[..], b"no form here", b"--a1b2c3"] {
            let err = fields(late_whole(&[body])).await.unwrap_err();
            assert!(
                matches!(err, multer::Error::IncompleteStream),
                "{body:?}: {err}"
            );
        }
        let failing: ChunkStream<'static> = Box::pin(futures::stream::iter([
            Ok(Bytes::from_static(b"--a1b2")),
            Err(std::io::Error::other("connection reset")),
        ]));
        let err = fields(failing).await.unwrap_err();
        assert!(matches!(err, multer::Error::StreamReadFailed(_)), "{err}");
    }
}
