//! `dsh check`: every class of manifest error exits 2 with a message naming
//! the entry (and line where known), and nothing is created.

use crate::support::{Scratch, library, require, run_dsh, text};

const PROBES: [&str; 3] = ["dsh-probe-e2b", "dsh-probe-fs", "dsh-probe-subprocess"];

/// Runs `dsh check` on `manifest` (YAML unless `name` says otherwise);
/// asserts exit 2 and returns stderr.
fn rejected(name: &str, manifest: &str) -> String {
    let scratch = Scratch::new();
    let path = scratch.write(name, manifest);
    let output = run_dsh(&["--config", &path, "check"]);
    let (stdout, stderr) = text(&output);
    assert_eq!(
        output.status.code(),
        Some(2),
        "expected exit 2 for {name}:\n{manifest}\nstdout: {stdout}\nstderr: {stderr}"
    );
    assert!(stdout.is_empty(), "nothing on stdout: {stdout}");
    assert!(
        stderr.contains(&path),
        "the message names the manifest: {stderr}"
    );
    stderr
}

fn assert_mentions(stderr: &str, needles: &[&str]) {
    for needle in needles {
        assert!(stderr.contains(needle), "missing {needle:?} in:\n{stderr}");
    }
}

#[test]
fn unknown_entry_key() {
    let err = rejected(
        "m.yaml",
        "plugins:\n  - id: fs\n    name: dsh-fs-local\n    inejct: {}\n",
    );
    assert_mentions(
        &err,
        &[
            ":4: entry \"fs\": unknown key \"inejct\"",
            "did you mean \"inject\"",
        ],
    );
}

#[test]
fn unknown_top_level_key() {
    let err = rejected(
        "m.toml",
        "version = 1\n[[plugins]]\nid = \"fs\"\nname = \"dsh-fs-local\"\n",
    );
    assert_mentions(&err, &[":1: unknown top-level key \"version\""]);
}

#[test]
fn mistyped_value() {
    let err = rejected(
        "m.toml",
        "[[plugins]]\nid = \"fs\"\nname = \"dsh-fs-local\"\ndisabled = \"yes\"\n",
    );
    assert_mentions(
        &err,
        &[":4: entry \"fs\": `disabled` must be true or false, found string \"yes\""],
    );
}

#[test]
fn missing_required_key() {
    let err = rejected("m.yaml", "- id: fs\n");
    assert_mentions(&err, &[":1: entry \"fs\": missing required key `name`"]);
}

#[test]
fn malformed_syntax() {
    let err = rejected("m.yaml", "plugins:\n  - id: fs\n    name: [unclosed\n");
    assert_mentions(&err, &["invalid YAML"]);
    let err = rejected("m.toml", "[[plugins]]\nid = \n");
    assert_mentions(&err, &[":2: invalid TOML"]);
}

#[test]
fn unreadable_manifest() {
    let output = run_dsh(&["--config", "/nonexistent/dsh.yaml", "check"]);
    assert_eq!(output.status.code(), Some(2));
    assert_mentions(&text(&output).1, &["/nonexistent/dsh.yaml: read: "]);
    let scratch = Scratch::new();
    let path = scratch.write("m.json", "{}");
    let output = run_dsh(&["--config", &path, "check"]);
    assert_eq!(output.status.code(), Some(2));
    assert_mentions(&text(&output).1, &["must end in .toml, .yaml or .yml"]);
}

#[test]
fn duplicate_id() {
    require(&["dsh-fs-local"]);
    let err = rejected(
        "m.yaml",
        "- {id: fs, name: dsh-fs-local}\n- {id: fs, name: dsh-fs-local}\n",
    );
    assert_mentions(
        &err,
        &["entry \"fs\" (line 2): duplicate id \"fs\" (first used by entry \"fs\" (line 1))"],
    );
}

#[test]
fn missing_library_names_every_place_searched() {
    let err = rejected("m.yaml", "- {id: x, name: '@acme/dsh-nowhere'}\n");
    let searched = crate::support::plugin_dir().join("libdsh_nowhere.so");
    assert_mentions(
        &err,
        &[
            "entry \"x\" (line 1): plugin @acme/dsh-nowhere: library libdsh_nowhere.so not found; searched ",
            &format!("{} (DSH_PLUGIN_PATH)", searched.display()),
            "(executable's directory)",
        ],
    );
}

#[test]
fn explicit_path_that_does_not_exist() {
    let err = rejected("m.yaml", "- {id: x, name: dsh-x, path: ./libmissing.so}\n");
    assert_mentions(
        &err,
        &[
            "entry \"x\" (line 1): plugin dsh-x: library ",
            "libmissing.so: ",
        ],
    );
}

#[test]
fn a_file_that_is_not_a_shared_object() {
    let scratch = Scratch::new();
    scratch.write("libfake.so", "not an ELF file");
    let manifest = "- {id: fake, name: dsh-fake, path: libfake.so}\n";
    let path = scratch.write("m.yaml", manifest);
    let output = run_dsh(&["--config", &path, "check"]);
    assert_eq!(output.status.code(), Some(2));
    assert_mentions(
        &text(&output).1,
        &["entry \"fake\" (line 1): ", "libfake.so"],
    );
}

#[test]
fn a_shared_object_that_is_not_a_dsh_plugin() {
    // Any system library without the dsh root module will do.
    let libm = [
        "/lib/x86_64-linux-gnu/libm.so.6",
        "/usr/lib/x86_64-linux-gnu/libm.so.6",
    ]
    .into_iter()
    .find(|path| std::path::Path::new(path).is_file())
    .expect("libm.so.6 is present on Debian");
    let err = rejected(
        "m.yaml",
        &format!("- {{id: libm, name: libm, path: {libm}}}\n"),
    );
    assert_mentions(&err, &["entry \"libm\" (line 1): ", libm]);
}

#[test]
fn manifest_name_must_match_the_descriptor() {
    let probe = library("dsh-probe-e2b");
    let err = rejected(
        "m.yaml",
        &format!(
            "- {{id: e2b, name: dsh-probe-fs, path: {}}}\n",
            probe.display()
        ),
    );
    assert_mentions(
        &err,
        &[
            "entry \"e2b\" (line 1): manifest name \"dsh-probe-fs\" does not match the plugin in",
            "(its descriptor says \"dsh-probe-e2b\")",
        ],
    );
}

#[test]
fn unknown_inject_service() {
    require(&["dsh-fs-local"]);
    let err = rejected(
        "m.yaml",
        "- id: fs\n  name: dsh-fs-local\n  inject: {db: fs}\n",
    );
    assert_mentions(
        &err,
        &["entry \"fs\" (line 3): inject: unknown service \"db\""],
    );
}

#[test]
fn binding_to_an_unknown_id() {
    require(&PROBES);
    let err = rejected(
        "m.yaml",
        "- {id: e2b, name: dsh-probe-e2b}\n- {id: fs, name: dsh-probe-fs, inject: {e2b: owner}}\n",
    );
    assert_mentions(
        &err,
        &["entry \"fs\" (line 2): inject: e2b is bound to \"owner\", but no entry has that id"],
    );
}

#[test]
fn binding_to_a_disabled_entry() {
    require(&PROBES);
    let err = rejected(
        "m.yaml",
        "- {id: e2b, name: dsh-probe-e2b}\n- {id: old, name: dsh-probe-e2b, disabled: true}\n- {id: fs, name: dsh-probe-fs, inject: {e2b: old}}\n",
    );
    assert_mentions(
        &err,
        &["entry \"fs\" (line 3): inject: e2b is bound to \"old\", which is disabled"],
    );
}

#[test]
fn binding_to_an_entry_that_does_not_provide_the_service() {
    require(&PROBES);
    let err = rejected(
        "m.yaml",
        "- {id: e2b, name: dsh-probe-e2b}\n- {id: fs, name: dsh-probe-fs, inject: {e2b: fs}}\n",
    );
    assert_mentions(
        &err,
        &[
            "entry \"fs\" (line 2): inject: e2b is bound to \"fs\", which does not provide e2b (it provides fs)",
        ],
    );
}

#[test]
fn binding_a_service_the_plugin_does_not_inject() {
    require(&PROBES);
    let err = rejected(
        "m.yaml",
        "- {id: e2b, name: dsh-probe-e2b, inject: {fs: fs}}\n- {id: fs, name: dsh-probe-fs}\n",
    );
    assert_mentions(
        &err,
        &["entry \"e2b\" (line 1): inject: binds fs, but plugin dsh-probe-e2b does not inject fs"],
    );
}

#[test]
fn missing_provider() {
    require(&PROBES);
    let err = rejected("m.yaml", "- {id: fs, name: dsh-probe-fs}\n");
    assert_mentions(
        &err,
        &[
            "entry \"fs\" (line 1): plugin dsh-probe-fs injects e2b, but no other enabled entry provides it",
        ],
    );
}

#[test]
fn ambiguous_provider_without_a_binding() {
    require(&PROBES);
    let err = rejected(
        "m.yaml",
        "- {id: a, name: dsh-probe-e2b}\n- {id: b, name: dsh-probe-e2b}\n- {id: fs, name: dsh-probe-fs}\n",
    );
    assert_mentions(
        &err,
        &[
            "entry \"fs\" (line 3): plugin dsh-probe-fs injects e2b, which \"a\" and \"b\" provide; choose one with `inject: { e2b: <id> }`",
        ],
    );
}

#[test]
fn every_problem_is_reported_not_just_the_first() {
    require(&PROBES);
    let err = rejected(
        "m.yaml",
        "- {id: fs, name: dsh-probe-fs}\n- {id: x, name: dsh-nowhere}\n- {id: fs, name: dsh-probe-e2b}\n",
    );
    let lines: Vec<&str> = err.lines().collect();
    assert_eq!(lines.len(), 2, "{err}");
    assert_mentions(lines[0], &["entry \"x\" (line 2)", "not found"]);
    assert_mentions(lines[1], &["entry \"fs\" (line 3): duplicate id"]);
}

#[test]
fn disabled_entries_are_excluded() {
    require(&PROBES);
    let scratch = Scratch::new();
    let path = scratch.write(
        "m.yaml",
        "- {id: ghost, name: dsh-nowhere, disabled: true}\n- {id: e2b, name: dsh-probe-e2b}\n",
    );
    let output = run_dsh(&["--config", &path, "check"]);
    let (stdout, stderr) = text(&output);
    assert!(output.status.success(), "{stderr}");
    assert!(
        stdout.contains("ok, 1 plugin in load order: e2b"),
        "{stdout}"
    );
}

#[test]
fn a_plugin_built_against_another_api_version() {
    // A library that carries the plugin entry symbol of a different plugin
    // API version: the loader must refuse it before using anything else.
    let scratch = Scratch::new();
    let source = scratch.write(
        "old.c",
        "const unsigned int dsh_plugin_api_version__dsh_old = 999;\n",
    );
    let library = scratch.path("libdsh_old.so");
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".to_owned());
    let built = std::process::Command::new(&cc)
        .args(["-shared", "-fPIC", "-o"])
        .arg(&library)
        .arg(&source)
        .status()
        .unwrap_or_else(|err| panic!("run {cc} (the C compiler Rust links with): {err}"));
    assert!(built.success(), "{cc} failed to build the fixture");
    let err = rejected(
        "m.yaml",
        &format!(
            "- {{id: old, name: dsh-old, path: {}}}\n",
            library.display()
        ),
    );
    assert_mentions(
        &err,
        &[
            "entry \"old\" (line 1): ",
            "incompatible",
            "built against dsh plugin API version 999",
        ],
    );
}

#[test]
fn a_cycle_is_printed() {
    // The example read-only decorator injects fs and provides fs: two of
    // them bound to each other form a cycle.
    require(&["dsh-example-fs-readonly"]);
    let err = rejected(
        "m.yaml",
        "\
- {id: a, name: dsh-example-fs-readonly, inject: {fs: b}}
- {id: b, name: dsh-example-fs-readonly, inject: {fs: a}}
",
    );
    assert_mentions(
        &err,
        &["entry \"a\" (line 1): dependency cycle: a -> b -> a"],
    );
}

/// The composition: a decorator bound to `fs`, plus a spare `fs`
/// provider nobody consumes. Which one `dsh` would use is a guess.
fn ambiguous_served(record: &str, serve: &str) -> String {
    format!(
        "\
- {{id: e2b, name: dsh-probe-e2b, config: {{record: {record}}}}}
- {{id: fs, name: dsh-probe-fs, config: {{record: {record}}}}}
- {{id: ro, name: dsh-example-fs-readonly, inject: {{fs: fs}}}}
- {{id: spare, name: dsh-probe-fs, config: {{record: {record}}}{serve}}}
- {{id: subprocess, name: dsh-probe-subprocess, config: {{record: {record}}}, inject: {{fs: fs}}}}
"
    )
}

#[test]
fn several_unconsumed_providers_fail_before_anything_is_created() {
    require(&PROBES);
    require(&["dsh-example-fs-readonly"]);
    let scratch = Scratch::new();
    let record = scratch.record("events.jsonl");
    let manifest = ambiguous_served(&record, "");
    let err = rejected("m.yaml", &manifest);
    assert_mentions(
        &err,
        &[
            "entry \"ro\" (line 3): fs is served by \"ro\" and \"spare\" (no other entry consumes them); choose one with `serve: [fs]` on its entry",
        ],
    );
    assert!(
        !err.contains("\"fs\" and"),
        "the consumed provider is no candidate: {err}"
    );
    // Commands that create fail the same way, before creating anything.
    let path = scratch.write("m.yaml", &manifest);
    let output = run_dsh(&["--config", &path, "fs", "stat", "/"]);
    assert_eq!(output.status.code(), Some(2), "{}", text(&output).1);
    assert_mentions(&text(&output).1, &["choose one with `serve: [fs]`"]);
    assert!(
        crate::support::read_record(&record).is_empty(),
        "no plugin was created"
    );
}

#[test]
fn serve_names_the_served_entry_and_plugins_shows_it() {
    require(&PROBES);
    require(&["dsh-example-fs-readonly"]);
    let scratch = Scratch::new();
    let record = scratch.record("events.jsonl");
    let path = scratch.write("m.yaml", &ambiguous_served(&record, ", serve: [fs]"));
    let output = run_dsh(&["--config", &path, "check"]);
    let (stdout, stderr) = text(&output);
    assert!(output.status.success(), "{stderr}");
    assert_mentions(
        &stdout,
        &[
            "fs: served by entry \"spare\"",
            "subprocess: served by entry \"subprocess\"",
        ],
    );
    let output = run_dsh(&["--config", &path, "plugins", "--json"]);
    let plugins: serde_json::Value = serde_json::from_slice(&output.stdout).expect("JSON");
    let serves: Vec<(&str, &serde_json::Value)> = plugins
        .as_array()
        .expect("list")
        .iter()
        .map(|plugin| (plugin["id"].as_str().expect("id"), &plugin["serves"]))
        .filter(|(_, serves)| serves.as_array().is_some_and(|list| !list.is_empty()))
        .collect();
    assert_eq!(
        serves,
        [
            ("e2b", &serde_json::json!(["e2b"])),
            ("spare", &serde_json::json!(["fs"])),
            ("subprocess", &serde_json::json!(["subprocess"])),
        ]
    );
    // The chosen entry is what `dsh fs` talks to: the spare probe, not
    // the read-only decorator (which would refuse the write).
    let output = run_dsh(&["--config", &path, "fs", "write", "/x", "hello"]);
    assert!(output.status.success(), "{}", text(&output).1);
}

#[test]
fn bad_serve_lists_are_reported() {
    require(&PROBES);
    let err = rejected(
        "m.yaml",
        "- {id: e2b, name: dsh-probe-e2b, serve: [fs, db]}\n",
    );
    assert_mentions(
        &err,
        &[
            "entry \"e2b\" (line 1): serve: plugin dsh-probe-e2b does not provide fs (it provides e2b)",
            "entry \"e2b\" (line 1): serve: unknown service \"db\"",
        ],
    );
}

#[test]
fn a_bad_plugin_config_fails_check_with_every_field_error() {
    require(&["dsh-fs-local", "dsh-subprocess-local"]);
    let err = rejected(
        "m.yaml",
        "\
- id: fs
  name: dsh-fs-local
  config: {cwd: 3}
- id: subprocess
  name: dsh-subprocess-local
  config: {killGraceMs: soon, spillDir: [/tmp], extra: 1}
",
    );
    let lines: Vec<&str> = err.lines().collect();
    assert_eq!(lines.len(), 4, "{err}");
    assert_mentions(
        lines[0],
        &[
            "entry \"fs\" (line 1): plugin dsh-fs-local: config.cwd: invalid type: number 3, expected a string",
        ],
    );
    assert_mentions(
        lines[1],
        &[
            "entry \"subprocess\" (line 4): plugin dsh-subprocess-local: config.extra: unknown field (expected cwd, durableDir, durableScope, killGraceMs, spillDir)",
        ],
    );
    assert_mentions(
        lines[2],
        &["config.killGraceMs: invalid type: string \"soon\", expected an integer"],
    );
    assert_mentions(
        lines[3],
        &["config.spillDir: invalid type: a list, expected a string"],
    );
}

/// The owner's own rules (a range, a path's shape, fields that exclude each
/// other) are `dsh check`'s too: every problem at once, before any sandbox
/// exists (check creates nothing; no E2B variables are needed).
#[test]
fn the_e2b_owners_config_rules_fail_check_all_at_once() {
    require(&["dsh-e2b-owner"]);
    let err = rejected(
        "owner.yaml",
        "\
- id: e2b
  name: dsh-e2b-owner
  config: {timeoutMs: 0, cwd: work, sandboxId: '', template: base}
",
    );
    let lines: Vec<&str> = err.lines().collect();
    assert_eq!(lines.len(), 4, "{err}");
    assert_mentions(
        lines[0],
        &["entry \"e2b\" (line 1): plugin dsh-e2b-owner: config.cwd: "],
    );
    assert_mentions(lines[1], &["config.timeoutMs: must be positive"]);
    assert_mentions(
        lines[2],
        &["config.template: applies only to a created sandbox; remove it or sandboxId"],
    );
    assert_mentions(lines[3], &["config.sandboxId: is empty"]);
}
