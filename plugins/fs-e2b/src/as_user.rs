//! Content moved by the world's user's own processes, for an envd that
//! performs file operations as root (docs/design.md §6.1, "Against an envd
//! acting as root").
//!
//! Such an envd opens, creates and renames whatever path it is given with
//! root's rights, and a path through a directory the sandbox user may write
//! can be changed by that user between any check and envd's act — a file
//! flipped into a symlink to `/etc/shadow`, a staging directory swapped for
//! a symlink to `/etc`. So against it no content and no name goes through
//! envd's `/files`, `ListDir`, `MakeDir`, `Move` or `Remove`: every open,
//! creation, rename and removal happens in a process envd starts *as the
//! user* (its process API keeps the user it is asked for), where the
//! kernel applies the user's rights at the moment of the act, whatever the
//! user changes meanwhile. Only `Stat` stays envd's (metadata, no content:
//! docs/design.md §5.1 identity).
//!
//! - **Reads** stream the stdout of [`READ`]: bash opens the file, checks
//!   that what it opened is a regular file (`fstat` of the descriptor, so
//!   no check-then-open), prints [`OPENED`] and `exec`s `cat` on the
//!   descriptor. Chunks arrive as envd's output events (at most 32 KiB);
//!   backpressure reaches `cat` through the connection's flow control, as
//!   for a download.
//! - **Writes** (see [`crate::staging`]) are fed to the stdin of the
//!   staging command, which writes them with `cat` into its own 0700
//!   staging directory; the write token travels as a one-member tar archive
//!   that the command extracts (`tar --xattrs`) into the empty staged file
//!   before the content, since only envd's upload could set it otherwise.
//!   Publishing is `mv -T` as the user; the committed version is envd's
//!   `Stat` of the target right after it.

use std::fmt::Write as _;

use bytes::Bytes;
use dsh_plugin_api::{ErrorKind, Result};
use e2b_client::{Envd, ProcessEvent, ProcessStream};
use futures::StreamExt;

use crate::chunks::Pieces;
use crate::errors::Op;
use crate::version::WRITE_TOKEN_KEY;
use crate::world::{CONTROL_OUTPUT_LIMIT, EnvdTransport, World, command_failed};

/// What [`READ`] prints once the file is open, before its content.
const OPENED: &[u8] = b"open\0";

/// Exit status of [`READ`] when the path is, or was replaced by, something
/// other than a regular file.
const NOT_REGULAR: i32 = 92;

/// Reads `$1` as the running user: refuses a non-regular file before
/// opening it (a FIFO would block the open), opens it, checks again on the
/// descriptor (bash tests `/dev/fd/N` with `fstat`), then streams it.
const READ: &str = r#"
[[ -f $1 ]] || exit 92
exec 3<"$1" || exit 1
[[ -f /dev/fd/3 ]] || exit 92
printf 'open\0'
exec cat <&3 3<&-
"#;

impl<T: EnvdTransport> World<T> {
    /// The content of the regular file `path`, read by the world's user's
    /// own process ([`READ`]) and streamed from its stdout. Resolves once
    /// the file is open: refusals (permission, a missing file, something
    /// other than a regular file) are errors of `op` here; a failure later
    /// ends the stream with an error.
    ///
    /// Dropping the stream leaves the reader to finish on its own (envd
    /// discards output nobody is attached to).
    pub(crate) async fn download_as_user(&self, op: Op<'_>, path: &str) -> Result<Pieces> {
        let command = self.shell.script(READ, [path]);
        let mut stream = self
            .envd
            .start(&command, &self.shell.options())
            .await
            .map_err(|err| op.remote(&err))?;
        let mut head = Vec::new();
        let mut stderr = Vec::new();
        loop {
            match stream.next().await {
                Some(Ok(ProcessEvent::Stdout(bytes) | ProcessEvent::Pty(bytes))) => {
                    head.extend_from_slice(&bytes);
                    if head.len() >= OPENED.len() {
                        break;
                    }
                }
                Some(Ok(ProcessEvent::Stderr(bytes))) => keep(&mut stderr, &bytes),
                Some(Ok(ProcessEvent::End(status))) => {
                    return Err(if status.exited && status.exit_code == NOT_REGULAR {
                        op.error(
                            ErrorKind::InvalidInput,
                            "not a regular file (it was replaced while being opened), refusing to read it",
                        )
                    } else {
                        let output = output_of(status, head, stderr);
                        command_failed(op, "opening the file as the sandbox user", &output)
                    });
                }
                Some(Err(err)) => return Err(op.remote(&err)),
                None => {
                    return Err(op.error(
                        ErrorKind::Io,
                        "the reading command's stream ended without its end",
                    ));
                }
            }
        }
        if !head.starts_with(OPENED) {
            return Err(op.error(
                ErrorKind::Io,
                "the reading command printed something other than its open mark",
            ));
        }
        let first = Bytes::from(head).slice(OPENED.len()..);
        let owned = op.to_owned();
        let rest = futures::stream::unfold(Some((stream, stderr)), move |state| {
            let owned = owned.clone();
            async move {
                let (mut stream, mut stderr) = state?;
                loop {
                    let op = owned.op();
                    match stream.next().await {
                        Some(Ok(ProcessEvent::Stdout(bytes) | ProcessEvent::Pty(bytes))) => {
                            return Some((Ok(bytes), Some((stream, stderr))));
                        }
                        Some(Ok(ProcessEvent::Stderr(bytes))) => keep(&mut stderr, &bytes),
                        Some(Ok(ProcessEvent::End(status))) if status.success() => {
                            return None;
                        }
                        Some(Ok(ProcessEvent::End(status))) => {
                            let output = output_of(status, Vec::new(), stderr);
                            let err = command_failed(op, "reading the file", &output);
                            return Some((Err(err), None));
                        }
                        Some(Err(err)) => return Some((Err(op.remote(&err)), None)),
                        None => {
                            let err = op.error(
                                ErrorKind::Io,
                                "the reading command's stream ended without its end",
                            );
                            return Some((Err(err), None));
                        }
                    }
                }
            }
        });
        Ok(
            futures::stream::iter((!first.is_empty()).then_some(Ok(first)))
                .chain(rest)
                .boxed(),
        )
    }
}

/// A command's answer in the shape [`command_failed`] reads.
fn output_of(
    status: e2b_client::ExitStatus,
    stdout: Vec<u8>,
    stderr: Vec<u8>,
) -> dsh_e2b_gateway::ControlOutput {
    dsh_e2b_gateway::ControlOutput {
        status,
        stdout,
        stderr,
        truncated: false,
    }
}

/// Keeps what fits of `bytes` under [`CONTROL_OUTPUT_LIMIT`].
fn keep(into: &mut Vec<u8>, bytes: &[u8]) {
    let room = CONTROL_OUTPUT_LIMIT.saturating_sub(into.len());
    into.extend_from_slice(&bytes[..bytes.len().min(room)]);
}

/// A process fed through its stdin: the staging command of a write against
/// an envd acting as root, started and waiting for its content.
pub(crate) struct Fed {
    pub pid: u32,
    pub stream: ProcessStream,
    /// Its stderr so far (bounded).
    pub stderr: Vec<u8>,
}

impl Fed {
    /// Reads the command's stdout until it has printed `fields`
    /// NUL-terminated fields, or ended. `Ok(Err(status))`: it ended first
    /// (a refusal), with what it printed.
    pub(crate) async fn fields(
        &mut self,
        op: Op<'_>,
        fields: usize,
    ) -> Result<std::result::Result<Vec<u8>, dsh_e2b_gateway::ControlOutput>> {
        let mut stdout = Vec::new();
        loop {
            match self.stream.next().await {
                Some(Ok(ProcessEvent::Stdout(bytes) | ProcessEvent::Pty(bytes))) => {
                    keep(&mut stdout, &bytes);
                    if stdout.iter().filter(|&&byte| byte == 0).count() >= fields {
                        return Ok(Ok(stdout));
                    }
                }
                Some(Ok(ProcessEvent::Stderr(bytes))) => keep(&mut self.stderr, &bytes),
                Some(Ok(ProcessEvent::End(status))) => {
                    return Ok(Err(output_of(
                        status,
                        stdout,
                        std::mem::take(&mut self.stderr),
                    )));
                }
                Some(Err(err)) => return Err(op.remote(&err)),
                None => {
                    return Err(op.error(
                        ErrorKind::Io,
                        "the staging command's stream ended without its end",
                    ));
                }
            }
        }
    }

    /// Waits for the command's end (its stdin closed); a failure names
    /// `what`.
    pub(crate) async fn finish(mut self, op: Op<'_>, what: &str) -> Result<()> {
        while let Some(event) = self.stream.next().await {
            match event.map_err(|err| op.remote(&err))? {
                ProcessEvent::Stderr(bytes) => keep(&mut self.stderr, &bytes),
                ProcessEvent::End(status) if status.success() => return Ok(()),
                ProcessEvent::End(status) => {
                    let output = output_of(status, Vec::new(), self.stderr);
                    return Err(command_failed(op, what, &output));
                }
                ProcessEvent::Stdout(_) | ProcessEvent::Pty(_) => {}
            }
        }
        Err(op.error(
            ErrorKind::Io,
            format_args!("{what}: the command's stream ended without its end"),
        ))
    }
}

/// Ends a fed command's input (its `cat` then ends); a command already gone
/// is fine.
pub(crate) async fn close_input<T: EnvdTransport>(envd: &Envd<T>, pid: u32) {
    if let Err(err) = envd
        .close_stdin(pid, &e2b_client::CallOptions::default())
        .await
        && !err.is_not_found()
    {
        tracing::debug!(pid, %err, "could not close a staging command's stdin");
    }
}

/// The name of the staged file in a staging directory made by the fed
/// staging command (the tar archive's one member).
pub(crate) const STAGED_NAME: &str = ".dsh-staged";

/// A `printf` format that prints a tar archive (POSIX pax) of one empty
/// regular file, [`STAGED_NAME`], mode 0644, carrying `token` as the
/// extended attribute envd stores upload metadata in
/// (`user.e2b.<WRITE_TOKEN_KEY>`), so a file staged by the user's own
/// process has the same version token an upload would give it.
pub(crate) fn token_archive(token: &str) -> String {
    let record = pax_record(&format!("SCHILY.xattr.user.e2b.{WRITE_TOKEN_KEY}"), token);
    let mut archive = Vec::with_capacity(5 * BLOCK);
    archive.extend_from_slice(&tar_header("././@PaxHeader", record.len(), b'x'));
    archive.extend_from_slice(&record);
    archive.resize(archive.len().next_multiple_of(BLOCK), 0);
    archive.extend_from_slice(&tar_header(STAGED_NAME, 0, b'0'));
    archive.resize(archive.len() + 2 * BLOCK, 0);
    printf_format(&archive)
}

/// A tar block.
const BLOCK: usize = 512;

/// One pax extended-header record, `<len> <key>=<value>\n`, whose length
/// counts its own digits.
fn pax_record(key: &str, value: &str) -> Vec<u8> {
    let body = format!(" {key}={value}\n");
    let mut len = body.len() + 1;
    while format!("{len}").len() + body.len() != len {
        len += 1;
    }
    format!("{len}{body}").into_bytes()
}

/// A ustar header block: `name`, `size` bytes, `kind` (`0` file, `x` pax
/// header), mode 0644, owned by uid and gid 0 (not restored for a user),
/// mtime 0 (not restored: the command extracts with `-m`).
fn tar_header(name: &str, size: usize, kind: u8) -> [u8; BLOCK] {
    let mut block = [0u8; BLOCK];
    let mut put = |at: usize, bytes: &[u8]| block[at..at + bytes.len()].copy_from_slice(bytes);
    put(0, name.as_bytes());
    put(100, b"0000644\0");
    put(108, b"0000000\0");
    put(116, b"0000000\0");
    put(124, format!("{size:011o}\0").as_bytes());
    put(136, b"00000000000\0");
    put(148, b"        ");
    put(156, &[kind]);
    put(257, b"ustar\0");
    put(263, b"00");
    let sum: u32 = block.iter().map(|&byte| u32::from(byte)).sum();
    block[148..156].copy_from_slice(format!("{sum:06o}\0 ").as_bytes());
    block
}

/// `bytes` as a bash `printf` format that prints exactly them (octal
/// escapes for what is not printable ASCII, `%%` and `\\` for the two
/// characters a format interprets).
fn printf_format(bytes: &[u8]) -> String {
    let mut format = String::with_capacity(bytes.len() * 2);
    for (index, &byte) in bytes.iter().enumerate() {
        match byte {
            b'%' => format.push_str("%%"),
            b'\\' => format.push_str("\\\\"),
            b' '..=b'~' => format.push(char::from(byte)),
            // `\0` alone is a NUL unless an octal digit follows.
            0 if !bytes
                .get(index + 1)
                .is_some_and(|next| (b'0'..=b'7').contains(next)) =>
            {
                format.push_str("\\0");
            }
            _ => {
                let _ = write!(format, "\\{byte:03o}");
            }
        }
    }
    format
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pax_records_count_their_own_length() {
        let record = pax_record("SCHILY.xattr.user.e2b.dsh-write", &"a".repeat(32));
        let text = String::from_utf8(record.clone()).unwrap();
        let (len, _) = text.split_once(' ').unwrap();
        assert_eq!(len.parse::<usize>().unwrap(), record.len());
        assert!(text.ends_with(&format!("={}\n", "a".repeat(32))));
        // A record whose length crosses a power of ten.
        let record = pax_record("k", &"v".repeat(94));
        let text = String::from_utf8(record.clone()).unwrap();
        assert_eq!(text.split_once(' ').unwrap().0, record.len().to_string());
    }

    #[test]
    fn tar_headers_carry_a_valid_checksum() {
        let header = tar_header(STAGED_NAME, 0, b'0');
        let stored = std::str::from_utf8(&header[148..154]).unwrap();
        let mut blank = header;
        blank[148..156].copy_from_slice(b"        ");
        let sum: u32 = blank.iter().map(|&byte| u32::from(byte)).sum();
        assert_eq!(u32::from_str_radix(stored, 8).unwrap(), sum);
        assert_eq!(&header[257..263], b"ustar\0");
    }

    #[test]
    fn printf_formats_escape_what_printf_interprets() {
        assert_eq!(printf_format(b"a%b\\c"), "a%%b\\\\c");
        assert_eq!(printf_format(&[0, b'x', 0, b'7', b'\n']), "\\0x\\0007\\012");
        let archive = token_archive(&"0".repeat(32));
        assert!(archive.contains(STAGED_NAME));
        assert!(archive.contains("SCHILY.xattr.user.e2b.dsh-write="));
    }
}
