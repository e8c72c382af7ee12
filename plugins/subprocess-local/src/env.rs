//! The environment boundary between the host and the commands it starts.
//!
//! The ambient environment is captured once, when the provider is created,
//! and scrubbed by the kit's rule ([`dsh_provider_kit::env`]); a caller
//! restores anything it needs through the spec's explicit `env`, which
//! always wins.
//!
//! Entries whose names or values are not UTF-8 pass through unchanged
//! unless their name matches the scrub rule.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::ffi::{CStr, CString, OsStr, OsString};
use std::os::unix::ffi::OsStrExt;

use dsh_provider_kit::env::{DEFAULT_PATH, is_scrubbed};

/// The scrubbed ambient environment of one provider, ready to hand to
/// `posix_spawn` (each entry pre-encoded as `NAME=VALUE\0`).
#[derive(Debug, Clone)]
pub struct Environment {
    entries: Vec<(OsString, CString)>,
    path: Option<OsString>,
}

impl Environment {
    /// Captures the host process's environment and scrubs it.
    pub fn from_host() -> Environment {
        Environment::scrubbed(std::env::vars_os())
    }

    /// Scrubs `ambient` (name, value pairs). Entries that cannot be encoded
    /// (a NUL inside, which the OS never produces) are dropped; a repeated
    /// name keeps its first value, as `getenv` would.
    pub fn scrubbed<I>(ambient: I) -> Environment
    where
        I: IntoIterator<Item = (OsString, OsString)>,
    {
        let mut entries: Vec<(OsString, CString)> = Vec::new();
        let mut path = None;
        for (name, value) in ambient {
            let bytes = name.as_bytes();
            if bytes.is_empty() || bytes.contains(&b'=') || is_scrubbed(bytes) {
                continue;
            }
            if entries.iter().any(|(seen, _)| *seen == name) {
                continue;
            }
            let Some(encoded) = encode(&name, &value) else {
                continue;
            };
            if bytes == b"PATH" {
                path = Some(value);
            }
            entries.push((name, encoded));
        }
        Environment { entries, path }
    }

    /// The ambient variables that survived the scrub, by name.
    #[cfg(test)]
    pub fn names(&self) -> impl Iterator<Item = &OsStr> {
        self.entries.iter().map(|(name, _)| name.as_os_str())
    }

    /// The environment block for one command: every surviving ambient entry
    /// not overridden by `explicit`, then every `explicit` entry (which the
    /// spec has validated: names non-empty without `=`/NUL, values without
    /// NUL).
    pub fn block<'a>(&'a self, explicit: &'a BTreeMap<String, String>) -> EnvBlock<'a> {
        let mut entries: Vec<Cow<'a, CStr>> =
            Vec::with_capacity(self.entries.len() + explicit.len());
        for (name, encoded) in &self.entries {
            let overridden = name
                .to_str()
                .is_some_and(|name| explicit.contains_key(name));
            if !overridden {
                entries.push(Cow::Borrowed(encoded.as_c_str()));
            }
        }
        for (name, value) in explicit {
            if let Some(encoded) = encode(OsStr::new(name), OsStr::new(value)) {
                entries.push(Cow::Owned(encoded));
            }
        }
        let path = match explicit.get("PATH") {
            Some(path) => OsStr::new(path.as_str()),
            None => self
                .path
                .as_deref()
                .unwrap_or_else(|| OsStr::new(DEFAULT_PATH)),
        };
        EnvBlock { entries, path }
    }
}

/// The environment of one command, borrowed from its provider where possible.
#[derive(Debug)]
pub struct EnvBlock<'a> {
    entries: Vec<Cow<'a, CStr>>,
    path: &'a OsStr,
}

impl EnvBlock<'_> {
    /// `NAME=VALUE` entries in the order they are passed.
    pub fn entries(&self) -> &[Cow<'_, CStr>] {
        &self.entries
    }

    /// The `PATH` the command sees, used to resolve a bare program name.
    pub fn search_path(&self) -> &OsStr {
        self.path
    }

    /// The value of `name`, if set.
    #[cfg(test)]
    pub fn get(&self, name: &str) -> Option<&[u8]> {
        self.entries.iter().find_map(|entry| {
            let bytes = entry.to_bytes();
            bytes
                .strip_prefix(name.as_bytes())
                .and_then(|rest| rest.strip_prefix(b"="))
        })
    }
}

fn encode(name: &OsStr, value: &OsStr) -> Option<CString> {
    let mut bytes = Vec::with_capacity(name.len() + value.len() + 1);
    bytes.extend_from_slice(name.as_bytes());
    bytes.push(b'=');
    bytes.extend_from_slice(value.as_bytes());
    CString::new(bytes).ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::ffi::OsStringExt;

    fn os(bytes: &[u8]) -> OsString {
        OsString::from_vec(bytes.to_vec())
    }

    fn ambient(pairs: &[(&str, &str)]) -> Vec<(OsString, OsString)> {
        pairs
            .iter()
            .map(|(name, value)| (OsString::from(name), OsString::from(value)))
            .collect()
    }

    #[test]
    fn block_scrubs_then_restores_explicit_entries() {
        let env = Environment::scrubbed(ambient(&[
            ("PATH", "/bin"),
            ("HOME", "/root"),
            ("DSH_DEBUG", "1"),
            ("OPENAI_API_KEY", "sk-1"),
            ("HOME", "/second"),
        ]));
        let names: Vec<_> = env.names().collect();
        assert_eq!(names, [OsStr::new("PATH"), OsStr::new("HOME")]);

        let mut explicit = BTreeMap::new();
        explicit.insert("OPENAI_API_KEY".to_owned(), "sk-explicit".to_owned());
        explicit.insert("HOME".to_owned(), "/home/agent".to_owned());
        let block = env.block(&explicit);
        assert_eq!(block.get("HOME"), Some(&b"/home/agent"[..]));
        assert_eq!(block.get("OPENAI_API_KEY"), Some(&b"sk-explicit"[..]));
        assert_eq!(block.get("DSH_DEBUG"), None);
        assert_eq!(block.entries().len(), 3);
        assert_eq!(block.search_path(), OsStr::new("/bin"));
    }

    #[test]
    fn explicit_path_drives_the_search_and_missing_path_has_a_default() {
        let env = Environment::scrubbed(ambient(&[("HOME", "/root")]));
        let none = BTreeMap::new();
        assert_eq!(env.block(&none).search_path(), OsStr::new(DEFAULT_PATH));
        let mut explicit = BTreeMap::new();
        explicit.insert("PATH".to_owned(), "/opt/bin".to_owned());
        assert_eq!(env.block(&explicit).search_path(), OsStr::new("/opt/bin"));
    }

    #[test]
    fn non_utf8_entries_pass_through() {
        let env =
            Environment::scrubbed([(os(b"RAW\xff"), os(b"v\xfe")), (os(b"KEY\xff"), os(b"x"))]);
        let none = BTreeMap::new();
        let block = env.block(&none);
        assert_eq!(block.entries().len(), 1);
        assert_eq!(block.entries()[0].to_bytes(), b"RAW\xff=v\xfe");
    }
}
