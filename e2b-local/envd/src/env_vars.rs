//! The sandbox-global environment: internal variables set by the daemon (`E2B_SANDBOX`,
//! `E2B_SANDBOX_ID`, `E2B_TEMPLATE_ID`) and user variables from create-time `envVars` or
//! `POST /init`. Internal variables cannot be overridden by user variables.

use std::collections::BTreeMap;

#[derive(Debug, Clone, PartialEq, Eq)]
struct Entry {
    value: String,
    internal: bool,
}

/// Global environment variables, in name order.
#[derive(Debug, Clone, Default)]
pub(crate) struct EnvVars {
    entries: BTreeMap<String, Entry>,
}

impl EnvVars {
    /// Sets an internal variable (wins over any user variable of the same name).
    pub(crate) fn set_internal(&mut self, key: &str, value: &str) {
        self.entries.insert(
            key.to_owned(),
            Entry {
                value: value.to_owned(),
                internal: true,
            },
        );
    }

    /// Replaces every user variable with `vars`; names held by internal variables are skipped.
    pub(crate) fn replace_user(&mut self, vars: &BTreeMap<String, String>) {
        self.entries
            .retain(|key, entry| entry.internal || vars.contains_key(key));
        for (key, value) in vars {
            match self.entries.get(key) {
                Some(existing) if existing.internal => {}
                _ => {
                    self.entries.insert(
                        key.clone(),
                        Entry {
                            value: value.clone(),
                            internal: false,
                        },
                    );
                }
            }
        }
    }

    /// Every variable, name → value.
    pub(crate) fn all(&self) -> impl Iterator<Item = (&str, &str)> {
        self.entries
            .iter()
            .map(|(key, entry)| (key.as_str(), entry.value.as_str()))
    }
}

/// Checks that `name=value` can be put in a process environment: a non-empty name without `=`
/// or NUL, a value without NUL. The error names the variable.
pub(crate) fn validate_env_var(name: &str, value: &str) -> Result<(), String> {
    if name.is_empty() {
        return Err("environment variable name is empty".to_owned());
    }
    if name.contains('=') || name.contains('\0') {
        return Err(format!(
            "environment variable name {name:?} contains '=' or a NUL byte"
        ));
    }
    if value.contains('\0') {
        return Err(format!(
            "environment variable {name:?} has a value containing a NUL byte"
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn internal_variables_survive_user_replacement() {
        let mut vars = EnvVars::default();
        vars.set_internal("E2B_SANDBOX", "true");
        vars.replace_user(&BTreeMap::from([
            ("E2B_SANDBOX".to_owned(), "false".to_owned()),
            ("A".to_owned(), "1".to_owned()),
        ]));
        vars.replace_user(&BTreeMap::from([("B".to_owned(), "2".to_owned())]));
        let all: Vec<_> = vars.all().collect();
        assert_eq!(all, vec![("B", "2"), ("E2B_SANDBOX", "true")]);
    }

    #[test]
    fn env_var_validation_names_the_variable() {
        assert!(validate_env_var("A", "1").is_ok());
        assert!(validate_env_var("", "1").unwrap_err().contains("empty"));
        assert!(
            validate_env_var("A=B", "1")
                .unwrap_err()
                .contains("\"A=B\"")
        );
        assert!(validate_env_var("A", "x\0y").unwrap_err().contains("\"A\""));
    }
}
