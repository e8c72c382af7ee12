//! The decorator in-process: its plugin created over `dsh-subprocess-local`
//! through the rlibs, no library loaded.

use std::sync::Arc;

use dsh_conformance::{KitOptions, World, run};
use dsh_example_subprocess_audit::SubprocessAudit;
use dsh_plugin_api::subprocess::{SpawnSpec, SubprocessProvider};
use dsh_plugin_api::{CreateContext, ErrorKind, Injected, Plugin, Service};
use dsh_subprocess_local::SubprocessLocalPlugin;
use serde_json::json;

use crate::support::{events, exit_of};

/// The decorator over `dsh-subprocess-local`, both created as a host
/// would; [`Audited::dispose`] ends them in reverse order, as a host does.
struct Audited {
    local: SubprocessLocalPlugin,
    audit: SubprocessAudit,
    subprocess: Arc<dyn SubprocessProvider>,
}

impl Audited {
    async fn create(config: serde_json::Value) -> Audited {
        let ctx = |id: &str, config, services| CreateContext {
            id: id.into(),
            config,
            services: Injected::new(services),
        };
        let local = SubprocessLocalPlugin::create(ctx("local", json!(null), vec![]))
            .await
            .expect("local");
        let audit = SubprocessAudit::create(ctx("audit", config, local.services()))
            .await
            .expect("audit");
        let subprocess = match audit.services().as_slice() {
            [Service::Subprocess(subprocess)] => subprocess.clone(),
            other => panic!("one subprocess service, got {other:?}"),
        };
        Audited {
            local,
            audit,
            subprocess,
        }
    }

    /// Disposes the decorator, then the provider it decorates.
    async fn dispose(self) {
        self.audit.dispose().await.expect("dispose audit");
        self.local.dispose().await.expect("dispose local");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn denied_programs_never_start_and_every_exit_is_audited_unwaited() {
    let dir = tempfile::tempdir().expect("tempdir");
    let log = dir.path().join("audit.jsonl");
    let victim = dir.path().join("victim");
    std::fs::write(&victim, "kept").expect("write");
    let audited = Audited::create(json!({"deny": ["rm"], "auditLog": log})).await;
    let subprocess = &audited.subprocess;

    for program in ["rm", "/bin/rm"] {
        let argv = [program, victim.to_str().expect("UTF-8")];
        let err = subprocess
            .spawn(SpawnSpec::new(argv))
            .await
            .err()
            .expect("denied");
        assert_eq!(err.kind(), ErrorKind::PermissionDenied);
        assert_eq!(err.message(), "spawn: `rm` is denied by `audit`");
        assert_eq!(err.subject(), Some(program));
    }
    assert!(victim.exists(), "nothing ran");

    // Nobody waits on this one: its exit is audited all the same.
    let process = subprocess
        .spawn(SpawnSpec::new(["sh", "-c", "exit 3"]))
        .await
        .expect("spawn");
    let exit = exit_of(&log, &["sh", "-c", "exit 3"]).await;
    assert_eq!(exit["pid"], process.pid());
    assert_eq!(exit["status"]["code"], 3);
    assert_eq!(exit["terminal"], false);
    let kinds: Vec<String> = events(&log)
        .iter()
        .map(|event| event["event"].as_str().expect("event").to_owned())
        .collect();
    assert_eq!(kinds, ["deny", "deny", "start", "exit"]);
    // The caller's own wait is unaffected by the watcher's.
    assert_eq!(process.wait().await.expect("wait").code, Some(3));
    audited.dispose().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn in_process_it_passes_the_kit() {
    let audited = Audited::create(json!({"deny": ["nonexistent-tool"]})).await;
    let world = World {
        fs: None,
        subprocess: Some(audited.subprocess.clone()),
    };
    let report = run(&world, &KitOptions::default(), |case| println!("{case}")).await;
    println!("{report}");
    assert!(report.is_success(), "{report}");
    assert!(report.passed() >= 20, "the subprocess cases ran: {report}");
    // The kit's spill case made the provider's spill directory; disposal removes it.
    let spills = audited
        .local
        .provider()
        .spill_dir()
        .expect("a spill directory");
    audited.dispose().await;
    assert!(
        !spills.exists(),
        "{} outlived the disposal",
        spills.display()
    );
}
