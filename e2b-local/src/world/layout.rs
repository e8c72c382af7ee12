//! Where one sandbox's files live in the state dir, and the configuration the server hands to
//! the in-namespace init over its stdin.

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

/// The parts of a sandbox dir that hold the sandbox's files (the overlay's upper layer, `/tmp`,
/// `/home`, `/root`): what a snapshot copies and a sandbox made from it starts with.
pub const FILES: [&str; 4] = [UPPER, "tmp", "homes", "root-home"];
/// The overlay's upper and work dirs' names in the sandbox dir.
pub const UPPER: &str = "upper";
pub const WORK: &str = "work";

/// The per-sandbox directory `<state>/sandboxes/<id>/` and its parts.
#[derive(Debug, Clone)]
pub struct SandboxDirs {
    pub dir: PathBuf,
}

impl SandboxDirs {
    pub fn new(dir: PathBuf) -> Self {
        Self { dir }
    }

    /// Overlay upper layer: every change the sandbox makes to the host root's view.
    pub fn upper(&self) -> PathBuf {
        self.dir.join(UPPER)
    }

    /// Overlay work dir (same filesystem as `upper`).
    pub fn work(&self) -> PathBuf {
        self.dir.join(WORK)
    }

    /// Mount point of the overlay: the sandbox's future `/`.
    pub fn root(&self) -> PathBuf {
        self.dir.join("root")
    }

    /// The current boot's id, shown inside as `/proc/sys/kernel/random/boot_id` (not a part of
    /// [`FILES`]: each boot makes its own).
    pub fn boot_id(&self) -> PathBuf {
        self.dir.join("boot_id")
    }

    /// Backing dir of the sandbox's fresh `/tmp`.
    pub fn tmp(&self) -> PathBuf {
        self.dir.join("tmp")
    }

    /// Backing dir of the sandbox's fresh `/home`: holds only [`SandboxDirs::home`], so the
    /// host's other home directories stay out of the sandbox.
    pub fn homes(&self) -> PathBuf {
        self.dir.join("homes")
    }

    /// Backing dir of the sandbox's fresh `/home/user` (inside [`SandboxDirs::homes`]).
    pub fn home(&self) -> PathBuf {
        self.homes().join("user")
    }

    /// Backing dir of the sandbox's fresh `/root`: the host root's home (its keys, history and
    /// credentials) stays out of the sandbox.
    pub fn root_home(&self) -> PathBuf {
        self.dir.join("root-home")
    }

    /// Unix socket the sandbox's envd listens on; the front connects here.
    pub fn socket(&self) -> PathBuf {
        self.dir.join("envd.sock")
    }

    /// The sandbox log envd appends to (JSON lines, `e2b_local_envd::Envd::log_to`), which the
    /// control plane's `…/logs` serves. Kept across a files-only pause's reboot.
    pub fn log(&self) -> PathBuf {
        self.dir.join("envd.log")
    }
}

/// Everything the init needs to build the world and start envd inside it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct InitConfig {
    pub sandbox_id: String,
    pub template_id: String,
    pub env_vars: BTreeMap<String, String>,
    pub access_token: Option<String>,
    /// The sandbox dir ([`SandboxDirs::dir`]).
    pub dir: PathBuf,
    /// Host directories covered by an empty read-only tmpfs inside (every e2b-local state dir,
    /// `/run/e2b-local`).
    pub hide: Vec<PathBuf>,
    /// Whose permissions envd performs file operations with (`serve --envd-file-access`).
    pub envd_file_access: e2b_local_envd::FileAccess,
    /// Volumes bound into the world, in order.
    pub volumes: Vec<VolumeBind>,
    /// envd's default user and working directory ([`super::WorldSpec`]).
    pub default_user: String,
    pub default_workdir: Option<PathBuf>,
}

/// A host dir (a volume's files) bound at an absolute, normalized path inside a world.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct VolumeBind {
    pub source: PathBuf,
    pub target: PathBuf,
}

impl InitConfig {
    pub fn dirs(&self) -> SandboxDirs {
        SandboxDirs::new(self.dir.clone())
    }
}
