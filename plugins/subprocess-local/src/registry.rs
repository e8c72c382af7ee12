//! What the provider still owns: live process groups and terminal sessions,
//! so disposal can terminate them even when every handle was dropped.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock, Weak};

use dsh_plugin_api::{Error, Result};

use crate::group::Group;
use crate::terminal::TerminalCore;

/// One owned thing.
#[derive(Clone)]
pub enum Owned {
    Group(Arc<Group>),
    Terminal(Arc<TerminalCore>),
}

#[derive(Default)]
struct State {
    next: u64,
    live: HashMap<u64, Owned>,
    closed: bool,
}

/// The provider's registry. Cheap to clone.
#[derive(Clone, Default)]
pub struct Registry {
    state: Arc<Mutex<State>>,
}

impl Registry {
    /// Registers `owned`; refused with `Closed` once [`Registry::close`]
    /// ran (the caller must then undo the start itself).
    pub fn insert(&self, operation: &str, owned: Owned, slot: &TicketSlot) -> Result<()> {
        let mut state = self.state.lock().expect("registry lock");
        if state.closed {
            return Err(Error::closed(format!(
                "{operation}: the subprocess provider is disposed"
            )));
        }
        let id = state.next;
        state.next += 1;
        state.live.insert(id, owned);
        slot.0
            .set(Ticket {
                registry: Arc::downgrade(&self.state),
                id,
            })
            .map_err(|_| Error::io(format!("{operation}: handle registered twice")))?;
        Ok(())
    }

    /// Whether new work is still accepted.
    pub fn is_closed(&self) -> bool {
        self.state.lock().expect("registry lock").closed
    }

    /// Refuses every later insert and returns what is still owned.
    pub fn close(&self) -> Vec<Owned> {
        let mut state = self.state.lock().expect("registry lock");
        state.closed = true;
        state.live.values().cloned().collect()
    }

    /// How many things are owned right now.
    pub fn len(&self) -> usize {
        self.state.lock().expect("registry lock").live.len()
    }
}

/// Where an owned thing keeps its registration, so it can leave the
/// registry once it is proven quiescent.
#[derive(Debug, Default)]
pub struct TicketSlot(OnceLock<Ticket>);

impl TicketSlot {
    /// Leaves the registry (idempotent; a no-op before registration).
    pub fn release(&self) {
        if let Some(ticket) = self.0.get()
            && let Some(state) = ticket.registry.upgrade()
        {
            state.lock().expect("registry lock").live.remove(&ticket.id);
        }
    }
}

#[derive(Debug)]
struct Ticket {
    registry: Weak<Mutex<State>>,
    id: u64,
}
