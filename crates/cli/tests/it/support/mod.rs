//! Shared by the host's integration tests: the built `dsh` binary, the
//! plugin libraries cargo builds with the tests, manifests in temp dirs,
//! and probe records.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant, SystemTime};

pub mod pty;

/// The `dsh` binary cargo built for this test run.
pub fn dsh_binary() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_dsh"))
}

/// The directory holding the plugin libraries the tests load: the test
/// executable's own (`target/<profile>/deps`). The plugins are this crate's
/// dev-dependencies, so cargo builds their libraries there with the tests,
/// from their current sources; `target/<profile>`, where `cargo build -p`
/// puts them, holds whatever was built last.
pub fn plugin_dir() -> PathBuf {
    std::env::current_exe()
        .expect("the test executable's path")
        .parent()
        .expect("the test executable has a parent directory")
        .to_path_buf()
}

/// The built library for `package` (`dsh-probe-e2b` → `libdsh_probe_e2b.so`),
/// checked to be no older than its crate's sources; a panic says what is
/// wrong (a package missing from dsh-cli's `[dev-dependencies]` is never
/// built here).
pub fn library(package: &str) -> PathBuf {
    let path = plugin_dir().join(format!("lib{}.so", package.replace('-', "_")));
    let built = modified(&path).unwrap_or_else(|err| {
        panic!(
            "{}: {err}: cargo builds a plugin's library with these tests only when \
             `{package}.workspace = true` is in dsh-cli's [dev-dependencies]",
            path.display()
        )
    });
    let (source, changed) = newest_source(package);
    assert!(
        built >= changed,
        "{} is older than {}: the tests would run a stale plugin",
        path.display(),
        source.display()
    );
    path
}

/// A `Cargo.toml` of this repository (`crates/cli/Cargo.toml`, `../Cargo.toml`,
/// relative to this crate) as a table.
pub fn cargo_toml(relative: &str) -> toml::Table {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(relative);
    std::fs::read_to_string(&path)
        .unwrap_or_else(|err| panic!("read {}: {err}", path.display()))
        .parse()
        .unwrap_or_else(|err| panic!("parse {}: {err}", path.display()))
}

/// The directory of the workspace crate `package`, from its path in
/// `[workspace.dependencies]`.
pub fn package_dir(package: &str) -> PathBuf {
    cargo_toml("../../Cargo.toml")["workspace"]["dependencies"]
        .get(package)
        .and_then(|spec| spec.get("path"))
        .and_then(|path| path.as_str())
        .map(|path| {
            Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("../..")
                .join(path)
        })
        .unwrap_or_else(|| panic!("{package} has no path in [workspace.dependencies]"))
}

/// The newest file of `package`'s sources (its `Cargo.toml`, `build.rs`
/// and everything under `src/`) and when it was changed.
fn newest_source(package: &str) -> (PathBuf, SystemTime) {
    let dir = package_dir(package);
    let mut files = vec![dir.join("Cargo.toml"), dir.join("build.rs")];
    let mut dirs = vec![dir.join("src")];
    while let Some(dir) = dirs.pop() {
        for entry in
            std::fs::read_dir(&dir).unwrap_or_else(|err| panic!("list {}: {err}", dir.display()))
        {
            let path = entry
                .unwrap_or_else(|err| panic!("list {}: {err}", dir.display()))
                .path();
            if path.is_dir() {
                dirs.push(path);
            } else {
                files.push(path);
            }
        }
    }
    files
        .into_iter()
        .filter_map(|path| modified(&path).ok().map(|time| (path, time)))
        .max_by_key(|(_, time)| *time)
        .expect("a crate has a Cargo.toml")
}

fn modified(path: &Path) -> std::io::Result<SystemTime> {
    std::fs::metadata(path)?.modified()
}

/// Asserts every listed plugin library is built from its current sources.
pub fn require(packages: &[&str]) {
    for package in packages {
        library(package);
    }
}

/// A `dsh` command with the plugin directory on `DSH_PLUGIN_PATH`, a quiet
/// log, and durable commands' state (the local provider's default
/// `durableDir`) under cargo's scratch directory for tests, not the user's
/// home.
pub fn dsh() -> Command {
    let mut command = Command::new(dsh_binary());
    command
        .env("DSH_PLUGIN_PATH", plugin_dir())
        .env("XDG_STATE_HOME", state_home())
        .env_remove("RUST_LOG")
        .stdin(Stdio::null());
    command
}

/// Where the `dsh` the tests start keep state (`XDG_STATE_HOME`): under
/// cargo's scratch directory for tests, never the user's home.
pub fn state_home() -> PathBuf {
    Path::new(env!("CARGO_TARGET_TMPDIR")).join("dsh-state")
}

/// Runs `dsh` with `args` to completion.
pub fn run_dsh(args: &[&str]) -> Output {
    dsh().args(args).output().expect("run dsh")
}

/// A temporary directory holding manifests and probe records.
pub struct Scratch {
    pub dir: tempfile::TempDir,
}

impl Scratch {
    pub fn new() -> Scratch {
        Scratch {
            dir: tempfile::tempdir().expect("tempdir"),
        }
    }

    pub fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// Writes `text` to `name` and returns its path as a string.
    pub fn write(&self, name: &str, text: &str) -> String {
        let path = self.path(name);
        std::fs::write(&path, text).expect("write scratch file");
        path.display().to_string()
    }

    /// The probe record file `name` in this scratch dir (as a string for
    /// manifests).
    pub fn record(&self, name: &str) -> String {
        self.path(name).display().to_string()
    }
}

/// Probe record events (JSON lines) from `path`; empty when the file does
/// not exist yet.
pub fn read_record(path: &str) -> Vec<serde_json::Value> {
    match std::fs::read_to_string(path) {
        Ok(text) => text
            .lines()
            .filter(|line| !line.trim().is_empty())
            .map(|line| serde_json::from_str(line).expect("record line is JSON"))
            .collect(),
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => Vec::new(),
        Err(err) => panic!("read record {path}: {err}"),
    }
}

/// Polls `condition` until it holds or `limit` passes.
pub fn wait_until(limit: Duration, mut condition: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + limit;
    while Instant::now() < deadline {
        if condition() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    condition()
}

/// stdout and stderr as text.
pub fn text(output: &Output) -> (String, String) {
    (
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

/// The repository's `config/` directory.
pub fn config_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../config")
}
