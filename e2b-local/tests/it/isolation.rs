//! Sandbox worlds: isolated from each other and from the host, and nothing of them survives
//! kill, timeout expiry or server shutdown (processes are counted by PID namespace on the host).

use std::path::Path;
use std::time::Duration;

use http::{Method, StatusCode};
use serde_json::json;

use crate::common::{
    self, Api, LocalServer, exec, processes_in, sandbox_cgroup, sandbox_pid_namespaces, unique,
};

#[tokio::test(flavor = "multi_thread")]
async fn sandboxes_cannot_see_each_others_files_or_processes() {
    let server = LocalServer::start();
    let api = Api::new(&server);
    let (a, b) = (api.sandbox().await, api.sandbox().await);
    let marker = unique("marker");
    let setup = format!(
        "echo a > /tmp/{marker}; echo a > /home/user/{marker}; (exec -a {marker} sleep 300) >/dev/null 2>&1 & echo started"
    );
    assert_eq!(exec(&server, &a, None, &setup).await.stdout, "started\n");
    // Counts processes whose argv[0] is the marker (the counting shell's own args do not start with it).
    let count = format!("ps -e -o args= | grep -c '^{marker}'");
    let seen_in_a = exec(&server, &a, None, &format!("cat /tmp/{marker}; {count}")).await;
    assert_eq!(seen_in_a.stdout, "a\n1\n");
    let check = format!("ls /tmp/{marker} /home/user/{marker} 2>&1 | grep -c 'No such'; {count}");
    assert_eq!(
        exec(&server, &b, None, &check).await.stdout,
        "2\n0\n",
        "b sees nothing of a"
    );
    let namespaces_a = sandbox_pid_namespaces(&a);
    let namespaces_b = sandbox_pid_namespaces(&b);
    assert!(
        namespaces_a.is_disjoint(&namespaces_b),
        "each sandbox has its own PID namespace"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn writes_inside_never_reach_the_host() {
    let server = LocalServer::start();
    let api = Api::new(&server);
    let id = api.sandbox().await;
    let name = unique("inside");
    let script = format!(
        "echo x > /etc/{name} && echo x > /root/{name} && echo x > /var/tmp/{name} && echo ok"
    );
    assert_eq!(
        exec(&server, &id, Some("root"), &script).await.stdout,
        "ok\n"
    );
    for dir in ["/etc", "/root", "/var/tmp"] {
        assert!(
            !Path::new(dir).join(&name).exists(),
            "{dir}/{name} appeared on the host"
        );
    }
    // A host file created after the sandbox started is visible inside (the overlay's lower
    // layer is the live host root), and deleting it inside leaves the host's copy alone.
    let host_file = Path::new("/var/tmp").join(format!("{name}-host"));
    std::fs::write(&host_file, "host").unwrap();
    let removed = exec(
        &server,
        &id,
        None,
        &format!("sudo -n rm {} && echo removed", host_file.display()),
    )
    .await;
    let still_there = host_file.exists();
    std::fs::remove_file(&host_file).unwrap();
    assert_eq!(removed.stdout, "removed\n", "{removed:?}");
    assert!(still_there, "deleting inside deleted the host's file");
    let state_dir = server.state_dir().display().to_string();
    let state = exec(
        &server,
        &id,
        Some("root"),
        &format!("ls -A {state_dir} 2>/dev/null | wc -l"),
    )
    .await;
    assert_eq!(
        state.stdout, "0\n",
        "the server's state dir is hidden inside"
    );
    let hidden = exec(
        &server,
        &id,
        Some("root"),
        "ls -A /var/lib/e2b-local 2>/dev/null | wc -l",
    )
    .await;
    assert_eq!(hidden.stdout, "0\n");
}

#[tokio::test(flavor = "multi_thread")]
async fn ps_inside_shows_only_the_sandbox() {
    let server = LocalServer::start();
    let id = Api::new(&server).sandbox().await;
    let ps = exec(&server, &id, None, "ps -e -o pid=,comm=").await;
    let lines: Vec<&str> = ps.stdout.lines().collect();
    assert!(
        lines.iter().any(|l| l.trim_start().starts_with("1 ")),
        "PID 1 is the sandbox init: {lines:?}"
    );
    let host_count = std::fs::read_dir("/proc")
        .unwrap()
        .filter(|e| {
            e.as_ref().is_ok_and(|e| {
                e.file_name()
                    .to_str()
                    .is_some_and(|n| n.parse::<u32>().is_ok())
            })
        })
        .count();
    assert!(
        lines.len() < 10 && host_count > lines.len() * 3,
        "inside: {lines:?}, host: {host_count}"
    );
    let whoami = exec(
        &server,
        &id,
        None,
        "whoami; id -u; echo $HOME; pwd; ls -ld /home/user | awk '{print $3}'",
    )
    .await;
    assert_eq!(whoami.stdout, "user\n1000\n/home/user\n/home/user\nuser\n");
    assert_eq!(
        exec(&server, &id, Some("root"), "whoami").await.stdout,
        "root\n"
    );
    let pty = exec(
        &server,
        &id,
        None,
        "test -c /dev/ptmx && test -c /dev/null && ls /dev/pts | wc -l",
    )
    .await;
    assert_eq!(pty.exit_code, 0, "{pty:?}");
}

async fn assert_world_gone(id: &str, namespaces: &common::Namespaces, state_dir: &Path) {
    let dir = state_dir.join("sandboxes").join(id);
    common::eventually(
        Duration::from_secs(10),
        "the sandbox's cgroup and dir to disappear",
        || sandbox_cgroup(id).is_none() && !dir.exists(),
    )
    .await;
    assert_eq!(
        processes_in(namespaces),
        Vec::<String>::new(),
        "processes of sandbox {id} survived"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn kill_leaves_no_process_and_no_overlay() {
    let server = LocalServer::start();
    let api = Api::new(&server);
    let id = api.sandbox().await;
    exec(&server, &id, None, "for i in 1 2 3; do setsid sleep 300 >/dev/null 2>&1 & done; nohup sleep 300 >/dev/null 2>&1 &").await;
    let namespaces = sandbox_pid_namespaces(&id);
    assert!(
        processes_in(&namespaces).len() >= 5,
        "the sandbox runs its init, envd and the sleeps"
    );
    assert_eq!(api.kill(&id).await, StatusCode::NO_CONTENT);
    assert_world_gone(&id, &namespaces, server.state_dir()).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn paused_sandboxes_are_frozen_and_killable() {
    pause_freezes_resume_thaws_kill_works(LocalServer::start(), None).await;
}

/// The cgroup v2 freezer (`cgroup.freeze`), forced even where v1 exists (hybrid hosts such as
/// these machines mount the v2 hierarchy at `/sys/fs/cgroup/unified`).
#[tokio::test(flavor = "multi_thread")]
async fn the_cgroup_v2_freezer_pauses_resumes_and_kills() {
    let server = LocalServer::start_with_args(&["--freezer", "v2"]);
    pause_freezes_resume_thaws_kill_works(server, Some("cgroup.freeze")).await;
}

/// `freezer_file`: the control file the sandbox's cgroup must have, when a version is forced.
async fn pause_freezes_resume_thaws_kill_works(server: LocalServer, freezer_file: Option<&str>) {
    let api = Api::new(&server);
    let id = api.sandbox().await;
    if let Some(file) = freezer_file {
        let cgroup = sandbox_cgroup(&id).expect("sandbox cgroup");
        assert!(
            cgroup.join(file).exists(),
            "{} has no {file}",
            cgroup.display()
        );
    }
    exec(&server, &id, None, "echo kept > /tmp/state; date +%s%N > /tmp/tick; (while true; do date +%s%N > /tmp/tick; sleep 0.05; done) >/dev/null 2>&1 &").await;
    api.call(Method::POST, &format!("/sandboxes/{id}/pause"), "")
        .await;
    let tick = sandbox_file(&server, &id, "tmp/tick");
    let frozen = std::fs::read(&tick).unwrap();
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(
        std::fs::read(&tick).unwrap(),
        frozen,
        "nothing runs while paused"
    );
    let resumed = api
        .call(
            Method::POST,
            &format!("/sandboxes/{id}/connect"),
            r#"{"timeout":30}"#,
        )
        .await;
    assert_eq!(resumed.status, StatusCode::CREATED);
    assert_eq!(
        exec(&server, &id, None, "cat /tmp/state").await.stdout,
        "kept\n"
    );
    common::eventually(Duration::from_secs(5), "the loop to tick again", || {
        std::fs::read(&tick).unwrap() != frozen
    })
    .await;
    api.call(Method::POST, &format!("/sandboxes/{id}/pause"), "")
        .await;
    let namespaces = sandbox_pid_namespaces(&id);
    assert_eq!(
        api.kill(&id).await,
        StatusCode::NO_CONTENT,
        "a paused sandbox can be killed"
    );
    assert_world_gone(&id, &namespaces, server.state_dir()).await;
}

/// Host path of a file in the sandbox's private `/tmp` (a dir in the server's state dir).
fn sandbox_file(server: &LocalServer, id: &str, rel: &str) -> std::path::PathBuf {
    let rel = rel
        .strip_prefix("tmp/")
        .expect("only /tmp files are mapped");
    server
        .state_dir()
        .join("sandboxes")
        .join(id)
        .join("tmp")
        .join(rel)
}

#[tokio::test(flavor = "multi_thread")]
async fn timeout_expiry_leaves_no_process() {
    let server = LocalServer::start();
    let api = Api::new(&server);
    let created = api
        .create(json!({"templateID": "base", "timeout": 2}))
        .await;
    let id = created["sandboxID"].as_str().unwrap().to_owned();
    exec(
        &server,
        &id,
        None,
        "setsid sleep 300 >/dev/null 2>&1 & echo",
    )
    .await;
    let namespaces = sandbox_pid_namespaces(&id);
    assert_world_gone(&id, &namespaces, server.state_dir()).await;
    assert_eq!(api.info(&id).await.status, StatusCode::NOT_FOUND);
}

#[tokio::test(flavor = "multi_thread")]
async fn server_shutdown_leaves_no_process() {
    let server = LocalServer::start();
    let api = Api::new(&server);
    let ids = [api.sandbox().await, api.sandbox().await];
    let paused = api.sandbox().await;
    api.call(Method::POST, &format!("/sandboxes/{paused}/pause"), "")
        .await;
    let mut namespaces = common::Namespaces::default();
    for id in ids.iter().chain([&paused]) {
        exec_if_running(&server, id).await;
        namespaces.extend(sandbox_pid_namespaces(id));
    }
    assert_eq!(namespaces.len(), 3);
    let status = server.stop();
    assert!(status.success(), "SIGTERM exits cleanly: {status}");
    assert_eq!(
        processes_in(&namespaces),
        Vec::<String>::new(),
        "sandbox processes survived shutdown"
    );
    for id in ids.iter().chain([&paused]) {
        assert!(
            sandbox_cgroup(id).is_none(),
            "cgroup of {id} survived shutdown"
        );
    }
}

async fn exec_if_running(server: &LocalServer, id: &str) {
    let reply = Api::new(server).info(id).await.json();
    if reply["state"] == json!("running") {
        exec(server, id, None, "setsid sleep 300 >/dev/null 2>&1 &").await;
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_crashed_server_takes_its_worlds_with_it() {
    let server = LocalServer::start();
    let api = Api::new(&server);
    let id = api.sandbox().await;
    exec(&server, &id, None, "setsid sleep 300 >/dev/null 2>&1 &").await;
    let namespaces = sandbox_pid_namespaces(&id);
    let cgroup = sandbox_cgroup(&id).expect("sandbox cgroup");
    // SAFETY: kill(2) on the server process this test started.
    unsafe { libc::kill(server.pid() as libc::pid_t, libc::SIGKILL) };
    common::eventually(
        Duration::from_secs(10),
        "the world to die with its server",
        || processes_in(&namespaces).is_empty(),
    )
    .await;
    // The next server to start sweeps the dead server's (now empty) cgroups.
    let _next = LocalServer::start();
    assert!(
        !cgroup.exists(),
        "{} survived the next server's start",
        cgroup.display()
    );
    drop(server);
}

/// A root command signalling its own process group (`kill -TERM 0`) reaches only its sandbox:
/// every world leads a session of its own, so the server and other sandboxes never share a
/// process group with sandbox processes.
#[tokio::test(flavor = "multi_thread")]
async fn signalling_its_own_process_group_cannot_reach_the_server() {
    let server = LocalServer::start();
    let api = Api::new(&server);
    let (victim, bystander) = (api.sandbox().await, api.sandbox().await);
    let host_group = exec(&server, &victim, Some("root"), "ps -o pgid= -p $$").await;
    let server_group = std::fs::read_to_string(format!("/proc/{}/stat", server.pid()))
        .unwrap()
        .rsplit(')')
        .next()
        .and_then(|rest| rest.split_whitespace().nth(2).map(str::to_owned))
        .unwrap();
    assert_ne!(host_group.stdout.trim(), "", "{host_group:?}");
    // The command may not see its own end (the signal can take envd down with it), so a
    // failed stream is expected here: only what happens around it matters.
    let kill = std::panic::AssertUnwindSafe(exec(
        &server,
        &victim,
        Some("root"),
        "kill -TERM 0; sleep 1",
    ));
    let _ = tokio::time::timeout(
        Duration::from_secs(10),
        futures::FutureExt::catch_unwind(kill),
    )
    .await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(
        Path::new(&format!("/proc/{}", server.pid())).exists(),
        "the server (group {server_group}) survived"
    );
    assert_eq!(
        exec(&server, &bystander, None, "echo alive").await.stdout,
        "alive\n",
        "another sandbox keeps working"
    );
    assert_eq!(
        api.call(Method::GET, "/v2/sandboxes", "").await.status,
        StatusCode::OK,
        "the control plane keeps serving"
    );
}
