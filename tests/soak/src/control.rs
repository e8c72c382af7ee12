//! The soak's view of e2b-local's control plane (through `e2b-client`, as any E2B client sees
//! it): which sandboxes exist, until when, and whether one is gone.

use std::collections::BTreeMap;
use std::time::Duration;

use anyhow::{Context, Result};
use e2b_client::{Api, ConnectionOptions, ListQuery, SandboxState};
use futures::TryStreamExt;

/// One listed sandbox.
#[derive(Debug, Clone)]
pub struct Listed {
    pub id: String,
    pub end_at: jiff::Timestamp,
    pub metadata: BTreeMap<String, String>,
}

/// A control-plane client for the soak's server.
#[derive(Debug, Clone)]
pub struct Control {
    api: Api,
}

impl Control {
    /// A client for the server whose `E2B_*` variables are `env`.
    pub fn new(env: &[(String, String)]) -> Result<Self> {
        let config = ConnectionOptions::default()
            .with_request_timeout(Some(Duration::from_secs(30)))
            .resolve_with(|name| {
                env.iter()
                    .find(|(key, _)| key == name)
                    .map(|(_, value)| value.clone())
            })
            .context("configure the control-plane client")?;
        Ok(Self {
            api: Api::new(config),
        })
    }

    /// Every running or paused sandbox (with `key = value` in its metadata, if given).
    pub async fn list(&self, metadata: &[(&str, &str)]) -> Result<Vec<Listed>> {
        let mut query = ListQuery::default()
            .state(SandboxState::Running)
            .state(SandboxState::Paused);
        for (key, value) in metadata {
            query = query.metadata(*key, *value);
        }
        let listed: Vec<_> = self
            .api
            .list_sandboxes(query)
            .into_stream()
            .try_collect()
            .await
            .context("list sandboxes")?;
        Ok(listed
            .into_iter()
            .map(|detail| Listed {
                id: detail.sandbox_id,
                end_at: detail.end_at,
                metadata: detail.metadata.unwrap_or_default(),
            })
            .collect())
    }

    /// Whether sandbox `id` exists (running or paused).
    pub async fn exists(&self, id: &str) -> Result<bool> {
        match self.api.sandbox_info(id).await {
            Ok(_) => Ok(true),
            Err(err) if err.is_sandbox_gone() => Ok(false),
            Err(err) => Err(err).with_context(|| format!("get info of sandbox {id}")),
        }
    }

    /// Waits (up to `limit`) until sandbox `id` no longer exists; whether it is gone.
    pub async fn gone_within(&self, id: &str, limit: Duration) -> Result<bool> {
        let deadline = tokio::time::Instant::now() + limit;
        loop {
            if !self.exists(id).await? {
                return Ok(true);
            }
            if tokio::time::Instant::now() >= deadline {
                return Ok(false);
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}
