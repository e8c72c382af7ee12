//! `dsh conformance`: the kit passes on the local composition; `--json`
//! gives the machine-readable report; a provider that breaks promises
//! makes it exit non-zero.

use crate::support::{require, run_dsh, text};

const LOCAL: [&str; 2] = ["dsh-fs-local", "dsh-subprocess-local"];

#[test]
fn the_kit_passes_on_the_local_composition() {
    require(&LOCAL);
    let output = run_dsh(&["conformance"]);
    let (stdout, stderr) = text(&output);
    assert_eq!(output.status.code(), Some(0), "{stdout}\n{stderr}");
    let summary = stdout.lines().last().expect("summary line");
    assert!(summary.contains(" passed, 0 failed, "), "{summary}");
    let passed: usize = summary
        .split_whitespace()
        .next()
        .and_then(|count| count.parse().ok())
        .expect("count");
    assert!(passed > 50, "only {passed} cases passed:\n{stdout}");
    assert!(!stdout.contains("\nFAIL "), "{stdout}");
}

#[test]
fn json_reports_every_selected_case() {
    require(&LOCAL);
    let output = run_dsh(&["conformance", "--json", "--filter", "fs.stat"]);
    let (stdout, stderr) = text(&output);
    assert_eq!(output.status.code(), Some(0), "{stderr}");
    let report: serde_json::Value = serde_json::from_str(&stdout).expect("JSON report");
    let cases = report["cases"].as_array().expect("cases");
    assert!(!cases.is_empty(), "{report}");
    for case in cases {
        assert!(
            case["name"].as_str().expect("name").contains("fs.stat"),
            "{case}"
        );
        assert_eq!(case["outcome"], "passed", "{case}");
    }
}

/// The read-only example decorator over fs-local refuses every mutation:
/// the kit's write cases fail unless told the fs is read-only.
fn read_only_manifest(scratch: &crate::support::Scratch) -> String {
    scratch.write(
        "readonly.yaml",
        "\
- {id: local, name: dsh-fs-local}
- {id: fs, name: dsh-example-fs-readonly, inject: {fs: local}}
- {id: subprocess, name: dsh-subprocess-local}
",
    )
}

#[test]
fn a_provider_that_breaks_promises_fails_the_kit() {
    require(&[
        "dsh-fs-local",
        "dsh-subprocess-local",
        "dsh-example-fs-readonly",
    ]);
    let scratch = crate::support::Scratch::new();
    let manifest = read_only_manifest(&scratch);
    let output = run_dsh(&["--config", &manifest, "conformance", "--filter", "fs.write"]);
    let (stdout, stderr) = text(&output);
    assert_eq!(output.status.code(), Some(1), "{stdout}\n{stderr}");
    assert!(stdout.contains("FAIL fs.write"), "{stdout}");

    // Declared read-only, the same provider passes what applies.
    let output = run_dsh(&[
        "--config",
        &manifest,
        "conformance",
        "--filter",
        "fs.write,fs.stat",
        "--read-only-fs",
    ]);
    let (stdout, stderr) = text(&output);
    assert_eq!(output.status.code(), Some(0), "{stdout}\n{stderr}");
    assert!(stdout.contains("SKIP fs.write"), "{stdout}");
    assert!(stdout.contains("PASS fs.stat"), "{stdout}");
}
