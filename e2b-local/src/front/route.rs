//! Which sandbox a request on the shared envd port is for (docs/e2b-protocol.md §1.2, §9.13): the
//! `E2b-Sandbox-Id`/`E2b-Sandbox-Port` headers, else a `Host: <port>-<id>.<domain>`, else — for
//! `/files` URLs the SDKs sign — the secure sandbox whose access token makes the signature match.

use std::sync::Arc;

use http::request::Parts;
use percent_encoding::percent_decode_str;

use crate::registry::{Phase, Registry, Sandbox};
use crate::signature::{FileOp, file_signature};

/// The port envd listens on inside a real sandbox; clients name it in routing headers and hosts.
pub const ENVD_PORT: u16 = 49983;

/// Why a request cannot be delivered; answered with 502.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unroutable {
    /// The sandbox id the request named, or empty if it named none.
    pub sandbox_id: String,
    pub message: String,
}

impl Unroutable {
    /// The edge proxy's answer for an unknown, paused or dead sandbox.
    pub fn not_found(sandbox_id: impl Into<String>) -> Self {
        Self {
            sandbox_id: sandbox_id.into(),
            message: "The sandbox was not found".to_owned(),
        }
    }
}

/// Resolves the sandbox and port a request is for: a running sandbox, or a paused one with
/// `autoResume` (which the front resumes before forwarding); [`ENVD_PORT`] is envd's, any other
/// port a server's inside the sandbox.
pub fn resolve(parts: &Parts, registry: &Registry) -> Result<(Arc<Sandbox>, u16), Unroutable> {
    let (id, port) = match routing_headers(parts) {
        Some(routed) => routed?,
        None => match host_route(parts) {
            Some(routed) => routed,
            None => {
                return signed_files_route(parts, registry)
                    .map(|sandbox| (sandbox, ENVD_PORT))
                    .ok_or_else(|| Unroutable::not_found(""));
            }
        },
    };
    running(registry, &id)
        .map(|sandbox| (sandbox, port))
        .ok_or_else(|| Unroutable::not_found(id))
}

/// A running sandbox, or a paused one whose `autoResume` is on (the caller resumes it).
fn running(registry: &Registry, id: &str) -> Option<Arc<Sandbox>> {
    registry.get(id).filter(|s| match s.phase() {
        Phase::Running { .. } => true,
        // Only a frozen world resumes by itself: one paused without memory reboots on connect.
        Phase::Paused { memory, .. } => s.auto_resume && memory,
        Phase::Dead => false,
    })
}

/// `E2b-Sandbox-Id` (+ optional `E2b-Sandbox-Port`, default envd's port).
fn routing_headers(parts: &Parts) -> Option<Result<(String, u16), Unroutable>> {
    let id = parts.headers.get("e2b-sandbox-id")?;
    let Ok(id) = id.to_str() else {
        return Some(Err(Unroutable::not_found("")));
    };
    let id = id.trim().to_owned();
    let port = match parts.headers.get("e2b-sandbox-port") {
        None => ENVD_PORT,
        Some(raw) => match raw.to_str().ok().and_then(|p| p.trim().parse::<u16>().ok()) {
            Some(port) => port,
            None => {
                return Some(Err(Unroutable {
                    sandbox_id: id,
                    message: format!("invalid E2b-Sandbox-Port header {raw:?}"),
                }));
            }
        },
    };
    Some(Ok((id, port)))
}

/// `Host: <port>-<id>.<domain>[:<listen port>]` (or the h2 `:authority`).
fn host_route(parts: &Parts) -> Option<(String, u16)> {
    let host = parts
        .headers
        .get(http::header::HOST)
        .and_then(|h| h.to_str().ok())
        .or_else(|| parts.uri.authority().map(|a| a.as_str()))?;
    parse_sandbox_host(host)
}

/// Parses `<port>-<id>.<rest>`; the id must be `[a-z0-9]+`.
pub fn parse_sandbox_host(host: &str) -> Option<(String, u16)> {
    let (label, rest) = host.split_once('.')?;
    if rest.is_empty() {
        return None;
    }
    let (port, id) = label.split_once('-')?;
    let port = port.parse().ok()?;
    crate::ids::is_valid_sandbox_id(id).then(|| (id.to_owned(), port))
}

/// A `/files` GET or POST carrying `signature`: the running secure sandbox whose token signs it.
fn signed_files_route(parts: &Parts, registry: &Registry) -> Option<Arc<Sandbox>> {
    if parts.uri.path() != "/files" {
        return None;
    }
    let op = match parts.method {
        http::Method::GET => FileOp::Read,
        http::Method::POST => FileOp::Write,
        _ => return None,
    };
    let query = parts.uri.query()?;
    let (mut path, mut username, mut signature, mut expiration) =
        (String::new(), String::new(), None, None);
    for pair in query.split('&') {
        let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
        let value = form_decode(value)?;
        match key {
            "path" => path = value,
            "username" => username = value,
            "signature" => signature = Some(value),
            "signature_expiration" => expiration = Some(value.parse::<i64>().ok()?),
            _ => {}
        }
    }
    let signature = signature?;
    registry.all().into_iter().find(|sandbox| {
        matches!(sandbox.phase(), Phase::Running { .. })
            && sandbox.access_token.as_deref().is_some_and(|token| {
                file_signature(&path, op, &username, token, expiration) == signature
            })
    })
}

fn form_decode(raw: &str) -> Option<String> {
    percent_decode_str(&raw.replace('+', " "))
        .decode_utf8()
        .ok()
        .map(|s| s.into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_sandbox_hosts() {
        assert_eq!(
            parse_sandbox_host("49983-abc123.e2b.local"),
            Some(("abc123".into(), 49983))
        );
        assert_eq!(
            parse_sandbox_host("49983-abc123.localhost:8080"),
            Some(("abc123".into(), 49983))
        );
        assert_eq!(
            parse_sandbox_host("3000-x.e2b.app"),
            Some(("x".into(), 3000))
        );
        assert_eq!(parse_sandbox_host("localhost:49983"), None);
        assert_eq!(parse_sandbox_host("127.0.0.1:49983"), None);
        assert_eq!(parse_sandbox_host("49983-ABC.e2b.app"), None);
        assert_eq!(parse_sandbox_host("49983-abc."), None);
        assert_eq!(parse_sandbox_host("x-abc.e2b.app"), None);
    }

    #[test]
    fn form_decoding_handles_plus_and_percent() {
        assert_eq!(form_decode("a+b%2Fc").as_deref(), Some("a b/c"));
        assert_eq!(form_decode("%FF"), None);
    }
}
