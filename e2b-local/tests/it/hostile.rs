//! The hostile-input corpus for e2b-local (`tests/hostile/e2b-local.json`): bad keys, tokens,
//! JSON, ids, ranges, huge bodies and truncated Connect envelopes, each sent to a fresh server
//! and answered with its expected status (and body substring); afterwards the sandbox the
//! requests aimed at still answers. Bad input gets a clear refusal and loses nothing.

use std::path::Path;

use http::{Method, StatusCode};
use serde_json::{Value, json};

use crate::common::{Api, LocalServer};

/// The bytes a case sends: `body` (text), `body_hex`, or `body_repeat: [text, count]`.
fn body_of(case: &Value) -> Vec<u8> {
    if let Some(text) = case["body"].as_str() {
        return text.as_bytes().to_vec();
    }
    if let Some(hex) = case["body_hex"].as_str() {
        return (0..hex.len())
            .step_by(2)
            .map(|at| u8::from_str_radix(&hex[at..at + 2], 16).expect("body_hex"))
            .collect();
    }
    if let Some([text, count]) = case["body_repeat"].as_array().map(Vec::as_slice) {
        let count = usize::try_from(count.as_u64().expect("count")).expect("count fits");
        return text.as_str().expect("text").repeat(count).into_bytes();
    }
    Vec::new()
}

#[tokio::test(flavor = "multi_thread")]
async fn corpus_requests_are_refused_with_their_expected_status() {
    let corpus = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/hostile/e2b-local.json");
    let cases: Vec<Value> =
        serde_json::from_str(&std::fs::read_to_string(&corpus).expect("read the e2b-local corpus"))
            .expect("the corpus is JSON");
    let server = LocalServer::start();
    let api = Api::new(&server);
    let created = api
        .create(json!({"templateID": "base", "timeout": 120, "secure": true}))
        .await;
    let sandbox = created["sandboxID"].as_str().expect("sandboxID").to_owned();
    let token = created["envdAccessToken"]
        .as_str()
        .expect("envdAccessToken")
        .to_owned();
    let long = "x".repeat(10_000);
    let fill = |text: &str| text.replace("{sandbox}", &sandbox).replace("{long}", &long);

    let mut mismatches = Vec::new();
    for case in &cases {
        let name = case["name"].as_str().expect("name");
        let authenticated = case["auth"].as_bool().unwrap_or(true);
        let (base, mut headers): (&str, Vec<(String, String)>) = match case["to"].as_str() {
            Some("api") => (
                server.api_url(),
                if authenticated {
                    vec![("x-api-key".into(), server.api_key().to_owned())]
                } else {
                    Vec::new()
                },
            ),
            Some("sandbox") => {
                let mut headers = vec![("e2b-sandbox-id".to_owned(), sandbox.clone())];
                if authenticated {
                    headers.push(("x-access-token".into(), token.clone()));
                }
                (server.sandbox_url(), headers)
            }
            other => panic!("{name}: `to` must be api or sandbox, found {other:?}"),
        };
        if let Some(extra) = case["headers"].as_object() {
            for (header, value) in extra {
                headers.push((header.clone(), fill(value.as_str().expect("header value"))));
            }
        }
        let headers: Vec<(&str, &str)> = headers
            .iter()
            .map(|(name, value)| (name.as_str(), value.as_str()))
            .collect();
        let method: Method = case["method"]
            .as_str()
            .expect("method")
            .parse()
            .expect("method");
        let url = format!("{base}{}", fill(case["path"].as_str().expect("path")));
        let reply = api.http.send(method, &url, &headers, body_of(case)).await;
        let status = u16::try_from(case["status"].as_u64().expect("status")).expect("status");
        let needle = case["contains"].as_str().unwrap_or_default();
        let body = String::from_utf8_lossy(&reply.body);
        if reply.status != StatusCode::from_u16(status).expect("status") || !body.contains(needle) {
            mismatches.push(format!(
                "{name}: expected {status} with {needle:?}, got {} {body:.300}",
                reply.status
            ));
        }
    }
    assert!(mismatches.is_empty(), "{}", mismatches.join("\n"));
    // Nothing above hurt the sandbox: it is still running and answers.
    let info = api.info(&sandbox).await;
    assert_eq!(info.status, StatusCode::OK);
    assert_eq!(info.json()["state"], json!("running"));
    assert_eq!(api.kill(&sandbox).await, StatusCode::NO_CONTENT);
}
