//! Which language server serves which files: per language, the command, the file extensions it
//! takes, the files that mark a workspace root, and its initialization options. Defaults cover
//! C/C++ (`clangd`), Python (`pyright-langserver`) and TypeScript/JavaScript
//! (`typescript-language-server`); a YAML or TOML file (`dsh --lsp-config FILE`) replaces or
//! adds languages by name.

use std::path::Path;

use dsh_plugin_api::{Error, Result};
use serde::Deserialize;
use serde_json::Value;

/// The largest config file read.
const MAX_CONFIG_BYTES: u64 = 1 << 20;

/// One language's server.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct LanguageConfig {
    /// The language's name (`python`, `typescript`, `c`), as the tools' results name it.
    pub name: String,
    /// The server's command line: a name on the world's PATH or an absolute path, and its
    /// arguments.
    pub command: Vec<String>,
    /// File extensions it serves (without the dot), each mapped to the LSP `languageId` sent
    /// for such files.
    pub extensions: Vec<Extension>,
    /// File names whose nearest directory above a file is its workspace root (the first
    /// marker found going up wins; no marker: the file's own directory).
    #[serde(default)]
    pub root_markers: Vec<String>,
    /// The server's `initializationOptions`.
    #[serde(default)]
    pub initialization_options: Option<Value>,
}

/// A file extension and the `languageId` of its documents.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Extension {
    pub extension: String,
    pub language_id: String,
}

/// Every language the tools know.
#[derive(Debug, Clone, PartialEq)]
pub struct LspConfig {
    pub languages: Vec<LanguageConfig>,
}

/// A config file: languages that replace the defaults of the same name or add to them.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ConfigFile {
    #[serde(default)]
    languages: Vec<LanguageConfig>,
}

fn extensions(pairs: &[(&str, &str)]) -> Vec<Extension> {
    pairs
        .iter()
        .map(|(extension, language_id)| Extension {
            extension: (*extension).to_owned(),
            language_id: (*language_id).to_owned(),
        })
        .collect()
}

fn strings(items: &[&str]) -> Vec<String> {
    items.iter().map(|s| (*s).to_owned()).collect()
}

impl Default for LspConfig {
    fn default() -> LspConfig {
        LspConfig {
            languages: vec![
                LanguageConfig {
                    name: "c".to_owned(),
                    command: strings(&["clangd", "--log=error"]),
                    extensions: extensions(&[
                        ("c", "c"),
                        ("h", "c"),
                        ("cc", "cpp"),
                        ("cpp", "cpp"),
                        ("cxx", "cpp"),
                        ("hh", "cpp"),
                        ("hpp", "cpp"),
                        ("hxx", "cpp"),
                    ]),
                    root_markers: strings(&[
                        "compile_commands.json",
                        "compile_flags.txt",
                        ".clangd",
                        ".git",
                    ]),
                    initialization_options: None,
                },
                LanguageConfig {
                    name: "python".to_owned(),
                    command: strings(&["pyright-langserver", "--stdio"]),
                    extensions: extensions(&[("py", "python"), ("pyi", "python")]),
                    root_markers: strings(&[
                        "pyrightconfig.json",
                        "pyproject.toml",
                        "setup.py",
                        "setup.cfg",
                        ".git",
                    ]),
                    initialization_options: None,
                },
                LanguageConfig {
                    name: "typescript".to_owned(),
                    command: strings(&["typescript-language-server", "--stdio"]),
                    extensions: extensions(&[
                        ("ts", "typescript"),
                        ("mts", "typescript"),
                        ("cts", "typescript"),
                        ("tsx", "typescriptreact"),
                        ("js", "javascript"),
                        ("mjs", "javascript"),
                        ("cjs", "javascript"),
                        ("jsx", "javascriptreact"),
                    ]),
                    root_markers: strings(&[
                        "tsconfig.json",
                        "jsconfig.json",
                        "package.json",
                        ".git",
                    ]),
                    initialization_options: None,
                },
            ],
        }
    }
}

impl LspConfig {
    /// The defaults with `path`'s languages (YAML `.yaml`/`.yml` or TOML `.toml`, a `languages`
    /// list) replacing those of the same name and adding the rest. Errors name the file.
    pub fn from_path(path: &Path) -> Result<LspConfig> {
        let op = format!("read LSP config {}", path.display());
        let metadata = std::fs::metadata(path).map_err(|e| Error::from_io(&op, &e))?;
        if !metadata.is_file() || metadata.len() > MAX_CONFIG_BYTES {
            return Err(Error::invalid_input(format!(
                "{op}: not a regular file of at most {MAX_CONFIG_BYTES} bytes"
            )));
        }
        let text = std::fs::read_to_string(path).map_err(|e| Error::from_io(&op, &e))?;
        let file: ConfigFile = match path.extension().and_then(|e| e.to_str()) {
            Some("toml") => {
                toml::from_str(&text).map_err(|e| Error::invalid_input(format!("{op}: {e}")))?
            }
            Some("yaml" | "yml") => serde_saphyr::from_str(&text)
                .map_err(|e| Error::invalid_input(format!("{op}: {e}")))?,
            _ => {
                return Err(Error::invalid_input(format!(
                    "{op}: the file name must end in .toml, .yaml or .yml"
                )));
            }
        };
        let mut config = LspConfig::default();
        for language in file.languages {
            language
                .check()
                .map_err(|e| Error::invalid_input(format!("{op}: {e}")))?;
            match config
                .languages
                .iter_mut()
                .find(|l| l.name == language.name)
            {
                Some(existing) => *existing = language,
                None => config.languages.push(language),
            }
        }
        Ok(config)
    }

    /// The language serving `path` (by its extension) and the `languageId` of its documents.
    pub fn language_of(&self, path: &str) -> Option<(&LanguageConfig, &str)> {
        let name = path.rsplit('/').next().unwrap_or(path);
        let (_, extension) = name.rsplit_once('.')?;
        self.languages.iter().find_map(|language| {
            language
                .extensions
                .iter()
                .find(|e| e.extension == extension)
                .map(|e| (language, e.language_id.as_str()))
        })
    }
}

impl LanguageConfig {
    fn check(&self) -> std::result::Result<(), String> {
        if self.name.is_empty() {
            return Err("a language needs a name".to_owned());
        }
        if self.command.first().is_none_or(String::is_empty) {
            return Err(format!("language {}: command is empty", self.name));
        }
        if self.extensions.is_empty() {
            return Err(format!("language {}: no extensions", self.name));
        }
        if let Some(bad) = self
            .extensions
            .iter()
            .find(|e| e.extension.is_empty() || e.extension.contains(['.', '/']))
        {
            return Err(format!(
                "language {}: extension {:?} must be a bare extension (no dot)",
                self.name, bad.extension
            ));
        }
        if let Some(bad) = self
            .root_markers
            .iter()
            .find(|m| m.is_empty() || m.contains('/'))
        {
            return Err(format!(
                "language {}: root marker {bad:?} must be a file name",
                self.name
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn files_find_their_language_by_extension() {
        let config = LspConfig::default();
        let (language, id) = config.language_of("/src/app/main.tsx").unwrap();
        assert_eq!(
            (language.name.as_str(), id),
            ("typescript", "typescriptreact")
        );
        assert_eq!(config.language_of("/a/b.hpp").unwrap().1, "cpp");
        assert_eq!(config.language_of("/a/x.py").unwrap().0.name, "python");
        assert!(config.language_of("/a/README").is_none());
        assert!(config.language_of("/a.d/README").is_none());
    }

    #[test]
    fn a_config_file_replaces_and_adds_languages_and_bad_ones_are_named() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("lsp.yaml");
        std::fs::write(
            &path,
            "languages:\n  - name: python\n    command: [pylsp]\n    extensions:\n      - {extension: py, languageId: python}\n  - name: rust\n    command: [rust-analyzer]\n    extensions:\n      - {extension: rs, languageId: rust}\n    rootMarkers: [Cargo.toml]\n    initializationOptions: {checkOnSave: false}\n",
        )
        .unwrap();
        let config = LspConfig::from_path(&path).unwrap();
        assert_eq!(config.language_of("/x.py").unwrap().0.command, ["pylsp"]);
        let (rust, _) = config.language_of("/src/lib.rs").unwrap();
        assert_eq!(rust.root_markers, ["Cargo.toml"]);
        assert_eq!(config.languages.len(), 4);

        let toml = dir.path().join("lsp.toml");
        for (text, says) in [
            (
                "[[languages]]\nname = \"x\"\ncommand = []\nextensions = [{extension = \"x\", languageId = \"x\"}]\n",
                "command is empty",
            ),
            (
                "[[languages]]\nname = \"x\"\ncommand = [\"x\"]\nextensions = [{extension = \".x\", languageId = \"x\"}]\n",
                "no dot",
            ),
            (
                "[[languages]]\nname = \"x\"\ncommand = [\"x\"]\nextensions = []\nbogus = 1\n",
                "bogus",
            ),
        ] {
            std::fs::write(&toml, text).unwrap();
            let err = LspConfig::from_path(&toml).unwrap_err().to_string();
            assert!(err.contains(says) && err.contains("lsp.toml"), "{err}");
        }
        let other = dir.path().join("lsp.json");
        std::fs::write(&other, "{}").unwrap();
        assert!(
            LspConfig::from_path(&other)
                .unwrap_err()
                .to_string()
                .contains(".toml")
        );
    }
}
