//! What the provider still owns: live process groups and terminal sessions,
//! so disposal can terminate them even when every handle was dropped (the
//! kit's [`dsh_provider_kit::registry`]).

use std::sync::Arc;

use crate::group::Group;
use crate::terminal::TerminalCore;

/// One owned thing.
#[derive(Clone)]
pub enum Owned {
    Group(Arc<Group>),
    Terminal(Arc<TerminalCore>),
}

/// The provider's registry. Cheap to clone.
pub type Registry = dsh_provider_kit::registry::Registry<Owned>;

/// Where an owned thing keeps its registration, so it can leave the
/// registry once it is proven quiescent.
pub type Membership = dsh_provider_kit::registry::Membership<Owned>;
