//! Test-only stand-in services: routed by the host, never expected to do
//! work. Every operation fails with `Unsupported` naming the stand-in.

use std::sync::Arc;

use dsh_plugin_api::fs::{
    DirEntry, Edit, EditOutcome, FsProvider, Metadata, ReadStream, Resolved, TextFile, Version,
    WriteGuard,
};
use dsh_plugin_api::owner::{DaemonRequest, DaemonResponse, Owner, SandboxInfo};
use dsh_plugin_api::stream::{ByteStream, TextStream};
use dsh_plugin_api::subprocess::{Process, SpawnSpec, SubprocessProvider, Terminal, TerminalSpec};
use dsh_plugin_api::{Bytes, Error, ErrorKind, Result, async_trait};

fn unsupported<T>(operation: &str) -> Result<T> {
    Err(Error::new(
        ErrorKind::Unsupported,
        format!("{operation}: test stand-in"),
    ))
}

pub(crate) struct NullFs;

#[async_trait]
impl FsProvider for NullFs {
    async fn resolve(&self, _: &str, _: Option<&str>) -> Result<Resolved> {
        unsupported("resolve")
    }
    async fn contains(&self, _: &str, _: &str) -> Result<bool> {
        unsupported("contains")
    }
    async fn stat(&self, _: &str) -> Result<Metadata> {
        unsupported("stat")
    }
    async fn lstat(&self, _: &str) -> Result<Metadata> {
        unsupported("lstat")
    }
    async fn list(&self, _: &str) -> Result<Vec<DirEntry>> {
        unsupported("list")
    }
    async fn read_text(&self, _: &str) -> Result<TextFile> {
        unsupported("read_text")
    }
    async fn stream_text(&self, _: &str) -> Result<ReadStream<TextStream>> {
        unsupported("stream_text")
    }
    async fn read_bytes(&self, _: &str) -> Result<ReadStream<ByteStream>> {
        unsupported("read_bytes")
    }
    async fn write(&self, _: &str, _: Bytes, _: WriteGuard) -> Result<Version> {
        unsupported("write")
    }
    async fn write_stream(&self, _: &str, _: ByteStream, _: WriteGuard) -> Result<Version> {
        unsupported("write_stream")
    }
    async fn edit(&self, _: &str, _: Vec<Edit>, _: WriteGuard) -> Result<EditOutcome> {
        unsupported("edit")
    }
    async fn mkdir(&self, _: &str) -> Result<()> {
        unsupported("mkdir")
    }
    async fn remove(&self, _: &str) -> Result<bool> {
        unsupported("remove")
    }
    async fn rename(&self, _: &str, _: &str) -> Result<()> {
        unsupported("rename")
    }
}

pub(crate) struct NullSubprocess;

#[async_trait]
impl SubprocessProvider for NullSubprocess {
    async fn resolve_executable(&self, _: &str, _: &[String]) -> Result<String> {
        unsupported("resolve_executable")
    }
    async fn spawn(&self, _: SpawnSpec) -> Result<Arc<dyn Process>> {
        unsupported("spawn")
    }
    async fn spawn_terminal(&self, _: TerminalSpec) -> Result<Arc<dyn Terminal>> {
        unsupported("spawn_terminal")
    }
}

pub(crate) struct NullOwner;

#[async_trait]
impl Owner for NullOwner {
    fn info(&self) -> SandboxInfo {
        SandboxInfo {
            sandbox_id: "stand-in".to_owned(),
            template_id: "base".to_owned(),
            daemon_version: "0.0.0".to_owned(),
            cwd: "/".to_owned(),
            runtime_root: "/.dsh-e2b".to_owned(),
        }
    }
    async fn daemon(&self, _: DaemonRequest) -> Result<DaemonResponse> {
        unsupported("daemon")
    }
    async fn alive(&self) -> Result<bool> {
        unsupported("alive")
    }
}
