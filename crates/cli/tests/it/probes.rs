//! Lifecycle through real plugin libraries (the test-only probe plugins):
//! topological create, typed injection of only the declared services, exact
//! reverse dispose, rollback on a failed create, aggregated dispose
//! failures, and orderly disposal when a running `dsh` gets SIGTERM/SIGINT.
//!
//! Each probe appends JSON lines to its `record` file: one per create (with
//! the injected service kinds) and one per dispose.

use std::time::Duration;

use crate::support::{Scratch, dsh, plugin_dir, read_record, require, wait_until};
use dsh_host::{Composition, HostError, Manifest, ManifestFormat, SearchPath};
use dsh_plugin_api::OwnerKind;

const PROBES: [&str; 3] = ["dsh-probe-e2b", "dsh-probe-fs", "dsh-probe-subprocess"];

/// `(event, id)` pairs of a record, e.g. `("create", "fs")`.
fn events(record: &str) -> Vec<(String, String)> {
    read_record(record)
        .iter()
        .map(|event| {
            (
                event["event"].as_str().expect("event name").to_owned(),
                event["id"].as_str().expect("event id").to_owned(),
            )
        })
        .collect()
}

fn pairs(list: &[(&str, &str)]) -> Vec<(String, String)> {
    list.iter()
        .map(|(event, id)| ((*event).to_owned(), (*id).to_owned()))
        .collect()
}

/// The injected service kinds a probe recorded at create.
fn injected(record: &str, id: &str) -> Vec<String> {
    let events = read_record(record);
    let create = events
        .iter()
        .find(|event| event["event"] == "create" && event["id"] == id)
        .unwrap_or_else(|| panic!("no create event for {id}: {events:?}"));
    let mut kinds: Vec<String> = create["injected"]
        .as_array()
        .expect("injected list")
        .iter()
        .map(|kind| kind.as_str().expect("kind").to_owned())
        .collect();
    kinds.sort();
    kinds
}

/// The seeds' order (dependents first): create must still go provider first.
fn probe_manifest(record: &str, extra: &[(&str, &str)]) -> String {
    let config = |id: &str| {
        let mut fields = vec![format!("record: {record}")];
        for (target, field) in extra {
            if *target == id {
                fields.push((*field).to_owned());
            }
        }
        format!("{{{}}}", fields.join(", "))
    };
    format!(
        "- {{id: subprocess, name: dsh-probe-subprocess, config: {}}}\n\
         - {{id: fs, name: dsh-probe-fs, config: {}}}\n\
         - {{id: e2b, name: dsh-probe-e2b, config: {}}}\n",
        config("subprocess"),
        config("fs"),
        config("e2b"),
    )
}

fn compose(text: &str) -> Result<Composition, HostError> {
    let manifest = Manifest::parse(text, ManifestFormat::Yaml, "probes.yaml", None)?;
    Composition::from_manifest(&manifest, &SearchPath::new([plugin_dir()]))
}

#[tokio::test]
async fn create_is_topological_injection_typed_and_dispose_exactly_reversed() {
    require(&PROBES);
    let scratch = Scratch::new();
    let record = scratch.record("events.jsonl");
    let composition = compose(&probe_manifest(&record, &[])).expect("valid");
    let order: Vec<&str> = composition.plugins().map(|p| p.id.as_str()).collect();
    assert_eq!(order, ["e2b", "fs", "subprocess"]);
    assert!(
        read_record(&record).is_empty(),
        "validation creates nothing"
    );

    let host = composition.start().await.expect("start");
    assert_eq!(
        events(&record),
        pairs(&[
            ("create", "e2b"),
            ("create", "fs"),
            ("create", "subprocess")
        ])
    );
    // Each probe got exactly the services its descriptor declares.
    assert!(injected(&record, "e2b").is_empty());
    assert_eq!(injected(&record, "fs"), ["e2b"]);
    assert_eq!(injected(&record, "subprocess"), ["e2b", "fs"]);
    // …and could use them: each probe exercised what it was handed.
    for event in read_record(&record) {
        let proof = event["proof"].as_object().expect("proof");
        for (kind, outcome) in proof {
            assert!(outcome.get("error").is_none(), "{kind}: {event}");
        }
    }
    // Typed handles from the host.
    assert!(host.owner(OwnerKind::E2B).is_ok());
    assert!(host.fs().is_ok());
    assert!(host.subprocess().is_ok());

    host.dispose().await.expect("dispose");
    assert_eq!(
        events(&record)[3..],
        pairs(&[
            ("dispose", "subprocess"),
            ("dispose", "fs"),
            ("dispose", "e2b")
        ])
    );
}

#[tokio::test]
async fn a_failed_create_disposes_the_created_in_reverse_and_reports_it() {
    require(&PROBES);
    // An error and a panic (caught at the ABI boundary) roll back alike.
    for failure in ["failCreate: true", "failCreate: panic"] {
        let scratch = Scratch::new();
        let record = scratch.record("events.jsonl");
        let composition =
            compose(&probe_manifest(&record, &[("subprocess", failure)])).expect("valid");
        let err = composition.start().await.expect_err("subprocess fails");
        let HostError::Create(create) = &err else {
            panic!("{failure}: expected a create error, got {err}");
        };
        assert_eq!(create.id, "subprocess", "{failure}");
        assert_eq!(create.rolled_back, ["fs", "e2b"], "{failure}");
        assert!(
            err.to_string()
                .starts_with("create \"subprocess\" (dsh-probe-subprocess): "),
            "{failure}: {err}"
        );
        let disposals: Vec<_> = events(&record)
            .into_iter()
            .filter(|(event, _)| event == "dispose")
            .collect();
        assert_eq!(
            disposals,
            pairs(&[("dispose", "fs"), ("dispose", "e2b")]),
            "{failure}"
        );
    }
}

#[tokio::test]
async fn every_dispose_runs_and_failures_are_aggregated() {
    require(&PROBES);
    let scratch = Scratch::new();
    let record = scratch.record("events.jsonl");
    let composition = compose(&probe_manifest(
        &record,
        &[
            ("subprocess", "failDispose: true"),
            ("e2b", "failDispose: true"),
        ],
    ))
    .expect("valid");
    let host = composition.start().await.expect("start");
    let err = host.dispose().await.expect_err("two dispose failures");
    let HostError::Dispose(dispose) = &err else {
        panic!("expected a dispose error, got {err}");
    };
    let failed: Vec<&str> = dispose.failures.iter().map(|f| f.id.as_str()).collect();
    assert_eq!(failed, ["subprocess", "e2b"]);
    let disposals: Vec<_> = events(&record)
        .into_iter()
        .filter(|(event, _)| event == "dispose")
        .collect();
    assert_eq!(
        disposals,
        pairs(&[
            ("dispose", "subprocess"),
            ("dispose", "fs"),
            ("dispose", "e2b")
        ])
    );
}

#[test]
fn plugin_config_errors_name_the_field_before_anything_is_created() {
    require(&PROBES);
    let scratch = Scratch::new();
    let record = scratch.record("events.jsonl");
    let err =
        compose(&probe_manifest(&record, &[("fs", "bogusField: 1")])).expect_err("strict config");
    assert!(err.is_config_error(), "{err}");
    let text = err.to_string();
    assert!(text.contains("entry \"fs\""), "{text}");
    assert!(text.contains("config.bogusField: unknown field"), "{text}");
    assert!(read_record(&record).is_empty(), "nothing was created");
}

/// Runs `dsh exec -- sleep` (the probe world's `sleep` never ends) over the
/// three probes, sends `signal` to dsh, and checks the orderly disposal.
fn signal_disposes(signal: i32) {
    require(&PROBES);
    let scratch = Scratch::new();
    let record = scratch.record("events.jsonl");
    // disposeDelayMs proves dsh waits for each disposal before the next and
    // before exiting.
    let manifest = scratch.write(
        "signal.yaml",
        &probe_manifest(&record, &[("fs", "disposeDelayMs: 200")]),
    );
    let mut child = dsh()
        .args(["--config", &manifest, "exec", "--", "sleep"])
        .spawn()
        .expect("spawn dsh");
    assert!(
        wait_until(Duration::from_secs(20), || events(&record).len() == 3),
        "probes not created: {:?}",
        events(&record)
    );
    // Give exec a moment to start the program.
    std::thread::sleep(Duration::from_millis(300));
    let started = std::time::Instant::now();
    rustix::process::kill_process(
        rustix::process::Pid::from_child(&child),
        rustix::process::Signal::from_named_raw(signal).expect("signal"),
    )
    .expect("signal dsh");
    let status = child.wait().expect("wait dsh");
    assert_eq!(status.code(), Some(128 + signal));
    assert!(started.elapsed() < Duration::from_secs(20), "disposal hung");
    assert_eq!(
        events(&record),
        pairs(&[
            ("create", "e2b"),
            ("create", "fs"),
            ("create", "subprocess"),
            ("dispose", "subprocess"),
            ("dispose", "fs"),
            ("dispose", "e2b"),
        ])
    );
    // Each dependent was fully disposed (fs after its 200 ms) before its
    // provider's dispose began.
    let lines = read_record(&record);
    for (dependent, provider) in [(3, 4), (4, 5)] {
        let done = lines[dependent]["monotonicNs"]
            .as_u64()
            .expect("dispose time");
        let began = lines[provider]["startedNs"]
            .as_u64()
            .expect("dispose start");
        assert!(
            began >= done,
            "{} began disposing before {} finished",
            lines[provider]["id"],
            lines[dependent]["id"]
        );
    }
}

#[test]
fn sigterm_on_a_running_dsh_disposes_in_reverse() {
    signal_disposes(libc::SIGTERM);
}

#[test]
fn sigint_on_a_running_dsh_disposes_in_reverse() {
    signal_disposes(libc::SIGINT);
}

#[test]
fn a_plugin_config_error_stops_dsh_with_exit_2_and_the_field_path() {
    require(&PROBES);
    let scratch = Scratch::new();
    let record = scratch.record("events.jsonl");
    // A config its type refuses is caught at validation: nothing created.
    let manifest = scratch.write(
        "bad-config.yaml",
        &probe_manifest(&record, &[("subprocess", "disposeDelayMs: soon")]),
    );
    let output = dsh()
        .args(["--config", &manifest, "exec", "--", "sleep"])
        .output()
        .expect("run dsh");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains(
            "entry \"subprocess\" (line 1): plugin dsh-probe-subprocess: config.disposeDelayMs"
        ),
        "{stderr}"
    );
    assert!(events(&record).is_empty(), "nothing was created");
    // A config only `create` can judge (a cwd that does not exist) is a
    // Config error at create: exit 2 too, after rolling back.
    let manifest = scratch.write(
        "bad-cwd.yaml",
        &format!(
            "- {{id: e2b, name: dsh-probe-e2b, config: {{record: {record}}}}}\n\
             - {{id: fs, name: dsh-probe-fs, config: {{record: {record}}}}}\n\
             - {{id: subprocess, name: dsh-subprocess-local, config: {{cwd: /nonexistent/dir}}}}\n"
        ),
    );
    let output = dsh()
        .args(["--config", &manifest, "exec", "--", "true"])
        .output()
        .expect("run dsh");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("create \"subprocess\" (dsh-subprocess-local): ")
            && stderr.contains("config.cwd"),
        "{stderr}"
    );
    // The providers created before it were rolled back.
    assert_eq!(
        events(&record),
        pairs(&[
            ("create", "e2b"),
            ("create", "fs"),
            ("dispose", "fs"),
            ("dispose", "e2b")
        ])
    );
}

/// The opt-in embedder helper: a program that starts a host and calls
/// `dispose_on_signal` gets the same orderly disposal on SIGTERM and exits
/// 128+15. The test re-runs its own binary as that program (selected by an
/// environment variable) so the helper's `exit` ends a child, not the test.
#[test]
fn dispose_on_signal_disposes_and_exits_for_embedders() {
    const ROLE: &str = "DSH_HOST_TEST_EMBEDDER_RECORD";
    if let Some(record) = std::env::var_os(ROLE) {
        embedder(&record.to_string_lossy());
        unreachable!("the embedder exits through the signal helper");
    }
    require(&PROBES);
    let scratch = Scratch::new();
    let record = scratch.record("events.jsonl");
    let mut child = std::process::Command::new(std::env::current_exe().expect("test binary"))
        .args([
            "--exact",
            "probes::dispose_on_signal_disposes_and_exits_for_embedders",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(ROLE, &record)
        .env("DSH_PLUGIN_PATH", plugin_dir())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("spawn embedder");
    // The embedder prints its marker once the handlers are installed (the
    // test harness writes its own text on the same line first).
    let stdout = child.stdout.take().expect("stdout");
    let (ready_tx, ready_rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let found = std::io::BufRead::lines(std::io::BufReader::new(stdout))
            .map_while(Result::ok)
            .any(|line| line.contains(EMBEDDER_READY));
        let _ = ready_tx.send(found);
    });
    let ready = ready_rx
        .recv_timeout(Duration::from_secs(20))
        .unwrap_or(false);
    if !ready {
        let _ = child.kill();
        panic!("embedder did not start: {:?}", events(&record));
    }
    assert_eq!(events(&record).len(), 3);
    rustix::process::kill_process(
        rustix::process::Pid::from_child(&child),
        rustix::process::Signal::TERM,
    )
    .expect("signal embedder");
    let status = child.wait().expect("wait embedder");
    assert_eq!(status.code(), Some(128 + libc::SIGTERM));
    assert_eq!(
        events(&record)[3..],
        pairs(&[
            ("dispose", "subprocess"),
            ("dispose", "fs"),
            ("dispose", "e2b")
        ])
    );
}

const EMBEDDER_READY: &str = "embedder-ready";

/// The embedder role: start the probes, opt in to signal disposal, wait.
fn embedder(record: &str) {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    runtime.block_on(async {
        let host = std::sync::Arc::new(
            dsh_host::Host::from_str(&probe_manifest(record, &[]), ManifestFormat::Yaml)
                .await
                .expect("start probes"),
        );
        let _watch = dsh_host::dispose_on_signal(host.clone()).expect("install handlers");
        println!("{EMBEDDER_READY}");
        std::future::pending::<()>().await;
    });
}

#[test]
fn a_panic_names_the_plugin_and_nothing_is_printed_outside_tracing() {
    require(&PROBES);
    let scratch = Scratch::new();
    let record = scratch.record("events.jsonl");
    let path = scratch.write("m.yaml", &probe_manifest(&record, &[]));
    let output = dsh()
        .args(["--config", &path, "fs", "stat", "/.probe/panic"])
        .output()
        .expect("run dsh");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    // One line: the error, naming the instance that panicked. The plugin's
    // panic hook reports through tracing (at info, below the default
    // level), so std's raw `thread '…' panicked at` print never appears.
    let lines: Vec<&str> = stderr.lines().collect();
    assert_eq!(lines.len(), 1, "{stderr}");
    assert!(
        lines[0].contains("plugin \"fs\" panicked: stat: probe panic on /.probe/panic"),
        "{stderr}"
    );
    // At info the hook's report arrives through the host's subscriber,
    // labelled with the plugin.
    let output = dsh()
        .args([
            "--log",
            "info",
            "--config",
            &path,
            "fs",
            "stat",
            "/.probe/panic",
        ])
        .output()
        .expect("run dsh");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!stderr.contains("thread '"), "{stderr}");
    let report = stderr
        .lines()
        .find(|line| line.contains("dsh_plugin_api::panic"))
        .unwrap_or_else(|| panic!("no tracing report of the panic: {stderr}"));
    assert!(
        report.contains("dsh.plugin") && report.contains("fs") && report.contains("memory_fs.rs"),
        "{report}"
    );
}
