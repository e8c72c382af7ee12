//! Sandbox worlds: isolated Linux environments (mount, PID, network, UTS and IPC namespaces over a
//! copy-on-write overlay of the host root, the kernel's settings read-only, a seccomp filter, a
//! reduced capability bounding set, every e2b-local state dir hidden), each running its own envd,
//! held in a freezer cgroup (docs/design.md §7).
//!
//! [`WorldFactory::start`] builds one and returns once its envd accepts connections on
//! [`World::socket`]; [`World::destroy`] kills every process and deletes every file it had.

pub mod boot_id;
pub mod cgroup;
pub mod confine;
pub mod envd_link;
pub mod host_name;
pub mod init;
pub mod instances;
pub mod layout;
pub mod metrics;
pub mod mounts;
pub mod network;
pub mod seccomp;
pub mod users;

use std::collections::BTreeMap;
use std::io;
use std::os::unix::fs::{PermissionsExt, chown};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::sync::watch;

use cgroup::{Cgroup, FreezerRoot};
pub use layout::VolumeBind;
use layout::{InitConfig, SandboxDirs};

/// The namespaces each world's keeper is started in: mount, PID, network, and its own host name
/// (UTS) and System V IPC, so nothing of the host's is shared but the kernel and what the overlay
/// shows.
pub const NAMESPACES: libc::c_int = libc::CLONE_NEWNS
    | libc::CLONE_NEWPID
    | libc::CLONE_NEWNET
    | libc::CLONE_NEWUTS
    | libc::CLONE_NEWIPC;
/// Hidden CLI subcommand that runs [`init::run`].
pub const INIT_SUBCOMMAND: &str = "__sandbox-init";
/// PATH of envd and, through it, of every sandbox process.
pub const SANDBOX_PATH: &str = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";
/// How long a world may take to come up before creation fails.
const START_TIMEOUT: Duration = Duration::from_secs(30);
/// How long processes may resist SIGKILL before teardown reports failure.
const KILL_DEADLINE: Duration = Duration::from_secs(10);
/// Bytes of the init's stderr kept to explain a failed start.
const STDERR_TAIL: usize = 4096;

/// Failure to build, freeze, thaw or tear down a world; the message names the sandbox.
#[derive(Debug, thiserror::Error)]
#[error("{message}")]
pub struct WorldError {
    pub message: String,
    /// The server has no room for another world (its address pool is used up): a capacity
    /// limit, not a fault.
    pub exhausted: bool,
}

impl WorldError {
    fn new(message: String) -> WorldError {
        WorldError {
            message,
            exhausted: false,
        }
    }
}

/// What a world is built from.
#[derive(Debug, Clone)]
pub struct WorldSpec {
    pub sandbox_id: String,
    pub template_id: String,
    pub env_vars: BTreeMap<String, String>,
    pub access_token: Option<String>,
    /// A snapshot's dir ([`World::copy_files`]): the world starts with its files.
    pub files_from: Option<PathBuf>,
    /// Host dirs (volumes) bound into the world.
    pub volumes: Vec<VolumeBind>,
    /// What the world may reach beyond its own network.
    pub egress: network::Egress,
    /// Who envd acts as when a request names no user (a template's last `USER`; else `user`).
    pub default_user: String,
    /// Where envd starts processes when a request names no directory (a template's last
    /// `WORKDIR`; `None`: the user's home).
    pub default_workdir: Option<PathBuf>,
}

/// Builds worlds under one state dir, with one freezer parent cgroup per server instance.
#[derive(Debug)]
pub struct WorldFactory {
    exe: PathBuf,
    state_dir: PathBuf,
    sandboxes_dir: PathBuf,
    freezer: FreezerRoot,
    /// Whose permissions each world's envd performs file operations with.
    envd_file_access: e2b_local_envd::FileAccess,
    /// Every world's network; `None`: worlds have only loopback (`serve --sandbox-network none`).
    network: Option<Arc<network::Network>>,
    /// This instance's state dir, listed for every instance's worlds to hide.
    _listed: instances::Registration,
}

impl WorldFactory {
    /// `exe` is the e2b-local binary (it re-executes itself as [`INIT_SUBCOMMAND`]);
    /// `state_dir` must exist, be locked by this server, and not be on overlayfs.
    /// `freezer` forces a cgroup freezer version (`None`: v1 if present, else v2);
    /// `envd_file_access` is handed to every world's envd; `network` gives each world a veth pair
    /// with addresses of its pool (`None`: loopback only).
    pub fn new(
        exe: PathBuf,
        state_dir: PathBuf,
        instance: &str,
        freezer: Option<cgroup::FreezerKind>,
        envd_file_access: e2b_local_envd::FileAccess,
        network: Option<network::Network>,
    ) -> io::Result<Self> {
        let sandboxes_dir = state_dir.join("sandboxes");
        std::fs::create_dir_all(&sandboxes_dir).map_err(|e| {
            io::Error::new(e.kind(), format!("create {}: {e}", sandboxes_dir.display()))
        })?;
        std::fs::set_permissions(&sandboxes_dir, std::fs::Permissions::from_mode(0o700))?;
        let freezer = FreezerRoot::create(instance, freezer)?;
        let listed = instances::Registration::register(instance, &state_dir)?;
        for failure in instances::hide_from_running_worlds(&state_dir) {
            tracing::warn!("{failure}");
        }
        Ok(Self {
            exe,
            state_dir,
            sandboxes_dir,
            freezer,
            envd_file_access,
            network: network.map(Arc::new),
            _listed: listed,
        })
    }

    pub fn freezer(&self) -> &FreezerRoot {
        &self.freezer
    }

    /// Removes sandbox dirs left by a server that died without tearing down (their processes
    /// died with it: every level of a world has PDEATHSIG).
    pub fn sweep_stale(&self) -> io::Result<usize> {
        let mut removed = 0;
        for entry in std::fs::read_dir(&self.sandboxes_dir)? {
            let path = entry?.path();
            remove_tree(&path)?;
            removed += 1;
        }
        Ok(removed)
    }

    /// Builds a world and waits until its envd listens. On failure nothing is left behind.
    /// Do not drop the future midway (the registry runs it in a task of its own): a world
    /// abandoned after its init started keeps running until the server exits (every level has
    /// PDEATHSIG), and its dir is left for the next start's [`Self::sweep_stale`].
    pub async fn start(&self, spec: WorldSpec) -> Result<World, WorldError> {
        let id = spec.sandbox_id.clone();
        let fail = |what: &str, e: &dyn std::fmt::Display| {
            WorldError::new(format!("start sandbox {id}: {what}: {e}"))
        };
        let network = match &self.network {
            None => None,
            Some(network) => Some((
                network.clone(),
                network.pool.allocate().map_err(|e| WorldError {
                    exhausted: e.kind() == io::ErrorKind::AddrNotAvailable,
                    ..fail("network", &e)
                })?,
            )),
        };
        let started = self.start_with(spec, network.clone()).await;
        if started.is_err()
            && let Some((network, block)) = network
        {
            network.pool.release(block);
        }
        started
    }

    async fn start_with(
        &self,
        spec: WorldSpec,
        network: Option<(Arc<network::Network>, network::Block)>,
    ) -> Result<World, WorldError> {
        let id = spec.sandbox_id.clone();
        let fail = |what: &str, e: &dyn std::fmt::Display| {
            WorldError::new(format!("start sandbox {id}: {what}: {e}"))
        };
        let dirs = SandboxDirs::new(self.sandboxes_dir.join(&id));
        prepare_dirs(&dirs).map_err(|e| fail("prepare dirs", &e))?;
        if let Some(from) = spec.files_from.clone() {
            let into = dirs.dir.clone();
            if let Err(e) = blocking(move || copy_files(&from, &into, true)).await {
                let _ = remove_tree(&dirs.dir);
                return Err(fail("copy the snapshot's files", &e));
            }
        }
        let cgroup = match self.freezer.sandbox(&id) {
            Ok(cgroup) => cgroup,
            Err(e) => {
                let _ = remove_tree(&dirs.dir);
                return Err(fail("cgroup", &e));
            }
        };
        let config = InitConfig {
            sandbox_id: id.clone(),
            template_id: spec.template_id,
            env_vars: spec.env_vars,
            access_token: spec.access_token,
            dir: dirs.dir.clone(),
            hide: self.hidden_dirs(),
            envd_file_access: self.envd_file_access,
            volumes: spec.volumes,
            default_user: spec.default_user,
            default_workdir: spec.default_workdir,
        };

        let world = World {
            id: id.clone(),
            dirs,
            cgroup,
            exe: self.exe.clone(),
            config,
            exited: Mutex::new(None),
            keeper: Mutex::new(None),
            stderr_tail: Arc::new(Mutex::new(String::new())),
            cpu: Mutex::new(None),
            network: Mutex::new(network),
            egress: Mutex::new(spec.egress),
        };
        match world.launch().await {
            Ok(()) => Ok(world),
            Err(err) => {
                let err = world.explained(err);
                let _ = world.destroy().await;
                Err(WorldError::new(format!("start sandbox {id}: {err}")))
            }
        }
    }
}

impl WorldFactory {
    /// Host dirs a new world must not see: this instance's state dir, every other running
    /// instance's, the default state dir and the list of instances itself.
    fn hidden_dirs(&self) -> Vec<PathBuf> {
        let mut hide = vec![self.state_dir.clone()];
        for dir in instances::state_dirs()
            .into_iter()
            .chain([instances::DEFAULT_STATE_DIR, instances::RUN_DIR].map(PathBuf::from))
        {
            if !hide.contains(&dir) {
                hide.push(dir);
            }
        }
        hide
    }
}

fn prepare_dirs(dirs: &SandboxDirs) -> io::Result<()> {
    let ctx = |p: &Path| {
        let p = p.to_path_buf();
        move |e: io::Error| io::Error::new(e.kind(), format!("{}: {e}", p.display()))
    };
    std::fs::create_dir(&dirs.dir).map_err(ctx(&dirs.dir))?;
    std::fs::set_permissions(&dirs.dir, std::fs::Permissions::from_mode(0o700))
        .map_err(ctx(&dirs.dir))?;
    for dir in [
        dirs.upper(),
        dirs.work(),
        dirs.root(),
        dirs.tmp(),
        dirs.homes(),
        dirs.home(),
        dirs.root_home(),
    ] {
        std::fs::create_dir(&dir).map_err(ctx(&dir))?;
    }
    std::fs::set_permissions(dirs.tmp(), std::fs::Permissions::from_mode(0o1777))
        .map_err(ctx(&dirs.tmp()))?;
    std::fs::set_permissions(dirs.homes(), std::fs::Permissions::from_mode(0o755))
        .map_err(ctx(&dirs.homes()))?;
    let root_home = dirs.root_home();
    copy_skeleton(Path::new("/etc/skel"), &root_home, 0).map_err(ctx(&root_home))?;
    std::fs::set_permissions(&root_home, std::fs::Permissions::from_mode(0o700))
        .map_err(ctx(&root_home))?;
    let home = dirs.home();
    copy_skeleton(Path::new("/etc/skel"), &home, users::UID).map_err(ctx(&home))?;
    chown(&home, Some(users::UID), Some(users::GID)).map_err(ctx(&home))?;
    std::fs::set_permissions(&home, std::fs::Permissions::from_mode(0o755)).map_err(ctx(&home))
}

/// Copies the regular files of `/etc/skel` (`.bashrc`, `.profile`, …) into a fresh home, owned by
/// `uid` (and the group of the same number), as `useradd -m` would.
fn copy_skeleton(skel: &Path, home: &Path, uid: u32) -> io::Result<()> {
    let Ok(entries) = std::fs::read_dir(skel) else {
        return Ok(());
    };
    for entry in entries.flatten() {
        if entry.file_type().is_ok_and(|t| t.is_file()) {
            let target = home.join(entry.file_name());
            std::fs::copy(entry.path(), &target)?;
            chown(&target, Some(uid), Some(uid))?;
        }
    }
    Ok(())
}

/// Copies the [`layout::FILES`] dirs of `from` into `into` with `cp -a` (which keeps owners,
/// modes, times, xattrs — the overlay's opaque marks — and device nodes — its whiteouts);
/// `replace`: `into`'s fresh dirs of those names go first.
fn copy_files(from: &Path, into: &Path, replace: bool) -> io::Result<()> {
    if replace {
        for name in layout::FILES {
            remove_tree(&into.join(name))?;
        }
    } else {
        std::fs::create_dir(into)?;
        std::fs::set_permissions(into, std::fs::Permissions::from_mode(0o700))?;
    }
    // One `cp` for them all, each copied to `into/<name>`: every process
    // this server starts costs a fork of a large multi-threaded process,
    // and a sandbox made from a template or snapshot waits for these.
    let sources: Vec<PathBuf> = layout::FILES.iter().map(|name| from.join(name)).collect();
    let output = std::process::Command::new("cp")
        .arg("-a")
        .args(&sources)
        .arg(into)
        .stdin(Stdio::null())
        .output()?;
    if !output.status.success() {
        return Err(io::Error::other(format!(
            "cp -a {}/{{{}}} {}: {}",
            from.display(),
            layout::FILES.join(","),
            into.display(),
            String::from_utf8_lossy(&output.stderr).trim()
        )));
    }
    Ok(())
}

/// Removes `path` and everything in it; already gone is done. The error names the path.
pub(crate) fn remove_tree(path: &Path) -> io::Result<()> {
    match std::fs::remove_dir_all(path) {
        Err(e) if e.kind() != io::ErrorKind::NotFound => Err(io::Error::new(
            e.kind(),
            format!("remove {}: {e}", path.display()),
        )),
        _ => Ok(()),
    }
}

/// One running (or frozen) sandbox world.
#[derive(Debug)]
pub struct World {
    id: String,
    dirs: SandboxDirs,
    cgroup: Cgroup,
    /// The e2b-local binary and what its init was given: what [`World::reboot`] launches again.
    exe: PathBuf,
    config: InitConfig,
    /// Receives the init's exit code once it has exited.
    exited: Mutex<Option<watch::Receiver<Option<i32>>>>,
    /// Host pid of the keeper process, once launched.
    keeper: Mutex<Option<i32>>,
    stderr_tail: Arc<Mutex<String>>,
    cpu: Mutex<Option<metrics::CpuSample>>,
    /// The server's networks and the world's block of its pool, until destroyed.
    network: Mutex<Option<(Arc<network::Network>, network::Block)>>,
    /// Its egress rules as last set.
    egress: Mutex<network::Egress>,
}

impl World {
    pub fn id(&self) -> &str {
        &self.id
    }

    /// The Unix socket envd serves on.
    pub fn socket(&self) -> PathBuf {
        self.dirs.socket()
    }

    /// A TCP connection to `127.0.0.1:port` inside the world's network namespace (what a
    /// server listening in the sandbox accepts). Made on a thread of its own that enters the
    /// namespace and ends: no thread of the server's pools ever changes namespace.
    pub async fn connect_port(&self, port: u16) -> io::Result<tokio::net::TcpStream> {
        let keeper = (*self.keeper.lock().expect("keeper lock")).ok_or_else(|| {
            io::Error::new(io::ErrorKind::NotConnected, "the world is not running")
        })?;
        let stream = in_netns(keeper, move || {
            std::net::TcpStream::connect((std::net::Ipv4Addr::LOCALHOST, port))
        })
        .await?;
        stream.set_nonblocking(true)?;
        tokio::net::TcpStream::from_std(stream)
    }

    /// The create-time `envVars` the world was given (a fork's worlds get them too).
    pub fn env_vars(&self) -> &BTreeMap<String, String> {
        &self.config.env_vars
    }

    /// The sandbox log ([`SandboxDirs::log`]).
    pub fn log(&self) -> PathBuf {
        self.dirs.log()
    }

    pub fn cgroup(&self) -> &Cgroup {
        &self.cgroup
    }

    /// Resolves when the world's init has exited (killed, or envd died), with its exit code.
    /// Resolves at once if the world was never launched.
    pub async fn exited(&self) -> Option<i32> {
        let receiver = self.exited.lock().expect("exited lock").clone();
        let mut receiver = receiver?;
        match receiver.wait_for(Option::is_some).await {
            Ok(code) => *code,
            Err(_) => None,
        }
    }

    async fn launch(&self) -> Result<(), String> {
        let (exe, config) = (&self.exe, &self.config);
        self.stderr_tail.lock().expect("stderr tail lock").clear();
        let mut command = tokio::process::Command::new(exe);
        command
            .arg(INIT_SUBCOMMAND)
            .env_clear()
            .env("PATH", SANDBOX_PATH)
            .env("HOME", "/root")
            .env("LANG", "C.UTF-8")
            .current_dir("/")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        // SAFETY: the closure runs between fork and exec and only makes async-signal-safe
        // syscalls (unshare, prctl), touching no memory of the parent.
        unsafe {
            command.pre_exec(|| {
                // Namespaces of its own (docs/design.md §7); the keeper holds the network one,
                // so the server can later add interfaces to it through /proc/<keeper>/ns/net.
                if libc::unshare(NAMESPACES) != 0 {
                    return Err(io::Error::last_os_error());
                }
                if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL as libc::c_ulong) != 0 {
                    return Err(io::Error::last_os_error());
                }
                Ok(())
            });
        }
        let mut child = command
            .spawn()
            .map_err(|e| format!("spawn {} {INIT_SUBCOMMAND}: {e}", exe.display()))?;
        let pid = child
            .id()
            .ok_or("init exited before it could be placed in its cgroup")?;
        // The keeper forks PID 1 only after reading its config, so placing it now puts every
        // process of the world in the cgroup.
        if let Err(err) = self.cgroup.add(pid) {
            let _ = child.start_kill();
            return Err(err.to_string());
        }
        *self.keeper.lock().expect("keeper lock") = Some(pid as i32);
        let mut stdin = child.stdin.take().expect("stdin is piped");
        let stdout = child.stdout.take().expect("stdout is piped");
        let stderr = child.stderr.take().expect("stderr is piped");
        self.spawn_stderr_logger(stderr);
        let (exit_tx, exit_rx) = watch::channel(None);
        *self.exited.lock().expect("exited lock") = Some(exit_rx);
        tokio::spawn(async move {
            let code = match child.wait().await {
                Ok(status) => status.code().unwrap_or(-1),
                Err(_) => -1,
            };
            let _ = exit_tx.send(Some(code));
        });

        let payload = serde_json::to_vec(config).map_err(|e| format!("encode init config: {e}"))?;
        stdin
            .write_all(&payload)
            .await
            .map_err(|e| format!("send init config: {e}"))?;
        drop(stdin);
        let mut lines = BufReader::new(stdout).lines();
        // The keeper already holds the world's network namespace: its network is built while
        // the init builds the rest.
        let (ready, networked) = tokio::join!(
            tokio::time::timeout(START_TIMEOUT, lines.next_line()),
            self.attach_network(pid as i32)
        );
        networked?;
        match ready {
            Ok(Ok(Some(line))) if line == init::READY_LINE => Ok(()),
            Ok(Ok(Some(line))) => Err(format!("unexpected line from init: {line:?}")),
            Ok(Ok(None)) => {
                let code = self.exited().await;
                Err(format!(
                    "init exited before envd was ready (exit code {code:?})"
                ))
            }
            Ok(Err(e)) => Err(format!("read init readiness: {e}")),
            Err(_) => Err(format!(
                "envd not ready within {} s",
                START_TIMEOUT.as_secs()
            )),
        }
    }

    /// Gives the world whose namespace `keeper` holds its veth pair, addresses and routes.
    async fn attach_network(&self, keeper: i32) -> Result<(), String> {
        let network = self.network.lock().expect("network lock").clone();
        let Some((network, block)) = network else {
            return Ok(());
        };
        let egress = self.egress.lock().expect("egress lock").clone();
        network
            .attach(&self.id, keeper, block, &egress)
            .await
            .map_err(|e| format!("network: {e}"))
    }

    /// Replaces the world's egress rules (`PUT /sandboxes/{id}/network`); with no network
    /// (loopback only) they are recorded and have nothing to do. A frozen world's are changed
    /// too; a stopped one's apply when it boots.
    pub async fn set_egress(&self, egress: network::Egress) -> Result<(), WorldError> {
        let old = self.egress.lock().expect("egress lock").clone();
        let network = self.network.lock().expect("network lock").clone();
        let keeper = *self.keeper.lock().expect("keeper lock");
        let running = self
            .exited
            .lock()
            .expect("exited lock")
            .as_ref()
            .is_some_and(|rx| rx.borrow().is_none());
        if let (Some((network, block)), Some(keeper), true) = (network, keeper, running) {
            network
                .update(keeper, block, &old, &egress)
                .await
                .map_err(|e| {
                    WorldError::new(format!("update the network of sandbox {}: {e}", self.id))
                })?;
        }
        *self.egress.lock().expect("egress lock") = egress;
        Ok(())
    }

    /// The world's egress rules as last set.
    pub fn egress(&self) -> network::Egress {
        self.egress.lock().expect("egress lock").clone()
    }

    fn spawn_stderr_logger(&self, stderr: tokio::process::ChildStderr) {
        let tail = self.stderr_tail.clone();
        let id = self.id.clone();
        tokio::spawn(async move {
            let mut lines = BufReader::new(stderr).lines();
            while let Ok(Some(line)) = lines.next_line().await {
                tracing::warn!(sandbox = %id, "{line}");
                let mut tail = tail.lock().expect("stderr tail lock");
                if tail.len() + line.len() < STDERR_TAIL {
                    tail.push_str(&line);
                    tail.push('\n');
                }
            }
        });
    }

    /// `err` of a launch, with what the init said on stderr.
    fn explained(&self, err: String) -> String {
        let tail = self.stderr_tail.lock().expect("stderr tail lock").clone();
        if tail.is_empty() {
            err
        } else {
            format!("{err} ({})", tail.trim())
        }
    }

    /// Freezes every process of the world; returns once all are frozen.
    pub async fn freeze(&self) -> Result<(), WorldError> {
        let cgroup = self.cgroup.clone();
        blocking(move || cgroup.freeze())
            .await
            .map_err(|e| WorldError::new(format!("pause sandbox {}: {e}", self.id)))
    }

    /// Thaws every process of the world.
    pub async fn thaw(&self) -> Result<(), WorldError> {
        let cgroup = self.cgroup.clone();
        blocking(move || cgroup.thaw())
            .await
            .map_err(|e| WorldError::new(format!("resume sandbox {}: {e}", self.id)))
    }

    /// Copies the world's files ([`layout::FILES`]) into `dest` (created), owners, modes,
    /// extended attributes and the overlay's whiteouts included; a copy that fails is removed.
    /// The caller keeps the world still meanwhile (frozen, or stopped) for a consistent copy.
    pub async fn copy_files(&self, dest: PathBuf) -> Result<(), WorldError> {
        let from = self.dirs.dir.clone();
        blocking(move || {
            copy_files(&from, &dest, false).inspect_err(|_| {
                let _ = remove_tree(&dest);
            })
        })
        .await
        .map_err(|e| WorldError::new(format!("copy the files of sandbox {}: {e}", self.id)))
    }

    /// Ends every process of the world (frozen or not) and waits for its init to exit; its files
    /// stay, for [`Self::reboot`] (a filesystem-only pause).
    pub async fn stop(&self) -> Result<(), WorldError> {
        let cgroup = self.cgroup.clone();
        let keeper = *self.keeper.lock().expect("keeper lock");
        let killed = blocking(move || cgroup.kill_all(KILL_DEADLINE, keeper)).await;
        // The overlay is unmounted with the mount namespace, once the keeper has exited.
        let _ = tokio::time::timeout(KILL_DEADLINE, self.exited()).await;
        killed.map_err(|e| WorldError::new(format!("stop sandbox {}: {e}", self.id)))
    }

    /// Boots a stopped world again over the files it kept: a new init, a new envd, no process
    /// of before. Resolves once envd accepts connections.
    pub async fn reboot(&self) -> Result<(), WorldError> {
        *self.cpu.lock().expect("cpu sample lock") = None;
        self.launch().await.map_err(|err| {
            WorldError::new(format!(
                "reboot sandbox {}: {}",
                self.id,
                self.explained(err)
            ))
        })
    }

    /// Kills every process of the world (frozen or not), waits for the init to exit, removes the
    /// cgroup and deletes the sandbox dir (overlay layers, `/tmp`, `/home/user`, socket).
    /// Idempotent. Runs the blocking parts on tokio's blocking pool; dropping the future midway
    /// leaves the rest undone (the server's shutdown sweep removes leftovers on next start).
    pub async fn destroy(&self) -> Result<(), WorldError> {
        let cgroup = self.cgroup.clone();
        let keeper = *self.keeper.lock().expect("keeper lock");
        let killed = blocking(move || cgroup.kill_all_and_remove(KILL_DEADLINE, keeper)).await;
        // The mount namespace (and with it the overlay) is released once its last process,
        // the keeper, has exited; wait for it before deleting the layers.
        let _ = tokio::time::timeout(KILL_DEADLINE, self.exited()).await;
        let network = self.network.lock().expect("network lock").take();
        if let Some((network, block)) = network {
            // The pair goes with the namespace; deleting it here makes sure of it, but a veth's
            // deletion waits for RCU grace periods (milliseconds), so it runs behind the kill.
            // The block is free for another world only once its pair is gone.
            let id = self.id.clone();
            tokio::spawn(async move {
                network.detach(&id).await;
                network.pool.release(block);
            });
        }
        let dir = self.dirs.dir.clone();
        let removed = blocking(move || remove_tree(&dir)).await;
        killed
            .and(removed)
            .map_err(|e| WorldError::new(format!("destroy sandbox {}: {e}", self.id)))
    }

    /// One metrics sample: CPU since the previous sample, memory and disk use now.
    pub async fn sample(
        &self,
        host: &crate::host::HostFacts,
    ) -> Result<metrics::Sample, WorldError> {
        let cgroup = self.cgroup.clone();
        let dirs = [self.dirs.upper(), self.dirs.tmp(), self.dirs.home()];
        let measured = blocking(move || Ok(metrics::measure(&cgroup.pids()?, &dirs)))
            .await
            .map_err(|e| WorldError::new(format!("metrics of sandbox {}: {e}", self.id)))?;
        let mut previous = self.cpu.lock().expect("cpu sample lock");
        Ok(metrics::Sample::new(&measured, &mut previous, host))
    }
}

async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> io::Result<T> + Send + 'static,
) -> io::Result<T> {
    tokio::task::spawn_blocking(f)
        .await
        .map_err(|e| io::Error::other(format!("blocking task: {e}")))?
}

/// Runs `f` on a thread of its own that enters the network namespace of process `pid` first
/// and ends after: no thread of the server's pools ever changes namespace.
async fn in_netns<T: Send + 'static>(
    pid: libc::pid_t,
    f: impl FnOnce() -> io::Result<T> + Send + 'static,
) -> io::Result<T> {
    let (tx, rx) = tokio::sync::oneshot::channel();
    std::thread::Builder::new()
        .name("netns".to_owned())
        .spawn(move || {
            let entered = || -> io::Result<()> {
                let netns = std::fs::File::open(format!("/proc/{pid}/ns/net"))?;
                // SAFETY: setns(2) on a descriptor we own; it changes only this thread, which
                // ends right after `f`.
                if unsafe {
                    libc::setns(std::os::fd::AsRawFd::as_raw_fd(&netns), libc::CLONE_NEWNET)
                } != 0
                {
                    return Err(io::Error::last_os_error());
                }
                Ok(())
            };
            let _ = tx.send(entered().and_then(|()| f()));
        })?;
    rx.await
        .map_err(|_| io::Error::other("the namespace thread ended without an answer"))?
}
