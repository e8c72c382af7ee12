//! A validated composition: manifest + libraries + plan, nothing created.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use dsh_plugin_api::ServiceKind;
use serde::Serialize;

use crate::embedded;
use crate::error::HostError;
use crate::graph::{self, Declared, Node};
use crate::host::Host;
use crate::lifecycle::{self, Created, Factory, Step};
use crate::loader::{CachingLoader, LibraryLoader, LoadedLibrary, PluginDescriptor};
use crate::manifest::{Manifest, ManifestFormat};
use crate::resolve::{SearchPath, package_name, renamed, resolve_library};
use crate::validation::{ValidationError, ValidationErrors};

/// One injected service and the entry providing it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct InjectedFrom {
    #[serde(serialize_with = "serialize_kind")]
    pub service: ServiceKind,
    /// The providing entry's id.
    pub provider: String,
}

fn serialize_kind<S: serde::Serializer>(kind: &ServiceKind, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(kind.name())
}

/// A plugin of a composition, as planned (and, in a [`Host`], as running).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PluginInfo {
    /// The manifest entry's id.
    pub id: String,
    /// The manifest name as written (`@scope/pkg` or `pkg`).
    pub name: String,
    /// The plugin's version (from its descriptor).
    pub version: String,
    /// The plugin API version it was built against.
    pub api_version: u32,
    /// The library file.
    pub library: PathBuf,
    #[serde(serialize_with = "crate::loader::serialize_kinds")]
    pub provides: Vec<ServiceKind>,
    /// Injected services with their providers, in the descriptor's order.
    pub inject: Vec<InjectedFrom>,
    /// The services this entry serves to the composition's user
    /// ([`Host::fs`], `dsh`): decided at validation (`serve` in the
    /// manifest, else the only or the outermost provider; docs/design.md §3).
    #[serde(serialize_with = "crate::loader::serialize_kinds")]
    pub serves: Vec<ServiceKind>,
}

struct Planned {
    info: PluginInfo,
    config: serde_json::Value,
    factory: Arc<dyn Factory>,
    /// Injected service → position of the provider in create order.
    inject: Vec<(ServiceKind, usize)>,
}

/// A manifest whose every library was found and read and whose graph is
/// valid. Nothing has been created; [`Composition::start`] creates it (and
/// may be called again for fresh instances from the same libraries —
/// libraries are never unloaded).
pub struct Composition {
    origin: String,
    planned: Vec<Planned>,
    warnings: Vec<String>,
}

impl std::fmt::Debug for Composition {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Composition")
            .field("origin", &self.origin)
            .field("plugins", &self.plugins().collect::<Vec<_>>())
            .finish()
    }
}

impl Composition {
    /// Reads the manifest at `path` and validates it, finding libraries on
    /// [`SearchPath::from_env`]. Blocking: reads files and `dlopen`s every
    /// library (as do the other constructors); async callers that must not
    /// stall use [`Host`]'s constructors or `spawn_blocking`.
    pub fn load(path: &Path) -> Result<Composition, HostError> {
        Composition::from_manifest(&Manifest::from_path(path)?, &SearchPath::from_env())
    }

    /// Parses `text` (named `origin` in messages; relative entry paths are
    /// resolved against the current directory) and validates it.
    pub fn from_text(
        text: &str,
        format: ManifestFormat,
        origin: &str,
    ) -> Result<Composition, HostError> {
        let manifest = Manifest::parse(text, format, origin, None)?;
        Composition::from_manifest(&manifest, &SearchPath::from_env())
    }

    /// The default local composition (`config/local.yaml`, compiled in).
    pub fn embedded_local() -> Result<Composition, HostError> {
        Composition::from_text(
            embedded::LOCAL_YAML,
            ManifestFormat::Yaml,
            embedded::LOCAL_ORIGIN,
        )
    }

    /// Validates `manifest`, opening libraries found through `search`.
    pub fn from_manifest(
        manifest: &Manifest,
        search: &SearchPath,
    ) -> Result<Composition, HostError> {
        Composition::with_loader(manifest, search, &crate::dlopen::DlopenLoader)
    }

    pub(crate) fn with_loader(
        manifest: &Manifest,
        search: &SearchPath,
        loader: &dyn LibraryLoader,
    ) -> Result<Composition, HostError> {
        let mut loader = CachingLoader::new(loader);
        let mut errors = Vec::new();
        let mut libraries: Vec<Option<(PathBuf, LoadedLibrary)>> = Vec::new();
        let mut warnings = Vec::new();
        for entry in manifest.entries() {
            if entry.disabled {
                libraries.push(None);
                continue;
            }
            if let Some(current) = renamed(&entry.name) {
                let warning = format!(
                    "{}: plugin name {:?} is deprecated, the plugin is now {current:?}; \
                     rename the entry's `name` (the old name still loads it)",
                    entry.label, entry.name
                );
                tracing::warn!(target: "dsh_host", "{warning}");
                warnings.push(warning);
            }
            let path = match resolve_library(
                &entry.name,
                entry.path.as_deref(),
                manifest.base_dir(),
                search,
            ) {
                Ok(path) => path,
                Err(failure) => {
                    errors.push(ValidationError::LibraryNotFound {
                        entry: entry.label.clone(),
                        name: entry.name.clone(),
                        failure,
                    });
                    libraries.push(None);
                    continue;
                }
            };
            match loader.load(&path) {
                Ok(library) if library.descriptor.name != package_name(&entry.name) => {
                    errors.push(ValidationError::NameMismatch {
                        entry: entry.label.clone(),
                        manifest_name: entry.name.clone(),
                        descriptor_name: library.descriptor.name.clone(),
                        path,
                    });
                    libraries.push(None);
                }
                Ok(library) => {
                    // Every entry's config is judged now, by its plugin's
                    // own config type, so that a config `create` would
                    // refuse fails here with everything else.
                    match library.factory.validate_config(&entry.config) {
                        Ok(problems) => errors.extend(problems.into_iter().map(|problem| {
                            ValidationError::Config {
                                entry: entry.label.clone(),
                                plugin: entry.name.clone(),
                                problem: problem.to_string(),
                            }
                        })),
                        Err(err) => errors.push(ValidationError::Config {
                            entry: entry.label.clone(),
                            plugin: entry.name.clone(),
                            problem: format!("config could not be checked: {err}"),
                        }),
                    }
                    libraries.push(Some((path, library)));
                }
                Err(failure) => {
                    errors.push(ValidationError::LibraryUnusable {
                        entry: entry.label.clone(),
                        path,
                        problem: failure.problem,
                        message: failure.message,
                    });
                    libraries.push(None);
                }
            }
        }

        let nodes: Vec<Node<'_>> = manifest
            .entries()
            .iter()
            .zip(&libraries)
            .map(|(entry, library)| Node {
                entry,
                declared: library
                    .as_ref()
                    .map(|(_, library)| declared(&library.descriptor)),
            })
            .collect();
        let plan = graph::plan(&nodes);
        let plan = match plan {
            Ok(plan) if errors.is_empty() => plan,
            outcome => {
                if let Err(graph_errors) = outcome {
                    errors.extend(graph_errors);
                }
                // Manifest order, cycles (which span entries) last.
                errors.sort_by_key(|error| {
                    (
                        matches!(error, ValidationError::Cycle { .. }),
                        error.entry().index,
                    )
                });
                return Err(ValidationErrors {
                    origin: manifest.source().to_owned(),
                    errors,
                }
                .into());
            }
        };

        let mut position = vec![usize::MAX; nodes.len()];
        for (at, index) in plan.order.iter().enumerate() {
            position[*index] = at;
        }
        let entries = manifest.entries();
        let planned = plan
            .order
            .iter()
            .map(|&index| {
                let entry = &entries[index];
                let (path, library) = libraries[index]
                    .clone()
                    .expect("a planned entry has a library");
                let wiring = &plan.wiring[index];
                Planned {
                    info: PluginInfo {
                        id: entry.id.clone(),
                        name: entry.name.clone(),
                        version: library.descriptor.version.clone(),
                        api_version: library.descriptor.api_version,
                        library: path,
                        provides: library.descriptor.provides.clone(),
                        inject: wiring
                            .iter()
                            .map(|(service, provider)| InjectedFrom {
                                service: *service,
                                provider: entries[*provider].id.clone(),
                            })
                            .collect(),
                        serves: plan
                            .served
                            .iter()
                            .filter(|(_, server)| **server == index)
                            .map(|(service, _)| *service)
                            .collect(),
                    },
                    config: entry.config.clone(),
                    factory: library.factory,
                    inject: wiring
                        .iter()
                        .map(|(service, provider)| (*service, position[*provider]))
                        .collect(),
                }
            })
            .collect();
        Ok(Composition {
            origin: manifest.source().to_owned(),
            planned,
            warnings,
        })
    }

    /// What loading found acceptable but deprecated (an entry naming a
    /// renamed plugin by its old name), one message each, in manifest
    /// order; each was also logged as a `tracing` warning.
    pub fn warnings(&self) -> &[String] {
        &self.warnings
    }

    /// What messages call the manifest.
    pub fn origin(&self) -> &str {
        &self.origin
    }

    /// The plugins in create order.
    pub fn plugins(&self) -> impl ExactSizeIterator<Item = &PluginInfo> {
        self.planned.iter().map(|planned| &planned.info)
    }

    /// The id of the entry serving `kind` to the composition's user, if
    /// one does (see [`PluginInfo::serves`]).
    pub fn served(&self, kind: ServiceKind) -> Option<&str> {
        served_by(self.plugins(), kind)
    }

    /// Creates every plugin in order (providers first): each gets
    /// exactly its declared services; a failed create disposes what was
    /// created, in reverse, before the error returns.
    ///
    /// Runs on the caller's tokio runtime; plugin work runs on each
    /// plugin's own runtime. Dropping the future part-way disposes the
    /// instances created so far in a background task on the caller's
    /// runtime.
    pub async fn start(&self) -> Result<Host, HostError> {
        match self.start_or_cancel(std::future::pending()).await? {
            Started::Running(host) => Ok(host),
            Started::Cancelled { .. } => unreachable!("a pending future never cancels"),
        }
    }

    /// [`Composition::start`], cancelled when `cancel` completes first
    /// (e.g. on a shutdown signal) with a grace: no further plugin is
    /// created; the create in flight is awaited for up to the grace (a
    /// create is never half-cancelled, docs/design.md §4.4 — what it made
    /// is rolled back too), past it abandoned; then the plugins created are
    /// disposed in reverse before [`Started::Cancelled`] returns. Unlike
    /// dropping the future, the caller learns when that rollback is over,
    /// and which create, if any, was abandoned.
    pub async fn start_or_cancel(
        &self,
        cancel: impl Future<Output = Duration>,
    ) -> Result<Started, HostError> {
        let steps = self
            .planned
            .iter()
            .map(|planned| Step {
                id: &planned.info.id,
                name: &planned.info.name,
                factory: planned.factory.as_ref(),
                config: planned.config.clone(),
                provides: &planned.info.provides,
                inject: &planned.inject,
            })
            .collect();
        match lifecycle::create_all_or_cancel(steps, cancel).await? {
            Created::All(running) => Ok(Started::Running(Host::new(
                self.origin.clone(),
                self.plugins().cloned().collect(),
                running,
            ))),
            Created::Cancelled {
                rolled_back,
                abandoned,
            } => {
                tracing::info!(
                    "start of {} cancelled; disposed [{}]",
                    self.origin,
                    rolled_back.join(", ")
                );
                Ok(Started::Cancelled { abandoned })
            }
        }
    }
}

/// How [`Composition::start_or_cancel`] ended.
#[derive(Debug)]
pub enum Started {
    /// Every plugin was created.
    Running(Host),
    /// Cancelled; everything created was disposed.
    Cancelled {
        /// The entry id whose create did not answer within the grace and
        /// was abandoned: whatever it was making (a sandbox) may be left.
        abandoned: Option<String>,
    },
}

/// The entry among `plugins` that serves `kind`.
pub(crate) fn served_by<'a>(
    mut plugins: impl Iterator<Item = &'a PluginInfo>,
    kind: ServiceKind,
) -> Option<&'a str> {
    plugins
        .find(|plugin| plugin.serves.contains(&kind))
        .map(|plugin| plugin.id.as_str())
}

fn declared(descriptor: &PluginDescriptor) -> Declared<'_> {
    Declared {
        name: &descriptor.name,
        provides: &descriptor.provides,
        inject: &descriptor.inject,
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;
    use std::sync::{Arc, Mutex};

    use dsh_plugin_api::OwnerKind;
    use dsh_plugin_api::Service;
    use dsh_plugin_api::ServiceKind::{self, Fs, Subprocess};

    const E2B: ServiceKind = ServiceKind::Owner(OwnerKind::E2B);

    use super::*;
    use crate::lifecycle::fake::{FakeFactory, Journal};
    use crate::loader::LoadFailure;
    use crate::validation::LibraryProblem;

    /// Libraries by file name: a descriptor and a fake factory, or a
    /// failure.
    struct FakeLoader {
        libraries: HashMap<String, Result<LoadedLibrary, LoadFailure>>,
        opened: Mutex<Vec<String>>,
    }

    impl LibraryLoader for FakeLoader {
        fn load(&self, path: &Path) -> Result<LoadedLibrary, crate::loader::LoadFailure> {
            let file = path
                .file_name()
                .expect("file")
                .to_string_lossy()
                .into_owned();
            self.opened.lock().expect("opened").push(file.clone());
            self.libraries
                .get(&file)
                .cloned()
                .unwrap_or_else(|| panic!("no fake library {file}"))
        }
    }

    struct World {
        dir: tempfile::TempDir,
        journal: Journal,
        loader: FakeLoader,
    }

    impl World {
        fn new() -> World {
            World {
                dir: tempfile::tempdir().expect("tempdir"),
                journal: Arc::new(Mutex::new(Vec::new())),
                loader: FakeLoader {
                    libraries: HashMap::new(),
                    opened: Mutex::new(Vec::new()),
                },
            }
        }

        fn plugin(&mut self, name: &str, provides: &[ServiceKind], inject: &[ServiceKind]) {
            self.library(
                name,
                Ok(LoadedLibrary {
                    descriptor: PluginDescriptor {
                        name: name.to_owned(),
                        version: "1.2.3".to_owned(),
                        api_version: 1,
                        provides: provides.to_vec(),
                        inject: inject.to_vec(),
                    },
                    factory: Arc::new(FakeFactory::new(&self.journal, provides)),
                }),
            );
        }

        fn library(&mut self, name: &str, outcome: Result<LoadedLibrary, LoadFailure>) {
            let file = crate::resolve::library_file_name(name);
            std::fs::write(self.dir.path().join(&file), b"").expect("write");
            self.loader.libraries.insert(file, outcome);
        }

        fn compose(&self, yaml: &str) -> Result<Composition, HostError> {
            let manifest = Manifest::parse(yaml, ManifestFormat::Yaml, "m.yaml", None)?;
            Composition::with_loader(&manifest, &SearchPath::new([self.dir.path()]), &self.loader)
        }

        fn journal(&self) -> Vec<String> {
            self.journal.lock().expect("journal").clone()
        }
    }

    fn e2b_world() -> World {
        let mut world = World::new();
        world.plugin("dsh-e2b-owner", &[E2B], &[]);
        world.plugin("dsh-fs-e2b", &[Fs], &[E2B]);
        world.plugin("dsh-subprocess-e2b", &[Subprocess], &[E2B, Fs]);
        world
    }

    const SEED: &str = "\
- id: e2b
  name: '@deepseek-ai/dsh-e2b-owner'
  config: { cwd: /home/user/workspace }
- id: subprocess-e2b
  name: '@deepseek-ai/dsh-subprocess-e2b'
- id: fs-e2b
  name: '@deepseek-ai/dsh-fs-e2b'
";

    #[tokio::test]
    async fn a_valid_composition_plans_starts_serves_and_disposes() {
        let world = e2b_world();
        let composition = world.compose(SEED).expect("valid");
        let plugins: Vec<&PluginInfo> = composition.plugins().collect();
        let ids: Vec<&str> = plugins.iter().map(|p| p.id.as_str()).collect();
        assert_eq!(ids, ["e2b", "fs-e2b", "subprocess-e2b"]);
        assert_eq!(plugins[2].version, "1.2.3");
        assert_eq!(
            plugins[2].inject,
            [
                InjectedFrom {
                    service: E2B,
                    provider: "e2b".into()
                },
                InjectedFrom {
                    service: Fs,
                    provider: "fs-e2b".into()
                }
            ]
        );
        assert_eq!(
            plugins[0].library,
            world.dir.path().join("libdsh_e2b_owner.so")
        );
        assert!(world.journal().is_empty(), "validation creates nothing");
        assert_eq!(composition.warnings(), [] as [String; 0]);

        let host = composition.start().await.expect("start");
        assert!(host.fs().is_ok());
        assert!(host.subprocess().is_ok());
        assert!(host.owner(OwnerKind::E2B).is_ok());
        assert!(host.service_of("fs-e2b", Fs).is_ok());
        let err = host.service_of("e2b", Fs).unwrap_err();
        assert_eq!(
            err.to_string(),
            "service_of: plugin \"e2b\" does not provide fs"
        );
        host.dispose().await.expect("dispose");
        host.dispose().await.expect("second dispose is a no-op");
        assert_eq!(
            world.journal(),
            [
                "create e2b [] config={\"cwd\":\"/home/user/workspace\"}",
                "create fs-e2b [e2b]",
                "create subprocess-e2b [e2b,fs]",
                "dispose subprocess-e2b",
                "dispose fs-e2b",
                "dispose e2b",
            ]
        );
        let err = host.fs().err().expect("disposed");
        assert_eq!(err.to_string(), "fs: the host has been disposed");
    }

    #[tokio::test]
    async fn the_owners_old_name_loads_it_with_a_deprecation_warning() {
        let world = e2b_world();
        let old = SEED.replace("dsh-e2b-owner", "dsh-e2b");
        assert!(old.contains("name: '@deepseek-ai/dsh-e2b'\n"), "{old}");
        let composition = world.compose(&old).expect("the old name still loads");
        let owner = composition.plugins().next().expect("the owner first");
        assert_eq!(owner.name, "@deepseek-ai/dsh-e2b", "the name as written");
        assert_eq!(owner.library, world.dir.path().join("libdsh_e2b_owner.so"));
        assert_eq!(
            composition.warnings(),
            [
                "entry \"e2b\" (line 1): plugin name \"@deepseek-ai/dsh-e2b\" is deprecated, the \
              plugin is now \"dsh-e2b-owner\"; rename the entry's `name` (the old name still \
              loads it)"
            ]
        );
        let host = composition.start().await.expect("start");
        assert!(host.owner(OwnerKind::E2B).is_ok());
        host.dispose().await.expect("dispose");
    }

    #[tokio::test]
    async fn typed_accessors_report_missing_and_unserved_services() {
        let mut world = World::new();
        world.plugin("dsh-a", &[Fs], &[]);
        world.plugin("dsh-b", &[Fs], &[]);
        world.plugin("dsh-c", &[], &[Fs]);
        // `c` and `d` consume both providers: no fs is served outside.
        let host = world
            .compose(
                "- {id: a, name: dsh-a}\n- {id: b, name: dsh-b}\n\
                 - {id: c, name: dsh-c, inject: {fs: a}}\n- {id: d, name: dsh-c, inject: {fs: b}}\n\
                 - {id: e, name: dsh-c, inject: {fs: b}, disabled: true}\n",
            )
            .expect("valid")
            .start()
            .await
            .expect("start");
        let err = host.fs().err().expect("not served");
        assert_eq!(
            err.to_string(),
            "fs: no entry serves fs (\"a\" and \"b\" provide it to other entries); choose one with `serve: [fs]` on its entry"
        );
        let err = host.subprocess().err().expect("missing");
        assert_eq!(
            err.to_string(),
            "subprocess: no plugin in this composition provides subprocess"
        );
        host.dispose().await.expect("dispose");
    }

    #[tokio::test]
    async fn serve_chooses_among_unconsumed_providers_before_anything_is_created() {
        let mut world = World::new();
        world.plugin("dsh-base", &[Fs], &[]);
        world.plugin("dsh-deco", &[Fs], &[Fs]);
        let manifest = "- {id: base, name: dsh-base}\n- {id: deco, name: dsh-deco, inject: {fs: base}}\n- {id: spare, name: dsh-base}\n";
        let Err(HostError::Invalid(invalid)) = world.compose(manifest) else {
            panic!("several unconsumed providers must be refused");
        };
        assert_eq!(
            invalid.to_string(),
            "m.yaml: entry \"deco\" (line 2): fs is served by \"deco\" and \"spare\" (no other entry consumes them); choose one with `serve: [fs]` on its entry"
        );
        assert!(world.journal().is_empty(), "nothing was created");

        let composition = world
            .compose(&manifest.replace(
                "spare, name: dsh-base",
                "spare, name: dsh-base, serve: [fs]",
            ))
            .expect("valid with serve");
        assert_eq!(composition.served(Fs), Some("spare"));
        let serves: Vec<(&str, &[ServiceKind])> = composition
            .plugins()
            .map(|plugin| (plugin.id.as_str(), plugin.serves.as_slice()))
            .collect();
        assert_eq!(serves, [("base", &[][..]), ("deco", &[]), ("spare", &[Fs])]);
        let host = composition.start().await.expect("start");
        let Service::Fs(spare) = host.service_of("spare", Fs).expect("spare") else {
            panic!("not fs");
        };
        assert!(Arc::ptr_eq(&host.fs().expect("served"), &spare));
        host.dispose().await.expect("dispose");
    }

    #[test]
    fn every_config_error_of_every_entry_is_reported_before_anything_is_created() {
        let mut world = World::new();
        let mut strict = FakeFactory::new(&world.journal, &[]);
        strict.config_errors = vec![
            dsh_plugin_api::FieldError::new(
                "deny",
                "invalid type: string \"rm\", expected an array",
            ),
            dsh_plugin_api::FieldError::new("extra", "unknown field (expected deny)"),
        ];
        world.library(
            "dsh-strict",
            Ok(LoadedLibrary {
                descriptor: PluginDescriptor {
                    name: "dsh-strict".to_owned(),
                    version: "1.0.0".to_owned(),
                    api_version: 1,
                    provides: vec![],
                    inject: vec![],
                },
                factory: Arc::new(strict),
            }),
        );
        world.plugin("dsh-other", &[], &[]);
        let Err(HostError::Invalid(invalid)) = world.compose(
            "- {id: a, name: dsh-strict, config: {deny: rm, extra: 1}}\n\
             - {id: b, name: dsh-strict}\n- {id: b, name: dsh-other}\n",
        ) else {
            panic!("bad configs must be refused");
        };
        assert_eq!(
            invalid.to_string().lines().collect::<Vec<_>>(),
            [
                "m.yaml: entry \"a\" (line 1): plugin dsh-strict: config.deny: invalid type: string \"rm\", expected an array",
                "m.yaml: entry \"a\" (line 1): plugin dsh-strict: config.extra: unknown field (expected deny)",
                "m.yaml: entry \"b\" (line 3): duplicate id \"b\" (first used by entry \"b\" (line 2))",
            ]
        );
        assert!(world.journal().is_empty(), "nothing was created");
    }

    #[test]
    fn messages_about_thousands_of_entries_name_ten_and_count_the_rest() {
        let mut world = World::new();
        world.plugin("dsh-base", &[Fs], &[]);
        world.plugin("dsh-user", &[], &[Fs]);
        let providers: String = (0..1000)
            .map(|index| format!("- {{id: base{index}, name: dsh-base}}\n"))
            .collect();
        // One problem naming a thousand providers.
        let Err(HostError::Invalid(invalid)) = world.compose(&providers) else {
            panic!("ambiguous served entry must be refused");
        };
        assert_eq!(
            invalid.to_string(),
            "m.yaml: entry \"base0\" (line 1): fs is served by \"base0\", \"base1\", \"base2\", \
             \"base3\", \"base4\", \"base5\", \"base6\", \"base7\", \"base8\", \"base9\" and 990 \
             more (no other entry consumes them); choose one with `serve: [fs]` on its entry"
        );
        let ValidationError::AmbiguousServed { candidates, .. } = &invalid.errors[0] else {
            panic!("{invalid:?}");
        };
        assert_eq!(candidates.total, 1000);

        // A thousand problems, each naming a thousand providers.
        let users: String = (0..1000)
            .map(|index| format!("- {{id: user{index}, name: dsh-user}}\n"))
            .collect();
        let Err(HostError::Invalid(invalid)) = world.compose(&(providers + &users)) else {
            panic!("ambiguous providers must be refused");
        };
        assert_eq!(invalid.errors.len(), 1000, "every problem is kept");
        let rendered = invalid.to_string();
        let lines: Vec<&str> = rendered.lines().collect();
        assert_eq!(lines.len(), 11, "{rendered}");
        assert!(
            lines[0].starts_with(
                "m.yaml: entry \"user0\" (line 1001): plugin dsh-user injects fs, which \"base0\", "
            ) && lines[0].ends_with(
                "\"base9\" and 990 more provide; choose one with `inject: { fs: <id> }`"
            ),
            "{}",
            lines[0]
        );
        assert_eq!(lines[10], "m.yaml: 990 more problems not shown");
    }

    #[tokio::test]
    async fn a_decorator_is_the_composition_service_over_what_it_wraps() {
        let mut world = World::new();
        world.plugin("dsh-base", &[Fs], &[]);
        world.plugin("dsh-deco", &[Fs], &[Fs]);
        let host = world
            .compose("- {id: deco, name: dsh-deco}\n- {id: base, name: dsh-base}\n")
            .expect("valid")
            .start()
            .await
            .expect("start");
        let outer = host.fs().expect("the decorator");
        let Service::Fs(deco) = host.service_of("deco", Fs).expect("deco") else {
            panic!("not fs");
        };
        assert!(Arc::ptr_eq(&outer, &deco));
        host.dispose().await.expect("dispose");
    }

    #[test]
    fn one_library_backs_several_entries_and_is_opened_once() {
        let mut world = World::new();
        world.plugin("dsh-a", &[], &[]);
        let composition = world
            .compose("- {id: one, name: dsh-a}\n- {id: two, name: dsh-a}\n")
            .expect("valid");
        assert_eq!(composition.plugins().len(), 2);
        assert_eq!(world.loader.opened.lock().expect("opened").len(), 1);
    }

    #[test]
    fn library_and_graph_problems_are_reported_together_in_manifest_order() {
        let mut world = e2b_world();
        world.plugin("dsh-other", &[], &[]);
        world.library(
            "dsh-not-plugin",
            Err(LoadFailure {
                problem: LibraryProblem::NotAPlugin,
                message: "no dsh root module".into(),
            }),
        );
        world.library(
            "dsh-old",
            Err(LoadFailure {
                problem: LibraryProblem::Incompatible,
                message: "built against plugin API 0, host speaks 1".into(),
            }),
        );
        let manifest = "\
- {id: fs, name: dsh-fs-e2b}
- {id: missing, name: dsh-nowhere}
- {id: junk, name: dsh-not-plugin}
- {id: old, name: dsh-old}
- {id: renamed, name: dsh-renamed, path: libdsh_other.so}
- {id: fs, name: dsh-e2b-owner}
";
        // Relative `path` resolves against the current directory for text
        // manifests; use an absolute one here.
        let manifest = manifest.replace(
            "path: libdsh_other.so",
            &format!(
                "path: {}",
                world.dir.path().join("libdsh_other.so").display()
            ),
        );
        let err = world.compose(&manifest).expect_err("invalid");
        let HostError::Invalid(errors) = err else {
            panic!("expected validation errors, got {err}");
        };
        let text = errors.to_string();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 5, "{text}");
        assert!(
            lines[0].starts_with("m.yaml: entry \"missing\" (line 2): plugin dsh-nowhere: library libdsh_nowhere.so not found; searched "),
            "{text}"
        );
        assert!(
            lines[1].starts_with("m.yaml: entry \"junk\" (line 3): "),
            "{text}"
        );
        assert!(lines[1].ends_with("(line 3): no dsh root module"), "{text}");
        assert!(
            lines[2].ends_with("built against plugin API 0, host speaks 1"),
            "{text}"
        );
        assert!(
            lines[3].contains("entry \"renamed\" (line 5): manifest name \"dsh-renamed\" does not match the plugin in"),
            "{text}"
        );
        assert!(
            lines[3].ends_with("(its descriptor says \"dsh-other\")"),
            "{text}"
        );
        assert_eq!(
            lines[4],
            "m.yaml: entry \"fs\" (line 6): duplicate id \"fs\" (first used by entry \"fs\" (line 1))"
        );
        assert_eq!(world.journal(), Vec::<String>::new());
    }

    #[test]
    fn a_cycle_is_printed_and_nothing_is_created() {
        let mut world = World::new();
        world.plugin("dsh-a", &[Fs], &[Subprocess]);
        world.plugin("dsh-b", &[Subprocess], &[Fs]);
        let err = world
            .compose("- {id: a, name: dsh-a}\n- {id: b, name: dsh-b}\n")
            .expect_err("cycle");
        assert!(err.is_config_error());
        assert_eq!(
            err.to_string(),
            "m.yaml: entry \"a\" (line 1): dependency cycle: a -> b -> a"
        );
    }

    #[test]
    fn the_embedded_manifest_is_the_shipped_local_composition() {
        let manifest = Manifest::parse(
            crate::embedded::LOCAL_YAML,
            ManifestFormat::Yaml,
            crate::embedded::LOCAL_ORIGIN,
            None,
        )
        .expect("embedded manifest parses");
        let names: Vec<&str> = manifest.entries().iter().map(|e| e.name.as_str()).collect();
        assert_eq!(names, ["dsh-fs-local", "dsh-subprocess-local"]);
        let toml = Manifest::from_path(
            &Path::new(env!("CARGO_MANIFEST_DIR")).join("../config/local.toml"),
        )
        .expect("local.toml parses");
        let toml_names: Vec<&str> = toml.entries().iter().map(|e| e.name.as_str()).collect();
        assert_eq!(names, toml_names);
    }
}
