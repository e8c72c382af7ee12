//! A deterministic fake `e2b` owner.
//!
//! - `info()`: sandbox `probe-<id>`, template `probe`, envd `0.0.0-probe`,
//!   cwd `/probe/<id>`, runtime root `/probe/<id>/.dsh-e2b`.
//! - `envd(request)`: an echo. Status 200; headers `x-echo-method` and
//!   `x-echo-path` followed by the request's headers; the body is the
//!   request body, pulled chunk by chunk as the response body is pulled
//!   (so backpressure runs end to end through the owner). The path may be
//!   magic (`/.probe/error/<code>`, `/.probe/panic`, `/.probe/hang`); for
//!   `/.probe/state` the body is the owner's counters as JSON instead.
//! - `alive()`: `true` until the owner is closed (plugin disposal).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use dsh_plugin_api::owner::{DaemonRequest, DaemonResponse, Owner, SandboxInfo};
use dsh_plugin_api::{Result, async_trait};
use futures::StreamExt;

use crate::magic::{self, Counters, Magic};

/// The fake owner of one fake sandbox.
#[derive(Debug)]
pub struct FakeOwner {
    id: String,
    counters: Arc<Counters>,
    closed: AtomicBool,
}

impl FakeOwner {
    pub fn new(id: &str, counters: Arc<Counters>) -> FakeOwner {
        FakeOwner {
            id: id.to_owned(),
            counters,
            closed: AtomicBool::new(false),
        }
    }

    /// After this, `alive()` answers `false`.
    pub fn close(&self) {
        self.closed.store(true, Ordering::SeqCst);
    }
}

#[async_trait]
impl Owner for FakeOwner {
    fn info(&self) -> SandboxInfo {
        SandboxInfo {
            sandbox_id: format!("probe-{}", self.id),
            template_id: "probe".into(),
            daemon_version: "0.0.0-probe".into(),
            cwd: format!("/probe/{}", self.id),
            runtime_root: format!("/probe/{}/.dsh-e2b", self.id),
        }
    }

    async fn daemon(&self, request: DaemonRequest) -> Result<DaemonResponse> {
        self.counters.calls.fetch_add(1, Ordering::SeqCst);
        match magic::parse(&request.path_and_query) {
            Some(Magic::Error(code)) => {
                return Err(magic::injected_error(code, "envd", &request.path_and_query));
            }
            Some(Magic::Panic) => panic!("envd: probe panic on {}", request.path_and_query),
            Some(Magic::Hang) => magic::hang(&self.counters).await,
            Some(Magic::State) => {
                return Ok(DaemonResponse {
                    status: 200,
                    headers: vec![("content-type".to_owned(), b"application/json".to_vec())],
                    body: dsh_plugin_api::stream::byte_stream_once(
                        self.counters.snapshot().to_string().into_bytes(),
                    ),
                });
            }
            _ => {}
        }
        let mut headers = vec![
            ("x-echo-method".to_owned(), request.method.into_bytes()),
            (
                "x-echo-path".to_owned(),
                request.path_and_query.into_bytes(),
            ),
        ];
        headers.extend(request.headers);
        let counters = self.counters.clone();
        let body = request.body.inspect(move |chunk| {
            if chunk.is_ok() {
                counters.chunks_produced.fetch_add(1, Ordering::SeqCst);
            }
        });
        Ok(DaemonResponse {
            status: 200,
            headers,
            body: Box::pin(body),
        })
    }

    async fn alive(&self) -> Result<bool> {
        self.counters.calls.fetch_add(1, Ordering::SeqCst);
        Ok(!self.closed.load(Ordering::SeqCst))
    }
}
