//! File operations through the `fs` seam (`dsh fs …`) against the worker's model of its data
//! directory. A completed operation must do exactly what it says; one whose `dsh` was SIGKILLed
//! is reconciled at once by looking (never killed): a write must have left the old content or
//! the new one (writes are atomic), a rename the file at one of its two paths, a removal may be
//! partial and is finished. Staging directories (`.dsh-stage-*`) that killed writes leave beside
//! their targets are counted and removed; one anywhere else is a failure.

use std::time::Duration;

use rand::Rng;
use serde_json::Value;

use crate::content::{Content, difference};
use crate::dsh::{Input, Outcome, contains};
use crate::model::{Model, Node, ROOT, parent};
use crate::tally::counter;
use crate::worker::{Settled, Worker, expect_code};

/// Above this many bytes in the model, writes give way to removals.
const BYTES_CAP: usize = 24 << 20;
/// What `dsh fs` says of a missing path, in a sandbox as on the host: the system's own words.
const MISSING: &str = "No such file or directory";
/// Above this many entries in the model, writes give way to removals.
const ENTRIES_CAP: usize = 60;
/// Name prefix of the `fs` seam's staging directories.
const STAGING_PREFIX: &str = ".dsh-stage-";
/// The kind under which reconciling looks are tallied.
const RECONCILE: &str = "fs-reconcile";

/// What `fs stat` says about a path.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Stat {
    kind: String,
    size: u64,
}

impl Worker {
    fn model(&self) -> Option<&Model> {
        self.sandbox.as_ref().map(|sandbox| &sandbox.model)
    }

    fn model_mut(&mut self) -> Option<&mut Model> {
        self.sandbox.as_mut().map(|sandbox| &mut sandbox.model)
    }

    /// A random file of the model.
    fn any_file(&mut self) -> Option<String> {
        let files: Vec<String> = self
            .model()?
            .files()
            .into_iter()
            .map(str::to_owned)
            .collect();
        pick(&mut self.rng, &files)
    }

    /// A random directory of the model.
    fn any_dir(&mut self) -> String {
        let dirs: Vec<String> = self
            .model()
            .map(|model| model.dirs().into_iter().map(str::to_owned).collect())
            .unwrap_or_default();
        pick(&mut self.rng, &dirs).unwrap_or_else(|| ROOT.to_owned())
    }

    /// A path not yet used, in a random directory of the model.
    fn fresh_path(&mut self, dir: &str) -> String {
        let name = match self.sandbox.as_mut() {
            Some(sandbox) => sandbox.model.fresh_name(&mut self.rng),
            None => format!("f{}", self.serial()),
        };
        format!("{dir}/{name}")
    }

    fn content_of(&self, path: &str) -> Option<Content> {
        match self.model()?.get(path)? {
            Node::File(content) => Some(content.clone()),
            Node::Dir => None,
        }
    }

    /// Writes a new file or replaces one, 0 bytes to 4 MiB, from stdin; sometimes with
    /// `--create-new`.
    pub async fn fs_write(&mut self) -> bool {
        const KIND: &str = "fs-write";
        let Some(model) = self.model() else {
            return true;
        };
        if model.bytes() > BYTES_CAP || model.len() > ENTRIES_CAP {
            return self.fs_rm().await;
        }
        let has_files = !model.files().is_empty();
        let path = match self.any_file() {
            Some(file) if has_files && self.rng.random_bool(0.4) => file,
            _ => {
                let dir = self.any_dir();
                self.fresh_path(&dir)
            }
        };
        let old = self.content_of(&path);
        let tag = self.serial();
        let content = if self.rng.random_bool(0.2) {
            Content::random_text(&mut self.rng, tag)
        } else {
            Content::random_generated(&mut self.rng)
        };
        let mut args = vec!["fs", "write"];
        if old.is_none() && self.rng.random_bool(0.3) {
            args.push("--create-new");
        }
        args.push(&path);
        let kill = self.kill_plan(400 + content.len() as u64 / 10_000);
        let manifest = self.leave_manifest();
        let input = Input::Bytes(content.bytes());
        let Some(outcome) = self.dsh(KIND, &manifest, &args, input, kill).await else {
            return false;
        };
        match self.settle(KIND, &args, &outcome, |outcome| {
            expect_code(outcome, 0)?;
            if outcome.stdout_text().trim().is_empty() {
                return Err("printed no version".to_owned());
            }
            Ok(())
        }) {
            Settled::Ok => {
                if let Some(model) = self.model_mut() {
                    model.put_file(&path, content);
                }
                true
            }
            Settled::Killed => {
                if let Some(sandbox) = self.sandbox.as_mut() {
                    sandbox.staging_suspects.insert(parent(&path).to_owned());
                }
                self.reconcile_content(&path, old, content, "write").await
            }
            Settled::Failed => false,
        }
    }

    /// `fs cat` of a file: every byte as written.
    pub async fn fs_cat(&mut self) -> bool {
        const KIND: &str = "fs-cat";
        let Some(path) = self.any_file() else {
            return self.fs_write().await;
        };
        let Some(content) = self.content_of(&path) else {
            return true;
        };
        let args = ["fs", "cat", &path];
        let kill = self.kill_plan(300);
        let manifest = self.leave_manifest();
        let Some(outcome) = self.dsh(KIND, &manifest, &args, Input::Null, kill).await else {
            return false;
        };
        self.settle(KIND, &args, &outcome, |outcome| {
            expect_code(outcome, 0)?;
            difference(&content.bytes(), &outcome.stdout).map_or(Ok(()), Err)
        }) != Settled::Failed
    }

    /// `fs ls --json` of a directory: exactly the model's entries (names, kinds, file sizes),
    /// apart from staging dirs where a killed write may have left them.
    pub async fn fs_ls(&mut self) -> bool {
        const KIND: &str = "fs-ls";
        let dir = self.any_dir();
        let Some(model) = self.model() else {
            return true;
        };
        let mut want: Vec<String> = model
            .children(&dir)
            .iter()
            .map(|(name, node)| match node {
                Node::Dir => format!("{name} directory"),
                Node::File(content) => format!("{name} file {}", content.len()),
            })
            .collect();
        want.sort();
        let suspect = self
            .sandbox
            .as_ref()
            .is_some_and(|sandbox| sandbox.staging_suspects.contains(&dir));
        let args = ["--json", "fs", "ls", &dir];
        let kill = self.kill_plan(300);
        let manifest = self.leave_manifest();
        let Some(outcome) = self.dsh(KIND, &manifest, &args, Input::Null, kill).await else {
            return false;
        };
        let mut staging = Vec::new();
        let settled = self.settle(KIND, &args, &outcome, |outcome| {
            expect_code(outcome, 0)?;
            let listed: Vec<Value> = serde_json::from_slice(&outcome.stdout)
                .map_err(|e| format!("not a JSON list: {e}"))?;
            let mut got = Vec::new();
            for entry in &listed {
                let name = entry["name"].as_str().unwrap_or("?");
                let kind = entry["kind"].as_str().unwrap_or("?");
                if name.starts_with(STAGING_PREFIX) && kind == "directory" {
                    if !suspect {
                        return Err(format!(
                            "staging dir {name} in {dir}, where no write was killed"
                        ));
                    }
                    staging.push(format!("{dir}/{name}"));
                    continue;
                }
                got.push(match kind {
                    "file" => format!("{name} file {}", entry["size"].as_u64().unwrap_or(u64::MAX)),
                    _ => format!("{name} {kind}"),
                });
            }
            got.sort();
            if got == want {
                Ok(())
            } else {
                Err(format!("listed {got:?}, expected {want:?}"))
            }
        });
        if settled != Settled::Ok {
            return settled == Settled::Killed;
        }
        for leftover in staging {
            let args = ["fs", "rm", &leftover];
            let Some(outcome) = self
                .dsh(RECONCILE, &manifest, &args, Input::Null, None)
                .await
            else {
                return false;
            };
            // A dropped upload may still be finishing in envd and recreate it, or the second
            // clean-up may have removed it meanwhile: both are fine.
            self.settle(RECONCILE, &args, &outcome, |_| Ok(()));
            self.tally().count(counter::STAGING_LEFT, 1);
        }
        true
    }

    /// `fs stat --json` of any entry: its kind, and a file's size.
    pub async fn fs_stat(&mut self) -> bool {
        const KIND: &str = "fs-stat";
        let Some(model) = self.model() else {
            return true;
        };
        let paths: Vec<String> = model
            .files()
            .into_iter()
            .chain(model.dirs())
            .map(str::to_owned)
            .collect();
        let Some(path) = pick(&mut self.rng, &paths) else {
            return true;
        };
        let want = match self.model().and_then(|model| model.get(&path)) {
            Some(Node::File(content)) => Stat {
                kind: "file".to_owned(),
                size: content.len() as u64,
            },
            _ => Stat {
                kind: "directory".to_owned(),
                size: 0,
            },
        };
        let args = ["--json", "fs", "stat", &path];
        let kill = self.kill_plan(300);
        let manifest = self.leave_manifest();
        let Some(outcome) = self.dsh(KIND, &manifest, &args, Input::Null, kill).await else {
            return false;
        };
        self.settle(KIND, &args, &outcome, |outcome| {
            expect_code(outcome, 0)?;
            let got = parse_stat(outcome)?;
            if got.kind == want.kind && (want.kind != "file" || got.size == want.size) {
                Ok(())
            } else {
                Err(format!("{got:?}, expected {want:?}"))
            }
        }) != Settled::Failed
    }

    /// Refusals: `stat` of a missing path says so ([`MISSING`], exit 1); `write --create-new` over
    /// an existing file is refused (exit 1) and leaves it as it was (a later `cat` checks).
    pub async fn fs_negative(&mut self) -> bool {
        const KIND: &str = "fs-negative";
        let existing = self.any_file();
        let manifest = self.leave_manifest();
        let (args, input, needle) = match existing {
            Some(path) if self.rng.random_bool(0.5) => (
                vec![
                    "fs".to_owned(),
                    "write".to_owned(),
                    "--create-new".to_owned(),
                    path,
                ],
                Input::Bytes(b"must not land".to_vec()),
                "exists",
            ),
            _ => {
                let dir = self.any_dir();
                let path = self.fresh_path(&dir);
                (
                    vec!["fs".to_owned(), "stat".to_owned(), path],
                    Input::Null,
                    MISSING,
                )
            }
        };
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let kill = self.kill_plan(300);
        let Some(outcome) = self.dsh(KIND, &manifest, &args, input, kill).await else {
            return false;
        };
        let settled = self.settle(KIND, &args, &outcome, |outcome| {
            expect_code(outcome, 1)?;
            if contains(&outcome.stderr, needle.as_bytes()) {
                Ok(())
            } else {
                Err(format!("the error does not say {needle:?}"))
            }
        });
        if settled == Settled::Killed && args[1] == "write" {
            // A killed refused write may still leave its staging dir.
            if let Some(sandbox) = self.sandbox.as_mut() {
                sandbox.staging_suspects.insert(parent(args[3]).to_owned());
            }
        }
        settled != Settled::Failed
    }

    /// `fs mkdir` of one or two new levels.
    pub async fn fs_mkdir(&mut self) -> bool {
        const KIND: &str = "fs-mkdir";
        let dir = self.any_dir();
        let first = self.fresh_path(&dir);
        let path = if self.rng.random_bool(0.3) {
            self.fresh_path(&first)
        } else {
            first.clone()
        };
        let args = ["fs", "mkdir", &path];
        let kill = self.kill_plan(300);
        let manifest = self.leave_manifest();
        let Some(outcome) = self.dsh(KIND, &manifest, &args, Input::Null, kill).await else {
            return false;
        };
        match self.settle(KIND, &args, &outcome, |o| expect_code(o, 0)) {
            Settled::Ok => {
                if let Some(model) = self.model_mut() {
                    model.make_dir(&path);
                }
                true
            }
            Settled::Killed => self.reconcile_new_dirs(&[&first, &path]).await,
            Settled::Failed => false,
        }
    }

    /// `fs mv` of a file to a new name (sometimes in a new directory) or over another file.
    pub async fn fs_mv(&mut self) -> bool {
        const KIND: &str = "fs-mv";
        let Some(from) = self.any_file() else {
            return self.fs_write().await;
        };
        let other = self.any_file().filter(|other| *other != from);
        let (to, new_dir) = match other {
            Some(other) if self.rng.random_bool(0.2) => (other, None),
            _ => {
                let dir = self.any_dir();
                if self.rng.random_bool(0.15) {
                    let new_dir = self.fresh_path(&dir);
                    (self.fresh_path(&new_dir), Some(new_dir))
                } else {
                    (self.fresh_path(&dir), None)
                }
            }
        };
        let (Some(moved), old_to) = (self.content_of(&from), self.content_of(&to)) else {
            return true;
        };
        let args = ["fs", "mv", &from, &to];
        let kill = self.kill_plan(300);
        let manifest = self.leave_manifest();
        let Some(outcome) = self.dsh(KIND, &manifest, &args, Input::Null, kill).await else {
            return false;
        };
        match self.settle(KIND, &args, &outcome, |o| expect_code(o, 0)) {
            Settled::Ok => {
                if let Some(model) = self.model_mut() {
                    model.rename_file(&from, &to);
                }
                true
            }
            Settled::Killed => {
                if let Some(new_dir) = &new_dir
                    && !self.reconcile_new_dirs(&[new_dir]).await
                {
                    return false;
                }
                self.reconcile_rename(&from, &to, moved, old_to).await
            }
            Settled::Failed => false,
        }
    }

    /// `fs rm` of a file or a directory tree.
    pub async fn fs_rm(&mut self) -> bool {
        const KIND: &str = "fs-rm";
        let Some(model) = self.model() else {
            return true;
        };
        let paths: Vec<String> = model
            .files()
            .into_iter()
            .chain(model.dirs().into_iter().filter(|dir| *dir != ROOT))
            .map(str::to_owned)
            .collect();
        let Some(path) = pick(&mut self.rng, &paths) else {
            return true;
        };
        let args = ["fs", "rm", &path];
        let kill = self.kill_plan(300);
        let manifest = self.leave_manifest();
        let Some(outcome) = self.dsh(KIND, &manifest, &args, Input::Null, kill).await else {
            return false;
        };
        match self.settle(KIND, &args, &outcome, |o| expect_code(o, 0)) {
            Settled::Ok => {}
            Settled::Killed => {
                // Removing a tree is not atomic: whatever is left, a second rm must finish it.
                let Some(stat) = self.look(&path).await else {
                    return false;
                };
                if stat.is_some() {
                    let Some(outcome) = self
                        .dsh(RECONCILE, &manifest, &args, Input::Null, None)
                        .await
                    else {
                        return false;
                    };
                    if self.settle(RECONCILE, &args, &outcome, |o| expect_code(o, 0)) != Settled::Ok
                    {
                        return false;
                    }
                }
            }
            Settled::Failed => return false,
        }
        if let Some(sandbox) = self.sandbox.as_mut() {
            sandbox.model.remove(&path);
            let prefix = format!("{path}/");
            sandbox
                .staging_suspects
                .retain(|dir| *dir != path && !dir.starts_with(&prefix));
        }
        true
    }

    /// `fs edit` of a text file: one unique token replaced.
    pub async fn fs_edit(&mut self) -> bool {
        const KIND: &str = "fs-edit";
        let files: Vec<String> = self
            .model()
            .map(|model| model.text_files().into_iter().map(str::to_owned).collect())
            .unwrap_or_default();
        let Some(path) = pick(&mut self.rng, &files) else {
            return self.fs_write().await;
        };
        let Some(Content::Text(text)) = self.content_of(&path) else {
            return true;
        };
        let lines: Vec<&str> = text.lines().collect();
        let Some(line) = pick(&mut self.rng, &lines) else {
            return true;
        };
        let Some(token) = line.split_whitespace().nth(2) else {
            return true;
        };
        let old = format!("{token} ");
        if text.matches(&old).count() != 1 {
            return true;
        }
        let new = format!("edited-{} ", self.serial());
        let edited = Content::Text(text.replacen(&old, &new, 1));
        let args = ["fs", "edit", &path, &old, &new];
        let kill = self.kill_plan(300);
        let manifest = self.leave_manifest();
        let Some(outcome) = self.dsh(KIND, &manifest, &args, Input::Null, kill).await else {
            return false;
        };
        match self.settle(KIND, &args, &outcome, |o| expect_code(o, 0)) {
            Settled::Ok => {
                if let Some(model) = self.model_mut() {
                    model.put_file(&path, edited);
                }
                true
            }
            Settled::Killed => {
                if let Some(sandbox) = self.sandbox.as_mut() {
                    sandbox.staging_suspects.insert(parent(&path).to_owned());
                }
                let old = Content::Text(text.clone());
                self.reconcile_content(&path, Some(old), edited, "edit")
                    .await
            }
            Settled::Failed => false,
        }
    }

    /// The file's SHA-256 as a command in the world sees it (`exec -- sha256sum`): the two seams
    /// show the same world.
    pub async fn fs_hash(&mut self) -> bool {
        const KIND: &str = "fs-hash";
        let Some(path) = self.any_file() else {
            return self.fs_write().await;
        };
        let Some(content) = self.content_of(&path) else {
            return true;
        };
        let args = ["exec", "--", "sha256sum", "--", &path];
        let kill = self.kill_plan(300);
        let manifest = self.leave_manifest();
        let Some(outcome) = self.dsh(KIND, &manifest, &args, Input::Null, kill).await else {
            return false;
        };
        self.settle(KIND, &args, &outcome, |outcome| {
            expect_code(outcome, 0)?;
            let want = format!("{}  ", content.sha256());
            if outcome.stdout.starts_with(want.as_bytes()) {
                Ok(())
            } else {
                Err(format!(
                    "printed {:?}, expected {want:?}…",
                    outcome.stdout_text()
                ))
            }
        }) != Settled::Failed
    }

    /// `fs stat` (never killed): `Some(None)` when the path does not exist, `None` after
    /// recording a failure.
    async fn look(&mut self, path: &str) -> Option<Option<Stat>> {
        let args = ["--json", "fs", "stat", path];
        let manifest = self.leave_manifest();
        let outcome = self
            .dsh(RECONCILE, &manifest, &args, Input::Null, None)
            .await?;
        let mut found = None;
        let settled = self.settle(RECONCILE, &args, &outcome, |outcome| match outcome.code() {
            Some(0) => {
                found = Some(parse_stat(outcome)?);
                Ok(())
            }
            Some(1) if contains(&outcome.stderr, MISSING.as_bytes()) => Ok(()),
            _ => Err(format!("expected exit 0, or 1 with {MISSING:?}")),
        });
        (settled == Settled::Ok).then_some(found)
    }

    /// `fs cat` (never killed): the bytes, or `None` after recording a failure.
    async fn read(&mut self, path: &str) -> Option<Vec<u8>> {
        let args = ["fs", "cat", path];
        let manifest = self.leave_manifest();
        let outcome = self
            .dsh(RECONCILE, &manifest, &args, Input::Null, None)
            .await?;
        (self.settle(RECONCILE, &args, &outcome, |o| expect_code(o, 0)) == Settled::Ok)
            .then_some(outcome.stdout)
    }

    /// After a killed write or edit of `path`: the file holds `old` (or is still absent) or
    /// `new`, nothing else.
    async fn reconcile_content(
        &mut self,
        path: &str,
        old: Option<Content>,
        new: Content,
        what: &str,
    ) -> bool {
        let Some(stat) = self.look(path).await else {
            return false;
        };
        let found = match stat {
            None if old.is_none() => return true,
            None => {
                self.fail(
                    RECONCILE,
                    Duration::ZERO,
                    format!("a killed {what} removed {path}"),
                );
                return false;
            }
            Some(stat) if stat.kind != "file" => {
                self.fail(
                    RECONCILE,
                    Duration::ZERO,
                    format!("a killed {what} left {path} a {}", stat.kind),
                );
                return false;
            }
            Some(_) => match self.read(path).await {
                Some(bytes) => bytes,
                None => return false,
            },
        };
        let (old_len, new_len) = (old.as_ref().map(Content::len), new.len());
        let settled = if found == new.bytes() {
            Some(new)
        } else if old.as_ref().is_some_and(|old| found == old.bytes()) {
            old
        } else {
            None
        };
        match settled {
            Some(content) => {
                if let Some(model) = self.model_mut() {
                    model.put_file(path, content);
                }
                true
            }
            None => {
                self.fail(
                    RECONCILE,
                    Duration::ZERO,
                    format!(
                        "a killed {what} left {path} torn: {} bytes, neither the old content ({:?} bytes) \
                         nor the new ({} bytes)",
                        found.len(),
                        old_len,
                        new_len
                    ),
                );
                false
            }
        }
    }

    /// After a killed rename: the file is at exactly one of its two paths, content intact (and
    /// a replaced target either untouched or replaced).
    async fn reconcile_rename(
        &mut self,
        from: &str,
        to: &str,
        moved: Content,
        old_to: Option<Content>,
    ) -> bool {
        let (Some(at_from), Some(at_to)) = (self.look(from).await, self.look(to).await) else {
            return false;
        };
        let (at_from, at_to) = (at_from.is_some(), at_to.is_some());
        let to_bytes = if at_to {
            self.read(to).await
        } else {
            Some(Vec::new())
        };
        let Some(to_bytes) = to_bytes else {
            return false;
        };
        let moved_bytes = moved.bytes();
        let renamed = !at_from && at_to && to_bytes == moved_bytes;
        let untouched = at_from
            && match &old_to {
                None => !at_to,
                Some(old) => at_to && to_bytes == old.bytes(),
            };
        if renamed {
            if let Some(model) = self.model_mut() {
                model.rename_file(from, to);
            }
            return true;
        }
        if untouched {
            let Some(bytes) = self.read(from).await else {
                return false;
            };
            if bytes == moved_bytes {
                return true;
            }
        }
        self.fail(
            RECONCILE,
            Duration::ZERO,
            format!(
                "a killed mv {from:?} -> {to:?} left the source {} and the target {} ({} bytes; \
                 moved {} bytes, target had {:?})",
                if at_from { "present" } else { "absent" },
                if at_to { "present" } else { "absent" },
                to_bytes.len(),
                moved_bytes.len(),
                old_to.map(|old| old.len())
            ),
        );
        false
    }

    /// After a killed `mkdir -p`-like call: each of `paths` (outermost first) exists or not;
    /// those that do join the model.
    async fn reconcile_new_dirs(&mut self, paths: &[&str]) -> bool {
        for path in paths {
            let Some(stat) = self.look(path).await else {
                return false;
            };
            match stat {
                None => return true,
                Some(stat) if stat.kind == "directory" => {
                    if let Some(model) = self.model_mut() {
                        model.make_dir(path);
                    }
                }
                Some(stat) => {
                    self.fail(
                        RECONCILE,
                        Duration::ZERO,
                        format!("a killed mkdir left {path} a {}", stat.kind),
                    );
                    return false;
                }
            }
        }
        true
    }
}

fn parse_stat(outcome: &Outcome) -> Result<Stat, String> {
    let value: Value =
        serde_json::from_slice(&outcome.stdout).map_err(|e| format!("stat is not JSON: {e}"))?;
    match (value["kind"].as_str(), value["size"].as_u64()) {
        (Some(kind), Some(size)) => Ok(Stat {
            kind: kind.to_owned(),
            size,
        }),
        _ => Err(format!("stat lacks kind or size: {value}")),
    }
}

fn pick<T: Clone>(rng: &mut impl Rng, items: &[T]) -> Option<T> {
    (!items.is_empty()).then(|| items[rng.random_range(0..items.len())].clone())
}
