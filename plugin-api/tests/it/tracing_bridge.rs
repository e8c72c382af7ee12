//! The tracing bridge: events emitted inside plugins arrive in the host's
//! `tracing` with their own target, level and fields plus the emitting
//! instance's id, filtered by the host's subscriber. One test: the host
//! subscriber is process-global, and the test needs its process to itself
//! (nextest runs every test in a process of its own; under `cargo test`,
//! run it alone: `cargo test -p dsh-plugin-api --test it tracing_bridge`).

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use dsh_plugin_api::host::LOG_PLUGIN_FIELD;
use serde_json::Value;
use tracing_core::field::{Field, Visit};
use tracing_core::span::{Attributes, Id, Record};
use tracing_core::subscriber::{Interest, Subscriber};
use tracing_core::{Event, Level, LevelFilter, Metadata};

use crate::support::World;

#[derive(Debug, Clone)]
struct Captured {
    target: String,
    level: Level,
    fields: BTreeMap<String, String>,
    thread: String,
}

/// A host subscriber at INFO that keeps every event it is given.
#[derive(Default)]
struct Capture {
    events: Mutex<Vec<Captured>>,
}

struct Shared(Arc<Capture>);

struct Fields(BTreeMap<String, String>);

impl Visit for Fields {
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        self.0.insert(field.name().to_owned(), format!("{value:?}"));
    }
}

impl Subscriber for Shared {
    fn register_callsite(&self, metadata: &'static Metadata<'static>) -> Interest {
        if *metadata.level() <= Level::INFO {
            Interest::always()
        } else {
            Interest::never()
        }
    }

    fn max_level_hint(&self) -> Option<LevelFilter> {
        Some(LevelFilter::INFO)
    }

    fn enabled(&self, metadata: &Metadata<'_>) -> bool {
        *metadata.level() <= Level::INFO
    }

    fn new_span(&self, _: &Attributes<'_>) -> Id {
        Id::from_u64(1)
    }

    fn record(&self, _: &Id, _: &Record<'_>) {}

    fn record_follows_from(&self, _: &Id, _: &Id) {}

    fn event(&self, event: &Event<'_>) {
        let mut fields = Fields(BTreeMap::new());
        event.record(&mut fields);
        self.0.events.lock().unwrap().push(Captured {
            target: event.metadata().target().to_owned(),
            level: *event.metadata().level(),
            fields: fields.0,
            // The OS name: threads a plugin started are unknown to this
            // binary's `std`.
            thread: std::fs::read_to_string("/proc/thread-self/comm")
                .unwrap_or_default()
                .trim()
                .to_owned(),
        });
    }

    fn enter(&self, _: &Id) {}

    fn exit(&self, _: &Id) {}
}

impl Capture {
    fn take(&self, message: &str) -> Vec<Captured> {
        let mut events = self.events.lock().unwrap();
        let (taken, kept): (Vec<Captured>, Vec<Captured>) = events
            .drain(..)
            .partition(|event| event.fields.get("message").map(String::as_str) == Some(message));
        *events = kept;
        taken
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn plugin_events_reach_the_host_with_the_instance_id_at_the_host_level() {
    let capture = Arc::new(Capture::default());
    tracing_core::dispatcher::set_global_default(tracing_core::Dispatch::new(Shared(
        capture.clone(),
    )))
    .expect("the only global subscriber of this test process");

    let world = World::new(Value::Null).await;

    // At create (a task on each instance's own runtime): INFO arrives,
    // DEBUG is filtered by the host's level.
    let mut created = capture.take("probe created");
    created.sort_by(|a, b| a.fields[LOG_PLUGIN_FIELD].cmp(&b.fields[LOG_PLUGIN_FIELD]));
    let plugins: Vec<&str> = created
        .iter()
        .map(|event| event.fields[LOG_PLUGIN_FIELD].as_str())
        .collect();
    assert_eq!(plugins, ["e2b", "fs", "subprocess"]);
    for event in &created {
        assert_eq!(event.target, "dsh_probe_common::lifecycle");
        assert_eq!(event.level, Level::INFO);
        assert_eq!(event.fields["id"], event.fields[LOG_PLUGIN_FIELD]);
        assert_eq!(
            event.thread,
            format!("dsh-{}", event.fields[LOG_PLUGIN_FIELD]),
            "emitted on the instance runtime"
        );
    }
    assert_eq!(created[1].fields["injected"], r#"["e2b"]"#);
    assert_eq!(
        created[1].fields["plugin"], "\"dsh-probe-fs\"",
        "str fields keep their Debug form"
    );
    assert!(
        capture.take("probe create details").is_empty(),
        "DEBUG is below the host's level"
    );

    // During a call polled on a host thread, the event is labelled with the
    // instance whose code emitted it.
    let fs = world.fs();
    fs.stat("/.probe/log/warn").await.expect("stat");
    let logged = capture.take("probe log event");
    assert_eq!(logged.len(), 1, "{logged:?}");
    let event = &logged[0];
    assert_eq!(event.target, "dsh_probe_common::magic");
    assert_eq!(event.level, Level::WARN);
    assert_eq!(event.fields[LOG_PLUGIN_FIELD], "fs");
    assert_eq!(event.fields["operation"], "\"stat\"");
    assert_eq!(event.fields["input"], "\"/.probe/log/warn\"");
    assert!(
        !event.thread.starts_with("dsh-"),
        "polled on the host's thread: {}",
        event.thread
    );
    // A panic is reported through tracing by the library's own panic hook
    // (never printed raw), labelled with the instance that panicked.
    fs.stat("/.probe/panic").await.expect_err("panics");
    let panics: Vec<Captured> = {
        let mut events = capture.events.lock().unwrap();
        let (panics, kept) = events
            .drain(..)
            .partition(|event| event.target == "dsh_plugin_api::panic");
        *events = kept;
        panics
    };
    assert_eq!(panics.len(), 1, "{panics:?}");
    assert_eq!(panics[0].level, Level::INFO);
    assert_eq!(panics[0].fields[LOG_PLUGIN_FIELD], "fs");
    assert_eq!(
        panics[0].fields["message"],
        "panicked: stat: probe panic on /.probe/panic"
    );
    assert!(
        panics[0].fields["location"].contains("memory_fs.rs"),
        "{panics:?}"
    );
    fs.stat("/.probe/log/debug").await.expect("stat");
    fs.stat("/.probe/log/trace").await.expect("stat");
    assert!(capture.take("probe log event").is_empty());

    // Through an injected service: the fs plugin's event, caused by the
    // subprocess plugin, is still labelled `fs`.
    let subprocess = world.subprocess();
    let process = subprocess
        .spawn(dsh_plugin_api::subprocess::SpawnSpec::new([
            "fs",
            "stat",
            "/.probe/log/error",
        ]))
        .await
        .expect("spawn");
    process.wait().await.expect("wait");
    let logged = capture.take("probe log event");
    assert_eq!(logged.len(), 1, "{logged:?}");
    assert_eq!(logged[0].level, Level::ERROR);
    assert_eq!(logged[0].fields[LOG_PLUGIN_FIELD], "fs");

    world.dispose().await;
    let disposed = capture.take("probe disposed");
    let order: Vec<&str> = disposed
        .iter()
        .map(|event| event.fields[LOG_PLUGIN_FIELD].as_str())
        .collect();
    assert_eq!(order, ["subprocess", "fs", "e2b"]);
}
