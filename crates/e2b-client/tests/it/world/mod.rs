//! Support for the tests against a real e2b-local server: one server per
//! test (so tests run in parallel and under nextest alike), clients in
//! every wire format and HTTP version, and sandboxes created through the
//! client under test.

use std::time::Duration;

use e2b_client::{Api, ConnectionOptions, NewSandbox, PlainHttp, Sandbox, WireFormat};
use e2b_local::harness::LocalServer;

/// A running e2b-local server; dropping it kills every sandbox and the
/// server (SIGTERM, then SIGKILL).
///
/// Dropping blocks the thread until the server exited, and the server
/// waits for open HTTP/2 connections to close; run tests on a
/// multi-threaded runtime so the client's connection tasks can answer its
/// GOAWAY meanwhile.
pub struct World {
    pub server: LocalServer,
}

impl World {
    /// Starts a server (needs `cargo build -p e2b-local` and root).
    pub fn start() -> World {
        World {
            server: LocalServer::start(),
        }
    }

    /// A client of this server with the given encoding and plain-HTTP
    /// version.
    pub fn api_with(&self, wire: WireFormat, plain: PlainHttp) -> Api {
        Api::new(
            ConnectionOptions::default()
                .with_api_key(self.server.api_key())
                .with_api_url(self.server.api_url())
                .with_sandbox_url(self.server.sandbox_url())
                .with_wire_format(wire)
                .with_plain_http(plain)
                .with_request_timeout(Some(Duration::from_secs(60)))
                .resolve_with(|_| None)
                .expect("the harness URLs and key are valid"),
        )
    }

    /// A protobuf, HTTP/1.1 client.
    pub fn api(&self) -> Api {
        self.api_with(WireFormat::Proto, PlainHttp::Http1)
    }

    /// A new secured sandbox from `base`.
    pub async fn sandbox(&self, api: &Api) -> Sandbox {
        Sandbox::create(
            api,
            &NewSandbox::new("base").timeout(Duration::from_secs(600)),
        )
        .await
        .expect("create a sandbox")
    }
}
