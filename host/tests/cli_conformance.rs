//! `dsh conformance`: the kit passes on the local composition; `--json`
//! gives the machine-readable report; a provider that breaks promises
//! makes it exit non-zero.

mod support;

use support::{require, run_dsh, text};

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
