//! Whether the sandbox still exists, asked through the injected owner: how
//! the provider tells a gone sandbox (settle everything as quiescent) from
//! a broken connection (re-attach, or report it).

use std::sync::Arc;

use async_trait::async_trait;
use dsh_e2b_gateway::{Liveness, Presence};
use dsh_plugin_api::owner::Owner;

/// [`Liveness`] from `Owner::alive`.
pub struct OwnerLiveness {
    owner: Arc<dyn Owner>,
}

impl OwnerLiveness {
    pub fn new(owner: Arc<dyn Owner>) -> OwnerLiveness {
        OwnerLiveness { owner }
    }
}

#[async_trait]
impl Liveness for OwnerLiveness {
    async fn presence(&self) -> Presence {
        match self.owner.alive().await {
            Ok(true) => Presence::Running,
            Ok(false) => Presence::Gone("the e2b owner reports the sandbox gone".to_owned()),
            Err(err) => Presence::Unknown(err.to_string()),
        }
    }
}
