//! Volumes (docs/design.md §7): named directories e2b-local owns under `<state>/volumes/<id>/`,
//! mounted into every sandbox that names one in `volumeMounts` and kept — across sandboxes and
//! across server restarts — until destroyed. A volume's description (`volume.json`: id, name,
//! content token) sits beside its files (`data/`), which sandboxes and the content API
//! (`crate::volume_content`) see as the volume's root.

use std::collections::BTreeMap;
use std::io;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use serde::{Deserialize, Serialize};

use crate::world::users;

pub use e2b_local_api::volume::{MAX_NAME_LEN, is_valid_name};

/// One volume.
#[derive(Debug, Serialize, Deserialize)]
pub struct Volume {
    pub id: String,
    pub name: String,
    /// The bearer token of the content API (`Authorization: Bearer <token>`).
    pub token: String,
    /// `<state>/volumes/<id>`.
    #[serde(skip)]
    dir: PathBuf,
}

impl Volume {
    /// The volume's root: what a sandbox sees at its mount path.
    pub fn data(&self) -> PathBuf {
        self.dir.join("data")
    }
}

/// Why a volume operation failed.
#[derive(Debug, thiserror::Error)]
pub enum VolumeError {
    #[error("a volume named {0:?} already exists")]
    NameTaken(String),
    #[error("volume {0} is mounted by {1} sandbox(es); kill them first")]
    InUse(String, usize),
    #[error("{0}")]
    Io(#[from] io::Error),
}

/// A sandbox's hold on a volume it mounts: while any lease lives the volume cannot be destroyed.
#[derive(Debug)]
pub struct Lease {
    volume: Arc<Volume>,
    volumes: Arc<Volumes>,
}

impl Lease {
    pub fn volume(&self) -> &Arc<Volume> {
        &self.volume
    }
}

/// Another lease on the same volume (a fork mounting what its source mounts).
impl Clone for Lease {
    fn clone(&self) -> Self {
        let mut state = self.volumes.state.lock().expect("volumes lock");
        *state.leases.entry(self.volume.id.clone()).or_default() += 1;
        Lease {
            volume: self.volume.clone(),
            volumes: self.volumes.clone(),
        }
    }
}

impl Drop for Lease {
    fn drop(&mut self) {
        let mut state = self.volumes.state.lock().expect("volumes lock");
        if let Some(count) = state.leases.get_mut(&self.volume.id) {
            *count -= 1;
        }
    }
}

#[derive(Debug, Default)]
struct State {
    /// By id.
    all: BTreeMap<String, Arc<Volume>>,
    /// Live leases per volume id.
    leases: BTreeMap<String, usize>,
}

/// The server's volumes.
#[derive(Debug)]
pub struct Volumes {
    dir: PathBuf,
    state: Mutex<State>,
}

impl Volumes {
    /// The volumes kept in `dir` (created 0700 if missing). A volume dir without a readable
    /// description is skipped with a warning, never removed: its files may matter to someone.
    pub fn open(dir: PathBuf) -> io::Result<Arc<Volumes>> {
        std::fs::create_dir_all(&dir)?;
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700))?;
        let mut all = BTreeMap::new();
        for entry in std::fs::read_dir(&dir)? {
            let path = entry?.path();
            match read_description(&path) {
                Ok(mut volume) => {
                    volume.dir = path;
                    all.insert(volume.id.clone(), Arc::new(volume));
                }
                Err(err) => tracing::warn!("skipping volume dir {}: {err}", path.display()),
            }
        }
        Ok(Arc::new(Volumes {
            dir,
            state: Mutex::new(State {
                all,
                leases: BTreeMap::new(),
            }),
        }))
    }

    /// Creates an empty volume named `name` (already checked with [`is_valid_name`]); its root
    /// belongs to the sandbox user, so sandboxes can write to it as their default user.
    pub fn create(&self, name: &str) -> Result<Arc<Volume>, VolumeError> {
        let mut state = self.state.lock().expect("volumes lock");
        if state.all.values().any(|v| v.name == name) {
            return Err(VolumeError::NameTaken(name.to_owned()));
        }
        let id = format!("vol-{}", crate::ids::sandbox_id());
        let volume = Volume {
            dir: self.dir.join(&id),
            id,
            name: name.to_owned(),
            token: crate::ids::access_token(),
        };
        let made = (|| {
            std::fs::create_dir(&volume.dir)?;
            std::fs::set_permissions(&volume.dir, std::fs::Permissions::from_mode(0o700))?;
            let data = volume.data();
            std::fs::create_dir(&data)?;
            std::fs::set_permissions(&data, std::fs::Permissions::from_mode(0o755))?;
            std::os::unix::fs::chown(&data, Some(users::UID), Some(users::GID))?;
            // Written last and atomically: a dir without it is not a volume (see `open`).
            let description = volume.dir.join("volume.json.tmp");
            std::fs::write(
                &description,
                serde_json::to_vec(&volume).map_err(io::Error::other)?,
            )?;
            std::fs::rename(&description, volume.dir.join("volume.json"))
        })();
        if let Err(err) = made {
            let _ = std::fs::remove_dir_all(&volume.dir);
            return Err(io::Error::new(
                err.kind(),
                format!("create volume dir {}: {err}", volume.dir.display()),
            )
            .into());
        }
        let volume = Arc::new(volume);
        state.all.insert(volume.id.clone(), volume.clone());
        Ok(volume)
    }

    /// Every volume, by id.
    pub fn list(&self) -> Vec<Arc<Volume>> {
        let state = self.state.lock().expect("volumes lock");
        state.all.values().cloned().collect()
    }

    pub fn get(&self, id: &str) -> Option<Arc<Volume>> {
        self.state
            .lock()
            .expect("volumes lock")
            .all
            .get(id)
            .cloned()
    }

    /// A lease on the volume named `name`, for a sandbox that mounts it; `None` if there is none.
    pub fn lease(self: &Arc<Self>, name: &str) -> Option<Lease> {
        let mut state = self.state.lock().expect("volumes lock");
        let volume = state.all.values().find(|v| v.name == name)?.clone();
        *state.leases.entry(volume.id.clone()).or_default() += 1;
        Some(Lease {
            volume,
            volumes: self.clone(),
        })
    }

    /// Destroys volume `id` and its files; `Ok(false)` if there is none. Refused while a sandbox
    /// (running or paused) mounts it: its files would vanish under the sandbox.
    pub fn destroy(&self, id: &str) -> Result<bool, VolumeError> {
        let volume = {
            let mut state = self.state.lock().expect("volumes lock");
            let users = state.leases.get(id).copied().unwrap_or(0);
            if users > 0 {
                return Err(VolumeError::InUse(id.to_owned(), users));
            }
            match state.all.remove(id) {
                Some(volume) => volume,
                None => return Ok(false),
            }
        };
        // The description goes first: a removal cut short leaves no half volume behind.
        std::fs::remove_file(volume.dir.join("volume.json"))?;
        std::fs::remove_dir_all(&volume.dir)?;
        Ok(true)
    }
}

fn read_description(dir: &Path) -> io::Result<Volume> {
    let text = std::fs::read(dir.join("volume.json"))?;
    let volume: Volume = serde_json::from_slice(&text).map_err(io::Error::other)?;
    if dir.file_name().and_then(|n| n.to_str()) != Some(volume.id.as_str()) {
        return Err(io::Error::other("volume.json names another volume"));
    }
    Ok(volume)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn volumes_persist_and_leases_block_destroy() {
        let dir = tempfile::tempdir().unwrap();
        let volumes = Volumes::open(dir.path().join("volumes")).unwrap();
        let volume = volumes.create("data").unwrap();
        assert!(matches!(
            volumes.create("data"),
            Err(VolumeError::NameTaken(_))
        ));
        std::fs::write(volume.data().join("kept"), "x").unwrap();
        let lease = volumes.lease("data").unwrap();
        let again = lease.clone();
        assert!(volumes.lease("other").is_none());
        drop(lease);
        assert!(matches!(
            volumes.destroy(&volume.id),
            Err(VolumeError::InUse(_, 1))
        ));
        drop(again);

        // A restarted server finds the volume, its token and its files.
        let reopened = Volumes::open(dir.path().join("volumes")).unwrap();
        let found = reopened.get(&volume.id).unwrap();
        assert_eq!((&found.name, &found.token), (&volume.name, &volume.token));
        assert_eq!(std::fs::read(found.data().join("kept")).unwrap(), b"x");
        // A dir that is not a volume is left alone.
        std::fs::create_dir(dir.path().join("volumes/stray")).unwrap();
        assert_eq!(
            Volumes::open(dir.path().join("volumes"))
                .unwrap()
                .list()
                .len(),
            1
        );

        assert!(reopened.destroy(&volume.id).unwrap());
        assert!(!reopened.destroy(&volume.id).unwrap());
        assert!(!dir.path().join("volumes").join(&volume.id).exists());
    }
}
