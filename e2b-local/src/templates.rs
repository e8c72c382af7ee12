//! Templates built offline (docs/design.md §7, "Templates"): each template has an id, its
//! names, its builds, and tags naming builds. A ready build is a copy of a build world's files
//! ([`crate::world::layout::FILES`]) under `<state>/templates/<id>/builds/<build>/` plus what
//! sandboxes made from it start as (user, working directory, start command). Templates live in
//! the state dir (each one's `template.json`) and outlive server restarts; a build that had not
//! finished when its server stopped is gone. Archives uploaded for `COPY` steps are kept under
//! `<state>/templates/uploads/<sha256>`, by the hash the SDK computed (an opaque cache key).

use std::collections::BTreeMap;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::SystemTime;

use serde::{Deserialize, Serialize};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::world::remove_tree;

/// The tag a build gets when its request names none, and the one a bare name means.
pub const DEFAULT_TAG: &str = "default";

/// The template every E2B team has: a sandbox or a build from it starts from the base world
/// (e2b-local's image of E2B's `e2bdev/base`). Other names are templates built here or
/// snapshots.
pub const BASE_TEMPLATE: &str = "base";

/// The file of a template's record in its dir.
const RECORD: &str = "template.json";

/// Where a build is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum BuildStatus {
    /// Requested; its steps have not been sent yet.
    Waiting,
    Building,
    Ready,
    Error,
}

/// A build log entry's level.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Level {
    Info,
    Warn,
    Error,
}

/// One line of a build's log.
#[derive(Debug, Clone)]
pub struct LogEntry {
    pub at: SystemTime,
    pub level: Level,
    pub message: String,
    /// The step it belongs to: `base`, `1`… (1-based), `finalize`.
    pub step: Option<String>,
}

/// Why a build failed, and at which step (as [`LogEntry::step`]).
#[derive(Debug, Clone)]
pub struct Failure {
    pub message: String,
    pub step: Option<String>,
}

/// What a sandbox made from a ready build starts as.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Start {
    /// envd's default user: the build's last `USER`.
    pub user: String,
    /// envd's default working directory: the build's last `WORKDIR` (`None`: the home).
    pub workdir: Option<String>,
    /// Started in every new sandbox, which is ready once `ready_cmd` succeeds.
    pub start_cmd: Option<String>,
    pub ready_cmd: Option<String>,
}

/// A build's changing part.
#[derive(Debug)]
pub struct BuildState {
    pub status: BuildStatus,
    /// Append-only: clients page through it by offset.
    pub log: Vec<LogEntry>,
    pub failure: Option<Failure>,
    /// Set once ready.
    pub start: Option<Start>,
}

/// One build of a template.
#[derive(Debug)]
pub struct Build {
    /// A UUID (the Python SDK parses build ids as UUIDs).
    pub id: String,
    pub template_id: String,
    pub created_at: SystemTime,
    /// The tags it gets once ready.
    pub tags: Vec<String>,
    /// Where its files go.
    pub dir: PathBuf,
    /// Cancelled when the template is deleted or the server shuts down.
    pub cancel: CancellationToken,
    state: Mutex<BuildState>,
}

impl Build {
    /// The build's state (never held across an await).
    pub fn state(&self) -> std::sync::MutexGuard<'_, BuildState> {
        self.state.lock().expect("build lock")
    }

    /// Appends a log line.
    pub fn log(&self, level: Level, step: Option<&str>, message: impl Into<String>) {
        self.state().log.push(LogEntry {
            at: SystemTime::now(),
            level,
            message: message.into(),
            step: step.map(str::to_owned),
        });
    }
}

/// One template.
#[derive(Debug)]
pub struct Template {
    pub id: String,
    /// Its names (`name` or `namespace/name`, no tag), oldest first.
    pub names: Vec<String>,
    /// Its builds, oldest first.
    pub builds: Vec<Arc<Build>>,
    /// tag → build id.
    pub tags: BTreeMap<String, String>,
}

impl Template {
    /// Whether `reference` is this template's id or one of its names.
    fn is(&self, reference: &str) -> bool {
        self.id == reference || self.names.iter().any(|n| n == reference)
    }

    fn build(&self, id: &str) -> Option<&Arc<Build>> {
        self.builds.iter().find(|b| b.id == id)
    }

    /// The ready build `tag` names; without a tag, the default tag's, else the newest ready.
    fn tagged(&self, tag: Option<&str>) -> Option<&Arc<Build>> {
        let ready = |b: &&Arc<Build>| b.state().status == BuildStatus::Ready;
        match tag {
            Some(tag) => self.tags.get(tag).and_then(|id| self.build(id)),
            None => self
                .tags
                .get(DEFAULT_TAG)
                .and_then(|id| self.build(id))
                .or_else(|| self.builds.iter().rev().find(ready)),
        }
        .filter(ready)
    }
}

/// A template's record on disk: names, tags and the ready builds.
#[derive(Debug, Serialize, Deserialize)]
struct Record {
    id: String,
    names: Vec<String>,
    tags: BTreeMap<String, String>,
    builds: Vec<BuildRecord>,
}

#[derive(Debug, Serialize, Deserialize)]
struct BuildRecord {
    id: String,
    created_at: SystemTime,
    start: Start,
}

/// What a `templateID` resolves to for a new sandbox.
#[derive(Debug, Clone)]
pub struct Resolved {
    pub template_id: String,
    pub build: Arc<Build>,
    /// Where the build's files are.
    pub files: PathBuf,
    pub start: Start,
}

/// A request to build a template, accepted.
#[derive(Debug)]
pub struct Requested {
    pub template_id: String,
    pub build: Arc<Build>,
    pub names: Vec<String>,
}

/// A refusal of the store, with the HTTP status it means.
#[derive(Debug)]
pub enum Refusal {
    BadRequest(String),
    NotFound(String),
    Conflict(String),
}

/// Every template of the server.
#[derive(Debug)]
pub struct Templates {
    dir: PathBuf,
    all: Mutex<Vec<Template>>,
    /// Running builds (shutdown waits for them).
    pub tasks: TaskTracker,
    /// The secret in this server's upload URLs: the SDKs upload `COPY` archives without their
    /// API key, to whatever URL the API handed out.
    pub upload_token: String,
}

/// `name[:tag]` split; a name is `[namespace/]name` of template-id characters.
pub fn split_name(full: &str) -> Result<(&str, Option<&str>), String> {
    let (name, tag) = match full.rsplit_once(':') {
        Some((name, tag)) => (name, Some(tag)),
        None => (full, None),
    };
    let part_ok = |p: &str| {
        !p.is_empty()
            && !p.starts_with('.')
            && p.len() <= 128
            && p.bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b"._-".contains(&b))
    };
    let name_ok = match name.split_once('/') {
        Some((namespace, name)) => part_ok(namespace) && part_ok(name),
        None => part_ok(name),
    };
    if !name_ok {
        return Err(format!(
            "invalid template name {full:?}: expected [namespace/]name[:tag] of lower-case \
             letters, digits, '.', '_' and '-', no part starting with '.'"
        ));
    }
    if let Some(tag) = tag
        && !is_valid_tag(tag)
    {
        return Err(format!("invalid tag {tag:?} in {full:?}"));
    }
    Ok((name, tag))
}

/// Whether `tag` is a usable tag: 1-128 of `[a-zA-Z0-9._-]`.
pub fn is_valid_tag(tag: &str) -> bool {
    !tag.is_empty()
        && tag.len() <= 128
        && tag
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"._-".contains(&b))
}

impl Templates {
    /// The templates kept in `dir` (created): every readable record is loaded; builds a record
    /// does not list (unfinished when a server stopped) and partial uploads are removed.
    pub fn open(dir: PathBuf) -> io::Result<Templates> {
        std::fs::create_dir_all(dir.join("uploads"))?;
        for entry in std::fs::read_dir(dir.join("uploads"))? {
            let path = entry?.path();
            if path.extension().is_some_and(|e| e == "partial") {
                std::fs::remove_file(&path)?;
            }
        }
        let mut all = Vec::new();
        for entry in std::fs::read_dir(&dir)? {
            let path = entry?.path();
            if path.file_name().is_some_and(|n| n == "uploads") {
                continue;
            }
            match load(&path) {
                Ok(template) => all.push(template),
                Err(err) => {
                    tracing::warn!("template {}: {err}; removed", path.display());
                    remove_tree(&path)?;
                }
            }
        }
        Ok(Templates {
            dir,
            all: Mutex::new(all),
            tasks: TaskTracker::new(),
            upload_token: crate::ids::access_token(),
        })
    }

    /// Where the archive uploaded for `hash` (64 hex digits, checked by the caller) is, or goes.
    pub fn upload(&self, hash: &str) -> PathBuf {
        self.uploads().join(hash)
    }

    /// The dir of uploaded archives (staged ones end in `.partial`).
    pub fn uploads(&self) -> PathBuf {
        self.dir.join("uploads")
    }

    /// Accepts a build request for `name[:tag]` (new template, or a new build of the one with
    /// that name), its build tagged with `tags`, the name's tag, or [`DEFAULT_TAG`].
    pub fn request(&self, full_name: &str, tags: &[String]) -> Result<Requested, Refusal> {
        let (name, tag) = split_name(full_name).map_err(Refusal::BadRequest)?;
        if let Some(bad) = tags.iter().find(|t| !is_valid_tag(t)) {
            return Err(Refusal::BadRequest(format!("invalid tag {bad:?}")));
        }
        let mut tags: Vec<String> = tag
            .into_iter()
            .map(str::to_owned)
            .chain(tags.iter().cloned())
            .collect();
        if tags.is_empty() {
            tags.push(DEFAULT_TAG.to_owned());
        }
        tags.sort();
        tags.dedup();
        let mut all = self.all.lock().expect("templates lock");
        let at = match all.iter().position(|t| t.names.iter().any(|n| n == name)) {
            Some(at) => at,
            None => {
                all.push(Template {
                    id: crate::ids::sandbox_id(),
                    names: vec![name.to_owned()],
                    builds: Vec::new(),
                    tags: BTreeMap::new(),
                });
                all.len() - 1
            }
        };
        let template = &mut all[at];
        let id = crate::ids::uuid_v4();
        let build = Arc::new(Build {
            dir: self.dir.join(&template.id).join("builds").join(&id),
            id,
            template_id: template.id.clone(),
            created_at: SystemTime::now(),
            tags,
            cancel: CancellationToken::new(),
            state: Mutex::new(BuildState {
                status: BuildStatus::Waiting,
                log: Vec::new(),
                failure: None,
                start: None,
            }),
        });
        template.builds.push(build.clone());
        Ok(Requested {
            template_id: template.id.clone(),
            build,
            names: template.names.clone(),
        })
    }

    /// Build `build_id` of template `template_id`.
    pub fn build(&self, template_id: &str, build_id: &str) -> Option<Arc<Build>> {
        let all = self.all.lock().expect("templates lock");
        all.iter()
            .find(|t| t.id == template_id)
            .and_then(|t| t.build(build_id))
            .cloned()
    }

    /// The ready build a `templateID` names: a template id or `[namespace/]name`, with an
    /// optional `:tag`.
    pub fn resolve(&self, reference: &str) -> Option<Resolved> {
        let all = self.all.lock().expect("templates lock");
        let (name, tag) = match reference.rsplit_once(':') {
            Some((name, tag)) => (name, Some(tag)),
            None => (reference, None),
        };
        let template = all.iter().find(|t| t.is(name))?;
        let build = template.tagged(tag)?;
        let start = build.state().start.clone()?;
        Some(Resolved {
            template_id: template.id.clone(),
            files: build.dir.clone(),
            build: build.clone(),
            start,
        })
    }

    /// The id of the template named `name` (or with that id).
    pub fn find(&self, name: &str) -> Option<String> {
        let all = self.all.lock().expect("templates lock");
        all.iter().find(|t| t.is(name)).map(|t| t.id.clone())
    }

    /// Marks `build` ready, starting sandboxes as `start`: its tags move to it and the
    /// template's record is written. A build cancelled meanwhile (its template deleted) stays
    /// out.
    pub fn finish(&self, build: &Build, start: Start) -> io::Result<()> {
        let mut all = self.all.lock().expect("templates lock");
        let Some(template) = all.iter_mut().find(|t| t.id == build.template_id) else {
            return Err(io::Error::new(
                io::ErrorKind::NotFound,
                "the template was deleted",
            ));
        };
        {
            let mut state = build.state();
            state.status = BuildStatus::Ready;
            state.start = Some(start);
        }
        for tag in &build.tags {
            template.tags.insert(tag.clone(), build.id.clone());
        }
        save(&self.dir, template)
    }

    /// Tags the ready build `target` (`name[:tag]` or an id) names with `tags`; its build id.
    pub fn assign_tags(&self, target: &str, tags: &[String]) -> Result<String, Refusal> {
        if tags.is_empty() {
            return Err(Refusal::BadRequest("no tags to assign".to_owned()));
        }
        if let Some(bad) = tags.iter().find(|t| !is_valid_tag(t)) {
            return Err(Refusal::BadRequest(format!("invalid tag {bad:?}")));
        }
        let build_id = self
            .resolve(target)
            .ok_or_else(|| Refusal::NotFound(format!("no ready build named {target:?}")))?
            .build
            .id
            .clone();
        let mut all = self.all.lock().expect("templates lock");
        let template = all
            .iter_mut()
            .find(|t| t.build(&build_id).is_some())
            .ok_or_else(|| Refusal::NotFound(format!("no ready build named {target:?}")))?;
        for tag in tags {
            template.tags.insert(tag.clone(), build_id.clone());
        }
        save(&self.dir, template).map_err(|e| Refusal::Conflict(e.to_string()))?;
        Ok(build_id)
    }

    /// Removes `tags` from the template `name` names.
    pub fn remove_tags(&self, name: &str, tags: &[String]) -> Result<(), Refusal> {
        let mut all = self.all.lock().expect("templates lock");
        let template = all
            .iter_mut()
            .find(|t| t.is(name))
            .ok_or_else(|| Refusal::NotFound(format!("no template named {name:?}")))?;
        if let Some(missing) = tags.iter().find(|t| !template.tags.contains_key(*t)) {
            return Err(Refusal::NotFound(format!(
                "template {name:?} has no tag {missing:?}"
            )));
        }
        for tag in tags {
            template.tags.remove(tag);
        }
        save(&self.dir, template).map_err(|e| Refusal::Conflict(e.to_string()))
    }

    /// The tags of the template `name` names: (tag, build id, build's creation), by tag.
    pub fn tags(&self, name: &str) -> Option<Vec<(String, String, SystemTime)>> {
        let all = self.all.lock().expect("templates lock");
        let template = all.iter().find(|t| t.is(name))?;
        Some(
            template
                .tags
                .iter()
                .filter_map(|(tag, id)| {
                    let build = template.build(id)?;
                    Some((tag.clone(), id.clone(), build.created_at))
                })
                .collect(),
        )
    }

    /// Deletes the template `name` names, its builds' files and its record; running builds are
    /// cancelled (their tasks remove their own worlds). False if there is none.
    pub fn delete(&self, name: &str) -> io::Result<bool> {
        let removed = {
            let mut all = self.all.lock().expect("templates lock");
            let Some(at) = all.iter().position(|t| t.is(name)) else {
                return Ok(false);
            };
            all.remove(at)
        };
        for build in &removed.builds {
            build.cancel.cancel();
        }
        remove_tree(&self.dir.join(&removed.id))?;
        Ok(true)
    }

    /// Cancels every running build (the server's shutdown; then wait on [`Self::tasks`]).
    pub fn cancel_all(&self) {
        for template in self.all.lock().expect("templates lock").iter() {
            for build in &template.builds {
                build.cancel.cancel();
            }
        }
    }
}

/// Loads the template in `dir` from its record; removes the build dirs it does not list.
fn load(dir: &Path) -> io::Result<Template> {
    let record: Record = serde_json::from_slice(&std::fs::read(dir.join(RECORD))?)
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))?;
    let builds_dir = dir.join("builds");
    if builds_dir.exists() {
        for entry in std::fs::read_dir(&builds_dir)? {
            let path = entry?.path();
            let listed = path
                .file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| record.builds.iter().any(|b| b.id == n));
            if !listed {
                remove_tree(&path)?;
            }
        }
    }
    let builds = record
        .builds
        .into_iter()
        .map(|b| {
            Arc::new(Build {
                dir: builds_dir.join(&b.id),
                id: b.id,
                template_id: record.id.clone(),
                created_at: b.created_at,
                tags: Vec::new(),
                cancel: CancellationToken::new(),
                state: Mutex::new(BuildState {
                    status: BuildStatus::Ready,
                    log: Vec::new(),
                    failure: None,
                    start: Some(b.start),
                }),
            })
        })
        .collect();
    Ok(Template {
        id: record.id,
        names: record.names,
        builds,
        tags: record.tags,
    })
}

/// Writes `template`'s record (its ready builds) atomically.
fn save(dir: &Path, template: &Template) -> io::Result<()> {
    let record = Record {
        id: template.id.clone(),
        names: template.names.clone(),
        tags: template.tags.clone(),
        builds: template
            .builds
            .iter()
            .filter_map(|b| {
                let start = b.state().start.clone()?;
                Some(BuildRecord {
                    id: b.id.clone(),
                    created_at: b.created_at,
                    start,
                })
            })
            .collect(),
    };
    let dir = dir.join(&template.id);
    std::fs::create_dir_all(&dir)?;
    let staged = dir.join(format!("{RECORD}.partial"));
    std::fs::write(
        &staged,
        serde_json::to_vec_pretty(&record).map_err(io::Error::other)?,
    )?;
    std::fs::rename(staged, dir.join(RECORD))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_split_into_name_and_tag() {
        assert_eq!(split_name("app").unwrap(), ("app", None));
        assert_eq!(
            split_name("team/app:v1.2").unwrap(),
            ("team/app", Some("v1.2"))
        );
        for bad in [
            "", "App", "a b", "a:", ":v1", "a/b/c", "a:b:c", "a/:v", "..", "x/..", ".a",
        ] {
            assert!(split_name(bad).is_err(), "{bad:?} was accepted");
        }
    }

    #[test]
    fn ready_builds_tags_and_names_outlive_a_reopen_and_unfinished_ones_do_not() {
        let dir = tempfile::tempdir().unwrap();
        let store = Templates::open(dir.path().join("t")).unwrap();
        let first = store.request("app:v1", &["extra".to_owned()]).unwrap();
        let pending = store.request("app", &[]).unwrap();
        assert_eq!(
            first.template_id, pending.template_id,
            "one template per name"
        );
        assert!(store.resolve("app:v1").is_none(), "not ready yet");
        std::fs::create_dir_all(&first.build.dir).unwrap();
        std::fs::create_dir_all(&pending.build.dir).unwrap();
        let start = Start {
            user: "root".to_owned(),
            workdir: Some("/app".to_owned()),
            start_cmd: None,
            ready_cmd: None,
        };
        store.finish(&first.build, start.clone()).unwrap();
        for reference in ["app:v1", "app:extra", "app", first.template_id.as_str()] {
            let resolved = store.resolve(reference).unwrap();
            assert_eq!(resolved.build.id, first.build.id, "{reference}");
        }
        assert!(store.resolve("app:nope").is_none());
        assert!(store.resolve("other").is_none());
        assert_eq!(
            store.assign_tags("app:v1", &["prod".to_owned()]).unwrap(),
            first.build.id
        );
        store.remove_tags("app", &["extra".to_owned()]).unwrap();
        assert!(matches!(
            store.remove_tags("app", &["extra".to_owned()]),
            Err(Refusal::NotFound(_))
        ));

        let reopened = Templates::open(dir.path().join("t")).unwrap();
        let resolved = reopened.resolve("app:prod").unwrap();
        assert_eq!(
            (resolved.build.id.as_str(), resolved.start),
            (first.build.id.as_str(), start)
        );
        let tags: Vec<String> = reopened
            .tags("app")
            .unwrap()
            .into_iter()
            .map(|t| t.0)
            .collect();
        assert_eq!(tags, ["prod", "v1"]);
        assert!(
            !pending.build.dir.exists(),
            "an unfinished build's files are removed"
        );
        assert!(reopened.delete("app").unwrap());
        assert!(!reopened.delete("app").unwrap());
        assert!(reopened.resolve("app").is_none());
        assert!(
            Templates::open(dir.path().join("t"))
                .unwrap()
                .find("app")
                .is_none()
        );
    }
}
