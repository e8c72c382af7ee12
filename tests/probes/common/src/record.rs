//! The event record: one JSON line per lifecycle event, appended to the
//! configured file.
//!
//! Every line carries `event`, `id` (the manifest entry), `plugin` (the
//! package), `pid` (the host process), `seq` (per library, increasing) and
//! `monotonicNs` (`CLOCK_MONOTONIC`, comparable across all plugins of one
//! process). Each line is written with one `write` on a file opened for
//! appending, so lines of concurrent writers never interleave and the file
//! order is the event order.

use std::io::Write;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};

use dsh_plugin_api::{Error, Result};
use serde_json::{Map, Value};

/// Nanoseconds on the monotonic clock shared by every thread and library of
/// the process.
pub fn monotonic_ns() -> u64 {
    let mut now = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `now` is a valid, writable timespec; CLOCK_MONOTONIC always
    // exists on Linux.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut now) };
    (now.tv_sec as u64) * 1_000_000_000 + now.tv_nsec as u64
}

/// Writes one entry's events (or nothing, without a `record` file).
#[derive(Debug, Clone)]
pub struct Recorder {
    path: Option<PathBuf>,
    id: String,
    plugin: &'static str,
}

impl Recorder {
    pub fn new(path: Option<PathBuf>, id: &str, plugin: &'static str) -> Recorder {
        Recorder {
            path,
            id: id.to_owned(),
            plugin,
        }
    }

    /// Appends `event` with `fields` (plus the common fields).
    pub fn record(&self, event: &str, fields: Map<String, Value>) -> Result<()> {
        let Some(path) = &self.path else {
            return Ok(());
        };
        static SEQ: AtomicU64 = AtomicU64::new(0);
        let mut line = Map::new();
        line.insert("event".into(), event.into());
        line.insert("id".into(), self.id.clone().into());
        line.insert("plugin".into(), self.plugin.into());
        line.insert("pid".into(), std::process::id().into());
        line.insert("seq".into(), SEQ.fetch_add(1, Ordering::SeqCst).into());
        line.insert("monotonicNs".into(), monotonic_ns().into());
        line.extend(fields);
        let mut text = Value::Object(line).to_string();
        text.push('\n');
        let mut file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .map_err(|err| {
                Error::from_io("record: open", &err).with_subject(path.display().to_string())
            })?;
        file.write_all(text.as_bytes()).map_err(|err| {
            Error::from_io("record: append", &err).with_subject(path.display().to_string())
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn appends_one_line_per_event_with_the_common_fields() {
        let path =
            std::env::temp_dir().join(format!("dsh-probe-record-{}.jsonl", std::process::id()));
        let _ = std::fs::remove_file(&path);
        let recorder = Recorder::new(Some(path.clone()), "fs", "dsh-probe-fs");
        let mut fields = Map::new();
        fields.insert("injected".into(), serde_json::json!(["e2b"]));
        recorder.record("create", fields).unwrap();
        recorder.record("dispose", Map::new()).unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        let lines: Vec<Value> = text
            .lines()
            .map(|line| serde_json::from_str(line).unwrap())
            .collect();
        assert_eq!(lines.len(), 2);
        assert_eq!(lines[0]["event"], "create");
        assert_eq!(lines[0]["id"], "fs");
        assert_eq!(lines[0]["plugin"], "dsh-probe-fs");
        assert_eq!(lines[0]["pid"], std::process::id());
        assert_eq!(lines[0]["injected"], serde_json::json!(["e2b"]));
        assert!(lines[1]["seq"].as_u64() > lines[0]["seq"].as_u64());
        assert!(lines[1]["monotonicNs"].as_u64() >= lines[0]["monotonicNs"].as_u64());
        std::fs::remove_file(&path).unwrap();
        // Without a record file nothing is written and nothing fails.
        Recorder::new(None, "x", "p")
            .record("create", Map::new())
            .unwrap();
    }
}
