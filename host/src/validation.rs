//! What whole-graph validation can find wrong, and the collection of all of
//! it that [`crate::Composition`] reports before anything is created.

use std::fmt;
use std::path::PathBuf;

use dsh_manifest::write_problems;
use dsh_plugin_api::ServiceKind;

use crate::manifest::EntryLabel;
use crate::resolve::ResolveFailure;

/// Why a library that exists could not be used.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum LibraryProblem {
    /// The dynamic loader refused the file (not a shared object, missing
    /// symbols of its own, wrong architecture …).
    Open,
    /// A shared object without the dsh plugin root module.
    NotAPlugin,
    /// A dsh plugin built against a different plugin API or layout.
    Incompatible,
}

/// One problem in a composition. Every variant names the entry it concerns
/// (with its line); `Display` renders `entry "id" (line N): what is wrong`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ValidationError {
    /// No library file for the entry.
    #[error("{entry}: plugin {name}: {failure}")]
    LibraryNotFound {
        entry: EntryLabel,
        name: String,
        failure: ResolveFailure,
    },
    /// The file exists but is not a usable dsh plugin. The loader's
    /// message names the file.
    #[error("{entry}: {message}")]
    LibraryUnusable {
        entry: EntryLabel,
        path: PathBuf,
        problem: LibraryProblem,
        /// The loader's explanation.
        message: String,
    },
    /// The library is a different plugin than the manifest names.
    #[error(
        "{entry}: manifest name {manifest_name:?} does not match the plugin in {} (its descriptor says {descriptor_name:?})",
        path.display()
    )]
    NameMismatch {
        entry: EntryLabel,
        manifest_name: String,
        descriptor_name: String,
        path: PathBuf,
    },
    /// Two enabled entries share an id.
    #[error("{entry}: duplicate id {id:?} (first used by {first})")]
    DuplicateId {
        entry: EntryLabel,
        id: String,
        first: EntryLabel,
    },
    /// An `inject` key that is not a service name.
    #[error("{entry}: inject: unknown service {service:?} (services: fs, subprocess, e2b)")]
    UnknownService { entry: EntryLabel, service: String },
    /// A binding to an id no entry has.
    #[error("{entry}: inject: {service} is bound to {provider:?}, but no entry has that id")]
    BindingToUnknownId {
        entry: EntryLabel,
        service: ServiceKind,
        provider: String,
    },
    /// A binding to a disabled entry.
    #[error("{entry}: inject: {service} is bound to {provider:?}, which is disabled")]
    BindingToDisabled {
        entry: EntryLabel,
        service: ServiceKind,
        provider: String,
    },
    /// A binding to an entry whose plugin does not provide the service.
    #[error(
        "{entry}: inject: {service} is bound to {provider:?}, which does not provide {service} (it provides {})",
        list_services(provides)
    )]
    BindingNotProvided {
        entry: EntryLabel,
        service: ServiceKind,
        provider: String,
        provides: Vec<ServiceKind>,
    },
    /// A binding for a service the entry's plugin does not inject.
    #[error(
        "{entry}: inject: binds {service}, but plugin {plugin} does not inject {service} (it injects {})",
        list_services(injects)
    )]
    BindingNotInjected {
        entry: EntryLabel,
        service: ServiceKind,
        plugin: String,
        injects: Vec<ServiceKind>,
    },
    /// No enabled entry provides a service the plugin injects.
    #[error("{entry}: plugin {plugin} injects {service}, but no other enabled entry provides it")]
    MissingProvider {
        entry: EntryLabel,
        service: ServiceKind,
        plugin: String,
    },
    /// Several entries provide an injected service and no binding chooses.
    #[error(
        "{entry}: plugin {plugin} injects {service}, which {candidates} provide; choose one with `inject: {{ {service}: <id> }}`"
    )]
    AmbiguousProvider {
        entry: EntryLabel,
        service: ServiceKind,
        plugin: String,
        /// The other enabled providers' ids, in manifest order.
        candidates: IdList,
    },
    /// A `serve` name that is not a service.
    #[error("{entry}: serve: unknown service {service:?} (services: fs, subprocess, e2b)")]
    ServeUnknownService { entry: EntryLabel, service: String },
    /// `serve` lists a service the entry's plugin does not provide.
    #[error(
        "{entry}: serve: plugin {plugin} does not provide {service} (it provides {})",
        list_services(provides)
    )]
    ServeNotProvided {
        entry: EntryLabel,
        service: ServiceKind,
        plugin: String,
        provides: Vec<ServiceKind>,
    },
    /// Two entries claim to serve one service.
    #[error("{entry}: serve: {service} is already served by {first}")]
    ServeConflict {
        entry: EntryLabel,
        service: ServiceKind,
        first: EntryLabel,
    },
    /// Several providers of a service that no other entry consumes, and no
    /// `serve` choosing among them: which one the composition's user gets
    /// would be a guess.
    #[error(
        "{entry}: {service} is served by {candidates} (no other entry consumes them); choose one with `serve: [{service}]` on its entry"
    )]
    AmbiguousServed {
        /// The first candidate.
        entry: EntryLabel,
        service: ServiceKind,
        /// The unconsumed providers' ids, in manifest order.
        candidates: IdList,
    },
    /// The entry's `config` is not what its plugin accepts: one error per
    /// problem, all of them (the plugin's config type decides, checked
    /// through its library without creating anything).
    #[error("{entry}: plugin {plugin}: {problem}")]
    Config {
        entry: EntryLabel,
        plugin: String,
        /// `config.deny: invalid type: …`, or why the check could not run.
        problem: String,
    },
    /// Entries that (transitively) inject from each other.
    #[error("{entry}: dependency cycle: {}", path.join(" -> "))]
    Cycle {
        /// The first entry of the cycle (in manifest order).
        entry: EntryLabel,
        /// Entry ids along the cycle, the first repeated at the end
        /// (`a -> b -> a`: `a` injects a service of `b`, which injects one
        /// of `a`).
        path: Vec<String>,
    },
}

impl ValidationError {
    /// The entry the problem is about.
    pub fn entry(&self) -> &EntryLabel {
        match self {
            ValidationError::LibraryNotFound { entry, .. }
            | ValidationError::LibraryUnusable { entry, .. }
            | ValidationError::NameMismatch { entry, .. }
            | ValidationError::DuplicateId { entry, .. }
            | ValidationError::UnknownService { entry, .. }
            | ValidationError::BindingToUnknownId { entry, .. }
            | ValidationError::BindingToDisabled { entry, .. }
            | ValidationError::BindingNotProvided { entry, .. }
            | ValidationError::BindingNotInjected { entry, .. }
            | ValidationError::MissingProvider { entry, .. }
            | ValidationError::AmbiguousProvider { entry, .. }
            | ValidationError::ServeUnknownService { entry, .. }
            | ValidationError::ServeNotProvided { entry, .. }
            | ValidationError::ServeConflict { entry, .. }
            | ValidationError::AmbiguousServed { entry, .. }
            | ValidationError::Config { entry, .. }
            | ValidationError::Cycle { entry, .. } => entry,
        }
    }
}

fn list_services(services: &[ServiceKind]) -> String {
    if services.is_empty() {
        return "nothing".to_owned();
    }
    services
        .iter()
        .map(|service| service.name())
        .collect::<Vec<_>>()
        .join(", ")
}

/// How many ids one message names ([`IdList`]) and how many problems one
/// report prints ([`ValidationErrors`], [`crate::ManifestError`]): the
/// manifest's bound, so every report of many problems reads alike.
pub use dsh_manifest::NAMED_IN_MESSAGES;

/// Entry ids as one problem names them: the first [`NAMED_IN_MESSAGES`] in
/// manifest order, and how many there are in all. `Display` quotes them:
/// `"a", "b" and "c"`, or `"a", … "j" and 990 more`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IdList {
    /// The first ids, at most [`NAMED_IN_MESSAGES`].
    pub named: Vec<String>,
    /// How many ids there are, the named ones included.
    pub total: usize,
}

impl IdList {
    /// The first [`NAMED_IN_MESSAGES`] of `ids`, which are `total` in all;
    /// only those are read from the iterator, so naming a few of many
    /// costs no more than naming a few.
    pub(crate) fn new(ids: impl Iterator<Item = String>, total: usize) -> IdList {
        let named: Vec<String> = ids.take(NAMED_IN_MESSAGES).collect();
        debug_assert!(named.len() <= total, "{} named of {total}", named.len());
        IdList { named, total }
    }
}

impl fmt::Display for IdList {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let more = self.total.saturating_sub(self.named.len());
        match (self.named.as_slice(), more) {
            ([], _) => f.write_str("no entries"),
            ([one], 0) => write!(f, "{one:?}"),
            ([init @ .., last], 0) => {
                write_quoted(f, init)?;
                write!(f, " and {last:?}")
            }
            (named, more) => {
                write_quoted(f, named)?;
                write!(f, " and {more} more")
            }
        }
    }
}

fn write_quoted(f: &mut fmt::Formatter<'_>, ids: &[String]) -> fmt::Result {
    for (index, id) in ids.iter().enumerate() {
        if index > 0 {
            f.write_str(", ")?;
        }
        write!(f, "{id:?}")?;
    }
    Ok(())
}

/// `ids` quoted as an [`IdList`] names them.
pub(crate) fn quote_ids(ids: &[String]) -> String {
    IdList::new(ids.iter().cloned(), ids.len()).to_string()
}

/// Every problem found in one composition, in manifest order (cycles
/// last). `Display` prints one `source: problem` line each, for the first
/// [`NAMED_IN_MESSAGES`], then how many more there are.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub struct ValidationErrors {
    /// The manifest's name in messages.
    pub origin: String,
    pub errors: Vec<ValidationError>,
}

impl fmt::Display for ValidationErrors {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write_problems(f, &self.origin, &self.errors, |f, error| {
            write!(f, "{}: {error}", self.origin)
        })
    }
}
