//! Which `dsh`, plugin libraries and `e2b-local` the soak drives: the ones given on the command
//! line, else those built next to this program (the same cargo profile), all checked to exist
//! before anything starts — and then copied into a private snapshot directory, so that a build
//! in the same target directory while the soak runs cannot change the programs under it (a
//! running e2b-local re-executes its binary by path for every sandbox).

use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};

/// The plugins of the E2B composition (`config/e2b-local.yaml`).
pub const PLUGINS: [&str; 3] = ["dsh-e2b-owner", "dsh-fs-e2b", "dsh-subprocess-e2b"];

/// The programs of one soak.
#[derive(Debug, Clone)]
pub struct Binaries {
    /// The `dsh` program.
    pub dsh: PathBuf,
    /// Where its plugin libraries are (`DSH_PLUGIN_PATH` of every `dsh` the soak runs).
    pub plugin_dir: PathBuf,
    /// The `e2b-local` program.
    pub e2b_local: PathBuf,
}

/// Resolves `dsh` and `e2b-local` (given, else next to the running program) and checks that
/// both and the three plugin libraries exist; the error says what to build.
pub fn locate(dsh: Option<PathBuf>, e2b_local: Option<PathBuf>) -> Result<Binaries> {
    let exe = std::env::current_exe().context("locate the running dsh-soak")?;
    let own_dir = profile_dir(&exe);
    let build_hint = || {
        let release = own_dir.file_name().is_some_and(|name| name == "release");
        format!(
            "build them first: cargo build{} -p dsh-cli -p e2b-local -p dsh-e2b-owner -p dsh-fs-e2b \
             -p dsh-subprocess-e2b",
            if release { " --release" } else { "" }
        )
    };
    let dsh = absolute(dsh.unwrap_or_else(|| own_dir.join("dsh")))?;
    let e2b_local = absolute(e2b_local.unwrap_or_else(|| own_dir.join("e2b-local")))?;
    for program in [&dsh, &e2b_local] {
        if !program.is_file() {
            bail!("{} does not exist; {}", program.display(), build_hint());
        }
    }
    let plugin_dir = dsh
        .parent()
        .context("the dsh binary has no directory")?
        .to_path_buf();
    let missing: Vec<String> = PLUGINS
        .iter()
        .map(|plugin| plugin_dir.join(library_file_name(plugin)))
        .filter(|path| !path.is_file())
        .map(|path| path.display().to_string())
        .collect();
    if !missing.is_empty() {
        bail!(
            "plugin libraries missing next to {}: {}; {}",
            dsh.display(),
            missing.join(", "),
            build_hint()
        );
    }
    Ok(Binaries {
        dsh,
        plugin_dir,
        e2b_local,
    })
}

impl Binaries {
    /// Copies the programs and plugin libraries into a new directory under the system's
    /// temporary directory (the caller removes it) and returns the copies.
    pub fn snapshot(&self) -> Result<Binaries> {
        let dir = tempfile::Builder::new()
            .prefix("dsh-soak-binaries-")
            .tempdir()
            .context("create the snapshot directory")?
            .keep();
        let copy = |from: &Path| -> Result<PathBuf> {
            let name = from.file_name().context("a program without a name")?;
            let to = dir.join(name);
            std::fs::copy(from, &to)
                .with_context(|| format!("copy {} to {}", from.display(), to.display()))?;
            Ok(to)
        };
        let dsh = copy(&self.dsh)?;
        let e2b_local = copy(&self.e2b_local)?;
        for plugin in PLUGINS {
            copy(&self.plugin_dir.join(library_file_name(plugin)))?;
        }
        Ok(Binaries {
            dsh,
            plugin_dir: dir,
            e2b_local,
        })
    }

    /// The programs of a snapshot directory made by [`Self::snapshot`].
    pub fn in_snapshot(dir: &Path) -> Binaries {
        Binaries {
            dsh: dir.join("dsh"),
            plugin_dir: dir.to_path_buf(),
            e2b_local: dir.join("e2b-local"),
        }
    }
}

/// `target/<profile>` for a program in it or in its `deps` directory (a test harness).
fn profile_dir(exe: &Path) -> PathBuf {
    let dir = exe.parent().unwrap_or(Path::new("."));
    if dir.file_name().is_some_and(|name| name == "deps") {
        dir.parent().unwrap_or(dir).to_path_buf()
    } else {
        dir.to_path_buf()
    }
}

/// `dsh-e2b-owner` → `libdsh_e2b_owner.so`, as dsh maps a plugin name to its library.
fn library_file_name(plugin: &str) -> String {
    format!("lib{}.so", plugin.replace('-', "_"))
}

fn absolute(path: PathBuf) -> Result<PathBuf> {
    std::path::absolute(&path).with_context(|| format!("resolve {}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn programs_are_looked_for_in_the_profile_directory() {
        assert_eq!(
            profile_dir(Path::new("/t/release/dsh-soak")),
            Path::new("/t/release")
        );
        assert_eq!(
            profile_dir(Path::new("/t/debug/deps/dsh_soak-1a2b")),
            Path::new("/t/debug")
        );
    }

    #[test]
    fn plugin_names_map_to_their_libraries() {
        assert_eq!(library_file_name("dsh-fs-e2b"), "libdsh_fs_e2b.so");
    }

    #[test]
    fn a_snapshot_holds_copies_of_every_program_and_library() {
        let built = tempfile::tempdir().unwrap();
        for name in ["dsh", "e2b-local"]
            .into_iter()
            .map(str::to_owned)
            .chain(PLUGINS.iter().map(|p| library_file_name(p)))
        {
            std::fs::write(built.path().join(&name), &name).unwrap();
        }
        let binaries = Binaries {
            dsh: built.path().join("dsh"),
            plugin_dir: built.path().to_path_buf(),
            e2b_local: built.path().join("e2b-local"),
        };
        let snapshot = binaries.snapshot().unwrap();
        let dir = snapshot.plugin_dir.clone();
        assert_ne!(dir, built.path());
        assert_eq!(std::fs::read_to_string(&snapshot.dsh).unwrap(), "dsh");
        assert_eq!(
            std::fs::read_to_string(dir.join("libdsh_fs_e2b.so")).unwrap(),
            "libdsh_fs_e2b.so"
        );
        assert_eq!(Binaries::in_snapshot(&dir).e2b_local, snapshot.e2b_local);
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn a_missing_program_is_named_with_what_to_build() {
        let err = locate(Some(PathBuf::from("/nonexistent/dsh")), None)
            .expect_err("no such dsh")
            .to_string();
        assert!(err.starts_with("/nonexistent/dsh does not exist"), "{err}");
        assert!(err.contains("cargo build"), "{err}");
    }
}
