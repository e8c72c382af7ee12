//! Faults between the host and the sandbox: connections to envd that drop
//! mid-command (the supervisor re-attaches: the status still arrives, the
//! output gap is reported, nothing hangs), and spawns whose caller gives up
//! at any point (nothing keeps running).

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use std::time::Duration;

use crate::support::{World, give_up_after, sh, survivors, within};
use bytes::Bytes;
use dsh_e2b_gateway::{OwnerTransport, RelayedBody, envd_options};
use dsh_plugin_api::ErrorKind;
use dsh_plugin_api::owner::Owner;
use dsh_plugin_api::subprocess::{OutputMode, SpawnSpec, SubprocessProvider, TerminalSpec};
use dsh_subprocess_e2b::{Config, E2bSubprocess, OwnerLiveness};
use e2b_client::{ClientTransport, Envd};
use futures::{FutureExt, StreamExt};
use http::{Request, Response};
use http_body::{Body, Frame};
use tokio::sync::watch;

const LIMIT: Duration = Duration::from_secs(30);

/// The owner's transport, with a switch that breaks every response body
/// in flight (as a reset connection would), leaving later requests alone.
#[derive(Clone)]
struct Flaky {
    inner: OwnerTransport,
    epoch: Arc<watch::Sender<u64>>,
}

impl Flaky {
    fn break_all(&self) {
        self.epoch.send_modify(|epoch| *epoch += 1);
    }
}

#[derive(Debug)]
struct Reset;

impl std::fmt::Display for Reset {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("connection reset (test)")
    }
}

impl std::error::Error for Reset {}

struct FlakyBody {
    inner: RelayedBody,
    broken: Pin<Box<dyn Future<Output = ()> + Send>>,
    failed: bool,
}

impl Body for FlakyBody {
    type Data = Bytes;
    type Error = Box<dyn std::error::Error + Send + Sync>;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        if self.failed {
            return Poll::Ready(None);
        }
        if self.broken.as_mut().poll(cx).is_ready() {
            self.failed = true;
            return Poll::Ready(Some(Err(Box::new(Reset))));
        }
        Pin::new(&mut self.inner)
            .poll_frame(cx)
            .map_err(|err| err.to_string().into())
    }
}

impl ClientTransport for Flaky {
    type ResponseBody = FlakyBody;
    type Error = <OwnerTransport as ClientTransport>::Error;

    fn send(
        &self,
        request: Request<connectrpc::client::ClientBody>,
    ) -> connectrpc::client::BoxFuture<'static, Result<Response<FlakyBody>, Self::Error>> {
        let sent = self.inner.send(request);
        let mut epoch = self.epoch.subscribe();
        let start = *epoch.borrow();
        Box::pin(async move {
            let response = sent.await?;
            Ok(response.map(|inner| FlakyBody {
                inner,
                broken: Box::pin(async move {
                    let _ = epoch.wait_for(|now| *now > start).await;
                }),
                failed: false,
            }))
        })
    }
}

fn flaky_provider(world: &World) -> (E2bSubprocess<Flaky>, Flaky) {
    let info = world.owner.info();
    let flaky = Flaky {
        inner: OwnerTransport::new(world.owner.clone()),
        epoch: Arc::new(watch::channel(0).0),
    };
    let provider = E2bSubprocess::new(
        Envd::new(flaky.clone(), envd_options(&info)),
        &info,
        Arc::new(OwnerLiveness::new(world.owner.clone())),
        &Config {
            kill_grace_ms: Some(300),
            ..Config::default()
        },
    )
    .expect("provider");
    (provider, flaky)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dropped_connection_reports_the_gap_and_still_yields_the_status() {
    let world = World::start().await;
    let (provider, flaky) = flaky_provider(&world);
    let piped = provider
        .spawn(sh("echo one; sleep 1; echo two; exit 6"))
        .await
        .expect("spawn");
    let mut collect = sh("echo kept; sleep 1; exit 9");
    collect.stdout = OutputMode::Collect { limit: 64 };
    let collected = provider.spawn(collect).await.expect("spawn");
    let mut terminal_spec = TerminalSpec::new(["sh", "-c", "echo up; sleep 1; exit 5"]);
    terminal_spec.env.insert("TERM".into(), "xterm".into());
    let terminal = provider
        .spawn_terminal(terminal_spec)
        .await
        .expect("terminal");
    let mut stdout = piped.take_stdout().expect("stdout");
    let mut screen = terminal.take_output().expect("output");
    assert_eq!(
        stdout.next().await.expect("one").expect("bytes"),
        &b"one\n"[..]
    );
    assert_eq!(
        screen.next().await.expect("up").expect("bytes"),
        &b"up\r\n"[..]
    );
    tokio::time::sleep(Duration::from_millis(100)).await;

    flaky.break_all();

    let err = within(LIMIT, "the broken pipe", stdout.next())
        .await
        .expect("an item")
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Io, "{err}");
    assert!(
        err.message().contains("the connection to envd broke"),
        "{err}"
    );
    assert!(
        stdout.next().await.is_none(),
        "the stream ends after its error"
    );
    let status = within(LIMIT, "wait (pipe)", piped.wait())
        .await
        .expect("status");
    assert_eq!(
        status.code,
        Some(6),
        "the status comes through the re-attached helper"
    );
    let status = within(LIMIT, "wait (collect)", collected.wait())
        .await
        .expect("status");
    assert_eq!(status.code, Some(9));
    let status = within(LIMIT, "wait (terminal)", terminal.wait())
        .await
        .expect("status");
    assert_eq!(status.code, Some(5));
    let rest: Vec<_> = within(
        LIMIT,
        "the terminal's output ends",
        screen.collect::<Vec<_>>(),
    )
    .await;
    assert!(
        rest.last()
            .is_some_and(|item| item.as_ref().is_err_and(|e| e.kind() == ErrorKind::Io)),
        "the terminal's output ends with the gap: {rest:?}"
    );
    // Everything still works afterwards, and nothing is left behind.
    let again = provider
        .spawn(sh("exit 2"))
        .await
        .expect("spawn after the drop");
    assert_eq!(again.wait().await.expect("wait").code, Some(2));
    for process in [&piped, &collected] {
        process
            .terminate(Duration::from_millis(100))
            .await
            .expect("terminate");
    }
    terminal.terminate().await.expect("terminate");
    within(LIMIT, "dispose", provider.dispose())
        .await
        .expect("dispose");
    assert_eq!(provider.owned(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_spawn_given_up_at_any_point_leaves_nothing_running() {
    let world = World::start().await;
    let provider = world.provider();
    provider.resolve_executable("sh", &[]).await.expect("ready");
    let mut markers = Vec::new();
    for (attempt, delay) in [0u64, 1, 2, 4, 8, 16, 32].into_iter().enumerate() {
        let marker = format!("43.{attempt}{}", std::process::id());
        let future = provider.spawn(SpawnSpec::new(["sleep", &marker])).boxed();
        if let Some(started) = give_up_after(future, delay).await {
            // It started before the caller gave up: it is the caller's.
            started
                .expect("start")
                .terminate(Duration::from_millis(100))
                .await
                .expect("terminate");
        }
        markers.push(marker);
    }
    let left = survivors(&world, &markers).await;
    assert!(
        left.is_empty(),
        "given-up spawns left commands running:\n{left}"
    );
    // A given-up spawn's group is let go once proven empty, which its
    // rollback task does after the caller has moved on.
    let deadline = tokio::time::Instant::now() + LIMIT;
    while provider.owned() > 0 && tokio::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(provider.owned(), 0);
    provider.dispose().await.expect("dispose");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn disposal_during_starts_rolls_them_back() {
    let world = World::start().await;
    let provider = world.provider();
    provider.resolve_executable("sh", &[]).await.expect("ready");
    let starts: Vec<_> = (0..6)
        .map(|i| {
            let provider = provider.clone();
            tokio::spawn(async move {
                provider
                    .spawn(SpawnSpec::new([
                        "sleep",
                        &format!("47.{i}{}", std::process::id()),
                    ]))
                    .await
            })
        })
        .collect();
    tokio::time::sleep(Duration::from_millis(5)).await;
    within(LIMIT, "dispose", provider.dispose())
        .await
        .expect("dispose");
    for start in starts {
        match start.await.expect("join") {
            Ok(process) => {
                // Started before disposal: disposal terminated it.
                process.terminate(Duration::ZERO).await.expect("quiescent");
            }
            Err(err) => assert_eq!(err.kind(), ErrorKind::Closed, "{err}"),
        }
    }
    let table = world.root("ps -e -o stat= -o args=", &[]).await;
    let left: Vec<String> = String::from_utf8_lossy(&table.stdout)
        .lines()
        .filter(|line| {
            !line.starts_with('Z')
                && line.contains(&format!("{}", std::process::id()))
                && line.contains("sleep 47.")
        })
        .map(str::to_owned)
        .collect();
    assert!(left.is_empty(), "starts racing disposal left: {left:?}");
}
