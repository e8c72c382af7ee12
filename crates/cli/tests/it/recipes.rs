//! The commands the READMEs show, run as shown where they run offline:
//! `examples/fs-readonly/README.md` §5–6 (the read-only fs by manifest) and
//! the README's durable-command recipe (a sandbox left running, reconnected
//! by `sandboxId`, on e2b-local).
//!
//! In a shown `sh` block, each command line runs in `sh -c` (a trailing
//! `  # comment` dropped; `cargo …` lines skipped: cargo built what these
//! tests depend on) with `dsh` on `PATH`, `target/debug` holding the
//! plugins the tests load, and `config/` the repository's; each `# … TEXT`
//! line under a command is text its output must contain. A command must
//! succeed unless such a line shows a `dsh:` error. A `yaml` block opening
//! with `# NAME.yaml` is written to that file first.

use std::path::{Path, PathBuf};
use std::process::Output;

use e2b_local::harness::LocalServer;
use serde_json::Value;

use crate::e2b_shutdown::sandboxes;
use crate::support::{Scratch, dsh_binary, plugin_dir, require, state_home};

/// A command line of a shown block and the text its output must contain.
#[derive(Debug)]
struct Step {
    command: String,
    expected: Vec<String>,
}

impl Step {
    fn refused(&self) -> bool {
        self.expected.iter().any(|text| text.starts_with("dsh: "))
    }
}

/// The fenced blocks of `language` in `text`, dedented by their fence's
/// indentation.
fn blocks(text: &str, language: &str) -> Vec<Vec<String>> {
    let mut found = Vec::new();
    let mut open: Option<(usize, Vec<String>)> = None;
    for line in text.lines() {
        let indent = line.len() - line.trim_start().len();
        match open.take() {
            None => {
                if line.trim_start() == format!("```{language}") {
                    open = Some((indent, Vec::new()));
                }
            }
            Some((_, lines)) if line.trim_start() == "```" => found.push(lines),
            Some((fence, mut lines)) => {
                lines.push(line.get(fence..).unwrap_or("").to_owned());
                open = Some((fence, lines));
            }
        }
    }
    found
}

/// The steps of a `sh` block.
fn steps(block: &[String]) -> Vec<Step> {
    let mut steps: Vec<Step> = Vec::new();
    for line in block {
        if let Some(text) = line.strip_prefix("# … ") {
            steps
                .last_mut()
                .unwrap_or_else(|| panic!("`{line}` follows no command"))
                .expected
                .push(text.to_owned());
        } else if !line.starts_with('#') && !line.starts_with("cargo ") && !line.is_empty() {
            let command = line.split_once("  #").map_or(line.as_str(), |(c, _)| c);
            steps.push(Step {
                command: command.trim().to_owned(),
                expected: Vec::new(),
            });
        }
    }
    steps
}

/// The part of `text` from the line `from` up to the line `to`.
fn section<'a>(text: &'a str, from: &str, to: &str) -> &'a str {
    let start = text
        .find(from)
        .unwrap_or_else(|| panic!("no `{from}` in the README"));
    let end = text[start..]
        .find(to)
        .unwrap_or_else(|| panic!("no `{to}` after `{from}`"));
    &text[start..start + end]
}

/// A scratch directory set up as the recipes expect: `dsh` on `PATH`
/// (`bin/dsh`), `target/debug` the plugin directory, `config/` the
/// repository's.
fn workdir() -> Scratch {
    let scratch = Scratch::new();
    let link = |target: &Path, name: &str| {
        let path = scratch.path(name);
        std::fs::create_dir_all(path.parent().expect("a parent")).expect("create a directory");
        std::os::unix::fs::symlink(target, &path)
            .unwrap_or_else(|err| panic!("link {}: {err}", path.display()));
    };
    link(&dsh_binary(), "bin/dsh");
    link(&plugin_dir(), "target/debug");
    link(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("../../config"),
        "config",
    );
    scratch
}

/// Runs `step` in `dir` (with `env` set) and checks what it printed.
fn run(dir: &Scratch, step: &Step, env: &[(String, String)]) -> Output {
    let path = format!(
        "{}:{}",
        dir.path("bin").display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let output = std::process::Command::new("sh")
        .arg("-c")
        .arg(&step.command)
        .current_dir(dir.dir.path())
        .env("PATH", path)
        .env("DSH_PLUGIN_PATH", plugin_dir())
        .env("XDG_STATE_HOME", state_home())
        .env_remove("RUST_LOG")
        .envs(env.iter().cloned())
        .stdin(std::process::Stdio::null())
        .output()
        .expect("run sh");
    let printed = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    assert_eq!(
        output.status.success(),
        !step.refused(),
        "`{}` exited {:?}:\n{printed}",
        step.command,
        output.status
    );
    for text in &step.expected {
        assert!(
            printed.contains(text.as_str()),
            "`{}` printed no `{text}`:\n{printed}",
            step.command
        );
    }
    output
}

fn readme(relative: &str) -> String {
    let path: PathBuf = Path::new(env!("CARGO_MANIFEST_DIR")).join(relative);
    std::fs::read_to_string(&path).unwrap_or_else(|err| panic!("read {}: {err}", path.display()))
}

/// `examples/fs-readonly/README.md` §5–6: the manifests it shows, then its
/// commands (`/tmp/x`, which the guide writes to show the refusal, becomes
/// a file in the scratch directory, which must not appear).
#[test]
fn the_fs_readonly_guide_runs_as_shown() {
    require(&[
        "dsh-fs-local",
        "dsh-subprocess-local",
        "dsh-example-fs-readonly",
    ]);
    let text = readme("../../examples/fs-readonly/README.md");
    let shown = section(&text, "## 5. Use it", "## 7. Compatibility");
    let dir = workdir();
    let mut manifests = Vec::new();
    for block in blocks(shown, "yaml") {
        let name = block[0]
            .strip_prefix("# ")
            .filter(|name| name.ends_with(".yaml"))
            .unwrap_or_else(|| panic!("a yaml block opens with `# NAME.yaml`: {block:?}"));
        dir.write(name, &block.join("\n"));
        manifests.push(name.to_owned());
    }
    assert_eq!(manifests, ["readonly.yaml", "readonly-with-commands.yaml"]);
    let target = dir.path("x").display().to_string();
    let mut ran = 0;
    for block in blocks(shown, "sh") {
        for mut step in steps(&block) {
            step.command = step.command.replace("/tmp/x", &target);
            for text in &mut step.expected {
                *text = text.replace("/tmp/x", &target);
            }
            run(&dir, &step, &[]);
            ran += 1;
        }
    }
    assert_eq!(ran, 6, "the guide's dsh commands");
    assert!(!dir.path("x").exists(), "the refused write wrote nothing");
}

/// README: a durable command's sandbox left running by `onDispose: leave`,
/// then reached by `sandboxId` in place of `template` (`SANDBOX` in the
/// recipe: the `sandboxId` the detached start printed). One sandbox
/// throughout, the command still running in it.
#[test]
fn the_readme_reconnects_a_left_sandbox_by_its_id() {
    require(&["dsh-e2b-owner", "dsh-fs-e2b", "dsh-subprocess-e2b"]);
    let text = readme("../../README.md");
    let recipe = blocks(&text, "sh")
        .into_iter()
        .find(|block| block.iter().any(|line| line.contains("> leave.yaml")))
        .expect("the README's sandboxId recipe");
    let steps = steps(&recipe);
    assert_eq!(steps.len(), 4, "{steps:?}");
    let server = LocalServer::start();
    let env = server.env();
    let dir = workdir();
    let mut started: Option<Value> = None;
    for mut step in steps {
        if let Some(started) = &started {
            let sandbox = started["sandboxId"].as_str().expect("a sandboxId");
            step.command = step.command.replace("SANDBOX", sandbox);
        }
        let output = run(&dir, &step, &env);
        if step.command.contains("--detach") {
            started = Some(serde_json::from_slice(&output.stdout).expect("JSON on stdout"));
        } else if step.command.ends_with(" ps") {
            let id = started.as_ref().expect("started before ps")["id"]
                .as_str()
                .expect("an id");
            let listing = String::from_utf8_lossy(&output.stdout);
            assert!(
                listing
                    .lines()
                    .any(|line| line.starts_with(id) && line.contains("running")),
                "{listing}"
            );
        }
    }
    assert!(started.is_some(), "the recipe starts a durable command");
    assert_eq!(sandboxes(&server), 1, "the later dsh reconnected");
}
