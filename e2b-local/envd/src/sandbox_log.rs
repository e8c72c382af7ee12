//! The sandbox's log: what envd did (it started, processes started, ended or failed to start),
//! one JSON object per line appended to a file the server opened for it, which the control
//! plane's `GET /sandboxes/{id}/logs` reads (e2b-local `api/logs.rs` parses this format).
//!
//! A line: `{"timestampMs":<unix ms>,"level":"info","logger":"process","message":"…",
//! "fields":{"pid":"…",…}}`. The file stops growing at [`CAP`] (one last line says so): a
//! sandbox that starts processes forever must not fill the server's disk.

use std::fs::File;
use std::io::Write;
use std::sync::{Arc, Mutex};
use std::time::{SystemTime, UNIX_EPOCH};

use serde::Serialize;

/// The most a sandbox's log grows to.
pub const CAP: u64 = 8 << 20;

/// How much an entry matters (E2B's log levels).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum Level {
    Info,
    Warn,
    Error,
}

#[derive(Serialize)]
struct Line<'a> {
    #[serde(rename = "timestampMs")]
    timestamp_ms: u128,
    level: Level,
    logger: &'a str,
    message: &'a str,
    fields: std::collections::BTreeMap<&'a str, String>,
}

/// Where entries go: a file, or nowhere (an envd run without one, as in tests).
#[derive(Debug, Default)]
pub(crate) struct SandboxLog {
    /// The file and the bytes it holds; `None` once capped (or never given).
    sink: Mutex<Option<(Arc<File>, u64)>>,
}

impl SandboxLog {
    /// Entries appended to `file` (opened for appending; what it holds already counts).
    pub fn to_file(file: Arc<File>) -> SandboxLog {
        let held = file.metadata().map_or(0, |meta| meta.len());
        SandboxLog {
            sink: Mutex::new(Some((file, held))),
        }
    }

    /// Appends one entry. Never fails the caller: a log that cannot be written is dropped.
    pub fn entry(&self, level: Level, logger: &str, message: &str, fields: &[(&str, String)]) {
        let mut sink = self.sink.lock().expect("sandbox log lock");
        let Some((file, held)) = sink.as_mut() else {
            return;
        };
        let line = |level, message: &str, fields: &[(&str, String)]| {
            let mut text = serde_json::to_string(&Line {
                timestamp_ms: SystemTime::now()
                    .duration_since(UNIX_EPOCH)
                    .map_or(0, |d| d.as_millis()),
                level,
                logger,
                message,
                fields: fields.iter().map(|(k, v)| (*k, v.clone())).collect(),
            })
            .expect("a log line serializes");
            text.push('\n');
            text
        };
        let text = line(level, message, fields);
        let capped = *held + text.len() as u64 > CAP;
        let text = if capped {
            line(
                Level::Warn,
                &format!("the sandbox log reached {CAP} bytes: later entries are dropped"),
                &[],
            )
        } else {
            text
        };
        let written = (&**file).write_all(text.as_bytes());
        *held += text.len() as u64;
        if capped || written.is_err() {
            *sink = None;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_are_json_lines_and_the_log_stops_at_its_cap_saying_so() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("envd.log");
        let open = || {
            std::fs::OpenOptions::new()
                .append(true)
                .create(true)
                .open(&path)
                .unwrap()
        };
        let log = SandboxLog::to_file(Arc::new(open()));
        log.entry(
            Level::Info,
            "process",
            "Process started",
            &[("pid", "7".to_owned())],
        );
        let text = std::fs::read_to_string(&path).unwrap();
        let line: serde_json::Value = serde_json::from_str(text.trim_end()).unwrap();
        assert_eq!(line["level"], "info");
        assert_eq!(line["logger"], "process");
        assert_eq!(line["fields"]["pid"], "7");
        assert!(line["timestampMs"].as_u64().unwrap() > 1_600_000_000_000);

        // A reopened log counts what is there already.
        let log = SandboxLog::to_file(Arc::new(open()));
        let big = "x".repeat(4096);
        for _ in 0..(CAP / 4096 + 10) {
            log.entry(Level::Info, "process", &big, &[]);
        }
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(text.len() as u64 <= CAP + 1024, "{} bytes", text.len());
        let last: serde_json::Value = serde_json::from_str(text.lines().last().unwrap()).unwrap();
        assert_eq!(last["level"], "warn");
        assert!(
            last["message"]
                .as_str()
                .unwrap()
                .contains("later entries are dropped")
        );
        log.entry(Level::Error, "process", "after the cap", &[]);
        assert_eq!(
            std::fs::read_to_string(&path).unwrap(),
            text,
            "nothing more is written"
        );
    }
}
