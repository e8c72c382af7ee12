//! Snapshots of sandboxes' files (docs/design.md §7): copies of a world's files
//! ([`crate::world::layout::FILES`]) under `<state>/snapshots/<n>/`, which a new sandbox — made
//! with the snapshot's id (or name) as its `templateID`, or by a fork — starts with. Processes
//! are not captured: e2b-local's snapshots are filesystem-only. They live as long as the server
//! (its shutdown removes them; a start removes what a server that died left).

use std::io;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use crate::world::remove_tree;

/// One snapshot.
#[derive(Debug)]
pub struct Snapshot {
    /// `<name>:<tag>`: the name given (or a random one) and a random tag.
    pub id: String,
    /// The sandbox it was taken of.
    pub sandbox_id: String,
    /// Where its files are.
    pub dir: PathBuf,
}

impl Snapshot {
    /// The name part of the id.
    pub fn name(&self) -> &str {
        self.id.rsplit_once(':').map_or(&self.id, |(name, _)| name)
    }
}

/// The server's snapshots, oldest first.
#[derive(Debug)]
pub struct Snapshots {
    dir: PathBuf,
    next: AtomicU64,
    all: Mutex<Vec<Arc<Snapshot>>>,
}

impl Snapshots {
    /// The snapshots kept in `dir` (created; what an earlier server left is removed).
    pub fn new(dir: PathBuf) -> io::Result<Snapshots> {
        remove_tree(&dir)?;
        std::fs::create_dir_all(&dir)?;
        Ok(Snapshots {
            dir,
            next: AtomicU64::new(0),
            all: Mutex::new(Vec::new()),
        })
    }

    /// A new dir for a snapshot's files (not yet created: the copy creates it).
    pub fn new_dir(&self) -> PathBuf {
        self.dir
            .join(self.next.fetch_add(1, Ordering::SeqCst).to_string())
    }

    /// Lists a snapshot of `sandbox_id` whose files are in `dir`, named `name` (or at random).
    pub fn add(&self, sandbox_id: &str, name: Option<&str>, dir: PathBuf) -> Arc<Snapshot> {
        let name = name.map_or_else(
            || format!("snapshot-{}", crate::ids::sandbox_id()),
            str::to_owned,
        );
        let tag = &crate::ids::sandbox_id()[..8];
        let snapshot = Arc::new(Snapshot {
            id: format!("{name}:{tag}"),
            sandbox_id: sandbox_id.to_owned(),
            dir,
        });
        self.all
            .lock()
            .expect("snapshots lock")
            .push(snapshot.clone());
        snapshot
    }

    /// The snapshot a `templateID` names: its id, or its name (the newest of that name).
    pub fn find(&self, template: &str) -> Option<Arc<Snapshot>> {
        let all = self.all.lock().expect("snapshots lock");
        all.iter()
            .rev()
            .find(|s| s.id == template || s.name() == template)
            .cloned()
    }

    /// Every snapshot, oldest first, of `sandbox_id` if given, named `name` (id or name) if given.
    pub fn list(&self, sandbox_id: Option<&str>, name: Option<&str>) -> Vec<Arc<Snapshot>> {
        let all = self.all.lock().expect("snapshots lock");
        all.iter()
            .filter(|s| sandbox_id.is_none_or(|id| s.sandbox_id == id))
            .filter(|s| name.is_none_or(|n| s.id == n || s.name() == n))
            .cloned()
            .collect()
    }

    /// Removes every snapshot and its files (the server's shutdown).
    pub fn clear(&self) -> io::Result<()> {
        self.all.lock().expect("snapshots lock").clear();
        remove_tree(&self.dir)
    }

    /// Removes snapshot `id` and its files; false if there is none.
    pub fn remove(&self, id: &str) -> io::Result<bool> {
        let removed = {
            let mut all = self.all.lock().expect("snapshots lock");
            let Some(at) = all.iter().position(|s| s.id == id) else {
                return Ok(false);
            };
            all.remove(at)
        };
        remove_tree(&removed.dir)?;
        Ok(true)
    }
}
