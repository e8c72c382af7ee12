//! The syntax layer of the manifest: TOML and YAML documents read into one
//! format-neutral, position-annotated shape.
//!
//! Parsing happens in two steps so that every problem can name its entry and
//! line. Here a document becomes a list of raw entries — each a list of
//! `key: value` pairs with the line of each key, values as JSON — without
//! judging keys or types. The crate's root then checks every entry and
//! reports all problems at once. Only malformed syntax (and YAML duplicate
//! keys, which the parsers reject) stops this step, with the parser's line.

use std::fmt;
use std::marker::PhantomData;

use serde::Deserialize;
use serde::de::{self, DeserializeOwned, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde_json::Value as Json;

/// The two manifest syntaxes; both describe the same model.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ManifestFormat {
    /// TOML: a `[[plugins]]` array of tables.
    Toml,
    /// YAML: a `plugins:` list, or a bare list of entries.
    Yaml,
}

impl ManifestFormat {
    /// The format a file name implies: `.toml`, or `.yaml`/`.yml`.
    pub fn from_path(path: &std::path::Path) -> Option<ManifestFormat> {
        match path.extension()?.to_str()? {
            "toml" => Some(ManifestFormat::Toml),
            "yaml" | "yml" => Some(ManifestFormat::Yaml),
            _ => None,
        }
    }
}

impl fmt::Display for ManifestFormat {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            ManifestFormat::Toml => "TOML",
            ManifestFormat::Yaml => "YAML",
        })
    }
}

/// One `key: value` pair of an entry.
#[derive(Debug, Clone)]
pub(crate) struct RawPair {
    pub key: String,
    /// 1-based line of the key, when the parser knows it.
    pub line: Option<usize>,
    pub value: Json,
}

/// One element of the plugin list, before its keys are judged.
#[derive(Debug, Clone)]
pub(crate) enum RawEntry {
    Mapping {
        line: Option<usize>,
        pairs: Vec<RawPair>,
    },
    /// Something other than a mapping (a string, a list, …): `found` names
    /// what it was.
    NotAMapping {
        line: Option<usize>,
        found: &'static str,
    },
}

/// A top-level key other than `plugins`.
#[derive(Debug, Clone)]
pub(crate) struct RawTopKey {
    pub key: String,
    pub line: Option<usize>,
}

/// A whole document.
#[derive(Debug, Clone, Default)]
pub(crate) struct RawDocument {
    pub entries: Vec<RawEntry>,
    pub unknown_top_keys: Vec<RawTopKey>,
}

/// A syntax error: the parser's message and line.
#[derive(Debug, Clone)]
pub(crate) struct SyntaxError {
    pub line: Option<usize>,
    pub message: String,
}

/// Parses `text` as `format` into the raw shape.
pub(crate) fn parse(text: &str, format: ManifestFormat) -> Result<RawDocument, SyntaxError> {
    match format {
        ManifestFormat::Toml => parse_toml(text).map(|top| resolve(top, &LineIndex::new(text))),
        ManifestFormat::Yaml => parse_yaml(text).map(|top| resolve(top, &LineIndex::new(text))),
    }
}

fn parse_toml(text: &str) -> Result<Top<TomlSyntax>, SyntaxError> {
    toml::from_str::<Top<TomlSyntax>>(text).map_err(|err| SyntaxError {
        line: err
            .span()
            .map(|span| LineIndex::new(text).line_of(span.start)),
        message: err.message().trim().to_owned(),
    })
}

fn parse_yaml(text: &str) -> Result<Top<YamlSyntax>, SyntaxError> {
    let mut options = serde_saphyr::options::Options::default();
    // Our own `file:line:` prefix replaces the parser's source snippet.
    options.with_snippet = false;
    serde_saphyr::from_str_with_options::<Top<YamlSyntax>>(text, options).map_err(|err| {
        SyntaxError {
            line: err
                .location()
                .map(|location| location.line())
                .filter(|line| *line > 0)
                .and_then(|line| usize::try_from(line).ok()),
            message: yaml_message(&err),
        }
    })
}

/// The parser's message without its own trailing position, which the
/// caller's `file:line:` prefix already gives.
fn yaml_message(err: &serde_saphyr::Error) -> String {
    let text = err.to_string();
    let first = text.lines().next().unwrap_or_default().trim();
    match first.rfind(" at line ") {
        Some(at) if first[at..].contains("column") => first[..at].to_owned(),
        _ => first.to_owned(),
    }
}

/// Byte offset → 1-based line, for every key of a document.
///
/// Built once per document (one pass over the text) and then answering
/// each lookup by binary search: resolving all `k` keys of an `n`-byte
/// TOML document costs O(n + k log n). Counting newlines per lookup, as
/// this once did, made a manifest with thousands of entries take minutes
/// (issue 9).
pub(crate) struct LineIndex {
    /// Byte offset of every `\n`, ascending.
    newlines: Vec<usize>,
}

impl LineIndex {
    pub(crate) fn new(text: &str) -> LineIndex {
        LineIndex {
            newlines: newline_offsets(text.as_bytes()),
        }
    }

    /// The 1-based line holding byte `offset` (offsets past the end fall
    /// on the last line).
    pub(crate) fn line_of(&self, offset: usize) -> usize {
        // Newlines strictly before `offset` end the lines above it.
        1 + self.newlines.partition_point(|at| *at < offset)
    }
}

fn newline_offsets(bytes: &[u8]) -> Vec<usize> {
    bytes
        .iter()
        .enumerate()
        .filter(|(_, byte)| **byte == b'\n')
        .map(|(at, _)| at)
        .collect()
}

/// A position as a parser reports it, resolved to a line once the whole
/// document is read.
#[derive(Debug, Clone, Copy)]
enum Pos {
    Unknown,
    /// A 1-based line (YAML).
    Line(usize),
    /// A byte offset (TOML).
    Offset(usize),
}

impl Pos {
    fn line(self, lines: &LineIndex) -> Option<usize> {
        match self {
            Pos::Unknown => None,
            Pos::Line(line) => Some(line),
            Pos::Offset(offset) => Some(lines.line_of(offset)),
        }
    }
}

fn resolve<S: Syntax>(top: Top<S>, lines: &LineIndex) -> RawDocument {
    let entries = top
        .entries
        .into_iter()
        .map(|entry| match entry.body {
            EntryBody::Mapping(pairs) => RawEntry::Mapping {
                line: entry.pos.line(lines),
                pairs: pairs
                    .into_iter()
                    .map(|(key, pos, value)| RawPair {
                        key,
                        line: pos.line(lines),
                        value: normalize(value),
                    })
                    .collect(),
            },
            EntryBody::NotAMapping(found) => RawEntry::NotAMapping {
                line: entry.pos.line(lines),
                found,
            },
        })
        .collect();
    let unknown_top_keys = top
        .unknown_top_keys
        .into_iter()
        .map(|(key, pos)| RawTopKey {
            key,
            line: pos.line(lines),
        })
        .collect();
    RawDocument {
        entries,
        unknown_top_keys,
    }
}

/// TOML datetimes reach serde as a private marker map; the manifest model
/// has no datetime type, so they become their RFC 3339 text.
fn normalize(value: Json) -> Json {
    const TOML_DATETIME: &str = "$__toml_private_datetime";
    match value {
        Json::Object(map) => {
            if map.len() == 1
                && let Some(Json::String(text)) = map.get(TOML_DATETIME)
            {
                return Json::String(text.clone());
            }
            Json::Object(map.into_iter().map(|(k, v)| (k, normalize(v))).collect())
        }
        Json::Array(items) => Json::Array(items.into_iter().map(normalize).collect()),
        other => other,
    }
}

/// How one parser attaches positions to values.
trait Syntax: Sized + 'static {
    type Spanned<T: DeserializeOwned>: DeserializeOwned;
    fn split<T: DeserializeOwned>(spanned: Self::Spanned<T>) -> (T, Pos);
}

struct TomlSyntax;

impl Syntax for TomlSyntax {
    type Spanned<T: DeserializeOwned> = toml::Spanned<T>;
    fn split<T: DeserializeOwned>(spanned: toml::Spanned<T>) -> (T, Pos) {
        let start = spanned.span().start;
        (spanned.into_inner(), Pos::Offset(start))
    }
}

struct YamlSyntax;

impl Syntax for YamlSyntax {
    type Spanned<T: DeserializeOwned> = serde_saphyr::Spanned<T>;
    fn split<T: DeserializeOwned>(spanned: serde_saphyr::Spanned<T>) -> (T, Pos) {
        let line = spanned.referenced.line();
        let pos = match usize::try_from(line) {
            Ok(line) if line > 0 => Pos::Line(line),
            _ => Pos::Unknown,
        };
        (spanned.value, pos)
    }
}

/// The document root: a map with `plugins` (both syntaxes) or a bare list
/// (YAML only, as the seeds write it).
struct Top<S: Syntax> {
    entries: Vec<SpannedEntry>,
    unknown_top_keys: Vec<(String, Pos)>,
    _syntax: PhantomData<S>,
}

struct SpannedEntry {
    pos: Pos,
    body: EntryBody,
}

enum EntryBody {
    Mapping(Vec<(String, Pos, Json)>),
    NotAMapping(&'static str),
}

impl<'de, S: Syntax> Deserialize<'de> for Top<S> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(TopVisitor::<S>(PhantomData))
    }
}

struct TopVisitor<S>(PhantomData<S>);

impl<'de, S: Syntax> Visitor<'de> for TopVisitor<S> {
    type Value = Top<S>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a mapping with a `plugins` list, or a list of plugin entries")
    }

    fn visit_unit<E: de::Error>(self) -> Result<Top<S>, E> {
        Ok(Top {
            entries: Vec::new(),
            unknown_top_keys: Vec::new(),
            _syntax: PhantomData,
        })
    }

    fn visit_none<E: de::Error>(self) -> Result<Top<S>, E> {
        self.visit_unit()
    }

    fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<Top<S>, A::Error> {
        Ok(Top {
            entries: collect_entries::<S, A>(seq)?,
            unknown_top_keys: Vec::new(),
            _syntax: PhantomData,
        })
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Top<S>, A::Error> {
        let mut entries = None;
        let mut unknown_top_keys = Vec::new();
        while let Some(key) = map.next_key::<S::Spanned<String>>()? {
            let (key, pos) = S::split(key);
            if key == "plugins" {
                let EntryList(list, _) = map.next_value::<EntryList<S>>()?;
                entries = Some(list);
            } else {
                map.next_value::<IgnoredAny>()?;
                unknown_top_keys.push((key, pos));
            }
        }
        Ok(Top {
            entries: entries.unwrap_or_default(),
            unknown_top_keys,
            _syntax: PhantomData,
        })
    }
}

fn collect_entries<'de, S: Syntax, A: SeqAccess<'de>>(
    mut seq: A,
) -> Result<Vec<SpannedEntry>, A::Error> {
    let mut entries = Vec::new();
    while let Some(entry) = seq.next_element::<S::Spanned<EntryBodyDe<S>>>()? {
        let (EntryBodyDe(body, _), pos) = S::split(entry);
        entries.push(SpannedEntry { pos, body });
    }
    Ok(entries)
}

/// The value of `plugins`: a list of entries.
struct EntryList<S>(Vec<SpannedEntry>, PhantomData<S>);

impl<'de, S: Syntax> Deserialize<'de> for EntryList<S> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct ListVisitor<S>(PhantomData<S>);
        impl<'de, S: Syntax> Visitor<'de> for ListVisitor<S> {
            type Value = EntryList<S>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("`plugins` to be a list of plugin entries")
            }
            fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<EntryList<S>, A::Error> {
                Ok(EntryList(collect_entries::<S, A>(seq)?, PhantomData))
            }
            fn visit_unit<E: de::Error>(self) -> Result<EntryList<S>, E> {
                Ok(EntryList(Vec::new(), PhantomData))
            }
        }
        deserializer.deserialize_seq(ListVisitor::<S>(PhantomData))
    }
}

/// One entry, accepting any value so that a non-mapping becomes a reported
/// problem rather than a parse failure. Keys carry positions through the
/// syntax's own spanned wrapper.
struct EntryBodyDe<S>(EntryBody, PhantomData<S>);

impl<'de, S: Syntax> Deserialize<'de> for EntryBodyDe<S> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(EntryVisitor::<S>(PhantomData))
    }
}

struct EntryVisitor<S>(PhantomData<S>);

macro_rules! not_a_mapping {
    ($($method:ident($($ty:ty)?) => $found:literal;)*) => {
        $(
            fn $method<E: de::Error>(self $(, _value: $ty)?) -> Result<EntryBodyDe<S>, E> {
                Ok(EntryBodyDe(EntryBody::NotAMapping($found), PhantomData))
            }
        )*
    };
}

impl<'de, S: Syntax> Visitor<'de> for EntryVisitor<S> {
    type Value = EntryBodyDe<S>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a plugin entry (a mapping)")
    }

    not_a_mapping! {
        visit_bool(bool) => "a boolean";
        visit_i64(i64) => "a number";
        visit_u64(u64) => "a number";
        visit_f64(f64) => "a number";
        visit_str(&str) => "a string";
        visit_unit() => "an empty value";
        visit_none() => "an empty value";
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<EntryBodyDe<S>, A::Error> {
        while seq.next_element::<IgnoredAny>()?.is_some() {}
        Ok(EntryBodyDe(EntryBody::NotAMapping("a list"), PhantomData))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<EntryBodyDe<S>, A::Error> {
        let mut pairs = Vec::new();
        while let Some(key) = map.next_key::<S::Spanned<String>>()? {
            let (key, pos) = S::split(key);
            let value = map.next_value::<Json>()?;
            pairs.push((key, pos, value));
        }
        Ok(EntryBodyDe(EntryBody::Mapping(pairs), PhantomData))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The reference the index must agree with: count the newlines.
    fn counted_line(text: &str, offset: usize) -> usize {
        1 + text.as_bytes()[..offset.min(text.len())]
            .iter()
            .filter(|byte| **byte == b'\n')
            .count()
    }

    #[test]
    fn line_index_agrees_with_counting_newlines_at_every_offset() {
        for text in [
            "",
            "\n",
            "a",
            "a\nb",
            "\n\nx\n",
            "[[plugins]]\nid = \"a\"\n\n",
        ] {
            let index = LineIndex::new(text);
            for offset in 0..=text.len() + 2 {
                assert_eq!(
                    index.line_of(offset),
                    counted_line(text, offset),
                    "{text:?} at {offset}"
                );
            }
        }
    }

    fn toml_entries(count: usize) -> String {
        let mut text = String::new();
        for index in 0..count {
            text.push_str(&format!(
                "[[plugins]]\nid = \"p{index}\"\nname = \"dsh-x\"\nconfig = {{ n = {index} }}\n"
            ));
        }
        text
    }

    /// The CPU time one parse of `text` takes this thread (schedstat's run time, in
    /// nanoseconds): wall time on a loaded machine preempts a long parse more than a short one.
    fn parse_time(text: &str) -> std::time::Duration {
        let cpu = || {
            let stat = std::fs::read_to_string("/proc/thread-self/schedstat").expect("schedstat");
            let nanos = stat.split_whitespace().next().and_then(|f| f.parse().ok());
            std::time::Duration::from_nanos(nanos.expect("schedstat's run time"))
        };
        let started = cpu();
        let document = parse(text, ManifestFormat::Toml).expect("parse");
        let elapsed = cpu() - started;
        assert!(!document.entries.is_empty());
        elapsed
    }

    /// Complexity, not speed: ten times the entries must cost about ten
    /// times the time. A quadratic line lookup made it a hundred (20,000
    /// TOML entries took minutes). The two sizes are timed alternately and
    /// each keeps its fastest of five, so a load that comes and goes (other
    /// tests, other builds) hits both alike; 30 leaves room for the rest.
    #[test]
    fn toml_parse_time_grows_linearly_with_entries() {
        let small = toml_entries(2_000);
        let large = toml_entries(20_000);
        let document = parse(&large, ManifestFormat::Toml).expect("parse");
        assert_eq!(document.entries.len(), 20_000);
        let RawEntry::Mapping { line, pairs } = &document.entries[19_999] else {
            panic!("the last entry is a mapping");
        };
        assert_eq!(*line, Some(4 * 19_999 + 1));
        let config = pairs.iter().find(|pair| pair.key == "config");
        assert_eq!(config.and_then(|pair| pair.line), Some(4 * 19_999 + 4));
        let (mut fastest_small, mut fastest_large) = (f64::MAX, f64::MAX);
        for _ in 0..5 {
            fastest_small = fastest_small.min(parse_time(&small).as_secs_f64());
            fastest_large = fastest_large.min(parse_time(&large).as_secs_f64());
        }
        let ratio = fastest_large / fastest_small;
        assert!(ratio < 30.0, "10x the entries took {ratio:.1}x the time");
    }
}
