//! `dsh fs …`: the world's files through the `fs` seam.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::UNIX_EPOCH;

use dsh_host::Host;
use dsh_plugin_api::fs::{DirEntry, Edit, FileKind, Metadata, Version, WriteGuard};
use futures::StreamExt;
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::args::{FsCommand, GuardArgs};
use crate::failure::{EXIT_CONFIG, EXIT_FAILURE, Failure};
use crate::plugins::print_json;
use crate::stdout::{self, outln};
use crate::streams::stdin_bytes;
use dsh_consumers::Outcome;
use dsh_consumers::files::{EditFileRequest, FileEdit, Files, FindFilesRequest, GrepRequest};
use dsh_plugin_api::Bytes;

/// Runs one fs command; 0 on success, a [`Failure`] naming the operation
/// and path otherwise.
pub async fn run(host: &Host, command: FsCommand, json: bool) -> Result<i32, Failure> {
    let fs = host.fs()?;
    match command {
        FsCommand::Stat { path, no_follow } => {
            let (operation, metadata) = if no_follow {
                ("lstat", fs.lstat(&path).await)
            } else {
                ("stat", fs.stat(&path).await)
            };
            let metadata = metadata.map_err(|err| Failure::seam(operation, &path, &err))?;
            if json {
                print_json(&metadata_json(&path, &metadata))?;
            } else {
                print_metadata(&path, &metadata)?;
            }
        }
        FsCommand::Ls { path } => {
            let path = path.unwrap_or_else(|| ".".to_owned());
            let entries = fs
                .list(&path)
                .await
                .map_err(|err| Failure::seam("ls", &path, &err))?;
            if json {
                let entries: Vec<_> = entries.iter().map(entry_json).collect();
                print_json(&entries)?;
            } else {
                for entry in &entries {
                    outln!("{}", entry_line(entry))?;
                }
            }
        }
        FsCommand::Cat { path } => {
            let read = fs
                .read_bytes(&path)
                .await
                .map_err(|err| Failure::seam("cat", &path, &err))?;
            let mut stdout = tokio::io::stdout();
            let mut chunks = read.chunks;
            while let Some(chunk) = chunks.next().await {
                let chunk = chunk.map_err(|err| Failure::seam("cat", &path, &err))?;
                stdout
                    .write_all(&chunk)
                    .await
                    .map_err(|err| stdout::failed(&format!("cat {path}"), &err))?;
            }
            stdout
                .flush()
                .await
                .map_err(|err| stdout::failed(&format!("cat {path}"), &err))?;
        }
        FsCommand::Write {
            path,
            content,
            guard,
        } => {
            let guard = write_guard(&guard);
            let (written, size) = match content {
                Some(content) => {
                    let size = content.len() as u64;
                    (fs.write(&path, Bytes::from(content), guard).await, size)
                }
                // Streamed: stdin of any size in bounded memory; a read
                // error fails the write and publishes nothing.
                None => {
                    let counted = Arc::new(AtomicU64::new(0));
                    let counter = Arc::clone(&counted);
                    let chunks = stdin_bytes(STDIN_WRITE_CHUNK).inspect(move |chunk| {
                        if let Ok(chunk) = chunk {
                            counter.fetch_add(chunk.len() as u64, Ordering::Relaxed);
                        }
                    });
                    let written = fs.write_stream(&path, Box::pin(chunks), guard).await;
                    (written, counted.load(Ordering::Relaxed))
                }
            };
            let version = written.map_err(|err| Failure::seam("write", &path, &err))?;
            report_version(json, &path, &version, json!({ "bytes": size }))?;
        }
        FsCommand::Edit {
            path,
            old,
            new,
            dry_run: true,
            guard,
            ..
        } => {
            let request = EditFileRequest {
                path: Some(path.clone()),
                old_string: Some(old),
                new_string: Some(new),
                expected_replacements: None,
                if_version: guard.if_version,
                edits: None,
                dry_run: Some(true),
            };
            let outcome = Files::new(fs)
                .edit_file(request)
                .await
                .map_err(|err| Failure::refused("edit", &path, &err))?;
            report_outcome(json, &outcome)?;
        }
        FsCommand::Edit {
            path,
            old,
            new,
            all,
            guard,
            ..
        } => {
            let edit = Edit {
                old,
                new,
                replace_all: all,
            };
            let outcome = fs
                .edit(&path, vec![edit], write_guard(&guard))
                .await
                .map_err(|err| Failure::refused("edit", &path, &err))?;
            report_version(
                json,
                &path,
                &outcome.version,
                json!({ "replacements": outcome.replacements }),
            )?;
        }
        FsCommand::Edits { edits, dry_run } => {
            let edits = match edits {
                Some(edits) => edits,
                None => stdin_text(EDITS_MAX_STDIN_BYTES).await?,
            };
            let edits: Vec<FileEdit> = serde_json::from_str(&edits).map_err(|err| {
                Failure::new(
                    EXIT_CONFIG,
                    format!(
                        "edits: not a JSON array of {{path, old_string, new_string, \
                         expected_replacements?, if_version?}}: {err}"
                    ),
                )
            })?;
            let request = EditFileRequest {
                path: None,
                old_string: None,
                new_string: None,
                expected_replacements: None,
                if_version: None,
                edits: Some(edits),
                dry_run: Some(dry_run),
            };
            let outcome = Files::new(fs).edit_file(request).await.map_err(|err| {
                match err.subject() {
                    Some(subject) => Failure::refused("edits", subject, &err),
                    // A refusal of the request itself, about no file.
                    None => Failure::new(EXIT_FAILURE, format!("edits: {}", err.message())),
                }
            })?;
            report_outcome(json, &outcome)?;
        }
        FsCommand::Grep {
            pattern,
            path,
            glob,
            ignore_case,
            context,
            max,
        } => {
            let subject = path.clone().unwrap_or_else(|| ".".to_owned());
            let request = GrepRequest {
                pattern,
                path,
                glob,
                case_insensitive: Some(ignore_case),
                max_matches: max,
                context,
                mode: None,
                file_type: None,
            };
            let outcome = Files::new(fs)
                .grep(request)
                .await
                .map_err(|err| Failure::seam("grep", &subject, &err))?;
            report_outcome(json, &outcome)?;
            if outcome.match_count == 0 {
                // As grep(1): no match is exit 1.
                return Ok(EXIT_FAILURE);
            }
        }
        FsCommand::Find { pattern, path, max } => {
            let subject = path.clone().unwrap_or_else(|| ".".to_owned());
            let request = FindFilesRequest {
                path,
                pattern,
                max_results: max,
            };
            let outcome = Files::new(fs)
                .find_files(request)
                .await
                .map_err(|err| Failure::seam("find", &subject, &err))?;
            report_outcome(json, &outcome)?;
        }
        FsCommand::Rm { path, force } => {
            let existed = fs
                .remove(&path)
                .await
                .map_err(|err| Failure::seam("rm", &path, &err))?;
            if json {
                print_json(&json!({ "path": path, "removed": existed }))?;
            }
            if !existed && !force {
                return Err(Failure::new(
                    EXIT_FAILURE,
                    format!("rm {path}: not found (use --force to accept a missing path)"),
                ));
            }
        }
        FsCommand::Mkdir { path } => {
            fs.mkdir(&path)
                .await
                .map_err(|err| Failure::seam("mkdir", &path, &err))?;
        }
        FsCommand::Mv { from, to } => {
            fs.rename(&from, &to)
                .await
                .map_err(|err| Failure::seam("mv", &format!("{from} -> {to}"), &err))?;
        }
    }
    Ok(0)
}

/// Chunk size of `dsh fs write PATH` reading stdin: big enough that each
/// chunk's trip across the seam is amortised, small enough to be nothing in
/// memory.
const STDIN_WRITE_CHUNK: usize = 256 * 1024;

/// The most stdin `dsh fs edits` reads: its JSON holds the replacements'
/// texts, not the files.
const EDITS_MAX_STDIN_BYTES: u64 = 64 * 1024 * 1024;

/// Stdin as UTF-8 text, at most `limit` bytes.
async fn stdin_text(limit: u64) -> Result<String, Failure> {
    let mut text = String::new();
    let read = tokio::io::stdin()
        .take(limit + 1)
        .read_to_string(&mut text)
        .await
        .map_err(|err| Failure::new(EXIT_FAILURE, format!("edits: read stdin: {err}")))?;
    if read as u64 > limit {
        return Err(Failure::new(
            EXIT_CONFIG,
            format!("edits: stdin holds more than {limit} bytes"),
        ));
    }
    Ok(text)
}

fn write_guard(guard: &GuardArgs) -> WriteGuard {
    match (&guard.if_version, guard.create_new) {
        (Some(version), _) => WriteGuard::IfVersion(Version(version.clone())),
        (None, true) => WriteGuard::CreateNew,
        (None, false) => WriteGuard::Overwrite,
    }
}

fn report_version(
    json: bool,
    path: &str,
    version: &Version,
    extra: serde_json::Value,
) -> Result<(), Failure> {
    if json {
        let mut value = json!({ "path": path, "version": version.0 });
        if let (Some(target), serde_json::Value::Object(extra)) = (value.as_object_mut(), extra) {
            target.extend(extra);
        }
        print_json(&value)
    } else {
        outln!("{version}")
    }
}

/// A `dsh-consumers` outcome: its structured value with `--json`, else the text
/// a model would read.
/// Prints a tool's result: its JSON with `--json`, else its text.
pub fn report_outcome<O: Outcome>(json: bool, outcome: &O) -> Result<(), Failure> {
    if json {
        let value = serde_json::to_value(outcome)
            .map_err(|err| Failure::new(EXIT_FAILURE, format!("encode the result: {err}")))?;
        print_json(&value)
    } else {
        outln!("{}", outcome.text())
    }
}

fn kind_name(kind: FileKind) -> &'static str {
    match kind {
        FileKind::File => "file",
        FileKind::Directory => "directory",
        FileKind::Symlink => "symlink",
        FileKind::Other => "other",
    }
}

/// Seconds since the epoch, negative before it (raw, for `--json`).
fn mtime_seconds(metadata: &Metadata) -> f64 {
    match metadata.modified.duration_since(UNIX_EPOCH) {
        Ok(after) => after.as_secs_f64(),
        Err(before) => -before.duration().as_secs_f64(),
    }
}

/// The modification time as a person reads it: RFC 3339 in UTC with
/// milliseconds, e.g. `2026-12-01T14:03:03.123Z`.
fn mtime_rfc3339(metadata: &Metadata) -> String {
    match jiff::Timestamp::try_from(metadata.modified) {
        Ok(timestamp) => format!("{timestamp:.3}"),
        // Outside jiff's range (years -9999..=9999): say the raw value.
        Err(_) => format!("{:.3} s since the epoch", mtime_seconds(metadata)),
    }
}

fn metadata_json(path: &str, metadata: &Metadata) -> serde_json::Value {
    json!({
        "path": path,
        "kind": kind_name(metadata.kind),
        "size": metadata.size,
        "mode": format!("{:o}", metadata.mode),
        "modified": mtime_seconds(metadata),
        "symlink_target": metadata.symlink_target,
        "version": metadata.version.0,
    })
}

fn print_metadata(path: &str, metadata: &Metadata) -> Result<(), Failure> {
    outln!("path:     {path}")?;
    outln!("kind:     {}", kind_name(metadata.kind))?;
    outln!("size:     {}", metadata.size)?;
    outln!("mode:     {:04o}", metadata.mode)?;
    outln!("modified: {}", mtime_rfc3339(metadata))?;
    if let Some(target) = &metadata.symlink_target {
        outln!("target:   {target}")?;
    }
    outln!("version:  {}", metadata.version)
}

fn entry_json(entry: &DirEntry) -> serde_json::Value {
    json!({
        "name": entry.name,
        "path": entry.path,
        "kind": kind_name(entry.metadata.kind),
        "size": entry.metadata.size,
        "mode": format!("{:o}", entry.metadata.mode),
        "resolved_kind": entry.resolved.as_ref().map(|resolved| kind_name(resolved.kind)),
    })
}

/// `name`, `name/` for a directory, `name -> target` for a symlink.
fn entry_line(entry: &DirEntry) -> String {
    match (entry.metadata.kind, &entry.metadata.symlink_target) {
        (FileKind::Directory, _) => format!("{}/", entry.name),
        (FileKind::Symlink, Some(target)) => format!("{} -> {target}", entry.name),
        _ => entry.name.clone(),
    }
}
