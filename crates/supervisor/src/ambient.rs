//! The environment boundary between the sandbox and the commands started
//! in it, shared by `dsh-subprocess-e2b` and the helper (each composes a
//! command's environment the same way: the host once it learned the
//! ambient environment, the helper when a first command learns it itself,
//! `run` with a [`crate::wire::ProbeFor`]).
//!
//! The ambient environment is what envd gives every command — `PATH`, the
//! sandbox's global variables — with `HOME`, `USER` and `LOGNAME` of the
//! sandbox user. It is scrubbed by the kit's rule ([`dsh_provider_kit::env`],
//! the same for every subprocess provider); a caller restores anything it
//! needs through the spec's explicit `env`, which always wins. Host
//! variables never enter the sandbox: only the spec's entries do.

use std::collections::BTreeMap;

use dsh_provider_kit::env::{DEFAULT_PATH, is_scrubbed};

/// Names the probe itself puts into what it reports (the helper's request,
/// the control shell's `HOME` and guards, bash's `PWD` and `SHLVL`) or that
/// are the probing user's rather than the sandbox user's: never part of the
/// ambient environment.
const PROBE_ARTIFACTS: &[&str] = &[
    crate::wire::REQUEST_ENV,
    "HOME",
    "USER",
    "LOGNAME",
    "PWD",
    "OLDPWD",
    "SHLVL",
    "_",
    "BASH_ENV",
    "ENV",
    RUNTIME_ROOT_ENV,
];

/// The environment variable naming the runtime root in the host's control
/// commands (set by `dsh-e2b-gateway`'s control shell).
pub const RUNTIME_ROOT_ENV: &str = "DSH_RUNTIME_ROOT";

/// The scrubbed ambient environment of the sandbox user.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ambient {
    entries: Vec<(String, String)>,
}

/// The environment of one command.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommandEnv {
    /// `NAME=VALUE`, exactly what the program gets.
    pub entries: Vec<String>,
    /// The `PATH` its program name is looked up on.
    pub path: String,
}

impl Ambient {
    /// The ambient environment from the probe's `env -0` output (strict
    /// UTF-8: an entry that is not is an error naming its position), for
    /// `user` with login home `home`.
    pub fn from_probe(env0: &[u8], user: &str, home: &str) -> Result<Ambient, String> {
        let mut entries: Vec<(String, String)> = vec![
            ("HOME".to_owned(), home.to_owned()),
            ("USER".to_owned(), user.to_owned()),
            ("LOGNAME".to_owned(), user.to_owned()),
        ];
        for (index, raw) in env0
            .split(|&b| b == 0)
            .filter(|entry| !entry.is_empty())
            .enumerate()
        {
            let text = std::str::from_utf8(raw).map_err(|err| {
                format!("sandbox environment entry #{index} is not UTF-8 ({err})")
            })?;
            let Some((name, value)) = text.split_once('=') else {
                return Err(format!("sandbox environment entry #{index} has no '='"));
            };
            if name.is_empty()
                || PROBE_ARTIFACTS.contains(&name)
                || is_scrubbed(name.as_bytes())
                || entries.iter().any(|(seen, _)| seen == name)
            {
                continue;
            }
            entries.push((name.to_owned(), value.to_owned()));
        }
        Ok(Ambient { entries })
    }

    /// The ambient names, in order.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.entries.iter().map(|(name, _)| name.as_str())
    }

    /// The `PATH` commands get when the spec sets none.
    pub fn path(&self) -> &str {
        self.entries
            .iter()
            .find(|(name, _)| name == "PATH")
            .map_or(DEFAULT_PATH, |(_, value)| value.as_str())
    }

    /// The environment of a command running in `cwd`: every ambient entry
    /// the spec does not override, `PWD` (as envd's own wrapper shell sets
    /// it), then every explicit entry (validated by the spec).
    pub fn for_command(&self, explicit: &BTreeMap<String, String>, cwd: &str) -> CommandEnv {
        let mut entries = Vec::with_capacity(self.entries.len() + explicit.len() + 1);
        for (name, value) in &self.entries {
            if !explicit.contains_key(name) {
                entries.push(format!("{name}={value}"));
            }
        }
        if !explicit.contains_key("PWD") {
            entries.push(format!("PWD={cwd}"));
        }
        for (name, value) in explicit {
            entries.push(format!("{name}={value}"));
        }
        CommandEnv {
            entries,
            path: explicit
                .get("PATH")
                .cloned()
                .unwrap_or_else(|| self.path().to_owned()),
        }
    }
}

/// The absolute directories of a `PATH`, in order: empty and relative
/// entries (which a shell would resolve against the cwd) never find a
/// program.
pub fn search_dirs(path: &str) -> Vec<String> {
    path.split(':')
        .filter(|dir| dir.starts_with('/'))
        .map(str::to_owned)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_probe_is_scrubbed_and_the_users_identity_set() {
        let env0 = b"PATH=/usr/bin:/bin\0HOME=/root/fresh\0USER=root\0OPENAI_API_KEY=sk\0\
E2B_SANDBOX=true\0DSH_RUNTIME_ROOT=/w/.dsh-e2b\0PWD=/\0SHLVL=1\0LANG=C.UTF-8\0LANG=second\0";
        let ambient = Ambient::from_probe(env0, "user", "/home/user").unwrap();
        assert_eq!(
            ambient.names().collect::<Vec<_>>(),
            ["HOME", "USER", "LOGNAME", "PATH", "E2B_SANDBOX", "LANG"]
        );
        assert_eq!(ambient.path(), "/usr/bin:/bin");
        let mut explicit = BTreeMap::new();
        explicit.insert("OPENAI_API_KEY".to_owned(), "explicit".to_owned());
        explicit.insert("HOME".to_owned(), "/elsewhere".to_owned());
        let env = ambient.for_command(&explicit, "/w");
        assert_eq!(
            env.entries,
            [
                "USER=user",
                "LOGNAME=user",
                "PATH=/usr/bin:/bin",
                "E2B_SANDBOX=true",
                "LANG=C.UTF-8",
                "PWD=/w",
                "HOME=/elsewhere",
                "OPENAI_API_KEY=explicit",
            ]
        );
        explicit.insert("PATH".to_owned(), "/opt/bin".to_owned());
        assert_eq!(ambient.for_command(&explicit, "/w").path, "/opt/bin");
    }

    #[test]
    fn strict_utf8_and_shape() {
        let err = Ambient::from_probe(b"A=1\0B=\xff\0", "u", "/h").unwrap_err();
        assert!(err.contains("#1 is not UTF-8"), "{err}");
        let err = Ambient::from_probe(b"NOEQUALS\0", "u", "/h").unwrap_err();
        assert!(err.contains("no '='"), "{err}");
        let bare = Ambient::from_probe(b"", "u", "/h").unwrap();
        assert_eq!(bare.path(), DEFAULT_PATH);
    }

    #[test]
    fn only_absolute_directories_are_searched() {
        assert_eq!(search_dirs("/a::b:./c:/d/"), ["/a", "/d/"]);
    }
}
