//! Support for the tests against a real e2b-local server (needs root and
//! `cargo build -p e2b-local`): one server and one sandbox per test, the
//! sandbox's cwd and runtime root set up as the `e2b` owner sets them up,
//! and the provider both directly on the sandbox's transport and through an
//! in-process owner (the gateway path dsh uses).

pub mod commands;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use dsh_conformance::{KitOptions, Outcome, Seam, World, cases, run};
use dsh_e2b_gateway::{GatewayOwner, OwnerTransport, envd_options};
use dsh_fs_e2b::{FsE2b, FsE2bPlugin};
use dsh_plugin_api::fs::FsProvider;
use dsh_plugin_api::owner::SandboxInfo;
use e2b_client::{
    Api, ClientTransport, Command, ConnectionOptions, Envd, NewSandbox, ProcessEvent, Sandbox,
    SandboxTransport, StreamOptions,
};
use e2b_local::harness::LocalServer;
use futures::StreamExt;
use http::{Request, Response};
use tokio::sync::watch;

/// The world's cwd in every test sandbox.
pub const CWD: &str = "/home/user/workspace";

/// The owner's private runtime root (root-owned, mode 0700).
pub const RUNTIME_ROOT: &str = "/home/user/workspace/.dsh-e2b";

/// One sandbox, set up as the `e2b` owner sets one up: on its own
/// e2b-local server (dropping the `Env` kills the sandbox and stops the
/// server), or on E2B's real service ([`Env::cloud`]; [`Env::kill`] ends
/// it, its short lifetime otherwise).
pub struct Env {
    pub sandbox: Sandbox,
    pub info: SandboxInfo,
    // Last: stopped after the sandbox handle is gone.
    local: Option<LocalServer>,
}

impl Env {
    /// Starts a server, creates a sandbox and prepares its cwd and runtime
    /// root.
    pub async fn start() -> Env {
        Env::start_with(&[]).await
    }

    /// [`Env::start`] on a server started with `args` (`e2b-local serve
    /// ARGS…`).
    pub async fn start_with(args: &[&str]) -> Env {
        let server = LocalServer::start_with_args(args);
        let api = Api::new(
            ConnectionOptions::default()
                .with_api_key(server.api_key())
                .with_api_url(server.api_url())
                .with_sandbox_url(server.sandbox_url())
                .with_request_timeout(Some(Duration::from_secs(60)))
                .resolve_with(|_| None)
                .expect("the harness URLs and key are valid"),
        );
        Env::on(&api, Some(server), Duration::from_secs(900)).await
    }

    /// A sandbox of E2B's real service (`E2B_API_KEY` and the other
    /// `E2B_*` variables as the SDKs read them), living at most `lifetime`.
    pub async fn cloud(lifetime: Duration) -> Env {
        let api = Api::from_env().expect("E2B_API_KEY and the E2B_* variables are usable");
        Env::on(&api, None, lifetime).await
    }

    async fn on(api: &Api, local: Option<LocalServer>, lifetime: Duration) -> Env {
        let sandbox = Sandbox::create(api, &NewSandbox::new("base").timeout(lifetime))
            .await
            .expect("create a sandbox");
        let info = SandboxInfo {
            sandbox_id: sandbox.id().to_owned(),
            template_id: sandbox.info().template_id.clone(),
            daemon_version: sandbox.info().envd_version.to_string(),
            cwd: CWD.to_owned(),
            runtime_root: RUNTIME_ROOT.to_owned(),
        };
        let env = Env {
            sandbox,
            info,
            local,
        };
        let setup = env
            .run_as(
                "root",
                r#"mkdir -p -- "$1" && chown user:user -- "$1" && mkdir -m 0700 -- "$2""#,
                &[CWD, RUNTIME_ROOT],
            )
            .await;
        assert_eq!(setup.code, 0, "set up the sandbox: {}", setup.stderr_text());
        env
    }

    /// The e2b-local server of this sandbox.
    pub fn server(&self) -> &LocalServer {
        self.local
            .as_ref()
            .expect("this test runs on e2b-local, not on E2B's service")
    }

    /// Kills the sandbox (a cloud one: a local one goes with its server).
    pub async fn kill(&self) {
        self.sandbox.kill().await.expect("kill the sandbox");
    }

    /// The provider directly on the sandbox's transport.
    pub fn direct(&self) -> FsE2b<SandboxTransport> {
        FsE2b::new(self.sandbox.envd().clone(), &self.info).expect("a valid sandbox identity")
    }

    /// An in-process `e2b` owner of the sandbox, serving through the
    /// gateway as `dsh-e2b-owner` does.
    pub fn owner(&self) -> Arc<GatewayOwner> {
        Arc::new(GatewayOwner::new(&self.sandbox, self.info.clone()))
    }

    /// The provider as the plugin builds it: through the owner.
    pub fn through_owner(&self) -> Arc<FsE2b<OwnerTransport>> {
        FsE2bPlugin::from_owner("fs", self.owner())
            .expect("create the plugin")
            .fs()
    }

    /// The fixture command provider of this sandbox (for the kit's
    /// symlinks, modes and FIFOs).
    pub fn commands(&self) -> commands::EnvdCommands {
        commands::EnvdCommands::new(self.sandbox.envd().clone(), CWD)
    }

    /// Runs `sh -c script sh args…` in the sandbox as `user`, to its end.
    pub async fn run_as(&self, user: &str, script: &str, args: &[&str]) -> Ran {
        let command = Command::new("/bin/sh")
            .args(["-c", script, "sh"])
            .args(args.iter().copied())
            .stdin(false);
        let stream = self
            .sandbox
            .envd()
            .start(&command, &StreamOptions::default().user(user))
            .await
            .expect("start a helper command");
        let mut ran = Ran::default();
        let mut stream = stream;
        while let Some(event) = tokio::time::timeout(Duration::from_secs(60), stream.next())
            .await
            .expect("the helper command makes progress")
        {
            match event.expect("no stream error") {
                ProcessEvent::Stdout(bytes) => ran.stdout.extend_from_slice(&bytes),
                ProcessEvent::Stderr(bytes) => ran.stderr.extend_from_slice(&bytes),
                ProcessEvent::Pty(_) => {}
                ProcessEvent::End(status) => ran.code = status.exit_code,
            }
        }
        ran
    }

    /// Runs a helper script as the sandbox's default user and returns its
    /// stdout; it must succeed.
    pub async fn sh(&self, script: &str, args: &[&str]) -> String {
        let ran = self.run_as("user", script, args).await;
        assert_eq!(ran.code, 0, "{script}: {}", ran.stderr_text());
        String::from_utf8(ran.stdout).expect("UTF-8 output")
    }
}

/// What a helper command did.
#[derive(Debug, Default)]
pub struct Ran {
    pub code: i32,
    pub stdout: Vec<u8>,
    pub stderr: Vec<u8>,
}

impl Ran {
    pub fn stderr_text(&self) -> String {
        String::from_utf8_lossy(&self.stderr).into_owned()
    }
}

/// Runs the fs half of the conformance kit on `fs` in `env`'s sandbox (the
/// fixture command provider making what `fs` cannot) and asserts that
/// exactly the kit's fs cases ran and all passed.
pub async fn run_fs_half(env: &Env, fs: Arc<dyn FsProvider>) {
    run_fs_half_and(env, fs, &[]).await;
}

/// [`run_fs_half`] and the cases named in `also` (e.g. a coherence case
/// the fixture commands can serve), all passing.
pub async fn run_fs_half_and(env: &Env, fs: Arc<dyn FsProvider>, also: &[&str]) {
    let world = World {
        fs: Some(fs),
        subprocess: Some(Arc::new(env.commands())),
    };
    let options = KitOptions {
        filter: Some(
            std::iter::once("fs.")
                .chain(also.iter().copied())
                .collect::<Vec<_>>()
                .join(","),
        ),
        ..KitOptions::default()
    };
    let report = run(&world, &options, |case| eprintln!("{case}")).await;
    let expected: Vec<&str> = cases()
        .iter()
        .filter(|case| case.applies(&options))
        .filter(|case| case.seam == Seam::Fs || also.contains(&case.name))
        .map(|case| case.name)
        .collect();
    let ran: Vec<&str> = report.cases.iter().map(|case| case.name).collect();
    assert_eq!(ran, expected, "exactly the kit's fs cases run");
    // Every case passes, the beneath race case included: dsh-fs-e2b answers the world-side
    // operations in the sandbox (dsh-supervisor world), confined by the kernel there.
    let not_passed: Vec<String> = report
        .cases
        .iter()
        .filter(|case| !matches!(case.outcome, Outcome::Passed))
        .map(ToString::to_string)
        .collect();
    assert!(
        not_passed.is_empty(),
        "{} of {} fs cases did not pass:\n{}",
        not_passed.len(),
        report.cases.len(),
        not_passed.join("\n")
    );
    assert!(report.cleanup_errors.is_empty(), "{report}");
}

/// The owner's transport, recording `METHOD path` of every request; it can
/// cut every envd `StreamInput` in flight as a reset connection would, and
/// hold every envd `Remove` back for [`SLOW_REMOVE`] before it goes out.
#[derive(Clone)]
pub struct Recorder {
    inner: OwnerTransport,
    seen: Arc<Mutex<Vec<String>>>,
    cuts: Arc<watch::Sender<u64>>,
    slow_removes: Arc<AtomicBool>,
}

/// How long a `Remove` waits before it is sent, once
/// [`Recorder::slow_removes`] was called.
pub const SLOW_REMOVE: Duration = Duration::from_millis(500);

pub const STREAM_INPUT: &str = "POST /process.Process/StreamInput";
pub const SEND_INPUT: &str = "POST /process.Process/SendInput";
pub const REMOVE: &str = "POST /filesystem.Filesystem/Remove";

impl ClientTransport for Recorder {
    type ResponseBody = <OwnerTransport as ClientTransport>::ResponseBody;
    type Error = <OwnerTransport as ClientTransport>::Error;

    fn send(
        &self,
        request: Request<connectrpc::client::ClientBody>,
    ) -> connectrpc::client::BoxFuture<'static, Result<Response<Self::ResponseBody>, Self::Error>>
    {
        let call = format!("{} {}", request.method(), request.uri().path());
        let cut = call == STREAM_INPUT;
        let slow = call == REMOVE && self.slow_removes.load(Ordering::Relaxed);
        self.seen.lock().unwrap().push(call);
        let sent = self.inner.send(request);
        if slow {
            return Box::pin(async move {
                tokio::time::sleep(SLOW_REMOVE).await;
                sent.await
            });
        }
        if !cut {
            return sent;
        }
        let mut cuts = self.cuts.subscribe();
        let start = *cuts.borrow();
        Box::pin(async move {
            tokio::select! {
                response = sent => response,
                _ = cuts.wait_for(|now| *now > start) => {
                    Err(connectrpc::ConnectError::unavailable("connection reset (test)"))
                }
            }
        })
    }
}

impl Recorder {
    /// What was sent since the last call, in order.
    pub fn take(&self) -> Vec<String> {
        std::mem::take(&mut *self.seen.lock().unwrap())
    }

    /// Fails every `StreamInput` in flight (the request aborted in the
    /// owner); later ones are left alone.
    pub fn cut_input_streams(&self) {
        self.cuts.send_modify(|epoch| *epoch += 1);
    }

    /// Holds every later `Remove` back for [`SLOW_REMOVE`] (a slow link),
    /// so that one left to run after its operation answered is still
    /// pending when the caller looks.
    pub fn slow_removes(&self) {
        self.slow_removes.store(true, Ordering::Relaxed);
    }
}

/// A provider on a [`Recorder`] of the owner's transport.
pub fn recorded_provider(env: &Env) -> (FsE2b<Recorder>, Recorder) {
    let recorder = Recorder {
        inner: OwnerTransport::new(env.owner()),
        seen: Arc::default(),
        cuts: Arc::new(watch::channel(0).0),
        slow_removes: Arc::default(),
    };
    let fs = FsE2b::new(
        Envd::new(recorder.clone(), envd_options(&env.info)),
        &env.info,
    )
    .expect("provider");
    (fs, recorder)
}
