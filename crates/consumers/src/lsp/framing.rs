//! The base protocol's framing: `Content-Length: N\r\n` (other headers ignored), a blank line,
//! then N bytes of JSON. No I/O policy here beyond the bounds: a header block over
//! [`MAX_HEADER_BYTES`] or a body over [`MAX_MESSAGE_BYTES`] is an error, not an allocation.

use std::io;

use tokio::io::{AsyncBufRead, AsyncBufReadExt, AsyncReadExt};

/// The largest message read (a workspace's symbols or diagnostics can be large; a server
/// that sends more is broken or hostile).
pub const MAX_MESSAGE_BYTES: usize = 64 << 20;
/// The largest header block read.
pub const MAX_HEADER_BYTES: usize = 8 << 10;

/// Reads one message's body; `Ok(None)` at a clean end of stream (between messages).
pub async fn read_message<R: AsyncBufRead + Unpin>(reader: &mut R) -> io::Result<Option<Vec<u8>>> {
    let mut length = None;
    let mut header_bytes = 0;
    let mut line = Vec::new();
    loop {
        line.clear();
        let read = (&mut *reader)
            .take((MAX_HEADER_BYTES - header_bytes + 1) as u64)
            .read_until(b'\n', &mut line)
            .await?;
        if read == 0 {
            return if header_bytes == 0 {
                Ok(None)
            } else {
                Err(invalid("the stream ended inside a message's headers"))
            };
        }
        header_bytes += read;
        if header_bytes > MAX_HEADER_BYTES || !line.ends_with(b"\n") {
            return Err(invalid(format!(
                "a header block longer than {MAX_HEADER_BYTES} bytes"
            )));
        }
        let text = std::str::from_utf8(&line)
            .map_err(|_| invalid("a header that is not UTF-8"))?
            .trim_end_matches(['\r', '\n']);
        if text.is_empty() {
            break;
        }
        let (name, value) = text
            .split_once(':')
            .ok_or_else(|| invalid(format!("a header without ':': {text:?}")))?;
        if name.trim().eq_ignore_ascii_case("content-length") {
            let value: usize = value.trim().parse().map_err(|_| {
                invalid(format!("Content-Length {:?} is not a number", value.trim()))
            })?;
            length = Some(value);
        }
    }
    let length = length.ok_or_else(|| invalid("a message without Content-Length"))?;
    if length > MAX_MESSAGE_BYTES {
        return Err(invalid(format!(
            "a message of {length} bytes (at most {MAX_MESSAGE_BYTES})"
        )));
    }
    let mut body = vec![0; length];
    reader.read_exact(&mut body).await.map_err(|e| {
        if e.kind() == io::ErrorKind::UnexpectedEof {
            invalid(format!(
                "the stream ended inside a message of {length} bytes"
            ))
        } else {
            e
        }
    })?;
    Ok(Some(body))
}

/// One message framed for the wire: headers and body in one chunk.
pub fn frame(body: &[u8]) -> bytes::Bytes {
    let mut framed = format!("Content-Length: {}\r\n\r\n", body.len()).into_bytes();
    framed.extend_from_slice(body);
    framed.into()
}

fn invalid(message: impl Into<String>) -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidData,
        format!("language server protocol: {}", message.into()),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn read_all(input: &[u8]) -> Vec<io::Result<Option<Vec<u8>>>> {
        let mut reader = tokio::io::BufReader::new(input);
        let mut out = Vec::new();
        loop {
            let next = read_message(&mut reader).await;
            let done = !matches!(next, Ok(Some(_)));
            out.push(next);
            if done {
                return out;
            }
        }
    }

    #[tokio::test]
    async fn messages_round_trip_and_headers_are_lenient() {
        let mut wire = frame(br#"{"a":1}"#).to_vec();
        wire.extend_from_slice(
            b"content-type: application/vscode-jsonrpc; charset=utf-8\r\nCONTENT-LENGTH:  2\n\r\n{}",
        );
        let read = read_all(&wire).await;
        assert_eq!(read.len(), 3);
        assert_eq!(
            read[0].as_ref().unwrap().as_deref(),
            Some(&br#"{"a":1}"#[..])
        );
        assert_eq!(read[1].as_ref().unwrap().as_deref(), Some(&b"{}"[..]));
        assert!(read[2].as_ref().unwrap().is_none(), "a clean end");
    }

    #[tokio::test]
    async fn broken_framing_is_an_error_that_says_what() {
        for (input, says) in [
            (
                &b"Content-Length: 10\r\n\r\n{}"[..],
                "ended inside a message",
            ),
            (b"Content-Length: 2\r\n", "ended inside a message's headers"),
            (b"Content-Type: x\r\n\r\n{}", "without Content-Length"),
            (b"Content-Length: lots\r\n\r\n", "is not a number"),
            (b"Content-Length: 99999999999\r\n\r\n", "at most"),
            (b"no colon here\r\n\r\n", "without ':'"),
        ] {
            let read = read_all(input).await;
            let err = read.last().unwrap().as_ref().unwrap_err();
            assert_eq!(err.kind(), io::ErrorKind::InvalidData);
            assert!(err.to_string().contains(says), "{err} for {input:?}");
        }
        let endless = vec![b'x'; MAX_HEADER_BYTES * 2];
        let err = read_all(&endless).await.pop().unwrap().unwrap_err();
        assert!(err.to_string().contains("header block longer"), "{err}");
    }
}
