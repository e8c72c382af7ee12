//! The `fs` seam's world-side operations — `walk`, `search`, `read_many`
//! (docs/design.md §5.1) — for callers and for providers.
//!
//! **Callers** use [`walk`], [`search`] and [`read_many`]: each asks the
//! provider's native operation and, where it has none (`Unsupported`),
//! runs the composition of [`composed`] over the provider's primitives, so
//! every provider serves every operation with the same results.
//!
//! **Providers** with a faster way to reach their files implement [`Tree`]
//! and hand it to [`walk_tree`] / [`search_tree`]: the walk and search
//! engines (breadth-first order, `.gitignore` rules, globs, ripgrep's
//! matcher and searcher, the bounds) are this module's, so a native path
//! differs from the composition only in how it lists and reads.

mod compose;
mod gitignore;
mod glob;
mod search;
mod walker;

use std::sync::Arc;

use dsh_plugin_api::fs::{
    FsProvider, ReadManyItem, ReadManyLimits, SearchSpec, SearchStream, WalkSpec, WalkStream,
};
use dsh_plugin_api::{Error, ErrorKind, Result};

pub use compose::{file_too_big, read_many_bounds};
pub use glob::{Globs, PathGlob};
pub use walker::{Tree, below, join};

/// The compositions over a provider's primitives (what [`walk`],
/// [`search`] and [`read_many`] fall back to).
pub mod composed {
    pub use super::compose::{read_many, search, walk};
}

/// `fs.walk(root, spec)`, or its composition when the provider has no
/// native walk.
pub async fn walk(fs: &Arc<dyn FsProvider>, root: &str, spec: WalkSpec) -> Result<WalkStream> {
    match fs.walk(root, spec.clone()).await {
        Err(err) if err.kind() == ErrorKind::Unsupported => {
            compose::walk(fs.clone(), root, spec).await
        }
        answered => answered,
    }
}

/// `fs.search(root, spec)`, or its composition when the provider has no
/// native search.
pub async fn search(
    fs: &Arc<dyn FsProvider>,
    root: &str,
    spec: SearchSpec,
) -> Result<SearchStream> {
    match fs.search(root, spec.clone()).await {
        Err(err) if err.kind() == ErrorKind::Unsupported => {
            compose::search(fs.clone(), root, spec).await
        }
        answered => answered,
    }
}

/// `fs.read_many(paths, limits)`, or its composition when the provider has
/// no native one.
pub async fn read_many(
    fs: &Arc<dyn FsProvider>,
    paths: Vec<String>,
    limits: ReadManyLimits,
) -> Result<Vec<ReadManyItem>> {
    match fs.read_many(paths.clone(), limits.clone()).await {
        Err(err) if err.kind() == ErrorKind::Unsupported => {
            compose::read_many(fs.clone(), paths, limits).await
        }
        answered => answered,
    }
}

/// A walk of the directory `tree` reaches as `root` (the caller's
/// spelling, for the paths yielded) by the shared engine: `spec` checked
/// (`InvalidInput`), the root listed at once (its errors are the call's),
/// the rest streamed as it is pulled. The tree decides confinement.
pub async fn walk_tree<T: Tree + 'static>(
    mut tree: T,
    root: &str,
    spec: WalkSpec,
) -> Result<WalkStream> {
    let plan = walker::WalkPlan::new("walk", &spec)?;
    let (absolute, is_dir) = tree.root().await?;
    if !is_dir {
        return Err(
            Error::new(ErrorKind::NotADirectory, "walk: not a directory").with_subject(root),
        );
    }
    let walker = walker::Walker::open(&mut tree, "walk", root, absolute, plan).await?;
    Ok(walker::walk_stream(tree, walker))
}

/// A search of the file or directory `tree` reaches as `root` by the
/// shared engine (see [`walk_tree`]).
pub async fn search_tree<T: Tree + 'static>(
    mut tree: T,
    root: &str,
    spec: SearchSpec,
) -> Result<SearchStream> {
    let plan = search::SearchPlan::new("search", &spec)?;
    let search = search::Search::open(&mut tree, "search", root, plan).await?;
    Ok(search::search_stream(tree, search))
}
