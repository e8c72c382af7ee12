//! The rule for a manifest `name`: a package name, optionally with an
//! npm-style scope (`dsh-fs-local`, `@deepseek-ai/dsh-e2b`). dsh-host maps a
//! valid name to its library file (`resolve`); here it is only checked.

/// Checks a manifest name: `package` or `@scope/package`, a package of
/// letters, digits, `-` and `_`, a scope of those and `.` or `~`. The error
/// says what is wrong with it.
pub fn validate_plugin_name(name: &str) -> Result<(), String> {
    if name.is_empty() {
        return Err("is empty".to_owned());
    }
    let package = if let Some(rest) = name.strip_prefix('@') {
        let Some((scope, package)) = rest.split_once('/') else {
            return Err(format!(
                "{name:?} starts with '@' but has no '/': a scoped name is @scope/package"
            ));
        };
        if scope.is_empty() || !scope.chars().all(is_scope_char) {
            return Err(format!(
                "{name:?} has an invalid scope {scope:?} (letters, digits, '-', '_', '.', '~')"
            ));
        }
        package
    } else {
        name
    };
    if package.is_empty() {
        return Err(format!("{name:?} has an empty package name"));
    }
    if let Some(bad) = package.chars().find(|c| !is_package_char(*c)) {
        return Err(format!(
            "{name:?} contains {bad:?}; a package name has only letters, digits, '-' and '_'"
        ));
    }
    Ok(())
}

fn is_scope_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | '~')
}

fn is_package_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '-' | '_')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn invalid_names_say_why() {
        assert!(validate_plugin_name("dsh-fs-local").is_ok());
        assert!(validate_plugin_name("@deepseek-ai/dsh-e2b").is_ok());
        for (name, needle) in [
            ("", "empty"),
            ("@scope", "no '/'"),
            ("@/pkg", "invalid scope"),
            ("@scope/", "empty package"),
            ("dir/pkg", "contains '/'"),
            ("pkg.so", "contains '.'"),
            ("has space", "contains ' '"),
        ] {
            let err = validate_plugin_name(name).unwrap_err();
            assert!(err.contains(needle), "{name:?}: {err}");
        }
    }
}
