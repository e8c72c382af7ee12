//! The soak, short: 40 s of the full mix on 4 sandboxes against the `dsh`, plugins and
//! `e2b-local` built next to `dsh-soak` (`cargo build --workspace`), with everything counted
//! afterwards. The 30-minute, 20-sandbox soak of issue 9 is the same program with other flags
//! (`tests/soak/README.md`).

use std::process::Command;

/// The number before `label` in the verdict line (`… 357 operations checked, …`).
fn figure(verdict: &str, label: &str) -> u64 {
    let before = verdict
        .split(label)
        .next()
        .unwrap_or_else(|| panic!("no {label:?} in {verdict:?}"));
    before
        .split_whitespace()
        .last()
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no figure before {label:?} in {verdict:?}"))
}

#[test]
fn a_short_soak_checks_every_operation_and_leaves_nothing() {
    let output = Command::new(env!("CARGO_BIN_EXE_dsh-soak"))
        .args([
            "--duration",
            "40s",
            "--sandboxes",
            "4",
            "--warm-up",
            "10s",
            "--sandbox-timeout",
            "20s",
            "--kill-rate",
            "0.15",
            // 40 s is no steady state (one sandbox more or less alive at the end moves e2b-local's
            // RSS by a tenth); the 30-minute soak holds the 1.2.
            "--max-rss-ratio",
            "1.5",
        ])
        .output()
        .expect("run dsh-soak");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    // The report, for `--no-capture` and for a failure's output.
    println!("{stdout}");
    assert!(
        output.status.success(),
        "dsh-soak {}\n--- stdout\n{stdout}\n--- stderr\n{stderr}",
        output.status
    );
    let verdict = stdout
        .lines()
        .find(|line| line.starts_with("dsh-soak: PASS"))
        .unwrap_or_else(|| panic!("no PASS line:\n{stdout}"));
    assert!(figure(verdict, " operations checked") >= 50, "{verdict}");
    assert!(
        figure(verdict, " dsh processes SIGKILLed") >= 1,
        "{verdict}"
    );
    for counted in ["leaks while serving: ", "leaks after stop:    "] {
        let line = stdout
            .lines()
            .find(|line| line.starts_with(counted))
            .unwrap_or_else(|| panic!("no {counted:?} line:\n{stdout}"));
        assert_eq!(
            line.trim_start_matches(counted),
            "sandboxes 0, world processes 0, server children 0, dsh processes 0, mounts 0, \
             cgroups 0, state entries 0",
            "{stdout}"
        );
    }
}
