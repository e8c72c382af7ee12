//! Reading the audit file the decorator appends to.

use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::Value;

/// The audit file's events, in order (none if it does not exist yet).
pub fn events(log: &Path) -> Vec<Value> {
    std::fs::read_to_string(log)
        .unwrap_or_default()
        .lines()
        .map(|line| serde_json::from_str(line).expect("one JSON event per line"))
        .collect()
}

/// Waits (up to 10 s) for an `exit` event of `argv`, and returns it.
pub async fn exit_of(log: &Path, argv: &[&str]) -> Value {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let found = events(log)
            .into_iter()
            .find(|event| event["event"] == "exit" && event["argv"] == serde_json::json!(argv));
        if let Some(event) = found {
            return event;
        }
        assert!(
            Instant::now() < deadline,
            "no exit of {argv:?} in {:?}",
            events(log)
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}
