//! The sandboxes this server holds and their lifecycle: create, connect/resume, pause, timeout,
//! expiry (kill or auto-pause), kill, and kill-all on shutdown.
//!
//! Each sandbox has a lifecycle task that sleeps until its `endAt` and re-arms whenever the
//! deadline changes; transitions of one sandbox are serialised by its operation lock, so a kill
//! racing an expiry or a pause racing a connect resolve in a definite order.

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, RwLock, Weak};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use http::StatusCode;
use tokio::sync::Notify;

use crate::api::error::ApiError;
use crate::fleet::Fleet;
use crate::front::upstream::Upstream;
use crate::host::HostFacts;
use crate::snapshots::{Snapshot, Snapshots};
use crate::templates::{Start, Templates};
use crate::volumes::{Lease, Volumes};
use crate::world::{World, WorldFactory, WorldSpec};

/// Where a sandbox is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// Processes run; the world ends (or auto-pauses) at the deadline.
    Running {
        deadline: Instant,
        end_at: SystemTime,
    },
    /// Paused; no deadline runs. `end_at` is the last deadline, for display. With `memory` the
    /// world is frozen and resumes where it was; without, only its files are kept (every process
    /// ended) and resuming reboots it.
    Paused { end_at: SystemTime, memory: bool },
    /// Killed or expired; the world is being or has been torn down.
    Dead,
}

/// What a create request asks for, validated.
#[derive(Debug, Clone)]
pub struct CreateSpec {
    pub template_id: String,
    pub timeout: Duration,
    pub metadata: BTreeMap<String, String>,
    pub env_vars: BTreeMap<String, String>,
    pub secure: bool,
    pub auto_pause: bool,
    /// Whether timeout expiry's pause keeps memory (`autoPauseMemory`, default true).
    pub auto_pause_memory: bool,
    pub auto_resume: bool,
    /// What the sandbox may reach beyond its own network.
    pub egress: crate::world::network::Egress,
    /// The `Host` requests to the sandbox's ports carry instead of the one they came with
    /// (`network.maskRequestHost`; `${PORT}` stands for the port).
    pub mask_request_host: Option<String>,
    /// `network.allowPublicTraffic: false`: requests to the sandbox's ports must carry its
    /// traffic access token (`e2b-traffic-access-token`).
    pub private_traffic: bool,
    /// A snapshot whose files the sandbox starts with.
    pub files_from: Option<PathBuf>,
    /// Volumes to mount, each at its absolute path inside (checked by the API).
    pub volume_mounts: Vec<VolumeMounted>,
    /// A template's: who envd acts as by default, where, and the command started (and waited
    /// ready) before the sandbox is handed out.
    pub start: Option<Start>,
}

/// A volume a sandbox mounts, and where; the lease keeps the volume from being destroyed while
/// the sandbox lives.
#[derive(Debug, Clone)]
pub struct VolumeMounted {
    pub lease: Lease,
    pub path: String,
}

/// One sandbox.
#[derive(Debug)]
pub struct Sandbox {
    pub id: String,
    pub template_id: String,
    pub metadata: BTreeMap<String, String>,
    pub access_token: Option<String>,
    /// Pause instead of kill when the timeout expires (`lifecycle.onTimeout: pause`).
    auto_pause: AtomicBool,
    /// Whether that pause keeps memory.
    pub auto_pause_memory: bool,
    pub auto_resume: bool,
    /// [`CreateSpec::mask_request_host`].
    pub mask_request_host: Option<String>,
    /// The token requests to its ports must carry ([`CreateSpec::private_traffic`]).
    pub traffic_access_token: Option<String>,
    /// The volumes it mounts.
    pub volume_mounts: Vec<VolumeMounted>,
    /// Its template's start ([`CreateSpec::start`]); forks start the same way.
    pub start: Option<Start>,
    /// The create-time lifetime, applied again when traffic auto-resumes the sandbox.
    pub timeout: Duration,
    pub started_at: SystemTime,
    pub world: World,
    pub upstream: Upstream,
    phase: Mutex<Phase>,
    /// Serialises lifecycle transitions (pause, resume, expiry, kill).
    op: tokio::sync::Mutex<()>,
    /// Wakes the lifecycle task when the phase or deadline changed.
    changed: Notify,
    /// The server's history, told when this sandbox starts or stops running.
    fleet: Arc<Fleet>,
}

impl Sandbox {
    pub fn phase(&self) -> Phase {
        *self.phase.lock().expect("phase lock")
    }

    fn set_phase(&self, phase: Phase) {
        *self.phase.lock().expect("phase lock") = phase;
        self.changed.notify_one();
    }

    /// Whether timeout expiry pauses (true) or kills (false) this sandbox.
    pub fn auto_pause(&self) -> bool {
        self.auto_pause.load(Ordering::SeqCst)
    }

    /// Changes what timeout expiry does (the deprecated resume endpoint's `autoPause`).
    pub fn set_auto_pause(&self, auto_pause: bool) {
        self.auto_pause.store(auto_pause, Ordering::SeqCst);
    }

    /// Nanoseconds since the epoch at start: the list order key.
    pub fn started_unix_nanos(&self) -> u128 {
        self.started_at
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos())
    }

    /// The `endAt` to report.
    pub fn end_at(&self) -> SystemTime {
        match self.phase() {
            Phase::Running { end_at, .. } | Phase::Paused { end_at, .. } => end_at,
            Phase::Dead => SystemTime::now(),
        }
    }
}

/// Whether connect found the sandbox running or had to resume it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Connected {
    WasRunning,
    Resumed,
}

/// All sandboxes of one server.
#[derive(Debug)]
pub struct Registry {
    factory: WorldFactory,
    pub host: HostFacts,
    sandboxes: RwLock<HashMap<String, Arc<Sandbox>>>,
    shutting_down: AtomicBool,
    /// When sandboxes started and stopped running (the team metrics).
    pub fleet: Arc<Fleet>,
    pub snapshots: Snapshots,
    pub volumes: Arc<Volumes>,
    pub templates: Templates,
}

fn deadline_after(timeout: Duration) -> Phase {
    Phase::Running {
        deadline: Instant::now() + timeout,
        end_at: SystemTime::now() + timeout,
    }
}

impl Registry {
    pub fn new(
        factory: WorldFactory,
        host: HostFacts,
        snapshots: Snapshots,
        volumes: Arc<Volumes>,
        templates: Templates,
    ) -> Arc<Self> {
        Arc::new(Self {
            factory,
            host,
            sandboxes: RwLock::new(HashMap::new()),
            shutting_down: AtomicBool::new(false),
            fleet: Arc::default(),
            snapshots,
            volumes,
            templates,
        })
    }

    pub fn factory(&self) -> &WorldFactory {
        &self.factory
    }

    /// The sandbox with this id, in any phase but dead.
    pub fn get(&self, id: &str) -> Option<Arc<Sandbox>> {
        self.sandboxes
            .read()
            .expect("registry lock")
            .get(id)
            .cloned()
    }

    /// Every live sandbox (running or paused).
    pub fn all(&self) -> Vec<Arc<Sandbox>> {
        self.sandboxes
            .read()
            .expect("registry lock")
            .values()
            .cloned()
            .collect()
    }

    fn lookup(&self, op: &str, id: &str) -> Result<Arc<Sandbox>, ApiError> {
        self.get(id)
            .ok_or_else(|| ApiError::sandbox_not_found(op, id))
    }

    /// Builds a world and registers a running sandbox. Resolves once envd accepts connections.
    /// The work runs in its own task: dropping this future (a client that gave up) does not
    /// abandon a half-built world — the sandbox is still created, and expires on its timeout.
    pub async fn create(self: &Arc<Self>, spec: CreateSpec) -> Result<Arc<Sandbox>, ApiError> {
        let this = self.clone();
        tokio::spawn(async move { this.build(spec).await })
            .await
            .map_err(|e| ApiError::internal(format!("create sandbox: task failed: {e}")))?
    }

    async fn build(self: Arc<Self>, spec: CreateSpec) -> Result<Arc<Sandbox>, ApiError> {
        if self.shutting_down.load(Ordering::SeqCst) {
            return Err(ApiError::new(
                StatusCode::SERVICE_UNAVAILABLE,
                "create sandbox: server is shutting down",
            ));
        }
        let id = crate::ids::sandbox_id();
        let access_token = spec.secure.then(crate::ids::access_token);
        let world = self
            .factory
            .start(WorldSpec {
                sandbox_id: id.clone(),
                template_id: spec.template_id.clone(),
                env_vars: spec.env_vars,
                access_token: access_token.clone(),
                files_from: spec.files_from,
                egress: spec.egress,
                volumes: spec
                    .volume_mounts
                    .iter()
                    .map(|m| crate::world::VolumeBind {
                        source: m.lease.volume().data(),
                        target: PathBuf::from(&m.path),
                    })
                    .collect(),
                default_user: spec
                    .start
                    .as_ref()
                    .map_or_else(|| crate::world::users::USER.to_owned(), |s| s.user.clone()),
                default_workdir: spec
                    .start
                    .as_ref()
                    .and_then(|s| s.workdir.clone().map(PathBuf::from)),
            })
            .await
            .map_err(|e| {
                if e.exhausted {
                    ApiError::new(StatusCode::SERVICE_UNAVAILABLE, e.message)
                } else {
                    ApiError::internal(e.message)
                }
            })?;
        if let Some(start) = &spec.start {
            let envd =
                crate::world::envd_link::EnvdLink::new(world.socket(), access_token.as_deref())
                    .envd(&id);
            if let Err(err) = crate::template_build::start_template(&envd, start).await {
                if let Err(e) = world.destroy().await {
                    tracing::warn!("{e}");
                }
                return Err(ApiError::internal(format!(
                    "create sandbox from template {}: {err}",
                    spec.template_id
                )));
            }
        }
        let upstream = Upstream::new(world.socket());
        let sandbox = Arc::new(Sandbox {
            fleet: self.fleet.clone(),
            id: id.clone(),
            template_id: spec.template_id,
            metadata: spec.metadata,
            access_token,
            auto_pause: AtomicBool::new(spec.auto_pause),
            auto_pause_memory: spec.auto_pause_memory,
            auto_resume: spec.auto_resume,
            mask_request_host: spec.mask_request_host,
            traffic_access_token: spec.private_traffic.then(crate::ids::access_token),
            volume_mounts: spec.volume_mounts,
            start: spec.start,
            timeout: spec.timeout,
            started_at: SystemTime::now(),
            world,
            upstream,
            phase: Mutex::new(deadline_after(spec.timeout)),
            op: tokio::sync::Mutex::new(()),
            changed: Notify::new(),
        });
        self.sandboxes
            .write()
            .expect("registry lock")
            .insert(id.clone(), sandbox.clone());
        if self.shutting_down.load(Ordering::SeqCst) {
            // Shutdown started while the world was being built: do not leak it.
            self.kill(&id).await.ok();
            return Err(ApiError::new(
                StatusCode::SERVICE_UNAVAILABLE,
                "create sandbox: server is shutting down",
            ));
        }
        self.fleet.created();
        tokio::spawn(lifecycle(Arc::downgrade(&self), sandbox.clone()));
        tracing::info!(sandbox = %id, "sandbox created");
        Ok(sandbox)
    }

    /// Connect/resume: a running sandbox's deadline is only ever extended to `now + timeout`;
    /// a paused one resumes and runs for `timeout` — thawed where it was if its memory was kept
    /// and `memory` asks for it, else rebooted over its files. Runs to the end even when the
    /// caller leaves (see `to_the_end`).
    pub async fn connect(
        &self,
        id: &str,
        timeout: Duration,
        memory: bool,
    ) -> Result<(Arc<Sandbox>, Connected), ApiError> {
        let op = "connect sandbox";
        let sandbox = self.lookup(op, id)?;
        to_the_end(op, id, connect_now(sandbox, timeout, memory)).await
    }

    /// Replaces sandbox `id`'s egress rules, under its operation lock (a pause or resume does not
    /// race it). Runs to the end even when the caller leaves (see `to_the_end`).
    pub async fn update_network(
        &self,
        id: &str,
        egress: crate::world::network::Egress,
    ) -> Result<(), ApiError> {
        let op = "update sandbox network";
        let sandbox = self.lookup(op, id)?;
        let update = async move {
            let _guard = sandbox.op.lock().await;
            if sandbox.phase() == Phase::Dead {
                return Err(ApiError::sandbox_not_found(op, &sandbox.id));
            }
            sandbox
                .world
                .set_egress(egress)
                .await
                .map_err(|e| ApiError::internal(e.to_string()))
        };
        to_the_end(op, id, update).await
    }

    /// Sets the deadline to `now + timeout` (may shorten it). On a paused sandbox it only
    /// records the value shown as `endAt`; the deadline starts when connect resumes it.
    pub async fn set_timeout(&self, id: &str, timeout: Duration) -> Result<(), ApiError> {
        let op = "set sandbox timeout";
        let sandbox = self.lookup(op, id)?;
        let _guard = sandbox.op.lock().await;
        match sandbox.phase() {
            Phase::Running { .. } => sandbox.set_phase(deadline_after(timeout)),
            Phase::Paused { memory, .. } => sandbox.set_phase(Phase::Paused {
                end_at: SystemTime::now() + timeout,
                memory,
            }),
            Phase::Dead => return Err(ApiError::sandbox_not_found(op, id)),
        }
        Ok(())
    }

    /// Pauses a running sandbox — frozen with `memory`, else every process ended and only its
    /// files kept —; 409 if it is already paused. Runs to the end even when the caller leaves
    /// (see `to_the_end`).
    pub async fn pause(&self, id: &str, memory: bool) -> Result<(), ApiError> {
        let op = "pause sandbox";
        let sandbox = self.lookup(op, id)?;
        let pause = async move {
            let _guard = sandbox.op.lock().await;
            pause_locked(&sandbox, memory).await
        };
        to_the_end(op, id, pause).await
    }

    /// Takes a snapshot of sandbox `id`'s files (frozen meanwhile if it runs), listed under
    /// `name` if given. Runs to the end even when the caller leaves (see `to_the_end`).
    pub async fn snapshot(
        self: &Arc<Self>,
        id: &str,
        name: Option<String>,
    ) -> Result<Arc<Snapshot>, ApiError> {
        let op = "snapshot sandbox";
        let sandbox = self.lookup(op, id)?;
        let this = self.clone();
        to_the_end(op, id, async move {
            let dir = this.snapshots.new_dir();
            copy_still(&sandbox, dir.clone()).await?;
            Ok(this.snapshots.add(&sandbox.id, name.as_deref(), dir))
        })
        .await
    }

    /// Forks sandbox `id` `count` times: a snapshot of its files (not listed), then that many
    /// new sandboxes from it, each living `timeout`, with the source's template, metadata,
    /// environment, security, lifecycle, egress rules and volumes. One outcome per fork; a
    /// source that cannot be copied fails the whole fork.
    pub async fn fork(
        self: &Arc<Self>,
        id: &str,
        count: usize,
        timeout: Duration,
    ) -> Result<Vec<Result<Arc<Sandbox>, ApiError>>, ApiError> {
        let op = "fork sandbox";
        let sandbox = self.lookup(op, id)?;
        let dir = self.snapshots.new_dir();
        let spec = CreateSpec {
            template_id: sandbox.template_id.clone(),
            timeout,
            metadata: sandbox.metadata.clone(),
            env_vars: sandbox.world.env_vars().clone(),
            secure: sandbox.access_token.is_some(),
            auto_pause: sandbox.auto_pause(),
            auto_pause_memory: sandbox.auto_pause_memory,
            auto_resume: sandbox.auto_resume,
            egress: sandbox.world.egress(),
            mask_request_host: sandbox.mask_request_host.clone(),
            private_traffic: sandbox.traffic_access_token.is_some(),
            files_from: Some(dir.clone()),
            volume_mounts: sandbox.volume_mounts.clone(),
            start: sandbox.start.clone(),
        };
        {
            let dir = dir.clone();
            to_the_end(op, id, async move { copy_still(&sandbox, dir).await }).await?;
        }
        let forks = futures::future::join_all((0..count).map(|_| self.create(spec.clone()))).await;
        let _ = tokio::task::spawn_blocking(move || crate::world::remove_tree(&dir)).await;
        Ok(forks)
    }

    /// Kills a sandbox (running or paused): every process dies, its files are deleted, and it is
    /// forgotten. Resolves after teardown. Once the sandbox is taken out of the registry the
    /// teardown runs to the end even when the caller leaves (see `to_the_end`) and logs its
    /// outcome.
    pub async fn kill(&self, id: &str) -> Result<(), ApiError> {
        let op = "kill sandbox";
        let sandbox = self.sandboxes.write().expect("registry lock").remove(id);
        let sandbox = sandbox.ok_or_else(|| ApiError::sandbox_not_found(op, id))?;
        let teardown = async move {
            terminate(&sandbox)
                .await
                .map_err(|e| ApiError::internal(e.to_string()))
        };
        to_the_end(op, id, teardown).await
    }

    /// Refuses new sandboxes and kills every existing one, concurrently. Returns the errors of
    /// teardowns that failed.
    pub async fn shutdown(&self) -> Vec<String> {
        self.shutting_down.store(true, Ordering::SeqCst);
        // Builds remove their own worlds once cancelled.
        self.templates.cancel_all();
        self.templates.tasks.close();
        self.templates.tasks.wait().await;
        let all: Vec<_> = self
            .sandboxes
            .write()
            .expect("registry lock")
            .drain()
            .map(|(_, s)| s)
            .collect();
        let results = futures::future::join_all(all.iter().map(|s| terminate(s))).await;
        results
            .into_iter()
            .filter_map(|r| r.err().map(|e| e.to_string()))
            .collect()
    }
}

/// [`Registry::connect`]'s work, under the sandbox's operation lock.
async fn connect_now(
    sandbox: Arc<Sandbox>,
    timeout: Duration,
    memory: bool,
) -> Result<(Arc<Sandbox>, Connected), ApiError> {
    let failed = |e: crate::world::WorldError| ApiError::internal(e.to_string());
    let _guard = sandbox.op.lock().await;
    match sandbox.phase() {
        Phase::Running { deadline, .. } => {
            if Instant::now() + timeout > deadline {
                sandbox.set_phase(deadline_after(timeout));
            }
            Ok((sandbox.clone(), Connected::WasRunning))
        }
        Phase::Paused {
            memory: kept,
            end_at,
        } => {
            if kept && memory {
                sandbox.world.thaw().await.map_err(failed)?;
            } else {
                if kept {
                    // A reboot asked of a frozen world: its memory goes.
                    sandbox.set_phase(Phase::Paused {
                        end_at,
                        memory: false,
                    });
                    sandbox.world.stop().await.map_err(failed)?;
                }
                sandbox.world.reboot().await.map_err(failed)?;
            }
            sandbox.set_phase(deadline_after(timeout));
            sandbox.fleet.resumed();
            tracing::info!(sandbox = %sandbox.id, rebooted = !(kept && memory), "sandbox resumed");
            Ok((sandbox.clone(), Connected::Resumed))
        }
        Phase::Dead => Err(ApiError::sandbox_not_found("connect sandbox", &sandbox.id)),
    }
}

async fn pause_locked(sandbox: &Sandbox, memory: bool) -> Result<(), ApiError> {
    match sandbox.phase() {
        Phase::Running { end_at, .. } if memory => {
            sandbox
                .world
                .freeze()
                .await
                .map_err(|e| ApiError::internal(e.to_string()))?;
            sandbox.set_phase(Phase::Paused { end_at, memory });
            // After the phase: the front, having taken a request's signal, checks the phase
            // again, so no request routed before this pause is left waiting on the frozen world.
            sandbox.upstream.cut();
            sandbox.fleet.stopped();
            tracing::info!(sandbox = %sandbox.id, "sandbox paused");
            Ok(())
        }
        Phase::Running { end_at, .. } => {
            // Paused before the processes end, so that the lifecycle task takes their end for
            // the pause, not for a world that died.
            sandbox.set_phase(Phase::Paused { end_at, memory });
            sandbox.fleet.stopped();
            if let Err(err) = sandbox.world.stop().await {
                return Err(ApiError::internal(err.to_string()));
            }
            tracing::info!(sandbox = %sandbox.id, "sandbox paused, files only");
            Ok(())
        }
        Phase::Paused { .. } => Err(ApiError::new(
            StatusCode::CONFLICT,
            format!("pause sandbox {}: sandbox is already paused", sandbox.id),
        )),
        Phase::Dead => Err(ApiError::sandbox_not_found("pause sandbox", &sandbox.id)),
    }
}

/// Copies `sandbox`'s files into `dir` under its operation lock, a running one frozen meanwhile
/// (a paused one is still already).
async fn copy_still(sandbox: &Sandbox, dir: PathBuf) -> Result<(), ApiError> {
    let _guard = sandbox.op.lock().await;
    let failed = |e: crate::world::WorldError| ApiError::internal(e.to_string());
    match sandbox.phase() {
        Phase::Running { .. } => {
            sandbox.world.freeze().await.map_err(failed)?;
            let copied = sandbox.world.copy_files(dir).await;
            let thawed = sandbox.world.thaw().await;
            copied.and(thawed).map_err(failed)
        }
        Phase::Paused { .. } => sandbox.world.copy_files(dir).await.map_err(failed),
        Phase::Dead => Err(ApiError::sandbox_not_found("snapshot sandbox", &sandbox.id)),
    }
}

/// Runs `change` — a state change of sandbox `id` — on a task of its own and waits for it.
///
/// Dropping the returned future (axum drops a handler's future when its client disconnects)
/// does not stop the change halfway — a world frozen but still marked running, thawed but still
/// marked paused, half torn down —: it runs to its end, and the client's leaving is logged; only
/// the answer is lost.
async fn to_the_end<T: Send + 'static>(
    op: &'static str,
    id: &str,
    change: impl Future<Output = Result<T, ApiError>> + Send + 'static,
) -> Result<T, ApiError> {
    let mut waiter = Waiter {
        op,
        id: id.to_owned(),
        done: false,
    };
    let result = tokio::spawn(change)
        .await
        .map_err(|e| ApiError::internal(format!("{op} {id}: task failed: {e}")))?;
    waiter.done = true;
    result
}

/// Logs a state change whose caller stopped waiting before it ended.
struct Waiter {
    op: &'static str,
    id: String,
    done: bool,
}

impl Drop for Waiter {
    fn drop(&mut self) {
        if !self.done {
            tracing::info!(sandbox = %self.id, "{}: the client left before it ended; it continues", self.op);
        }
    }
}

async fn terminate(sandbox: &Sandbox) -> Result<(), crate::world::WorldError> {
    let _guard = sandbox.op.lock().await;
    if matches!(sandbox.phase(), Phase::Running { .. }) {
        sandbox.fleet.stopped();
    }
    sandbox.set_phase(Phase::Dead);
    let result = sandbox.world.destroy().await;
    match &result {
        Ok(()) => tracing::info!(sandbox = %sandbox.id, "sandbox killed"),
        Err(err) => tracing::error!(sandbox = %sandbox.id, "{err}"),
    }
    result
}

/// Sleeps until the deadline (re-arming when it changes), then kills or auto-pauses. Also
/// notices a world that died on its own and forgets it.
async fn lifecycle(registry: Weak<Registry>, sandbox: Arc<Sandbox>) {
    loop {
        let phase = sandbox.phase();
        let deadline = match phase {
            Phase::Running { deadline, .. } => Some(deadline),
            Phase::Paused { .. } => None,
            Phase::Dead => return,
        };
        // A world paused without its memory has no processes to end.
        let live = !matches!(phase, Phase::Paused { memory: false, .. });
        let ended = async {
            if live {
                sandbox.world.exited().await
            } else {
                std::future::pending().await
            }
        };
        let expired = async {
            match deadline {
                Some(deadline) => tokio::time::sleep_until(deadline.into()).await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            () = sandbox.changed.notified() => continue,
            code = ended => {
                let phase = sandbox.phase();
                if matches!(phase, Phase::Paused { memory: false, .. }) {
                    // Its processes were ended by a pause.
                    continue;
                }
                if phase != Phase::Dead {
                    tracing::warn!(sandbox = %sandbox.id, ?code, "sandbox world exited on its own");
                    if let Some(registry) = registry.upgrade() {
                        registry.kill(&sandbox.id).await.ok();
                    }
                }
                return;
            }
            () = expired => {}
        }
        let guard = sandbox.op.lock().await;
        match sandbox.phase() {
            Phase::Running { deadline, .. } if deadline <= Instant::now() => {}
            _ => continue,
        }
        if sandbox.auto_pause() {
            match pause_locked(&sandbox, sandbox.auto_pause_memory).await {
                Ok(()) => continue,
                Err(err) => {
                    tracing::warn!(sandbox = %sandbox.id, "auto-pause on timeout failed, killing instead: {}", err.message)
                }
            }
        }
        drop(guard);
        tracing::info!(sandbox = %sandbox.id, "sandbox timeout expired");
        if let Some(registry) = registry.upgrade() {
            registry.kill(&sandbox.id).await.ok();
        }
        return;
    }
}
