//! What a provider still owns — process groups and terminal sessions not
//! yet proven empty — so disposal reaches them even after every handle was
//! dropped.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock, Weak};
use std::time::Duration;

use async_trait::async_trait;
use dsh_plugin_api::{Error, Result};

/// Something disposal must stop.
#[async_trait]
pub trait Owned: Send + Sync + 'static {
    /// Ends it (`grace` between the polite signal and SIGKILL) and proves
    /// it empty, or fails with `Busy`.
    async fn stop(&self, grace: Duration) -> Result<()>;
}

#[derive(Default)]
struct Table {
    next: u64,
    live: HashMap<u64, Arc<dyn Owned>>,
    closed: bool,
}

/// The registry of one provider. Cheap to clone.
#[derive(Clone, Default)]
pub struct Registry {
    table: Arc<Mutex<Table>>,
}

impl Registry {
    fn table(&self) -> std::sync::MutexGuard<'_, Table> {
        self.table.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Takes `owned` in, with `membership` recording where to leave from.
    /// Refused with `Closed` once disposal began (the caller then undoes
    /// the start itself).
    pub fn adopt(
        &self,
        operation: &str,
        owned: Arc<dyn Owned>,
        membership: &Membership,
    ) -> Result<()> {
        let mut table = self.table();
        if table.closed {
            return Err(Error::closed(format!(
                "{operation}: the subprocess provider is disposed"
            )));
        }
        let id = table.next;
        table.next += 1;
        table.live.insert(id, owned);
        let _ = membership.0.set((Arc::downgrade(&self.table), id));
        Ok(())
    }

    pub fn is_closed(&self) -> bool {
        self.table().closed
    }

    /// Refuses every later adoption and returns what is owned now.
    pub fn close(&self) -> Vec<Arc<dyn Owned>> {
        let mut table = self.table();
        table.closed = true;
        table.live.values().cloned().collect()
    }

    pub fn len(&self) -> usize {
        self.table().live.len()
    }
}

/// An owned thing's place in the registry.
#[derive(Debug, Default)]
pub struct Membership(OnceLock<(Weak<Mutex<Table>>, u64)>);

impl std::fmt::Debug for Table {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Table")
            .field("live", &self.live.len())
            .field("closed", &self.closed)
            .finish()
    }
}

impl Membership {
    /// Leaves the registry (proven quiescent); idempotent.
    pub fn leave(&self) {
        if let Some((table, id)) = self.0.get()
            && let Some(table) = table.upgrade()
        {
            table
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .live
                .remove(id);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use dsh_plugin_api::ErrorKind;

    struct Thing;

    #[async_trait]
    impl Owned for Thing {
        async fn stop(&self, _: Duration) -> Result<()> {
            Ok(())
        }
    }

    #[test]
    fn members_leave_and_closing_refuses_newcomers() {
        let registry = Registry::default();
        let first = Membership::default();
        registry.adopt("spawn", Arc::new(Thing), &first).unwrap();
        let second = Membership::default();
        registry.adopt("spawn", Arc::new(Thing), &second).unwrap();
        assert_eq!(registry.len(), 2);
        first.leave();
        first.leave();
        assert_eq!(registry.len(), 1);
        assert_eq!(registry.close().len(), 1);
        let err = registry
            .adopt("spawn", Arc::new(Thing), &Membership::default())
            .unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Closed);
        assert!(registry.is_closed());
    }
}
