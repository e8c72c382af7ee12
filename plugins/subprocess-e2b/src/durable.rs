//! Durable commands in the sandbox (docs/design.md §5.2.1): the helper
//! starts each under a detached supervisor of its own (`durable-start`),
//! with its record and output in the owner's root-owned runtime root
//! (`<runtime root>/durable`, which the owner's sweep keeps), so neither
//! this provider's disposal nor the host's exit ends it, and a later host
//! connected to the same sandbox lists and attaches to it. The sandbox
//! user can neither read nor forge that state. A handle is a
//! `durable-follow` helper started as root like any command of this
//! provider ([`dsh_supervisor_client::FollowedProcess`]).

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use dsh_plugin_api::durable::{AttachSpec, Attached, DurableSpec, validate_spawn};
use dsh_plugin_api::subprocess::{OutputMode, Process, SpawnSpec, SpillSpec};
use dsh_plugin_api::{Error, Result};
use dsh_supervisor_client::control::{CONTROL_TIMEOUT, HelperRunner};
use dsh_supervisor_client::{follower_spec, holds, new_id, started};

use crate::errors::{self, StartContext};
use crate::start::{RunAs, spawn_as};
use crate::transport::EnvdTransport;
use crate::wire::{self, DurableStartRequest, Launch};
use crate::world::World;

/// The durable commands of one sandbox, through one provider's world.
pub struct Durable<T: EnvdTransport> {
    world: Arc<World<T>>,
}

impl<T: EnvdTransport> Durable<T> {
    pub fn new(world: Arc<World<T>>) -> Durable<T> {
        Durable { world }
    }
}

#[async_trait]
impl<T: EnvdTransport> HelperRunner for Durable<T> {
    fn state_dir(&self) -> Result<&str> {
        Ok(self.world.durable_dir())
    }

    async fn run_helper(
        &self,
        operation: &str,
        args: &[&str],
        request: Option<&[u8]>,
        timeout: Duration,
    ) -> Result<String> {
        self.world.check_open(operation)?;
        let ready = self.world.ready(operation).await?;
        ready
            .control
            .durable(operation, args, request, timeout)
            .await
    }
}

/// `spawn_durable` in `durable`'s world.
pub async fn spawn<T: EnvdTransport>(
    durable: &Arc<Durable<T>>,
    spec: SpawnSpec,
    keep: DurableSpec,
) -> Result<Attached> {
    const OP: &str = "spawn_durable";
    validate_spawn(&spec)?;
    let world = &durable.world;
    world.check_open(OP)?;
    let ready = world.ready(OP).await?;
    let cwd = world.working_dir(OP, spec.cwd.as_deref())?;
    let env = ready.setup.ambient.for_command(&spec.env, &cwd);
    let search = dsh_supervisor::ambient::search_dirs(&env.path);
    let id = new_id();
    let request = DurableStartRequest {
        id: id.clone(),
        launch: Launch {
            identity: ready.setup.identity.clone(),
            argv: spec.argv.clone(),
            env: env.entries,
            cwd: cwd.clone(),
            search: search.clone(),
        },
        dir: world.durable_dir().to_owned(),
        retain: keep.retain,
        timeout_ms: spec
            .timeout
            .map_or(0, |timeout| timeout.as_millis().max(1) as u64),
        drain_grace_ms: spec.drain_grace.as_millis() as u64,
        hold: holds([spec.stdout, spec.stderr]),
        merge_stderr: spec.stderr == OutputMode::IntoStdout,
    }
    .encode();
    if wire::base64_encode(&request).len() > wire::MAX_REQUEST_ENV {
        return Err(Error::invalid_input(format!(
            "{OP}: {}: argv and environment are too large to pass into the sandbox (at most {} bytes once encoded)",
            spec.argv[0],
            wire::MAX_REQUEST_ENV
        ))
        .with_subject(spec.argv[0].clone()));
    }
    // The follower starts beside the start (one round trip, not two),
    // waiting for the command whose id we chose.
    let modes = [spec.stdout, spec.stderr];
    let (answer, follower) = tokio::join!(
        durable.run_helper(OP, &["durable-start"], Some(&request), CONTROL_TIMEOUT),
        start_follower(durable, &id, [0, 0], modes, spec.spill, true),
    );
    let cx = StartContext {
        operation: OP,
        program: &spec.argv[0],
        cwd: &cwd,
        search: &search,
    };
    started(
        id,
        answer,
        follower,
        durable.clone(),
        |stage, errno, detail| errors::start_failure(cx, stage, errno, detail),
    )
    .await
}

/// `attach` in `durable`'s world.
pub async fn attach<T: EnvdTransport>(
    durable: &Arc<Durable<T>>,
    spec: AttachSpec,
) -> Result<Attached> {
    let id = spec.id.clone();
    dsh_supervisor_client::attach(durable.clone(), spec, |from, modes| {
        start_follower(durable, &id, from, modes, None, false)
    })
    .await
}

/// A follower (as root) of command `id` from `from` (see
/// [`follower_spec`]).
async fn start_follower<T: EnvdTransport>(
    durable: &Arc<Durable<T>>,
    id: &str,
    from: [u64; 2],
    modes: [OutputMode; 2],
    spill: Option<SpillSpec>,
    starting: bool,
) -> Result<Arc<dyn Process>> {
    let world = &durable.world;
    let ready = world.ready("attach").await?;
    let dir = world.durable_dir();
    let spec = follower_spec(&ready.setup.helper, dir, id, from, modes, spill, starting);
    spawn_as(world, spec, RunAs::Root).await
}
