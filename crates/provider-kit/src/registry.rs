//! What a provider still owns — process groups, terminal sessions not yet
//! proven empty — so that `dispose` reaches them even after every handle
//! was dropped, and so that nothing new starts once disposal began (the
//! seams promise `Closed` for operations after `dispose`).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, PoisonError, Weak};

use dsh_plugin_api::{Error, Result};

struct Table<T> {
    next: u64,
    live: HashMap<u64, T>,
    closed: bool,
}

type Shared<T> = Arc<Mutex<Table<T>>>;

fn lock<T>(table: &Mutex<Table<T>>) -> MutexGuard<'_, Table<T>> {
    // The table is consistent after every statement; a panic elsewhere
    // while it was held leaves nothing half-done.
    table.lock().unwrap_or_else(PoisonError::into_inner)
}

/// The registry of one provider. Cheap to clone (clones share the table).
pub struct Registry<T> {
    table: Shared<T>,
    /// Names the provider in refusals (`"the subprocess provider"`).
    what: &'static str,
}

impl<T> Clone for Registry<T> {
    fn clone(&self) -> Self {
        Registry {
            table: Arc::clone(&self.table),
            what: self.what,
        }
    }
}

impl<T> std::fmt::Debug for Registry<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let table = lock(&self.table);
        f.debug_struct("Registry")
            .field("what", &self.what)
            .field("live", &table.live.len())
            .field("closed", &table.closed)
            .finish()
    }
}

impl<T: Clone> Registry<T> {
    /// An open, empty registry; `what` names the provider in refusals
    /// (`"the subprocess provider"`).
    pub fn new(what: &'static str) -> Registry<T> {
        Registry {
            table: Arc::new(Mutex::new(Table {
                next: 0,
                live: HashMap::new(),
                closed: false,
            })),
            what,
        }
    }

    /// `Closed` (`"<operation>: <what> is disposed"`) once disposal began.
    pub fn check_open(&self, operation: &str) -> Result<()> {
        if self.is_closed() {
            return Err(self.refusal(operation));
        }
        Ok(())
    }

    /// Takes `item` in, with `membership` recording where it leaves from.
    /// Refused with `Closed` once disposal began (the caller then undoes
    /// the start itself), and with `Io` for a membership already used
    /// (nothing is registered then).
    pub fn adopt(&self, operation: &str, item: T, membership: &Membership<T>) -> Result<()> {
        let mut table = lock(&self.table);
        if table.closed {
            return Err(self.refusal(operation));
        }
        let id = table.next;
        membership
            .0
            .set((Arc::downgrade(&self.table), id))
            .map_err(|_| Error::io(format!("{operation}: the handle is registered already")))?;
        table.next += 1;
        table.live.insert(id, item);
        Ok(())
    }

    /// Whether disposal began.
    pub fn is_closed(&self) -> bool {
        lock(&self.table).closed
    }

    /// Refuses every later adoption and returns what is owned now.
    pub fn close(&self) -> Vec<T> {
        let mut table = lock(&self.table);
        table.closed = true;
        table.live.values().cloned().collect()
    }

    /// How many things are owned right now.
    pub fn len(&self) -> usize {
        lock(&self.table).live.len()
    }

    /// Whether nothing is owned right now.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn refusal(&self, operation: &str) -> Error {
        Error::closed(format!("{operation}: {} is disposed", self.what))
    }
}

/// An owned thing's place in a [`Registry`], kept by the thing itself so
/// it can leave once it is proven quiescent.
pub struct Membership<T>(OnceLock<(Weak<Mutex<Table<T>>>, u64)>);

impl<T> Default for Membership<T> {
    fn default() -> Self {
        Membership(OnceLock::new())
    }
}

impl<T> std::fmt::Debug for Membership<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("Membership")
            .field(&self.0.get().map(|(_, id)| id))
            .finish()
    }
}

impl<T> Membership<T> {
    /// Leaves the registry; idempotent, a no-op before adoption and after
    /// the registry is gone.
    pub fn leave(&self) {
        if let Some((table, id)) = self.0.get()
            && let Some(table) = table.upgrade()
        {
            lock(&table).live.remove(id);
        }
    }
}

#[cfg(test)]
mod tests {
    use dsh_plugin_api::ErrorKind;

    use super::*;

    #[test]
    fn members_leave_and_closing_refuses_newcomers() {
        let registry = Registry::new("the subprocess provider");
        let first = Membership::default();
        registry.adopt("spawn", 1, &first).unwrap();
        let second = Membership::default();
        registry.adopt("spawn", 2, &second).unwrap();
        assert_eq!(registry.len(), 2);
        first.leave();
        first.leave();
        assert_eq!(registry.len(), 1);
        registry.check_open("spawn").unwrap();
        assert_eq!(registry.close(), vec![2]);
        let err = registry
            .adopt("spawn", 3, &Membership::default())
            .unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Closed);
        assert_eq!(err.message(), "spawn: the subprocess provider is disposed");
        assert!(registry.is_closed());
        let err = registry.check_open("open_terminal").unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Closed);
        assert_eq!(
            err.message(),
            "open_terminal: the subprocess provider is disposed"
        );
    }

    #[test]
    fn a_membership_is_used_once() {
        let registry = Registry::new("the subprocess provider");
        let membership = Membership::default();
        registry.adopt("spawn", 1, &membership).unwrap();
        let err = registry.adopt("spawn", 2, &membership).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Io);
        assert_eq!(registry.len(), 1, "the second adoption registered nothing");
        membership.leave();
        assert!(registry.is_empty());
    }

    #[test]
    fn leaving_after_the_registry_is_gone_is_harmless() {
        let membership = Membership::default();
        {
            let registry = Registry::new("the subprocess provider");
            registry.adopt("spawn", "x", &membership).unwrap();
        }
        membership.leave();
    }
}
