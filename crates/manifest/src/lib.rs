//! The dsh manifest format: which plugins make up a composition, read from
//! TOML or YAML into [`Entry`]s. `dsh-host` validates the entries as a
//! graph and loads them (and re-exports this crate as `dsh_host::manifest`);
//! this crate only reads documents, so the manifest fuzz target
//! (`tests/fuzz`) builds it alone.
//!
//! Two equivalent syntaxes. TOML:
//!
//! ```toml
//! [[plugins]]
//! id = "fs"                  # unique among enabled entries
//! name = "dsh-fs-local"      # package name -> libdsh_fs_local.so (dsh-host's resolve)
//! path = "plugins/libx.so"   # optional: explicit library, relative to the manifest
//! disabled = false           # optional: leave the entry out entirely
//! config = { root = "/tmp" } # optional: handed to the plugin as JSON
//! inject = { e2b = "owner" } # optional: service name -> provider entry id
//! serve = ["fs"]             # optional: the services this entry serves to the composition's user
//! ```
//!
//! YAML, as a `plugins:` list or — as the reference system's notes write
//! it — a bare list of the same entries:
//!
//! ```yaml
//! plugins:
//!   - id: fs
//!     name: dsh-fs-local
//!     config: { root: /tmp }
//! ```
//!
//! Reading is strict: unknown keys (top-level or per entry), missing or
//! empty `id`/`name`, and values of the wrong type are errors. Every problem
//! in the document is reported, each naming its entry (by id, or by position
//! when the id is unusable) and its line.

#![forbid(unsafe_code)]

mod name;
mod syntax;

use std::fmt;
use std::path::{Path, PathBuf};

use serde_json::Value as Json;

use crate::syntax::{RawEntry, RawPair};

pub use crate::name::validate_plugin_name;
pub use crate::syntax::ManifestFormat;

/// The keys an entry may have.
pub const ENTRY_KEYS: [&str; 7] = [
    "id", "name", "path", "config", "disabled", "inject", "serve",
];

/// The largest manifest [`Manifest::from_path`] reads: 1 MiB, a thousand
/// times a large real composition, small enough that a hostile path
/// (`/dev/zero`, a huge file) costs nothing (`docs/design.md §8`).
pub const MAX_MANIFEST_BYTES: u64 = 1 << 20;

/// Reads the regular file at `path` as UTF-8, at most
/// [`MAX_MANIFEST_BYTES`]; the error is the message of a `Read` problem.
fn read_bounded(path: &Path) -> Result<String, String> {
    use std::io::Read;
    use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};

    // O_NONBLOCK: opening a FIFO for reading must not wait for a writer;
    // the type check below then refuses it. Regular files ignore the flag.
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path)
        .map_err(|err| format!("read: {err}"))?;
    // The type of what was opened, not of what the path named a moment
    // earlier: no window for a swap.
    let kind = file
        .metadata()
        .map_err(|err| format!("read: {err}"))?
        .file_type();
    let not_regular = if kind.is_file() {
        None
    } else if kind.is_dir() {
        Some("a directory")
    } else if kind.is_fifo() {
        Some("a FIFO")
    } else if kind.is_char_device() {
        Some("a character device")
    } else if kind.is_block_device() {
        Some("a block device")
    } else if kind.is_socket() {
        Some("a socket")
    } else {
        Some("not a regular file")
    };
    if let Some(what) = not_regular {
        return Err(format!(
            "read: not a regular file ({what}); a manifest must be a regular file"
        ));
    }
    let mut bytes = Vec::new();
    // One byte past the cap tells "exactly at the cap" from "beyond it".
    file.take(MAX_MANIFEST_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(|err| format!("read: {err}"))?;
    if bytes.len() as u64 > MAX_MANIFEST_BYTES {
        return Err(format!(
            "read: larger than the {} MiB manifest limit",
            MAX_MANIFEST_BYTES >> 20
        ));
    }
    String::from_utf8(bytes).map_err(|err| {
        format!(
            "read: not UTF-8 (invalid byte at offset {})",
            err.utf8_error().valid_up_to()
        )
    })
}

/// How messages name an entry: its id when it has a usable one, else its
/// 1-based position; plus its line when known.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct EntryLabel {
    /// 0-based position in the plugin list.
    pub index: usize,
    pub id: Option<String>,
    /// 1-based line where the entry starts.
    pub line: Option<usize>,
}

impl fmt::Display for EntryLabel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.id {
            Some(id) => write!(f, "entry {id:?}")?,
            None => write!(f, "entry #{}", self.index + 1)?,
        }
        if let Some(line) = self.line {
            write!(f, " (line {line})")?;
        }
        Ok(())
    }
}

/// One `inject` binding: service name → provider entry id.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Binding {
    /// As written; validated against the known services by the graph.
    pub service: String,
    pub provider: String,
}

/// One plugin entry.
#[derive(Debug, Clone, PartialEq)]
pub struct Entry {
    pub label: EntryLabel,
    pub id: String,
    /// Package name as written (`dsh-fs-local`, `@scope/pkg`).
    pub name: String,
    /// Explicit library file, as written (relative to the manifest).
    pub path: Option<PathBuf>,
    /// The `config` subtree (`Null` when absent).
    pub config: Json,
    pub disabled: bool,
    /// Bindings in the order written.
    pub inject: Vec<Binding>,
    /// Line of the `inject` key, for messages about bindings.
    pub inject_line: Option<usize>,
    /// The services this entry serves to the composition's user (`dsh`,
    /// `Host::fs` …) when several entries provide them, as written;
    /// validated against the known services by the graph.
    pub serve: Vec<String>,
    /// Line of the `serve` key, for messages about it.
    pub serve_line: Option<usize>,
}

/// A parsed manifest.
#[derive(Debug, Clone, PartialEq)]
pub struct Manifest {
    source: String,
    base_dir: Option<PathBuf>,
    entries: Vec<Entry>,
}

impl Manifest {
    /// Reads and parses the file at `path`; the format follows the
    /// extension (`.toml`, `.yaml`, `.yml`).
    ///
    /// The file must be a regular file after following symlinks and at most
    /// [`MAX_MANIFEST_BYTES`] long; a FIFO, device or directory, or a longer
    /// file, is a [`ProblemKind::Read`] problem naming the file. Nothing
    /// blocks on a FIFO and nothing beyond the cap is read
    /// (`docs/design.md §8`).
    pub fn from_path(path: &Path) -> Result<Manifest, ManifestError> {
        let source = path.display().to_string();
        let format = ManifestFormat::from_path(path).ok_or_else(|| {
            ManifestError::single(
                &source,
                ManifestProblem::new(
                    ProblemKind::Format,
                    None,
                    None,
                    "unknown manifest format: the file name must end in .toml, .yaml or .yml",
                ),
            )
        })?;
        let text = read_bounded(path).map_err(|message| {
            ManifestError::single(
                &source,
                ManifestProblem::new(ProblemKind::Read, None, None, message),
            )
        })?;
        let base_dir = path
            .parent()
            .map(|dir| {
                if dir.as_os_str().is_empty() {
                    Path::new(".")
                } else {
                    dir
                }
            })
            .map(Path::to_path_buf);
        Manifest::parse(&text, format, &source, base_dir)
    }

    /// Parses `text`. `source` names it in messages (a path, or e.g.
    /// `<embedded local.yaml>`); `base_dir` anchors relative entry paths
    /// (`None`: the current directory).
    pub fn parse(
        text: &str,
        format: ManifestFormat,
        source: &str,
        base_dir: Option<PathBuf>,
    ) -> Result<Manifest, ManifestError> {
        let raw = syntax::parse(text, format).map_err(|err| {
            ManifestError::single(
                source,
                ManifestProblem::new(
                    ProblemKind::Syntax,
                    err.line,
                    None,
                    format!("invalid {format}: {}", err.message),
                ),
            )
        })?;
        let mut problems = Vec::new();
        for key in &raw.unknown_top_keys {
            problems.push(ManifestProblem::new(
                ProblemKind::UnknownKey,
                key.line,
                None,
                format!(
                    "unknown top-level key {:?} (the only top-level key is \"plugins\")",
                    key.key
                ),
            ));
        }
        let mut entries = Vec::with_capacity(raw.entries.len());
        for (index, raw_entry) in raw.entries.iter().enumerate() {
            if let Some(entry) = read_entry(index, raw_entry, &mut problems) {
                entries.push(entry);
            }
        }
        if problems.is_empty() {
            Ok(Manifest {
                source: source.to_owned(),
                base_dir,
                entries,
            })
        } else {
            Err(ManifestError {
                origin: source.to_owned(),
                problems,
            })
        }
    }

    /// What messages call this manifest.
    pub fn source(&self) -> &str {
        &self.source
    }

    /// The directory relative entry paths are resolved against.
    pub fn base_dir(&self) -> Option<&Path> {
        self.base_dir.as_deref()
    }

    /// Every entry, disabled ones included, in manifest order.
    pub fn entries(&self) -> &[Entry] {
        &self.entries
    }
}

/// What class of problem a [`ManifestProblem`] is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ProblemKind {
    /// The file could not be read.
    Read,
    /// The file name implies no known format.
    Format,
    /// Malformed TOML/YAML (including duplicate keys).
    Syntax,
    /// A key the model does not have.
    UnknownKey,
    /// A required key is absent.
    MissingKey,
    /// A value of the wrong type, or an empty required string.
    InvalidValue,
    /// A list element that is not a mapping.
    NotAnEntry,
}

/// One problem in a manifest.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ManifestProblem {
    pub kind: ProblemKind,
    /// 1-based line, when known.
    pub line: Option<usize>,
    /// The entry concerned, when the problem is inside one.
    pub entry: Option<EntryLabel>,
    pub message: String,
}

impl ManifestProblem {
    fn new(
        kind: ProblemKind,
        line: Option<usize>,
        entry: Option<EntryLabel>,
        message: impl Into<String>,
    ) -> ManifestProblem {
        ManifestProblem {
            kind,
            line,
            entry,
            message: message.into(),
        }
    }

    fn render(&self, source: &str, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(source)?;
        if let Some(line) = self.line {
            write!(f, ":{line}")?;
        }
        f.write_str(": ")?;
        if let Some(entry) = &self.entry {
            // The line is already in the prefix.
            match &entry.id {
                Some(id) => write!(f, "entry {id:?}: ")?,
                None => write!(f, "entry #{}: ", entry.index + 1)?,
            }
        }
        f.write_str(&self.message)
    }
}

/// A manifest that could not be read: every problem found, in document
/// order. `Display` prints one `source:line: entry "id": message` line per
/// problem, for the first [`NAMED_IN_MESSAGES`], then how many more there
/// are.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub struct ManifestError {
    /// The manifest's name in messages (its path, or `<embedded …>`).
    pub origin: String,
    pub problems: Vec<ManifestProblem>,
}

impl ManifestError {
    fn single(source: &str, problem: ManifestProblem) -> ManifestError {
        ManifestError {
            origin: source.to_owned(),
            problems: vec![problem],
        }
    }
}

impl fmt::Display for ManifestError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write_problems(f, &self.origin, &self.problems, |f, problem| {
            problem.render(&self.origin, f)
        })
    }
}

/// How many problems one report prints ([`ManifestError`], and dsh-host's
/// validation errors and the entry ids one of its messages names): a
/// manifest of thousands of entries must not make a message of hundreds of
/// kilobytes. The rest is counted; every problem stays in the error's list.
pub const NAMED_IN_MESSAGES: usize = 10;

/// Writes `problems` one per line with `write_one`, the first
/// [`NAMED_IN_MESSAGES`] of them, then a line `origin: N more problems not
/// shown` — how every dsh report of many problems prints.
pub fn write_problems<T>(
    f: &mut fmt::Formatter<'_>,
    origin: &str,
    problems: &[T],
    mut write_one: impl FnMut(&mut fmt::Formatter<'_>, &T) -> fmt::Result,
) -> fmt::Result {
    for (index, problem) in problems.iter().take(NAMED_IN_MESSAGES).enumerate() {
        if index > 0 {
            f.write_str("\n")?;
        }
        write_one(f, problem)?;
    }
    match problems.len().saturating_sub(NAMED_IN_MESSAGES) {
        0 => Ok(()),
        1 => write!(f, "\n{origin}: 1 more problem not shown"),
        more => write!(f, "\n{origin}: {more} more problems not shown"),
    }
}

/// Judges one raw entry, pushing its problems; returns the entry only when
/// it had none.
fn read_entry(index: usize, raw: &RawEntry, problems: &mut Vec<ManifestProblem>) -> Option<Entry> {
    let (line, pairs) = match raw {
        RawEntry::Mapping { line, pairs } => (*line, pairs),
        RawEntry::NotAMapping { line, found } => {
            problems.push(ManifestProblem::new(
                ProblemKind::NotAnEntry,
                *line,
                Some(EntryLabel {
                    index,
                    id: None,
                    line: *line,
                }),
                format!("a plugin entry must be a mapping with `id` and `name`, found {found}"),
            ));
            return None;
        }
    };
    let id = pairs
        .iter()
        .find(|pair| pair.key == "id")
        .and_then(|pair| pair.value.as_str())
        .filter(|id| !id.is_empty())
        .map(str::to_owned);
    let label = EntryLabel {
        index,
        id: id.clone(),
        line: line.or_else(|| pairs.first().and_then(|pair| pair.line)),
    };
    let before = problems.len();
    let mut problem = |kind, at: Option<usize>, message: String| {
        problems.push(ManifestProblem::new(
            kind,
            at.or(label.line),
            Some(label.clone()),
            message,
        ));
    };

    let mut name = None;
    let mut path = None;
    let mut config = Json::Null;
    let mut disabled = false;
    let mut inject = Vec::new();
    let mut inject_line = None;
    let mut serve = Vec::new();
    let mut serve_line = None;
    for RawPair { key, line, value } in pairs {
        let at = *line;
        match key.as_str() {
            "id" => {
                if let Err(message) = non_empty_string("id", value) {
                    problem(ProblemKind::InvalidValue, at, message);
                }
            }
            "name" => match non_empty_string("name", value) {
                Ok(text) => match validate_plugin_name(text) {
                    Ok(()) => name = Some(text.to_owned()),
                    Err(why) => problem(ProblemKind::InvalidValue, at, format!("`name` {why}")),
                },
                Err(message) => problem(ProblemKind::InvalidValue, at, message),
            },
            "path" => match non_empty_string("path", value) {
                Ok(text) => path = Some(PathBuf::from(text)),
                Err(message) => problem(ProblemKind::InvalidValue, at, message),
            },
            "config" => match value {
                Json::Null | Json::Object(_) => config = value.clone(),
                other => problem(
                    ProblemKind::InvalidValue,
                    at,
                    format!("`config` must be a mapping, found {}", type_name(other)),
                ),
            },
            "disabled" => match value {
                Json::Bool(flag) => disabled = *flag,
                other => problem(
                    ProblemKind::InvalidValue,
                    at,
                    format!(
                        "`disabled` must be true or false, found {}",
                        type_name(other)
                    ),
                ),
            },
            "inject" => {
                inject_line = at;
                match value {
                    Json::Null => {}
                    Json::Object(map) => {
                        for (service, provider) in map {
                            match provider.as_str() {
                                Some(provider) if !provider.is_empty() => inject.push(Binding {
                                    service: service.clone(),
                                    provider: provider.to_owned(),
                                }),
                                _ => problem(
                                    ProblemKind::InvalidValue,
                                    at,
                                    format!(
                                        "`inject.{service}` must be the id of the providing entry (a non-empty string), found {}",
                                        type_name(provider)
                                    ),
                                ),
                            }
                        }
                    }
                    other => problem(
                        ProblemKind::InvalidValue,
                        at,
                        format!(
                            "`inject` must be a mapping of service name to provider id, found {}",
                            type_name(other)
                        ),
                    ),
                }
            }
            "serve" => {
                serve_line = at;
                match value {
                    Json::Null => {}
                    Json::Array(services) => {
                        for service in services {
                            match service.as_str() {
                                Some(service) if !service.is_empty() => {
                                    serve.push(service.to_owned());
                                }
                                _ => problem(
                                    ProblemKind::InvalidValue,
                                    at,
                                    format!(
                                        "`serve` lists service names (non-empty strings), found {}",
                                        type_name(service)
                                    ),
                                ),
                            }
                        }
                    }
                    other => problem(
                        ProblemKind::InvalidValue,
                        at,
                        format!(
                            "`serve` must be a list of service names (e.g. [fs]), found {}",
                            type_name(other)
                        ),
                    ),
                }
            }
            unknown => problem(ProblemKind::UnknownKey, at, unknown_key_message(unknown)),
        }
    }
    for required in ["id", "name"] {
        if !pairs.iter().any(|pair| pair.key == required) {
            problem(
                ProblemKind::MissingKey,
                None,
                format!("missing required key `{required}`"),
            );
        }
    }
    if problems.len() > before {
        return None;
    }
    Some(Entry {
        label,
        id: id.expect("a valid entry has an id"),
        name: name.expect("a valid entry has a name"),
        path,
        config,
        disabled,
        inject,
        inject_line,
        serve,
        serve_line,
    })
}

fn non_empty_string<'a>(key: &str, value: &'a Json) -> Result<&'a str, String> {
    match value {
        Json::String(text) if text.is_empty() => Err(format!("`{key}` must not be empty")),
        Json::String(text) => Ok(text),
        other => Err(format!(
            "`{key}` must be a string, found {}",
            type_name(other)
        )),
    }
}

fn type_name(value: &Json) -> String {
    match value {
        Json::Null => "an empty value".to_owned(),
        Json::Bool(flag) => format!("boolean {flag}"),
        Json::Number(number) => format!("number {number}"),
        Json::String(text) => format!("string {text:?}"),
        Json::Array(_) => "a list".to_owned(),
        Json::Object(_) => "a mapping".to_owned(),
    }
}

fn unknown_key_message(key: &str) -> String {
    let known = ENTRY_KEYS.join(", ");
    match ENTRY_KEYS
        .iter()
        .map(|candidate| (edit_distance(key, candidate), candidate))
        .filter(|(distance, _)| *distance <= 2)
        .min()
    {
        Some((_, suggestion)) => {
            format!("unknown key {key:?} (did you mean {suggestion:?}? entry keys: {known})")
        }
        None => format!("unknown key {key:?} (entry keys: {known})"),
    }
}

/// Levenshtein distance, for "did you mean" hints on short keys.
fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut previous: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut current = vec![i + 1; b.len() + 1];
        for (j, cb) in b.iter().enumerate() {
            let substitute = previous[j] + usize::from(ca != *cb);
            current[j + 1] = substitute.min(previous[j + 1] + 1).min(current[j] + 1);
        }
        previous = current;
    }
    previous[b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn yaml(text: &str) -> Result<Manifest, ManifestError> {
        Manifest::parse(text, ManifestFormat::Yaml, "m.yaml", None)
    }

    fn toml(text: &str) -> Result<Manifest, ManifestError> {
        Manifest::parse(text, ManifestFormat::Toml, "m.toml", None)
    }

    const YAML: &str = "\
plugins:
  - id: e2b
    name: dsh-e2b
    config:
      cwd: /home/user/workspace
      timeoutMs: 300000
  - id: fs
    name: dsh-fs-e2b
    inject: { e2b: e2b }
  - id: spare
    name: dsh-fs-local
    path: lib/libdsh_fs_local.so
    disabled: true
";

    const TOML: &str = r#"
[[plugins]]
id = "e2b"
name = "dsh-e2b"
config = { cwd = "/home/user/workspace", timeoutMs = 300000 }

[[plugins]]
id = "fs"
name = "dsh-fs-e2b"
inject = { e2b = "e2b" }

[[plugins]]
id = "spare"
name = "dsh-fs-local"
path = "lib/libdsh_fs_local.so"
disabled = true
"#;

    fn strip_lines(mut manifest: Manifest) -> Manifest {
        manifest.source = String::new();
        for entry in &mut manifest.entries {
            entry.label.line = None;
            entry.inject_line = None;
            entry.serve_line = None;
        }
        manifest
    }

    #[test]
    fn toml_and_yaml_describe_the_same_model() {
        let from_yaml = yaml(YAML).expect("yaml");
        let from_toml = toml(TOML).expect("toml");
        assert_eq!(strip_lines(from_yaml.clone()), strip_lines(from_toml));
        let entries = from_yaml.entries();
        assert_eq!(entries.len(), 3);
        assert_eq!(entries[0].config["timeoutMs"], 300000);
        assert_eq!(
            entries[1].inject,
            vec![Binding {
                service: "e2b".into(),
                provider: "e2b".into()
            }]
        );
        assert!(entries[2].disabled);
        assert_eq!(
            entries[2].path.as_deref(),
            Some(Path::new("lib/libdsh_fs_local.so"))
        );
        assert_eq!(entries[1].label.line, Some(7));
    }

    #[test]
    fn toml_lines_point_at_the_entry() {
        let manifest = toml(TOML).expect("toml");
        assert_eq!(manifest.entries()[1].label.line, Some(7));
        assert_eq!(manifest.entries()[1].inject_line, Some(10));
    }

    #[test]
    fn the_seeds_bare_list_loads() {
        let seed = "\
- id: e2b
  name: '@deepseek-ai/dsh-e2b'
  config:
    cwd: /home/user/workspace
    timeoutMs: 300000

- id: subprocess-e2b
  name: '@deepseek-ai/dsh-subprocess-e2b'

- id: fs-e2b
  name: '@deepseek-ai/dsh-fs-e2b'
";
        let manifest = yaml(seed).expect("seed list");
        let ids: Vec<_> = manifest.entries().iter().map(|e| e.id.as_str()).collect();
        assert_eq!(ids, ["e2b", "subprocess-e2b", "fs-e2b"]);
        assert_eq!(manifest.entries()[0].name, "@deepseek-ai/dsh-e2b");
        assert_eq!(manifest.entries()[2].label.line, Some(10));
    }

    #[test]
    fn empty_documents_are_empty_compositions() {
        assert!(yaml("").expect("empty yaml").entries().is_empty());
        assert!(
            yaml("plugins: []")
                .expect("empty list")
                .entries()
                .is_empty()
        );
        assert!(toml("").expect("empty toml").entries().is_empty());
    }

    fn problems(result: Result<Manifest, ManifestError>) -> ManifestError {
        result.expect_err("manifest should be rejected")
    }

    #[test]
    fn unknown_keys_name_the_entry_and_line() {
        let err = problems(yaml(
            "plugins:\n  - id: fs\n    name: dsh-fs-local\n    inejct: {}\n",
        ));
        assert_eq!(err.problems.len(), 1);
        assert_eq!(err.problems[0].kind, ProblemKind::UnknownKey);
        assert_eq!(
            err.to_string(),
            "m.yaml:4: entry \"fs\": unknown key \"inejct\" (did you mean \"inject\"? entry keys: id, name, path, config, disabled, inject, serve)"
        );
        let err = problems(toml(
            "[[plugins]]\nid = \"fs\"\nname = \"dsh-fs-local\"\nextra = 1\n",
        ));
        assert_eq!(err.problems[0].line, Some(4));
        assert!(
            err.to_string()
                .starts_with("m.toml:4: entry \"fs\": unknown key \"extra\"")
        );
    }

    #[test]
    fn unknown_top_level_keys_are_errors() {
        let err = problems(yaml("plugin:\n  - id: fs\n"));
        assert_eq!(err.problems[0].kind, ProblemKind::UnknownKey);
        assert_eq!(err.problems[0].line, Some(1));
        assert!(
            err.to_string().contains("unknown top-level key \"plugin\""),
            "{err}"
        );
        let err = problems(toml("version = 2\n"));
        assert!(
            err.to_string()
                .starts_with("m.toml:1: unknown top-level key \"version\""),
            "{err}"
        );
    }

    #[test]
    fn mistyped_values_are_errors_and_all_are_reported() {
        let err = problems(yaml(
            "\
- id: a
  name: dsh-a
  disabled: yes please
- id: b
  name: 7
  config: [1, 2]
- id: c
  name: dsh-c
  inject: { fs: 3 }
- id: ''
  name: dsh-d
- just a string
- name: dsh-f
",
        ));
        let rendered = err.to_string();
        let lines: Vec<&str> = rendered.lines().collect();
        assert_eq!(
            lines,
            [
                "m.yaml:3: entry \"a\": `disabled` must be true or false, found string \"yes please\"",
                "m.yaml:5: entry \"b\": `name` must be a string, found number 7",
                "m.yaml:6: entry \"b\": `config` must be a mapping, found a list",
                "m.yaml:9: entry \"c\": `inject.fs` must be the id of the providing entry (a non-empty string), found number 3",
                "m.yaml:10: entry #4: `id` must not be empty",
                "m.yaml:12: entry #5: a plugin entry must be a mapping with `id` and `name`, found a string",
                "m.yaml:13: entry #6: missing required key `id`",
            ],
            "{rendered}"
        );
    }

    #[test]
    fn a_thousand_problems_print_the_first_ten_and_count_the_rest() {
        let text: String = (0..1000)
            .map(|index| format!("- {{id: e{index}, name: dsh-a, disabled: maybe}}\n"))
            .collect();
        let err = problems(yaml(&text));
        assert_eq!(err.problems.len(), 1000, "every problem is kept");
        let rendered = err.to_string();
        let lines: Vec<&str> = rendered.lines().collect();
        assert_eq!(lines.len(), 11, "{rendered}");
        assert_eq!(
            lines[9],
            "m.yaml:10: entry \"e9\": `disabled` must be true or false, found string \"maybe\""
        );
        assert_eq!(lines[10], "m.yaml: 990 more problems not shown");
    }

    #[test]
    fn serve_is_a_list_of_service_names() {
        let manifest = yaml("- {id: a, name: dsh-a, serve: [fs, subprocess]}\n").expect("valid");
        assert_eq!(manifest.entries()[0].serve, ["fs", "subprocess"]);
        let err = problems(yaml(
            "- {id: a, name: dsh-a, serve: fs}\n- {id: b, name: dsh-b, serve: [3]}\n",
        ));
        let rendered = err.to_string();
        let lines: Vec<&str> = rendered.lines().collect();
        assert_eq!(
            lines,
            [
                "m.yaml:1: entry \"a\": `serve` must be a list of service names (e.g. [fs]), found string \"fs\"",
                "m.yaml:2: entry \"b\": `serve` lists service names (non-empty strings), found number 3",
            ]
        );
    }

    #[test]
    fn bad_names_are_rejected_with_the_rule() {
        let err = problems(yaml("- id: a\n  name: ../evil\n"));
        assert_eq!(err.problems[0].kind, ProblemKind::InvalidValue);
        assert!(err.to_string().contains("contains '.'"), "{err}");
    }

    #[test]
    fn syntax_errors_carry_the_parser_line() {
        let err = problems(yaml("plugins:\n  - id: a\n    name: [unclosed\n"));
        assert_eq!(err.problems[0].kind, ProblemKind::Syntax);
        assert!(err.problems[0].line.is_some(), "{err}");
        assert!(err.to_string().starts_with("m.yaml:"), "{err}");
        let err = problems(toml("[[plugins]]\nid = \"a\"\nname = \n"));
        assert_eq!(err.problems[0].kind, ProblemKind::Syntax);
        assert_eq!(err.problems[0].line, Some(3), "{err}");
        let err = problems(yaml("plugins: 3\n"));
        assert_eq!(err.problems[0].kind, ProblemKind::Syntax);
    }

    #[test]
    fn duplicate_keys_are_syntax_errors() {
        let err = problems(yaml("- id: a\n  id: b\n  name: x\n"));
        assert_eq!(err.problems[0].kind, ProblemKind::Syntax, "{err}");
        let err = problems(toml("[[plugins]]\nid = \"a\"\nid = \"b\"\n"));
        assert_eq!(err.problems[0].kind, ProblemKind::Syntax, "{err}");
    }

    #[test]
    fn files_are_read_by_extension() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("m.yml");
        std::fs::write(&path, YAML).expect("write");
        let manifest = Manifest::from_path(&path).expect("read");
        assert_eq!(manifest.base_dir(), Some(dir.path()));
        assert_eq!(manifest.source(), path.display().to_string());

        let err = Manifest::from_path(&dir.path().join("m.json")).unwrap_err();
        assert_eq!(err.problems[0].kind, ProblemKind::Format);
        let err = Manifest::from_path(&dir.path().join("missing.toml")).unwrap_err();
        assert_eq!(err.problems[0].kind, ProblemKind::Read);
        assert!(err.to_string().contains("missing.toml: read: "), "{err}");
    }

    /// A `Read` problem for `path`, with its rendered message.
    fn read_problem(path: &Path) -> String {
        let err = Manifest::from_path(path).unwrap_err();
        assert_eq!(err.problems[0].kind, ProblemKind::Read, "{err}");
        let rendered = err.to_string();
        assert!(
            rendered.starts_with(&format!("{}: read: ", path.display())),
            "{rendered}"
        );
        rendered
    }

    #[test]
    fn devices_and_symlinks_to_them_are_refused_without_reading() {
        let dir = tempfile::tempdir().expect("tempdir");
        let link = dir.path().join("zero.yaml");
        std::os::unix::fs::symlink("/dev/zero", &link).expect("symlink");
        let message = read_problem(&link);
        assert!(message.contains("(a character device)"), "{message}");
    }

    #[test]
    fn fifos_are_refused_without_waiting_for_a_writer() {
        let dir = tempfile::tempdir().expect("tempdir");
        let fifo = dir.path().join("m.toml");
        let status = std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .expect("mkfifo");
        assert!(status.success());
        let message = read_problem(&fifo);
        assert!(message.contains("(a FIFO)"), "{message}");
    }

    #[test]
    fn directories_are_refused() {
        let dir = tempfile::tempdir().expect("tempdir");
        let sub = dir.path().join("m.yaml");
        std::fs::create_dir(&sub).expect("mkdir");
        let message = read_problem(&sub);
        assert!(message.contains("(a directory)"), "{message}");
    }

    #[test]
    fn files_beyond_the_cap_are_refused_and_at_the_cap_read() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("m.yaml");
        let cap = usize::try_from(MAX_MANIFEST_BYTES).expect("cap fits");
        // A comment line filling the file exactly to the cap parses.
        let mut text = vec![b'#'; cap];
        text[cap - 1] = b'\n';
        std::fs::write(&path, &text).expect("write");
        let manifest = Manifest::from_path(&path).expect("a file at the cap reads");
        assert!(manifest.entries().is_empty());
        text.push(b'\n');
        std::fs::write(&path, &text).expect("write");
        let message = read_problem(&path);
        assert!(
            message.contains("larger than the 1 MiB manifest limit"),
            "{message}"
        );
    }

    #[test]
    fn non_utf8_files_are_refused_with_the_offset() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("m.toml");
        std::fs::write(&path, b"[[plugins]]\nid = \"\xff\"\n").expect("write");
        let message = read_problem(&path);
        assert!(
            message.contains("not UTF-8 (invalid byte at offset 18)"),
            "{message}"
        );
    }

    #[test]
    fn toml_datetimes_become_text() {
        let manifest =
            toml("[[plugins]]\nid = \"a\"\nname = \"x\"\nconfig = { at = 1979-05-27T07:32:00Z }\n")
                .expect("toml");
        assert_eq!(manifest.entries()[0].config["at"], "1979-05-27T07:32:00Z");
    }

    #[test]
    fn edit_distance_is_levenshtein() {
        assert_eq!(edit_distance("inejct", "inject"), 2);
        assert_eq!(edit_distance("", "id"), 2);
        assert_eq!(edit_distance("name", "name"), 0);
    }
}
