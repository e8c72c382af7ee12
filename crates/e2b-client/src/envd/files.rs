//! envd's plain HTTP routes: streamed `/files` download and upload
//! (docs/e2b-protocol.md §7.1, §7.3) and `/health` (§7.4).

use std::collections::BTreeMap;
use std::fmt;
use std::pin::Pin;
use std::task::{Context as TaskContext, Poll};
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use connectrpc::client::{ClientBody, ClientTransport};
use futures::stream::BoxStream;
use futures::{Stream, StreamExt};
use http::header::{
    ACCEPT_ENCODING, CONTENT_ENCODING, CONTENT_LENGTH, CONTENT_RANGE, CONTENT_TYPE, RANGE,
};
use http::{HeaderName, HeaderValue, Method, Request, Response, StatusCode};
use http_body::Body;
use serde::Deserialize;

use super::gzip::{self, InflateError};
use super::multipart;
use super::options::Bound;
use super::{Access, Envd};
use crate::body::{
    BodyChunks, BoxError, CollectError, SourceFailure, StreamBody, collect_limited,
    error_body_prefix,
};
use crate::classify::{self, ERROR_BODY_LIMIT, Surface};
use crate::error::{Context, Error, Result};
use crate::urlenc;

/// Largest `/files` upload response accepted (a JSON array of entries).
const UPLOAD_RESPONSE_LIMIT: usize = 4 * 1024 * 1024;

/// A byte range of a download: from `start` to `end` inclusive, or to the
/// end of the file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ByteRange {
    start: u64,
    end: Option<u64>,
}

impl ByteRange {
    /// From `start` to the end of the file.
    pub fn from(start: u64) -> Self {
        ByteRange { start, end: None }
    }

    /// From `start` to `end_inclusive`.
    pub fn new(start: u64, end_inclusive: u64) -> Self {
        ByteRange {
            start,
            end: Some(end_inclusive),
        }
    }

    fn header(&self) -> String {
        match self.end {
            Some(end) => format!("bytes={}-{end}", self.start),
            None => format!("bytes={}-", self.start),
        }
    }

    fn len(&self) -> Option<u64> {
        self.end.map(|end| end - self.start + 1)
    }
}

/// Options of a download: as [`super::CallOptions`], plus a byte range.
/// The timeout bounds the wait for the response head, not the body.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DownloadOptions {
    pub(crate) user: Option<String>,
    pub(crate) timeout: Bound,
    pub(crate) range: Option<ByteRange>,
    pub(crate) gzip: bool,
}

impl DownloadOptions {
    /// Reads as `user` (`username=` query).
    #[must_use]
    pub fn user(mut self, user: impl Into<String>) -> Self {
        self.user = Some(user.into());
        self
    }

    /// Bounds the wait for the response head.
    #[must_use]
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = Bound::Limit(timeout);
        self
    }

    /// Waits for the response head without a bound.
    #[must_use]
    pub fn no_timeout(mut self) -> Self {
        self.timeout = Bound::Unlimited;
        self
    }

    /// Reads only `range` (sent as `Range`; a server that ignores it is
    /// corrected on the client side).
    #[must_use]
    pub fn range(mut self, range: ByteRange) -> Self {
        self.range = Some(range);
        self
    }

    /// Asks for a gzip-compressed transfer (`Accept-Encoding: gzip`),
    /// decompressed here as it streams; worth it for text over slow links.
    /// envd ignores it for ranges. A gzip response is decompressed whether
    /// or not it was asked for.
    #[must_use]
    pub fn gzip(mut self, gzip: bool) -> Self {
        self.gzip = gzip;
        self
    }
}

/// Options of an upload.
///
/// The timeout bounds the whole upload including the body; by default
/// there is none (a large upload takes as long as it takes).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct UploadOptions {
    pub(crate) user: Option<String>,
    pub(crate) timeout: Option<Duration>,
    pub(crate) metadata: BTreeMap<String, String>,
    pub(crate) content_length: Option<u64>,
    pub(crate) gzip: bool,
}

impl UploadOptions {
    /// Writes as `user`: the file and new parent directories are owned by
    /// them (`username=` query).
    #[must_use]
    pub fn user(mut self, user: impl Into<String>) -> Self {
        self.user = Some(user.into());
        self
    }

    /// Bounds the whole upload.
    #[must_use]
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = Some(timeout);
        self
    }

    /// Stores `key = value` as file metadata (`X-Metadata-<key>`, envd ≥
    /// 0.6.2; replaces earlier metadata of the file). Printable ASCII only.
    #[must_use]
    pub fn metadata(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.metadata.insert(key.into(), value.into());
        self
    }

    /// Declares the body's exact length (sent as `Content-Length` instead of
    /// chunked encoding). The stream must then yield exactly that many bytes.
    /// Not combinable with [`UploadOptions::gzip`].
    #[must_use]
    pub fn content_length(mut self, length: u64) -> Self {
        self.content_length = Some(length);
        self
    }

    /// Compresses the body on the fly (`Content-Encoding: gzip`; envd
    /// decompresses it); worth it for text over slow links.
    #[must_use]
    pub fn gzip(mut self, gzip: bool) -> Self {
        self.gzip = gzip;
        self
    }
}

/// One file of a multi-file upload.
pub struct UploadPart {
    path: String,
    body: BoxStream<'static, Result<Bytes, BoxError>>,
}

impl fmt::Debug for UploadPart {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("UploadPart")
            .field("path", &self.path)
            .finish_non_exhaustive()
    }
}

impl UploadPart {
    /// The file at `path` (absolute, or relative to the user's home) with
    /// content streamed from `body`.
    pub fn new<S, E>(path: impl Into<String>, body: S) -> Self
    where
        S: Stream<Item = Result<Bytes, E>> + Send + 'static,
        E: Into<BoxError>,
    {
        UploadPart {
            path: path.into(),
            body: body.map(|chunk| chunk.map_err(Into::into)).boxed(),
        }
    }

    /// The file at `path` with content `bytes`.
    pub fn bytes(path: impl Into<String>, bytes: Bytes) -> Self {
        UploadPart::new(
            path,
            futures::stream::once(async move { Ok::<_, BoxError>(bytes) }),
        )
    }
}

/// The entry envd wrote, from its upload response.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct WriteInfo {
    /// Absolute path written.
    pub path: String,
    /// Base name.
    pub name: String,
    /// Entry type as envd names it (`"file"`).
    #[serde(rename = "type", default)]
    pub entry_type: Option<String>,
    /// The metadata stored with the file, if any.
    #[serde(default)]
    pub metadata: Option<BTreeMap<String, String>>,
}

/// A file's content as it arrives, chunk by chunk; nothing is retained.
/// Dropping it aborts the request.
pub struct Download {
    context: Context,
    content_length: Option<u64>,
    content_type: Option<String>,
    chunks: BoxStream<'static, Result<Bytes>>,
}

impl fmt::Debug for Download {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Download")
            .field("content_length", &self.content_length)
            .field("content_type", &self.content_type)
            .finish_non_exhaustive()
    }
}

impl Download {
    /// The number of bytes that will be delivered, when the server said.
    pub fn content_length(&self) -> Option<u64> {
        self.content_length
    }

    /// The server's guess of the content type.
    pub fn content_type(&self) -> Option<&str> {
        self.content_type.as_deref()
    }

    /// Collects the whole content, failing beyond `limit` bytes.
    ///
    /// # Errors
    /// The stream's first error, or [`Error::InvalidArgument`] past `limit`.
    pub async fn into_bytes(mut self, limit: usize) -> Result<Bytes> {
        let mut buf = BytesMut::new();
        while let Some(chunk) = self.chunks.next().await {
            let chunk = chunk?;
            if buf.len().saturating_add(chunk.len()) > limit {
                return Err(Error::invalid_argument(
                    self.context.clone(),
                    format!("the content exceeds the {limit}-byte limit"),
                ));
            }
            buf.extend_from_slice(&chunk);
        }
        Ok(buf.freeze())
    }
}

impl Stream for Download {
    type Item = Result<Bytes>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut TaskContext<'_>) -> Poll<Option<Self::Item>> {
        self.chunks.poll_next_unpin(cx)
    }
}

/// Applies a requested range to a full (200) body, for servers that ignore
/// `Range`: skips `skip` bytes, then passes at most `take`.
struct RangeFilter<S> {
    inner: S,
    skip: u64,
    take: Option<u64>,
}

impl<S: Stream<Item = Result<Bytes>> + Unpin> Stream for RangeFilter<S> {
    type Item = Result<Bytes>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut TaskContext<'_>) -> Poll<Option<Self::Item>> {
        loop {
            if self.take == Some(0) {
                return Poll::Ready(None);
            }
            let mut chunk = match self.inner.poll_next_unpin(cx) {
                Poll::Ready(Some(Ok(chunk))) => chunk,
                other => return other,
            };
            if self.skip > 0 {
                let cut = usize::try_from(self.skip)
                    .unwrap_or(usize::MAX)
                    .min(chunk.len());
                self.skip -= cut as u64;
                chunk = chunk.slice(cut..);
                if chunk.is_empty() {
                    continue;
                }
            }
            if let Some(take) = self.take {
                let keep = usize::try_from(take).unwrap_or(usize::MAX).min(chunk.len());
                chunk.truncate(keep);
                self.take = Some(take - keep as u64);
            }
            return Poll::Ready(Some(Ok(chunk)));
        }
    }
}

impl<T> Envd<T>
where
    T: ClientTransport,
    T::ResponseBody: Unpin,
    <T::ResponseBody as Body>::Error: fmt::Display,
{
    /// Streams the content of file `path` (`GET /files`).
    ///
    /// The future resolves once the response head arrived (bounded by the
    /// timeout); the body then streams without a bound. A range that starts
    /// at or past the end of the file yields an empty download.
    ///
    /// # Errors
    /// [`Error::NotFound`] for a missing file, [`Error::InvalidArgument`]
    /// for a directory or a bad range, [`Error::Authentication`] for an
    /// unknown user, [`Error::SandboxNotFound`] when the sandbox is not
    /// running.
    pub async fn download(&self, path: &str, options: &DownloadOptions) -> Result<Download> {
        let context = Context::new("download", path);
        if path.is_empty() {
            return Err(Error::invalid_argument(context, "the path is empty"));
        }
        if let Some(ByteRange {
            start,
            end: Some(end),
        }) = options.range
            && end < start
        {
            return Err(Error::invalid_argument(
                context,
                format!("range end {end} is before its start {start}"),
            ));
        }
        let user = self.effective_user(&context, Access::AsUser(options.user.as_deref()))?;
        let mut request = Request::builder()
            .method(Method::GET)
            .uri(files_uri(&context, path, user)?);
        if let Some(range) = options.range {
            request = request.header(RANGE, range.header());
        }
        if options.gzip {
            request = request.header(ACCEPT_ENCODING, "gzip");
        }
        let request = request
            .body(connectrpc::client::full_body(Bytes::new()))
            .map_err(|e| Error::invalid_argument(context.clone(), e.to_string()))?;

        let timeout = options.timeout.resolve(self.request_timeout);
        let response = self.send_files(&context, request, timeout, None).await?;
        let status = response.status();
        let content_type = header_str(&response, CONTENT_TYPE).map(str::to_owned);
        let content_length =
            header_str(&response, CONTENT_LENGTH).and_then(|v| v.parse::<u64>().ok());
        let content_range = header_str(&response, CONTENT_RANGE).map(str::to_owned);
        let gzipped = match header_str(&response, CONTENT_ENCODING).map(str::trim) {
            None | Some("") | Some("identity") => false,
            Some(encoding) if encoding.eq_ignore_ascii_case("gzip") => true,
            Some(other) => {
                return Err(Error::protocol(
                    context,
                    format!("unsupported Content-Encoding {other:?}"),
                ));
            }
        };

        if status == StatusCode::RANGE_NOT_SATISFIABLE && options.range.is_some() {
            return Ok(Download {
                context,
                content_length: Some(0),
                content_type,
                chunks: futures::stream::empty().boxed(),
            });
        }
        if !status.is_success() {
            return Err(self.status_error(context, response).await);
        }

        let body_context = context.clone();
        let broke_off = move |message: String| Error::Transport {
            context: body_context.clone(),
            message: format!("the response body broke off: {message}"),
            source: None,
        };
        let raw = BodyChunks::new(response.into_body());
        let (chunks, content_length): (BoxStream<'static, Result<Bytes>>, Option<u64>) = if gzipped
        {
            let corrupt_context = context.clone();
            let inflated = gzip::decompress(raw).map(move |chunk| {
                chunk.map_err(|e| match e {
                    InflateError::Input(message) => broke_off(message),
                    InflateError::Corrupt(e) => Error::protocol(
                        corrupt_context.clone(),
                        format!("corrupt gzip content: {e}"),
                    ),
                })
            });
            // The length on the wire is the compressed one.
            (inflated.boxed(), None)
        } else {
            (
                raw.map(move |chunk| chunk.map_err(&broke_off)).boxed(),
                content_length,
            )
        };
        let (chunks, content_length) = match (status, options.range) {
            (StatusCode::PARTIAL_CONTENT, Some(range)) => {
                check_content_range(&context, range, &content_range)?;
                (chunks, content_length)
            }
            (StatusCode::PARTIAL_CONTENT, None) => {
                return Err(Error::protocol(
                    context,
                    "206 Partial Content without a requested range",
                ));
            }
            (_, Some(range)) => {
                // The server sent the whole file: cut the range out here.
                let filtered = RangeFilter {
                    inner: chunks,
                    skip: range.start,
                    take: range.len(),
                };
                let length = content_length.map(|total| {
                    let available = total.saturating_sub(range.start);
                    range.len().map_or(available, |len| len.min(available))
                });
                (filtered.boxed(), length)
            }
            (_, None) => (chunks, content_length),
        };
        Ok(Download {
            context,
            content_length,
            content_type,
            chunks,
        })
    }

    /// Writes file `path` from `body`, streamed as it is polled
    /// (`POST /files`, `application/octet-stream`, envd ≥ 0.5.7). Parent
    /// directories are created; an existing file is truncated first.
    ///
    /// Dropping the future aborts the upload; the file may then be left
    /// partially written.
    ///
    /// # Errors
    /// [`Error::UploadSource`] when `body` yields an error;
    /// [`Error::InvalidArgument`] for a bad path or metadata (nothing is
    /// sent) or a path envd rejects (e.g. a directory);
    /// [`Error::NotEnoughSpace`] when the disk is full.
    pub async fn upload<S, E>(
        &self,
        path: &str,
        body: S,
        options: &UploadOptions,
    ) -> Result<WriteInfo>
    where
        S: Stream<Item = Result<Bytes, E>> + Send + 'static,
        E: Into<BoxError> + 'static,
    {
        let context = Context::new("upload", path);
        if path.is_empty() {
            return Err(Error::invalid_argument(context, "the path is empty"));
        }
        if options.gzip && options.content_length.is_some() {
            return Err(Error::invalid_argument(
                context,
                "a content length cannot be declared for a gzip-compressed upload",
            ));
        }
        let user = self.effective_user(&context, Access::AsUser(options.user.as_deref()))?;
        let mut request = Request::builder()
            .method(Method::POST)
            .uri(files_uri(&context, path, user)?)
            .header(CONTENT_TYPE, "application/octet-stream");
        if let Some(length) = options.content_length {
            request = request.header(CONTENT_LENGTH, length);
        }
        if options.gzip {
            request = request.header(CONTENT_ENCODING, "gzip");
        }
        for (name, value) in metadata_headers(&context, &options.metadata)? {
            request = request.header(name, value);
        }
        let failure = SourceFailure::default();
        let body = if options.gzip {
            StreamBody::new(gzip::compress(body), failure.clone(), None).boxed()
        } else {
            StreamBody::new(body, failure.clone(), options.content_length).boxed()
        };
        let request = request
            .body(body)
            .map_err(|e| Error::invalid_argument(context.clone(), e.to_string()))?;
        let mut written = self
            .upload_request(&context, request, options.timeout, failure, 1)
            .await?;
        Ok(written.remove(0))
    }

    /// Writes several files in one multipart request (each part named
    /// `file`, its path as the file name), streaming each part's content in
    /// turn. Results come in part order. An empty list sends nothing.
    ///
    /// # Errors
    /// As [`Envd::upload`]; [`Error::InvalidArgument`] for an empty path, a
    /// path with CR, LF or NUL, or two parts with the same path (nothing is
    /// sent).
    pub async fn upload_files(
        &self,
        parts: Vec<UploadPart>,
        options: &UploadOptions,
    ) -> Result<Vec<WriteInfo>> {
        let subject = match parts.as_slice() {
            [] => return Ok(Vec::new()),
            [one] => one.path.clone(),
            [first, ..] => format!("{} and {} more", first.path, parts.len() - 1),
        };
        let context = Context::new("upload files", subject);
        if options.content_length.is_some() {
            return Err(Error::invalid_argument(
                context,
                "a content length cannot be declared for a multi-file upload",
            ));
        }
        let mut seen = std::collections::HashSet::new();
        for part in &parts {
            multipart::check_file_name(&part.path).map_err(|why| {
                Error::invalid_argument(context.clone(), format!("file {:?}: {why}", part.path))
            })?;
            if !seen.insert(part.path.as_str()) {
                return Err(Error::invalid_argument(
                    context,
                    format!("file {:?} appears twice", part.path),
                ));
            }
        }
        let user = self.effective_user(&context, Access::AsUser(options.user.as_deref()))?;
        let query = match user {
            Some(user) => format!("/files?{}", urlenc::query([("username", user)])),
            None => "/files".to_owned(),
        };
        let boundary = multipart::new_boundary();
        let mut request = Request::builder()
            .method(Method::POST)
            .uri(query)
            .header(CONTENT_TYPE, multipart::content_type(&boundary));
        if options.gzip {
            request = request.header(CONTENT_ENCODING, "gzip");
        }
        for (name, value) in metadata_headers(&context, &options.metadata)? {
            request = request.header(name, value);
        }
        let count = parts.len();
        let parts = parts
            .into_iter()
            .map(|part| multipart::Part {
                path: part.path,
                body: part.body,
            })
            .collect();
        let failure = SourceFailure::default();
        let multipart = multipart::body(boundary, parts);
        let body = if options.gzip {
            StreamBody::new(gzip::compress(multipart), failure.clone(), None).boxed()
        } else {
            StreamBody::new(multipart, failure.clone(), None).boxed()
        };
        let request = request
            .body(body)
            .map_err(|e| Error::invalid_argument(context.clone(), e.to_string()))?;
        self.upload_request(&context, request, options.timeout, failure, count)
            .await
    }

    /// Whether envd answers: `true` on 2xx, `false` on the edge proxy's 502
    /// (the sandbox is not running), as the SDKs' `isRunning`.
    ///
    /// # Errors
    /// Transport failures and any other status.
    pub async fn health(&self) -> Result<bool> {
        let context = Context::new("check health of sandbox", self.sandbox_id.to_string());
        let request = Request::builder()
            .method(Method::GET)
            .uri("/health")
            .body(connectrpc::client::full_body(Bytes::new()))
            .map_err(|e| Error::invalid_argument(context.clone(), e.to_string()))?;
        let response = self
            .send_files(&context, request, self.request_timeout, None)
            .await?;
        if response.status().is_success() {
            return Ok(true);
        }
        if response.status() == StatusCode::BAD_GATEWAY {
            return Ok(false);
        }
        Err(self.status_error(context, response).await)
    }

    async fn upload_request(
        &self,
        context: &Context,
        request: Request<ClientBody>,
        timeout: Option<Duration>,
        failure: SourceFailure,
        expected: usize,
    ) -> Result<Vec<WriteInfo>> {
        let response = self
            .send_files(context, request, timeout, Some(&failure))
            .await?;
        if !response.status().is_success() {
            return Err(self.status_error(context.clone(), response).await);
        }
        let body = match timeout {
            Some(limit) => tokio::time::timeout(
                limit,
                collect_limited(response.into_body(), UPLOAD_RESPONSE_LIMIT),
            )
            .await
            .map_err(|_| {
                Error::timeout(
                    context.clone(),
                    "the upload response did not complete in time",
                )
            })?,
            None => collect_limited(response.into_body(), UPLOAD_RESPONSE_LIMIT).await,
        };
        let body = body.map_err(|e| match e {
            CollectError::TooLarge(limit) => Error::protocol(
                context.clone(),
                format!("the upload response exceeds {limit} bytes"),
            ),
            CollectError::Read(message) => Error::Transport {
                context: context.clone(),
                message: format!("the upload response broke off: {message}"),
                source: None,
            },
        })?;
        let written: Vec<WriteInfo> = serde_json::from_slice(&body).map_err(|e| {
            Error::protocol(
                context.clone(),
                format!("the upload response is not a list of entries: {e}"),
            )
        })?;
        if written.len() != expected {
            return Err(Error::protocol(
                context.clone(),
                format!(
                    "envd reported {} written entries for {expected} files",
                    written.len()
                ),
            ));
        }
        Ok(written)
    }

    /// Sends a `/files` or `/health` request through the transport, bounded
    /// by `timeout` until the response head. A failure of the caller's
    /// upload stream wins over the transport's view of it.
    async fn send_files(
        &self,
        context: &Context,
        request: Request<ClientBody>,
        timeout: Option<Duration>,
        failure: Option<&SourceFailure>,
    ) -> Result<Response<T::ResponseBody>> {
        let send = self.transport.inner().send(request);
        let sent = match timeout {
            Some(limit) => tokio::time::timeout(limit, send).await.map_err(|_| {
                Error::timeout(
                    context.clone(),
                    format!("no response within {} ms", limit.as_millis()),
                )
            })?,
            None => send.await,
        };
        sent.map_err(|e| {
            if let Some(message) = failure.and_then(SourceFailure::get) {
                return Error::UploadSource {
                    context: context.clone(),
                    message: message.to_owned(),
                };
            }
            classify::from_send_error(context.clone(), &self.sandbox_id, &e)
        })
    }

    async fn status_error(&self, context: Context, response: Response<T::ResponseBody>) -> Error {
        let status = response.status();
        let body = error_body_prefix(response.into_body(), ERROR_BODY_LIMIT).await;
        classify::from_http_status(
            context,
            Surface::Envd {
                sandbox_id: &self.sandbox_id,
            },
            status,
            &body,
        )
    }
}

/// `/files?path=…[&username=…]`.
fn files_uri(context: &Context, path: &str, user: Option<&str>) -> Result<http::Uri> {
    let mut pairs = vec![("path", path)];
    if let Some(user) = user {
        pairs.push(("username", user));
    }
    format!("/files?{}", urlenc::query(pairs))
        .parse()
        .map_err(|e| {
            Error::invalid_argument(context.clone(), format!("cannot form the request URI: {e}"))
        })
}

/// `X-Metadata-<key>: <value>` headers; keys and values printable ASCII.
fn metadata_headers(
    context: &Context,
    metadata: &BTreeMap<String, String>,
) -> Result<Vec<(HeaderName, HeaderValue)>> {
    metadata
        .iter()
        .map(|(key, value)| {
            let printable = |s: &str| s.bytes().all(|b| (0x20..0x7f).contains(&b));
            if key.is_empty() || !printable(key) || !printable(value) {
                return Err(Error::invalid_argument(
                    context.clone(),
                    format!(
                        "metadata {key:?} = {value:?} is not printable ASCII or has an empty key"
                    ),
                ));
            }
            let name = HeaderName::try_from(format!("x-metadata-{key}")).map_err(|_| {
                Error::invalid_argument(
                    context.clone(),
                    format!("metadata key {key:?} is not a valid header name"),
                )
            })?;
            let value = HeaderValue::from_str(value).map_err(|_| {
                Error::invalid_argument(
                    context.clone(),
                    format!("metadata value of {key:?} is not a valid header value"),
                )
            })?;
            Ok((name, value))
        })
        .collect()
}

fn header_str<B>(response: &Response<B>, name: HeaderName) -> Option<&str> {
    response.headers().get(name).and_then(|v| v.to_str().ok())
}

/// A 206 must cover the requested start (`Content-Range: bytes a-b/n`).
fn check_content_range(context: &Context, range: ByteRange, header: &Option<String>) -> Result<()> {
    let Some(value) = header else {
        return Err(Error::protocol(
            context.clone(),
            "206 Partial Content without Content-Range",
        ));
    };
    let start = value
        .strip_prefix("bytes ")
        .and_then(|rest| rest.split('-').next())
        .and_then(|start| start.trim().parse::<u64>().ok());
    match start {
        Some(start) if start == range.start => Ok(()),
        _ => Err(Error::protocol(
            context.clone(),
            format!(
                "Content-Range {value:?} does not start at the requested byte {}",
                range.start
            ),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn range_headers() {
        assert_eq!(ByteRange::from(10).header(), "bytes=10-");
        assert_eq!(ByteRange::new(0, 99).header(), "bytes=0-99");
        assert_eq!(ByteRange::new(5, 5).len(), Some(1));
    }

    #[tokio::test]
    async fn range_filter_skips_and_truncates_across_chunks() {
        let chunks: Vec<Result<Bytes>> = vec![
            Ok(Bytes::from_static(b"0123")),
            Ok(Bytes::from_static(b"4567")),
            Ok(Bytes::from_static(b"89")),
        ];
        let filter = RangeFilter {
            inner: futures::stream::iter(chunks).boxed(),
            skip: 3,
            take: Some(4),
        };
        let out: Vec<Bytes> = filter.map(|c| c.unwrap()).collect().await;
        let joined: Vec<u8> = out.concat();
        assert_eq!(joined, b"3456");
    }

    #[test]
    fn files_uri_encodes_path_and_user() {
        let context = Context::new("download", "x");
        assert_eq!(
            files_uri(&context, "/home/user/a b?.txt", Some("root"))
                .unwrap()
                .to_string(),
            "/files?path=%2Fhome%2Fuser%2Fa%20b%3F.txt&username=root"
        );
        assert_eq!(
            files_uri(&context, "~/x", None).unwrap().to_string(),
            "/files?path=~%2Fx"
        );
    }

    #[test]
    fn metadata_must_be_printable_ascii() {
        let context = Context::new("upload", "/x");
        let ok: BTreeMap<String, String> = [("Owner".to_owned(), "dsh v1".to_owned())].into();
        let headers = metadata_headers(&context, &ok).unwrap();
        assert_eq!(headers[0].0.as_str(), "x-metadata-owner");
        for (key, value) in [("", "v"), ("k", "é"), ("k\n", "v"), ("a b", "v")] {
            let bad: BTreeMap<String, String> = [(key.to_owned(), value.to_owned())].into();
            assert!(
                matches!(
                    metadata_headers(&context, &bad),
                    Err(Error::InvalidArgument { .. })
                ),
                "{key:?}={value:?}"
            );
        }
    }

    #[test]
    fn content_range_must_match_the_request() {
        let context = Context::new("download", "x");
        let range = ByteRange::from(10);
        check_content_range(&context, range, &Some("bytes 10-19/20".into())).unwrap();
        assert!(check_content_range(&context, range, &Some("bytes 0-19/20".into())).is_err());
        assert!(check_content_range(&context, range, &None).is_err());
    }

    #[test]
    fn write_info_parses_envd_responses() {
        let parsed: Vec<WriteInfo> = serde_json::from_str(
            r#"[{"path":"/home/user/a","name":"a","type":"file","metadata":{"k":"v"},"extra":1}]"#,
        )
        .unwrap();
        assert_eq!(parsed[0].entry_type.as_deref(), Some("file"));
        assert_eq!(parsed[0].metadata.as_ref().unwrap()["k"], "v");
    }
}
