//! Creating and disposing instances through the real loader: the probes'
//! records, failures and panics in create and dispose, strict config,
//! injection checked against the descriptor, cancelled creates, and the
//! instance runtime's threads.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use dsh_plugin_api::OwnerKind;
use dsh_plugin_api::host::CreateRequest;
use dsh_plugin_api::{Error, ErrorKind, Service, ServiceKind};
use serde_json::{Value, json};

use crate::support::{self, World};

/// A record file in a fresh directory; the directory is removed when the
/// returned guard drops.
fn scratch(name: &str) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::Builder::new()
        .prefix(&format!("dsh-lifecycle-test-{name}-"))
        .tempdir()
        .expect("scratch dir");
    let record = dir.path().join("events.jsonl");
    (dir, record)
}

fn records(path: &Path) -> Vec<Value> {
    match std::fs::read_to_string(path) {
        Ok(text) => text
            .lines()
            .map(|line| serde_json::from_str(line).expect("a JSON line"))
            .collect(),
        Err(_) => Vec::new(),
    }
}

/// Names of this process's threads (`/proc/self/task/*/comm`).
fn thread_names() -> Vec<String> {
    std::fs::read_dir("/proc/self/task")
        .expect("/proc/self/task")
        .filter_map(|task| std::fs::read_to_string(task.ok()?.path().join("comm")).ok())
        .map(|name| name.trim().to_owned())
        .collect()
}

/// The (15-byte) name of the runtime threads of instance `id`.
fn runtime_threads(id: &str) -> usize {
    let name: String = format!("dsh-{id}").chars().take(15).collect();
    thread_names()
        .iter()
        .filter(|thread| **thread == name)
        .count()
}

/// Asserts that the runtime threads of `id` are gone. Dispose joins them
/// before it returns; the kernel may list a joined thread in `/proc` a
/// moment longer (the join completes at the thread's exit, its `/proc`
/// entry goes when it is released), hence a short grace.
async fn assert_stopped(id: &str) {
    let what = format!("the joined threads of {id} to leave /proc");
    within(Duration::from_millis(500), &what, || {
        runtime_threads(id) == 0
    })
    .await;
}

async fn eventually(what: &str, check: impl FnMut() -> bool) {
    within(Duration::from_secs(10), what, check).await;
}

async fn within(limit: Duration, what: &str, mut check: impl FnMut() -> bool) {
    let deadline = Instant::now() + limit;
    while !check() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

async fn create_err(package: &str, id: &str, config: Value, services: Vec<Service>) -> Error {
    support::load(package)
        .create(CreateRequest {
            id: id.into(),
            config,
            services,
        })
        .await
        .err()
        .unwrap_or_else(|| panic!("create {id} succeeded"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn records_show_order_injection_proofs_and_complete_reverse_disposal() {
    let (_scratch, record) = scratch("order");
    let world = World::new(json!({"record": record, "disposeDelayMs": 20})).await;
    let events = records(&record);
    let ids: Vec<(&str, &str)> = events
        .iter()
        .map(|event| {
            (
                event["event"].as_str().unwrap(),
                event["id"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        ids,
        [
            ("create", "e2b"),
            ("create", "fs"),
            ("create", "subprocess")
        ]
    );
    for event in &events {
        assert_eq!(event["pid"], std::process::id());
        assert_eq!(event["fail"], Value::Null);
    }
    assert_eq!(events[0]["injected"], json!([]));
    assert_eq!(events[1]["injected"], json!(["e2b"]));
    assert_eq!(
        events[1]["proof"],
        json!({"e2b": {"sandboxId": "probe-e2b", "alive": true}})
    );
    assert_eq!(events[2]["injected"], json!(["e2b", "fs"]));
    assert_eq!(
        events[2]["proof"],
        json!({"e2b": {"sandboxId": "probe-e2b", "alive": true}, "fs": {"rootKind": "Directory"}})
    );
    world.dispose().await;
    let events = records(&record);
    let disposals: Vec<&Value> = events
        .iter()
        .filter(|event| event["event"] == "dispose")
        .collect();
    let order: Vec<&str> = disposals
        .iter()
        .map(|event| event["id"].as_str().unwrap())
        .collect();
    assert_eq!(order, ["subprocess", "fs", "e2b"]);
    let ns = |event: &Value, field: &str| event[field].as_u64().expect("a timestamp");
    for event in &disposals {
        assert_eq!(event["delayMs"], 20);
        assert!(ns(event, "monotonicNs") - ns(event, "startedNs") >= 20_000_000);
    }
    // Each dispose completed before the next began.
    for pair in disposals.windows(2) {
        assert!(ns(pair[0], "monotonicNs") <= ns(pair[1], "startedNs"));
    }
    for id in ["e2b", "fs", "subprocess"] {
        assert_stopped(id).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_create_is_reported_and_leaves_nothing_running() {
    let (_scratch, record) = scratch("fail-create");
    let err = create_err(
        "dsh-probe-e2b",
        "fc-error",
        json!({"record": record, "failCreate": true}),
        vec![],
    )
    .await;
    assert_eq!(err.kind(), ErrorKind::Unavailable);
    assert_eq!(err.message(), "create: failing as configured (failCreate)");
    assert_eq!(err.subject(), Some("fc-error"));
    assert_stopped("fc-error").await;

    let err = create_err(
        "dsh-probe-e2b",
        "fc-panic",
        json!({"record": record, "failCreate": "panic"}),
        vec![],
    )
    .await;
    assert_eq!(err.kind(), ErrorKind::Panicked);
    assert_eq!(
        err.message(),
        "create: plugin \"fc-panic\" panicked: create: panicking as configured (failCreate)"
    );
    assert_stopped("fc-panic").await;
    let events = records(&record);
    assert_eq!(
        events.len(),
        2,
        "a failed create is never disposed: {events:?}"
    );
    assert_eq!(events[0]["fail"], "error");
    assert_eq!(events[1]["fail"], "panic");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_dispose_is_reported_and_the_runtime_still_stops() {
    let (_scratch, record) = scratch("fail-dispose");
    let instance = support::create(
        "dsh-probe-e2b",
        "fd-error",
        json!({"record": record, "failDispose": true}),
        vec![],
    )
    .await;
    let err = instance.dispose().await.expect_err("dispose fails");
    assert_eq!(err.kind(), ErrorKind::Io);
    assert_eq!(
        err.message(),
        "dispose: failing as configured (failDispose)"
    );
    assert_eq!(err.subject(), Some("fd-error"));
    assert_stopped("fd-error").await;

    let instance = support::create(
        "dsh-probe-e2b",
        "fd-panic",
        json!({"failDispose": "panic"}),
        vec![],
    )
    .await;
    let err = instance.dispose().await.expect_err("dispose panics");
    assert_eq!(err.kind(), ErrorKind::Panicked);
    assert_eq!(
        err.message(),
        "dispose: plugin \"fd-panic\" panicked: dispose: panicking as configured (failDispose)"
    );
    assert_stopped("fd-panic").await;
    assert_eq!(
        records(&record)
            .iter()
            .filter(|event| event["event"] == "dispose")
            .count(),
        1
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn config_is_strict_and_every_field_error_is_named() {
    // Validation through the library, creating nothing: every problem, each
    // with its path, from the schema of the plugin's config type.
    let probe = support::load("dsh-probe-e2b");
    let bad = json!({"bogus": 1, "disposeDelayMs": "soon", "failCreate": "sometimes"});
    let problems: Vec<String> = probe
        .validate_config(&bad)
        .expect("the check runs")
        .iter()
        .map(ToString::to_string)
        .collect();
    assert_eq!(
        problems,
        [
            "config.bogus: unknown field (expected createDelayMs, disposeDelayMs, failCreate, failDispose, record)",
            "config.disposeDelayMs: invalid type: string \"soon\", expected an integer",
            "config.failCreate: invalid value: string \"sometimes\", expected true or false, \"error\" or \"panic\"",
        ]
    );
    assert_eq!(
        probe
            .validate_config(&json!({"failCreate": "panic", "record": "/tmp/x"}))
            .expect("the check runs"),
        []
    );
    assert_eq!(probe.validate_config(&Value::Null).expect("runs"), []);

    // Create refuses the same config with the same list, before the
    // plugin's own create runs.
    let err = create_err("dsh-probe-e2b", "strict", bad, vec![]).await;
    assert_eq!(err.kind(), ErrorKind::Config);
    assert_eq!(err.message(), problems.join("\n"));
    assert_eq!(err.subject(), Some("strict"));
    assert_stopped("strict").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn injected_services_must_match_the_descriptor() {
    let err = create_err("dsh-probe-fs", "fs-none", Value::Null, vec![]).await;
    assert_eq!(err.kind(), ErrorKind::Config);
    assert_eq!(
        err.message(),
        "create: the injected services () do not match the descriptor's inject list (e2b)"
    );
    assert_eq!(err.subject(), Some("fs-none"));
    let owner = support::create("dsh-probe-e2b", "owner", Value::Null, vec![]).await;
    let e2b = support::service(&owner, ServiceKind::Owner(OwnerKind::E2B));
    let err = create_err(
        "dsh-probe-fs",
        "fs-twice",
        Value::Null,
        vec![e2b.clone(), e2b],
    )
    .await;
    assert_eq!(
        err.message(),
        "create: the injected services (e2b, e2b) do not match the descriptor's inject list (e2b)"
    );
    owner.dispose().await.expect("dispose");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancelled_create_finishes_and_disposes_itself() {
    let (_scratch, record) = scratch("cancelled");
    let library = support::load("dsh-probe-e2b");
    let mut create = Box::pin(library.create(CreateRequest {
        id: "cancelled".into(),
        config: json!({"record": record, "createDelayMs": 100}),
        services: vec![],
    }));
    // Start the create, then walk away from it while it is under way.
    assert!(futures::poll!(&mut create).is_pending());
    eventually("the create to begin", || !records(&record).is_empty()).await;
    drop(create);
    eventually("the abandoned instance to be disposed", || {
        records(&record)
            .iter()
            .any(|event| event["event"] == "dispose")
    })
    .await;
    let events: Vec<String> = records(&record)
        .iter()
        .map(|event| event["event"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(events, ["create", "dispose"]);
    eventually("the abandoned runtime to stop", || {
        runtime_threads("cancelled") == 0
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn instances_run_on_runtimes_of_their_own() {
    let first = support::create("dsh-probe-e2b", "rt-first", Value::Null, vec![]).await;
    let second = support::create("dsh-probe-e2b", "rt-second", Value::Null, vec![]).await;
    // Two named workers each (started asynchronously by tokio).
    eventually("the workers of rt-first", || {
        runtime_threads("rt-first") == 2
    })
    .await;
    eventually("the workers of rt-second", || {
        runtime_threads("rt-second") == 2
    })
    .await;
    first.dispose().await.expect("dispose");
    assert_stopped("rt-first").await;
    assert_eq!(
        runtime_threads("rt-second"),
        2,
        "the other instance is untouched"
    );
    // Dropped without dispose: no dispose runs, the runtime stops anyway.
    drop(second);
    eventually("the dropped instance's runtime to stop", || {
        runtime_threads("rt-second") == 0
    })
    .await;
}
