//! The cases, one file per area of the contract. Order here is run order:
//! fs first, then commands, terminals, and both seams together.

use crate::registry::CaseInfo;

mod coherence;
mod fs_confine;
mod fs_edit;
mod fs_meta;
mod fs_paths;
mod fs_read;
mod fs_tree;
mod fs_world;
mod fs_write;
mod fs_write_stream;
mod permissions;
mod sp_durable;
mod sp_exit;
mod sp_output;
mod sp_quiescence;
mod sp_spawn;
mod terminal;

/// Every group of cases, in run order.
pub(crate) const ALL: &[&[CaseInfo]] = &[
    fs_paths::CASES,
    fs_confine::CASES,
    fs_meta::CASES,
    fs_read::CASES,
    fs_write::CASES,
    fs_write_stream::CASES,
    fs_edit::CASES,
    fs_tree::CASES,
    fs_world::CASES,
    sp_spawn::CASES,
    sp_output::CASES,
    sp_exit::CASES,
    sp_quiescence::CASES,
    sp_durable::CASES,
    terminal::CASES,
    coherence::CASES,
    permissions::CASES,
];
