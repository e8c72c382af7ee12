//! `GET /files` (docs/e2b-protocol.md §7.1): the file at `path`, gzip-streamed when the client
//! accepts gzip and sent no range or conditional header, otherwise served with range and
//! conditional support like Go's `http.ServeContent`. The body is streamed from disk, never
//! buffered whole.

use std::io::{SeekFrom, Write as _};
use std::sync::Arc;

use bytes::Bytes;
use flate2::Compression;
use flate2::write::GzEncoder;
use futures::{Stream, StreamExt};
use http::{HeaderValue, Request, Response, StatusCode, header};
use http_body_util::{BodyExt, StreamBody};
use hyper::body::{Frame, Incoming};
use tokio::io::{AsyncReadExt, AsyncSeekExt};

use super::encoding::{self, Coding};
use super::ranges::{self, ByteRange, Decision, RangeError};
use super::response::{Body, BoxError, json_error, text_error};
use super::{content_type, files_prologue};
use crate::acting_user::as_user;
use crate::auth::Operation;
use crate::paths::{base_name, expand_and_resolve};
use crate::state::Daemon;

/// Download chunk size: large enough to keep per-read overhead (a blocking-pool hop) small.
const READ_CHUNK: usize = 256 << 10;

pub(crate) async fn get_files(daemon: &Arc<Daemon>, request: Request<Incoming>) -> Response<Body> {
    let files = match files_prologue(daemon, &request, Operation::Read) {
        Ok(files) => files,
        Err(response) => return *response,
    };
    let raw_path = files.path().to_owned();
    let path = match expand_and_resolve(&raw_path, &files.user, daemon.default_workdir().as_deref())
    {
        Ok(path) => path,
        Err(err) => {
            return json_error(
                StatusCode::BAD_REQUEST,
                format!("error expanding and resolving path '{raw_path}': {err}"),
            );
        }
    };
    // Opened with the acting user's permissions, or root's under FileAccess::AsRoot
    // (crate::acting_user); reading an open file needs no further permission, so the content
    // streams from the ordinary blocking pool.
    let opened = {
        let path = path.clone();
        let access = daemon.options.file_access;
        as_user(&daemon.users, access, &files.user, move || {
            let meta = std::fs::metadata(&path)?;
            // A directory is refused below, before anything is opened.
            let file = (!meta.is_dir())
                .then(|| std::fs::File::open(&path))
                .transpose()?;
            Ok((meta, file))
        })
        .await
    };
    let (meta, file) = match opened.and_then(|opened| opened) {
        Ok(opened) => opened,
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => {
            return json_error(
                StatusCode::NOT_FOUND,
                format!("path '{}' does not exist", path.display()),
            );
        }
        Err(err) if err.kind() == std::io::ErrorKind::PermissionDenied => {
            return json_error(
                StatusCode::FORBIDDEN,
                format!(
                    "error opening file '{}' as user {}: {err}",
                    path.display(),
                    files.user.name
                ),
            );
        }
        Err(err) => {
            return json_error(
                StatusCode::INTERNAL_SERVER_ERROR,
                format!("error opening file '{}': {err}", path.display()),
            );
        }
    };
    let Some(file) = file else {
        return json_error(
            StatusCode::BAD_REQUEST,
            format!("path '{}' is a directory", path.display()),
        );
    };
    let file = tokio::fs::File::from_std(file);
    let headers = request.headers();
    let mut coding = match encoding::negotiate_download(headers) {
        Ok(coding) => coding,
        Err(message) => return json_error(StatusCode::NOT_ACCEPTABLE, message),
    };
    let range_or_conditional = ["range", "if-modified-since", "if-none-match", "if-range"]
        .iter()
        .any(|name| headers.get(*name).is_some_and(|value| !value.is_empty()));
    if range_or_conditional {
        if !encoding::identity_acceptable(headers) {
            return json_error(
                StatusCode::NOT_ACCEPTABLE,
                "identity encoding not acceptable for Range or conditional request",
            );
        }
        coding = Coding::Identity;
    }
    let mut response = match coding {
        Coding::Gzip => gzip_response(file, &raw_path),
        Coding::Identity => {
            serve_content(
                request.method(),
                headers,
                file,
                &raw_path,
                meta.len(),
                meta.modified().ok(),
            )
            .await
        }
    };
    let response_headers = response.headers_mut();
    response_headers.insert(header::VARY, HeaderValue::from_static("Accept-Encoding"));
    if let Ok(disposition) = HeaderValue::from_str(&content_disposition(&base_name(&path))) {
        response_headers.insert(header::CONTENT_DISPOSITION, disposition);
    }
    response
}

/// `inline; filename=…` as Go's `mime.FormatMediaType` writes it: a token as is, other ASCII
/// quoted, non-ASCII in RFC 2231 form.
fn content_disposition(name: &str) -> String {
    let is_token_char =
        |c: char| c.is_ascii() && !c.is_ascii_control() && !" ()<>@,;:\\\"/[]?=".contains(c);
    if !name.is_empty() && name.chars().all(is_token_char) {
        return format!("inline; filename={name}");
    }
    if name.is_ascii() {
        let escaped: String = name
            .chars()
            .flat_map(|c| match c {
                '"' | '\\' => vec!['\\', c],
                c => vec![c],
            })
            .collect();
        return format!("inline; filename=\"{escaped}\"");
    }
    let encoded: String = name
        .bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() || b"!#$&+-.^_`|~".contains(&b) {
                char::from(b).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect();
    format!("inline; filename*=utf-8''{encoded}")
}

fn body_from(stream: impl Stream<Item = Result<Bytes, std::io::Error>> + Send + 'static) -> Body {
    StreamBody::new(stream.map(|chunk| {
        chunk
            .map(Frame::data)
            .map_err(|err| Box::new(err) as BoxError)
    }))
    .boxed_unsync()
}

/// The next chunk of at most `remaining` bytes (all of the rest when `None`).
async fn read_chunk(
    file: &mut tokio::fs::File,
    remaining: Option<u64>,
) -> std::io::Result<Option<Bytes>> {
    let want = remaining.map_or(READ_CHUNK, |left| left.min(READ_CHUNK as u64) as usize);
    if want == 0 {
        return Ok(None);
    }
    let mut buf = vec![0u8; want];
    let n = file.read(&mut buf).await?;
    if n == 0 {
        return Ok(None);
    }
    buf.truncate(n);
    Ok(Some(Bytes::from(buf)))
}

/// Streams `length` bytes of `file` from its current position (to the end when `None`).
fn file_stream(
    file: tokio::fs::File,
    length: Option<u64>,
) -> impl Stream<Item = Result<Bytes, std::io::Error>> + Send + 'static {
    futures::stream::try_unfold((file, length), |(mut file, remaining)| async move {
        Ok(read_chunk(&mut file, remaining).await?.map(|chunk| {
            let left = remaining.map(|left| left - chunk.len() as u64);
            (chunk, (file, left))
        }))
    })
}

fn gzip_response(file: tokio::fs::File, raw_path: &str) -> Response<Body> {
    let encoder = GzEncoder::new(Vec::new(), Compression::default());
    let stream =
        futures::stream::try_unfold((file, Some(encoder)), |(mut file, encoder)| async move {
            let Some(mut encoder) = encoder else {
                return Ok(None);
            };
            loop {
                match read_chunk(&mut file, None).await? {
                    Some(chunk) => {
                        encoder.write_all(&chunk)?;
                        let compressed = std::mem::take(encoder.get_mut());
                        if !compressed.is_empty() {
                            return Ok(Some((Bytes::from(compressed), (file, Some(encoder)))));
                        }
                    }
                    None => {
                        let rest = encoder.finish()?;
                        return Ok(Some((Bytes::from(rest), (file, None))));
                    }
                }
            }
        });
    let mut response = Response::new(body_from(stream));
    let content_type = content_type::by_extension(raw_path).unwrap_or("application/octet-stream");
    let headers = response.headers_mut();
    headers.insert(header::CONTENT_ENCODING, HeaderValue::from_static("gzip"));
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    response
}

/// Go's `http.ServeContent` for a file of `size` bytes named `raw_path`.
async fn serve_content(
    method: &http::Method,
    headers: &http::HeaderMap,
    mut file: tokio::fs::File,
    raw_path: &str,
    size: u64,
    modified: Option<std::time::SystemTime>,
) -> Response<Body> {
    let last_modified = modified
        .filter(|time| *time != std::time::UNIX_EPOCH)
        .map(httpdate::fmt_http_date);
    let range = match ranges::evaluate(method, headers, modified) {
        Decision::Serve { range } => range,
        Decision::NotModified => {
            let mut response = Response::new(super::response::empty());
            *response.status_mut() = StatusCode::NOT_MODIFIED;
            if let Some(date) = &last_modified
                && let Ok(value) = HeaderValue::from_str(date)
            {
                response.headers_mut().insert(header::LAST_MODIFIED, value);
            }
            return response;
        }
        Decision::PreconditionFailed => {
            return text_error(StatusCode::PRECONDITION_FAILED, "Precondition Failed");
        }
    };

    let content_type = match content_type::by_extension(raw_path) {
        Some(known) => known,
        None => {
            let mut head = vec![0u8; 512];
            let mut filled = 0;
            while filled < head.len() {
                match file.read(&mut head[filled..]).await {
                    Ok(0) => break,
                    Ok(n) => filled += n,
                    Err(err) => {
                        return text_error(
                            StatusCode::INTERNAL_SERVER_ERROR,
                            &format!("seeker can't seek: {err}"),
                        );
                    }
                }
            }
            if let Err(err) = file.seek(SeekFrom::Start(0)).await {
                return text_error(
                    StatusCode::INTERNAL_SERVER_ERROR,
                    &format!("seeker can't seek: {err}"),
                );
            }
            content_type::sniff(&head[..filled])
        }
    };

    let ranges = match range.as_deref().map(|spec| ranges::parse(spec, size)) {
        None => Vec::new(),
        Some(Ok(ranges)) => ranges,
        Some(Err(err)) => {
            let mut response = text_error(StatusCode::RANGE_NOT_SATISFIABLE, &err.to_string());
            if err == RangeError::NoOverlap
                && let Ok(value) = HeaderValue::from_str(&format!("bytes */{size}"))
            {
                response.headers_mut().insert(header::CONTENT_RANGE, value);
            }
            return response;
        }
    };
    // A request for more bytes than the file has gets the whole file instead.
    let ranges = if ranges.iter().map(|r| r.length).sum::<u64>() > size {
        Vec::new()
    } else {
        ranges
    };

    let head_only = method == http::Method::HEAD;
    let (status, body, length, content_range, content_type) = match ranges.as_slice() {
        [] => (
            StatusCode::OK,
            file_body(file, Some(size), head_only),
            size,
            None,
            content_type.to_owned(),
        ),
        [single] => {
            if let Err(err) = file.seek(SeekFrom::Start(single.start)).await {
                return text_error(StatusCode::RANGE_NOT_SATISFIABLE, &err.to_string());
            }
            (
                StatusCode::PARTIAL_CONTENT,
                file_body(file, Some(single.length), head_only),
                single.length,
                Some(single.content_range(size)),
                content_type.to_owned(),
            )
        }
        several => {
            let boundary = multipart_boundary();
            let (body, length) = multipart_body(
                file,
                several.to_vec(),
                size,
                content_type,
                &boundary,
                head_only,
            );
            (
                StatusCode::PARTIAL_CONTENT,
                body,
                length,
                None,
                format!("multipart/byteranges; boundary={boundary}"),
            )
        }
    };
    let mut response = Response::new(body);
    *response.status_mut() = status;
    let response_headers = response.headers_mut();
    if let Ok(value) = HeaderValue::from_str(&content_type) {
        response_headers.insert(header::CONTENT_TYPE, value);
    }
    if let Some(date) = &last_modified
        && let Ok(value) = HeaderValue::from_str(date)
    {
        response_headers.insert(header::LAST_MODIFIED, value);
    }
    response_headers.insert(header::ACCEPT_RANGES, HeaderValue::from_static("bytes"));
    response_headers.insert(header::CONTENT_LENGTH, HeaderValue::from(length));
    if let Some(content_range) = content_range
        && let Ok(value) = HeaderValue::from_str(&content_range)
    {
        response_headers.insert(header::CONTENT_RANGE, value);
    }
    response
}

fn file_body(file: tokio::fs::File, length: Option<u64>, head_only: bool) -> Body {
    if head_only {
        return super::response::empty();
    }
    body_from(file_stream(file, length))
}

fn multipart_boundary() -> String {
    use rand::Rng as _;
    let mut rng = rand::rng();
    (0..30)
        .map(|_| format!("{:x}", rng.random_range(0..16u8)))
        .collect()
}

/// `multipart/byteranges` with one part per range; returns the body and its exact length.
fn multipart_body(
    file: tokio::fs::File,
    ranges: Vec<ByteRange>,
    size: u64,
    content_type: &str,
    boundary: &str,
    head_only: bool,
) -> (Body, u64) {
    let part_header = |index: usize, range: &ByteRange| {
        let lead = if index == 0 { "" } else { "\r\n" };
        format!(
            "{lead}--{boundary}\r\nContent-Range: {}\r\nContent-Type: {content_type}\r\n\r\n",
            range.content_range(size)
        )
    };
    let closing = format!("\r\n--{boundary}--\r\n");
    let length = ranges
        .iter()
        .enumerate()
        .map(|(index, range)| part_header(index, range).len() as u64 + range.length)
        .sum::<u64>()
        + closing.len() as u64;
    if head_only {
        return (super::response::empty(), length);
    }
    let headers: Vec<String> = ranges
        .iter()
        .enumerate()
        .map(|(index, range)| part_header(index, range))
        .collect();
    let parts = ranges
        .into_iter()
        .zip(headers)
        .collect::<std::collections::VecDeque<_>>();
    let stream = futures::stream::try_unfold(
        (file, parts, None::<u64>, Some(closing)),
        |(mut file, mut parts, remaining, closing)| async move {
            if let Some(left) = remaining.filter(|left| *left > 0) {
                let chunk = read_chunk(&mut file, Some(left)).await?.ok_or_else(|| {
                    std::io::Error::new(
                        std::io::ErrorKind::UnexpectedEof,
                        "file shrank while served",
                    )
                })?;
                let left = left - chunk.len() as u64;
                return Ok(Some((chunk, (file, parts, Some(left), closing))));
            }
            if let Some((range, header)) = parts.pop_front() {
                file.seek(SeekFrom::Start(range.start)).await?;
                return Ok(Some((
                    Bytes::from(header),
                    (file, parts, Some(range.length), closing),
                )));
            }
            Ok(closing.map(|closing| (Bytes::from(closing), (file, parts, None, None))))
        },
    );
    (body_from(stream), length)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn content_disposition_like_go() {
        assert_eq!(content_disposition("a.txt"), "inline; filename=a.txt");
        assert_eq!(
            content_disposition("a b.txt"),
            "inline; filename=\"a b.txt\""
        );
        assert_eq!(content_disposition("q\"x"), "inline; filename=\"q\\\"x\"");
        assert_eq!(
            content_disposition("€.txt"),
            "inline; filename*=utf-8''%E2%82%AC.txt"
        );
    }
}
