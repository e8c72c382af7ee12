//! `dsh lsp …` on the embedded local composition, against pyright: diagnostics (exit 1 on
//! errors, `--json`), definition, references, hover, symbols and rename by position or symbol
//! name; bad positions, files no server takes (no language, not UTF-8, not a regular file) and
//! broken `--lsp-config` files refused with a clear error, exit 2; `--timeout` bounding a server
//! that never answers `initialize`; a file under `a:b/` diagnosed by clangd; no server left
//! running when `dsh` exits.

use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::mcp::processes_under;
use crate::support::{dsh, require, text};

const LOCAL: [&str; 2] = ["dsh-fs-local", "dsh-subprocess-local"];

/// `dsh ARGS` in `dir`: (exit code, stdout, stderr).
fn lsp(dir: &Path, args: &[&str]) -> (i32, String, String) {
    let output = dsh().current_dir(dir).args(args).output().expect("run dsh");
    let (stdout, stderr) = text(&output);
    (output.status.code().unwrap_or(-1), stdout, stderr)
}

#[test]
fn lsp_commands_answer_from_pyright_and_leave_nothing_running() {
    require(&LOCAL);
    let scratch = tempfile::tempdir().expect("tempdir");
    let dir = scratch.path();
    std::fs::write(dir.join("pyrightconfig.json"), "{}\n").unwrap();
    std::fs::write(
        dir.join("lib.py"),
        "def greet(name: str) -> str:\n    return 'hi ' + name\n",
    )
    .unwrap();
    std::fs::write(
        dir.join("app.py"),
        "from lib import greet\n\nprint(greet(42))\n",
    )
    .unwrap();

    let (code, stdout, stderr) = lsp(dir, &["lsp", "diagnostics", "app.py"]);
    assert_eq!(code, 1, "errors exit 1: {stdout}{stderr}");
    assert!(
        stdout.contains("1 errors") && stdout.contains("app.py:3:"),
        "{stdout}"
    );
    let (code, stdout, _) = lsp(dir, &["--json", "lsp", "diagnostics", "app.py"]);
    assert_eq!(code, 1);
    let json: Value = serde_json::from_str(&stdout).expect("JSON");
    assert_eq!(json["errors"], 1);
    assert_eq!(json["diagnostics"][0]["severity"], "error");
    assert_eq!(json["diagnostics"][0]["start"]["line"], 3);

    let (code, stdout, stderr) = lsp(dir, &["lsp", "definition", "app.py:3:7"]);
    assert_eq!(code, 0, "{stderr}");
    assert!(stdout.trim().ends_with("lib.py:1:5"), "{stdout}");
    let (code, stdout, stderr) = lsp(dir, &["lsp", "references", "lib.py", "--symbol", "greet"]);
    assert_eq!(code, 0, "{stderr}");
    assert!(
        stdout.contains("app.py:3:7") && stdout.contains("lib.py:1:5"),
        "{stdout}"
    );
    let (_, stdout, _) = lsp(dir, &["lsp", "hover", "lib.py:1:5"]);
    assert!(stdout.contains("def greet(name: str) -> str"), "{stdout}");
    let (_, stdout, _) = lsp(dir, &["lsp", "symbols", "--file", "lib.py"]);
    assert!(stdout.contains("function greet"), "{stdout}");
    let (_, stdout, _) = lsp(dir, &["lsp", "symbols", "gree", "--language", "python"]);
    assert!(
        stdout.contains("greet") && stdout.contains("lib.py:1:5"),
        "{stdout}"
    );

    let (code, stdout, _) = lsp(
        dir,
        &["lsp", "rename", "lib.py:1:5", "welcome", "--dry-run"],
    );
    assert_eq!(code, 0);
    assert!(stdout.contains("not applied"), "{stdout}");
    assert!(
        std::fs::read_to_string(dir.join("app.py"))
            .unwrap()
            .contains("greet")
    );
    let (code, stdout, stderr) = lsp(
        dir,
        &["lsp", "rename", "lib.py", "--symbol", "greet", "welcome"],
    );
    assert_eq!(code, 0, "{stderr}");
    assert!(stdout.contains("applied"), "{stdout}");
    assert_eq!(
        std::fs::read_to_string(dir.join("app.py")).unwrap(),
        "from lib import welcome\n\nprint(welcome(42))\n"
    );
    std::fs::write(
        dir.join("app.py"),
        "from lib import welcome\n\nprint(welcome('x'))\n",
    )
    .unwrap();
    let (code, stdout, _) = lsp(dir, &["lsp", "diagnostics", "app.py"]);
    assert_eq!(code, 0, "fixed: {stdout}");

    for (args, says) in [
        (vec!["lsp", "definition", "app.py:x:1"], "FILE:LINE:COL"),
        (
            vec!["lsp", "hover", "app.py:1:1", "--symbol", "x"],
            "not both",
        ),
        (
            vec!["lsp", "diagnostics", "notes.txt"],
            "no language server",
        ),
        (vec!["lsp", "definition", "app.py:99:1"], "past the end"),
    ] {
        let (code, _, stderr) = lsp(dir, &args);
        assert_eq!(code, 2, "{args:?}: {stderr}");
        assert!(stderr.contains(says), "{args:?}: {stderr}");
    }
    std::fs::write(
        dir.join("lsp.yaml"),
        "languages:\n  - name: x\n    command: []\n",
    )
    .unwrap();
    let (code, _, stderr) = lsp(
        dir,
        &["--lsp-config", "lsp.yaml", "lsp", "diagnostics", "app.py"],
    );
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("lsp.yaml"), "{stderr}");

    assert_eq!(
        processes_under(dir),
        Vec::<u32>::new(),
        "no server outlives dsh"
    );
}

/// The report of issue 24: clangd answers for `a:b/m.cpp` with `:` unescaped where dsh had sent
/// `%3A`, and the answer was filed under the URI's spelling: the call waited out its timeout.
#[test]
fn a_file_under_a_directory_with_a_colon_is_diagnosed() {
    require(&LOCAL);
    let scratch = tempfile::tempdir().expect("tempdir");
    let dir = scratch.path();
    std::fs::create_dir(dir.join("a:b")).unwrap();
    std::fs::write(
        dir.join("a:b/m.cpp"),
        "int main() {\n  int x = \"text\";\n  return x;\n}\n",
    )
    .unwrap();
    let started = Instant::now();
    let (code, stdout, stderr) = lsp(dir, &["lsp", "diagnostics", "a:b/m.cpp", "--timeout", "30"]);
    assert_eq!(code, 1, "errors exit 1: {stdout}{stderr}");
    assert!(
        stdout.contains("1 errors") && stdout.contains("a:b/m.cpp:2:"),
        "{stdout}"
    );
    assert!(
        started.elapsed() < Duration::from_secs(30),
        "answered, not timed out: {:?}",
        started.elapsed()
    );
    assert_eq!(processes_under(dir), Vec::<u32>::new());
}

#[test]
fn timeout_bounds_a_server_that_never_answers_initialize() {
    require(&LOCAL);
    let scratch = tempfile::tempdir().expect("tempdir");
    let dir = scratch.path();
    // A "language server" that reads its stdin and never answers (its stdout, the shell's,
    // stays open).
    std::fs::write(
        dir.join("lsp.yaml"),
        "languages:\n  - name: silent\n    command: [sh, -c, 'cat > /dev/null']\n    \
         extensions: [{extension: silent, languageId: silent}]\n",
    )
    .unwrap();
    std::fs::write(dir.join("a.silent"), "anything\n").unwrap();
    let started = Instant::now();
    let (code, stdout, stderr) = lsp(
        dir,
        &[
            "--lsp-config",
            "lsp.yaml",
            "lsp",
            "diagnostics",
            "a.silent",
            "--timeout",
            "2",
        ],
    );
    let took = started.elapsed();
    // It took 62 s (the 60 s initialize wait, whatever --timeout said).
    assert!(
        took < Duration::from_secs(20),
        "took {took:?}: {stdout}{stderr}"
    );
    assert_eq!(code, 1, "a failed operation: {stdout}{stderr}");
    assert!(stdout.is_empty(), "{stdout}");
    assert!(
        stderr.contains("lsp_diagnostics a.silent")
            && stderr.contains("was not ready within 2 s")
            && stderr.contains("initialize"),
        "{stderr}"
    );
    assert_eq!(
        processes_under(dir),
        Vec::<u32>::new(),
        "the silent server does not outlive dsh"
    );
}

#[test]
fn files_no_server_can_be_given_are_refused_with_exit_2() {
    require(&LOCAL);
    let scratch = tempfile::tempdir().expect("tempdir");
    let dir = scratch.path();
    std::fs::write(dir.join("pyrightconfig.json"), "{}\n").unwrap();
    std::os::unix::fs::symlink("/dev/zero", dir.join("zero.py")).unwrap();
    std::fs::write(dir.join("latin1.py"), b"name = 'caf\xe9'\n").unwrap();

    let (code, stdout, stderr) = lsp(dir, &["lsp", "diagnostics", "zero.py"]);
    assert_eq!(code, 2, "{stdout}{stderr}");
    assert!(
        stderr.contains("lsp_diagnostics zero.py: /dev/zero is not a regular file but a device"),
        "{stderr}"
    );
    let (code, _, stderr) = lsp(dir, &["lsp", "hover", "zero.py:1:1"]);
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("not a regular file"), "{stderr}");

    // Exit 1 would say "the file has errors".
    let (code, stdout, stderr) = lsp(dir, &["lsp", "diagnostics", "latin1.py"]);
    assert_eq!(code, 2, "{stdout}{stderr}");
    assert!(stdout.is_empty(), "{stdout}");
    assert!(
        stderr.contains("lsp_diagnostics latin1.py")
            && stderr.contains("not valid UTF-8 (invalid sequence at byte offset 11)"),
        "{stderr}"
    );
    assert_eq!(processes_under(dir), Vec::<u32>::new());
}
