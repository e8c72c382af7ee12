//! The `fs` and `e2b` programs of the fake subprocess world: they call the
//! services injected into the subprocess probe and print the outcome, so a
//! host can drive every method of an injected service through a plugin
//! (host → subprocess probe → injected `fs` / `e2b`).
//!
//! Results are one JSON document on stdout: `{"ok": <value>}`, or
//! `{"error": {"kind": <code>, "message": …, "subject": …}}` with exit
//! code 1. The programs `fs read_bytes` and `fs stream_text` instead copy
//! the stream to stdout chunk by chunk (exit code 1 and the error document
//! on stderr if the stream fails).
//!
//! | program | arguments | value |
//! |---|---|---|
//! | `fs resolve` | path \[cwd\] | `{path, uri}` |
//! | `fs contains` | root target | bool |
//! | `fs stat`, `fs lstat` | path | metadata (see [`metadata_json`]) |
//! | `fs list` | dir | `[{name, path, metadata, resolved}]` |
//! | `fs read_text` | path | `{text, version}` |
//! | `fs stream_text`, `fs read_bytes` | path | raw stdout |
//! | `fs write` | path content \[`create-new` \| `if-version:<v>`\] | version |
//! | `fs edit` | path old new \[`all`\] | `{version, replacements}` |
//! | `fs mkdir` | path | null |
//! | `fs remove` | path | bool |
//! | `fs rename` | from to | null |
//! | `e2b info` | | the sandbox info |
//! | `e2b alive` | | bool |
//! | `e2b envd` | method path \[body\] | `{status, headers, body}` |

use std::sync::Arc;

use dsh_plugin_api::fs::{Edit, FileKind, FsProvider, Metadata, ReadStream, Version, WriteGuard};
use dsh_plugin_api::owner::{DaemonRequest, Owner};
use dsh_plugin_api::stream::{byte_stream_once, collect_bytes};
use dsh_plugin_api::{Bytes, Error, Result};
use futures::StreamExt;
use serde_json::{Value, json};

use crate::fake_process::Io;

/// Metadata as the programs print it.
pub fn metadata_json(metadata: &Metadata) -> Value {
    json!({
        "kind": match metadata.kind {
            FileKind::File => "file",
            FileKind::Directory => "directory",
            FileKind::Symlink => "symlink",
            FileKind::Other => "other",
        },
        "size": metadata.size,
        "mode": metadata.mode,
        "symlinkTarget": metadata.symlink_target,
        "version": metadata.version.0,
    })
}

/// An error as the programs print it.
pub fn error_json(err: &Error) -> Value {
    json!({"error": {
        "kind": err.kind().code(),
        "message": err.message(),
        "subject": err.subject(),
    }})
}

fn arg<'a>(args: &'a [String], index: usize, name: &str) -> Result<&'a str> {
    args.get(index)
        .map(String::as_str)
        .ok_or_else(|| Error::invalid_input(format!("missing argument <{name}>")))
}

async fn finish(io: &mut Io, outcome: Result<Value>) -> i32 {
    match outcome {
        Ok(value) => {
            io.stdout
                .write(json!({"ok": value}).to_string().into_bytes())
                .await;
            0
        }
        Err(err) => {
            io.stdout
                .write(error_json(&err).to_string().into_bytes())
                .await;
            1
        }
    }
}

/// `fs <op> <args…>` against the injected `fs`.
pub async fn run_fs(fs: Option<&Arc<dyn FsProvider>>, args: &[String], io: &mut Io) -> i32 {
    let outcome = match fs {
        None => Err(Error::config("fs: no fs service was injected")),
        Some(fs) => match args.first().map(String::as_str) {
            Some("read_bytes") => {
                let opened = async { fs.read_bytes(arg(args, 1, "path")?).await }.await;
                return copy(opened, io).await;
            }
            Some("stream_text") => {
                let opened = async { fs.stream_text(arg(args, 1, "path")?).await }.await;
                return copy(opened, io).await;
            }
            _ => fs_value(fs.as_ref(), args).await,
        },
    };
    finish(io, outcome).await
}

async fn fs_value(fs: &dyn FsProvider, args: &[String]) -> Result<Value> {
    let op = arg(args, 0, "operation")?;
    let path = || arg(args, 1, "path");
    Ok(match op {
        "resolve" => {
            let resolved = fs.resolve(path()?, args.get(2).map(String::as_str)).await?;
            json!({"path": resolved.path, "uri": resolved.uri})
        }
        "contains" => json!(fs.contains(path()?, arg(args, 2, "target")?).await?),
        "stat" => metadata_json(&fs.stat(path()?).await?),
        "lstat" => metadata_json(&fs.lstat(path()?).await?),
        "list" => Value::Array(
            fs.list(path()?)
                .await?
                .iter()
                .map(|entry| {
                    json!({
                        "name": entry.name,
                        "path": entry.path,
                        "metadata": metadata_json(&entry.metadata),
                        "resolved": entry.resolved.as_ref().map(metadata_json),
                    })
                })
                .collect(),
        ),
        "read_text" => {
            let file = fs.read_text(path()?).await?;
            json!({"text": file.text, "version": file.version.0})
        }
        "write" => {
            let guard = match args.get(3).map(String::as_str) {
                None => WriteGuard::Overwrite,
                Some("create-new") => WriteGuard::CreateNew,
                Some(other) => match other.strip_prefix("if-version:") {
                    Some(version) => WriteGuard::IfVersion(Version(version.to_owned())),
                    None => return Err(Error::invalid_input(format!("unknown guard {other:?}"))),
                },
            };
            let content = Bytes::copy_from_slice(arg(args, 2, "content")?.as_bytes());
            json!(fs.write(path()?, content, guard).await?.0)
        }
        "edit" => {
            let edit = Edit {
                old: arg(args, 2, "old")?.to_owned(),
                new: arg(args, 3, "new")?.to_owned(),
                replace_all: args.get(4).is_some_and(|flag| flag == "all"),
            };
            let outcome = fs.edit(path()?, vec![edit], WriteGuard::Overwrite).await?;
            json!({"version": outcome.version.0, "replacements": outcome.replacements})
        }
        "mkdir" => {
            fs.mkdir(path()?).await?;
            Value::Null
        }
        "remove" => json!(fs.remove(path()?).await?),
        "rename" => {
            fs.rename(path()?, arg(args, 2, "to")?).await?;
            Value::Null
        }
        other => {
            return Err(Error::invalid_input(format!(
                "fs: unknown operation {other:?}"
            )));
        }
    })
}

/// Copies the stream a `read_bytes`/`stream_text` call opened to stdout,
/// chunk by chunk.
async fn copy<S, C>(opened: Result<ReadStream<S>>, io: &mut Io) -> i32
where
    S: futures::Stream<Item = Result<C>> + Unpin,
    C: Into<Bytes>,
{
    let mut stream = match opened {
        Ok(read) => read.chunks,
        Err(err) => return finish(io, Err(err)).await,
    };
    while let Some(chunk) = stream.next().await {
        match chunk {
            Ok(chunk) => io.stdout.write(chunk.into()).await,
            Err(err) => {
                io.stderr
                    .write(error_json(&err).to_string().into_bytes())
                    .await;
                return 1;
            }
        }
    }
    0
}

/// `e2b <op> <args…>` against the injected owner.
pub async fn run_e2b(owner: Option<&Arc<dyn Owner>>, args: &[String], io: &mut Io) -> i32 {
    let outcome = match owner {
        None => Err(Error::config("e2b: no e2b service was injected")),
        Some(owner) => e2b_value(owner.as_ref(), args).await,
    };
    finish(io, outcome).await
}

async fn e2b_value(owner: &dyn Owner, args: &[String]) -> Result<Value> {
    Ok(match arg(args, 0, "operation")? {
        "info" => {
            let info = owner.info();
            json!({
                "sandboxId": info.sandbox_id,
                "templateId": info.template_id,
                "daemonVersion": info.daemon_version,
                "cwd": info.cwd,
                "runtimeRoot": info.runtime_root,
            })
        }
        "alive" => json!(owner.alive().await?),
        "envd" => {
            let body = args
                .get(3)
                .map(|body| body.as_bytes().to_vec())
                .unwrap_or_default();
            let response = owner
                .daemon(DaemonRequest {
                    method: arg(args, 1, "method")?.to_owned(),
                    path_and_query: arg(args, 2, "path")?.to_owned(),
                    headers: vec![("x-probe".to_owned(), b"subprocess".to_vec())],
                    body: byte_stream_once(body),
                })
                .await?;
            let headers: serde_json::Map<String, Value> = response
                .headers
                .iter()
                .map(|(name, value)| {
                    (
                        name.clone(),
                        String::from_utf8_lossy(value).into_owned().into(),
                    )
                })
                .collect();
            let body = collect_bytes(response.body).await?;
            json!({
                "status": response.status,
                "headers": headers,
                "body": String::from_utf8_lossy(&body),
            })
        }
        other => {
            return Err(Error::invalid_input(format!(
                "e2b: unknown operation {other:?}"
            )));
        }
    })
}
