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
    // The background `exec -a` may not have happened yet when `started` is printed (a loaded
    // machine showed 0): in a, wait up to 5 s for it.
    let awaited = format!(
        "for _ in $(seq 50); do n=$({count}); [ \"$n\" = 1 ] && break; sleep 0.1; done; echo \"$n\""
    );
    let seen_in_a = exec(&server, &a, None, &format!("cat /tmp/{marker}; {awaited}")).await;
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
        "the sandbox's cgroup, dir and veth pair to disappear",
        || sandbox_cgroup(id).is_none() && !dir.exists() && !host_veth(id).exists(),
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
    assert!(host_veth(&id).exists(), "the sandbox has its veth pair");
    assert_eq!(api.kill(&id).await, StatusCode::NO_CONTENT);
    assert_world_gone(&id, &namespaces, server.state_dir()).await;
}

/// The host end of sandbox `id`'s veth pair, in sysfs.
fn host_veth(id: &str) -> std::path::PathBuf {
    Path::new("/sys/class/net").join(e2b_local::world::network::Network::host_if(id))
}

/// A DELETE whose client disconnects at once (`curl -m 0.005`) still tears the world down: the
/// server finishes the teardown on its own task and logs it.
#[tokio::test(flavor = "multi_thread")]
async fn a_kill_whose_client_disconnects_still_tears_down() {
    let server = LocalServer::start();
    let api = Api::new(&server);
    let id = api.sandbox().await;
    exec(&server, &id, None, "setsid sleep 300 >/dev/null 2>&1 &").await;
    let namespaces = sandbox_pid_namespaces(&id);
    // Give the server time to start the teardown, then go away without reading the answer.
    send_and_leave(&server, "DELETE", &format!("/sandboxes/{id}"), "", 5).await;
    assert_world_gone(&id, &namespaces, server.state_dir()).await;
    let sandbox_dir = server.state_dir().join("sandboxes").join(&id);
    assert_eq!(
        mounts_of(&sandbox_dir),
        0,
        "mounts of {} survived",
        sandbox_dir.display()
    );
    common::eventually(Duration::from_secs(5), "the kill to be logged", || {
        server
            .log()
            .lines()
            .any(|l| l.contains(&id) && l.contains("sandbox killed"))
    })
    .await;
    assert_eq!(api.info(&id).await.status, StatusCode::NOT_FOUND);
}

/// Sends one API request on a raw connection and closes it `after_ms` later without reading the
/// answer, as a client that is killed or times out does.
async fn send_and_leave(server: &LocalServer, method: &str, path: &str, body: &str, after_ms: u64) {
    use tokio::io::AsyncWriteExt;
    let address = server.api_url().strip_prefix("http://").unwrap();
    let mut stream = tokio::net::TcpStream::connect(address).await.unwrap();
    let request = format!(
        "{method} {path} HTTP/1.1\r\nHost: {address}\r\nX-API-KEY: {}\r\n\
         Content-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        server.api_key(),
        body.len()
    );
    stream.write_all(request.as_bytes()).await.unwrap();
    tokio::time::sleep(Duration::from_millis(after_ms)).await;
    drop(stream);
}

/// Whether the sandbox's freezer holds it frozen (cgroup v1 `freezer.state`, v2
/// `cgroup.freeze`).
fn frozen(id: &str) -> bool {
    let cgroup = sandbox_cgroup(id).expect("sandbox cgroup");
    match std::fs::read_to_string(cgroup.join("freezer.state")) {
        Ok(state) => state.trim() != "THAWED",
        Err(_) => {
            std::fs::read_to_string(cgroup.join("cgroup.freeze"))
                .expect("freezer")
                .trim()
                == "1"
        }
    }
}

/// A pause or a connect whose client leaves at any moment still completes or never starts:
/// once the server is done, the state it reports and the sandbox's freezer agree (paused ⇔
/// frozen), and the sandbox still pauses, resumes and runs commands.
#[tokio::test(flavor = "multi_thread")]
async fn a_pause_or_connect_whose_client_leaves_leaves_state_and_freezer_agreeing() {
    let server = LocalServer::start();
    let api = Api::new(&server);
    let id = api.sandbox().await;
    let state = |reply: common::Reply| {
        reply.json()["state"]
            .as_str()
            .unwrap_or_default()
            .to_owned()
    };
    for after_ms in [0, 1, 2, 3, 5, 8, 13] {
        for (path, body) in [("pause", ""), ("connect", r#"{"timeout":60}"#)] {
            send_and_leave(
                &server,
                "POST",
                &format!("/sandboxes/{id}/{path}"),
                body,
                after_ms,
            )
            .await;
            // A change left behind may still be under way: the two must come to agree (a
            // change stopped halfway would leave them disagreeing for good).
            let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
            let (mut last, mut agreed) = (String::new(), false);
            while !agreed && tokio::time::Instant::now() < deadline {
                last = state(api.info(&id).await);
                agreed = (last == "paused") == frozen(&id);
                if !agreed {
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            }
            assert!(
                agreed,
                "{path} left after {after_ms} ms: the server says {last}, the freezer disagrees"
            );
        }
    }
    // Whatever happened, it still works.
    if state(api.info(&id).await) == "paused" {
        api.call(
            Method::POST,
            &format!("/sandboxes/{id}/connect"),
            r#"{"timeout":60}"#,
        )
        .await;
    }
    assert_eq!(
        exec(&server, &id, None, "echo alive").await.stdout,
        "alive\n"
    );
}

/// Mounts under `dir` in the mount namespace of any process on the host.
fn mounts_of(dir: &Path) -> usize {
    let dir = dir.display().to_string();
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter(|e| {
            e.file_name()
                .to_str()
                .is_some_and(|n| n.parse::<u32>().is_ok())
        })
        .filter_map(|e| std::fs::read_to_string(e.path().join("mountinfo")).ok())
        .map(|info| info.lines().filter(|l| l.contains(&dir)).count())
        .sum()
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
    for id in ids.iter().chain([&paused]) {
        assert!(host_veth(id).exists(), "{id} has its veth pair");
    }
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
        // The kernel removes a pair with its namespace, asynchronously.
        common::eventually(Duration::from_secs(10), "the veth pair to go", || {
            !host_veth(id).exists()
        })
        .await;
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

/// The host's addresses, as `ip -o addr` prints them.
/// The host's addresses (`ip -o addr`), but those of sandboxes' veth pairs, which tests running
/// alongside add and remove.
fn host_addresses() -> String {
    let out = std::process::Command::new("ip")
        .args(["-o", "addr"])
        .output()
        .expect("run ip -o addr on the host");
    String::from_utf8(out.stdout)
        .expect("ip output is UTF-8")
        .lines()
        .filter(|line| {
            line.split_whitespace()
                .nth(1)
                .is_none_or(|name| !name.starts_with("e2bl"))
        })
        .map(|line| format!("{line}\n"))
        .collect()
}

/// Root inside (through the sandbox's passwordless sudo) works on the sandbox's own network
/// namespace: adding an address changes nothing on the host.
#[tokio::test(flavor = "multi_thread")]
async fn root_inside_cannot_add_an_address_to_the_hosts_interfaces() {
    let server = LocalServer::start();
    let id = Api::new(&server).sandbox().await;
    let before = host_addresses();
    let address = "10.254.254.254";
    let tried = exec(
        &server,
        &id,
        None,
        &format!("sudo -n id -u; sudo -n ip addr add {address}/32 dev lo; echo rc=$?"),
    )
    .await;
    let after = host_addresses();
    if after.contains(address) {
        // Leave the host as it was before failing.
        let _ = std::process::Command::new("ip")
            .args(["addr", "del", &format!("{address}/32"), "dev", "lo"])
            .status();
    }
    assert!(
        tried.stdout.starts_with("0\n"),
        "sudo works inside: {tried:?}"
    );
    assert_eq!(before, after, "the host's addresses changed: {tried:?}");
}

/// Capabilities of a root process inside, `CapEff` and `CapBnd` (as hex masks), for root asked
/// for directly and root reached through sudo.
#[tokio::test(flavor = "multi_thread")]
async fn root_inside_holds_no_capability_over_the_host() {
    let server = LocalServer::start();
    let id = Api::new(&server).sandbox().await;
    let script = "grep -E '^Cap(Eff|Bnd):' /proc/self/status";
    let direct = exec(&server, &id, Some("root"), script).await;
    let sudo = exec(&server, &id, None, &format!("sudo -n {script}")).await;
    for (how, out) in [("root", &direct), ("sudo", &sudo)] {
        let masks: Vec<u64> = out
            .stdout
            .lines()
            .map(|l| u64::from_str_radix(l.split_whitespace().nth(1).unwrap(), 16).unwrap())
            .collect();
        assert_eq!(masks.len(), 2, "{how}: {out:?}");
        assert_ne!(masks[0], 0, "{how}: root keeps its ordinary capabilities");
        // SYS_MODULE 16, SYS_RAWIO 17, SYS_ADMIN 21, SYS_TIME 25, NET_ADMIN 12, MKNOD 27,
        // DAC_READ_SEARCH 2.
        for (cap, name) in [
            (16, "SYS_MODULE"),
            (17, "SYS_RAWIO"),
            (21, "SYS_ADMIN"),
            (25, "SYS_TIME"),
            (12, "NET_ADMIN"),
            (27, "MKNOD"),
            (2, "DAC_READ_SEARCH"),
        ] {
            for mask in &masks {
                assert_eq!(mask & (1 << cap), 0, "{how} holds CAP_{name}: {out:?}");
            }
        }
    }
}

/// The host's secrets stay out even of root inside: root's home (keys, history, credentials),
/// other users' homes and the password hashes are the sandbox's own — a fresh `/root` and `/home`
/// holding only `user`, every account locked in `/etc/shadow` — while `user`'s home is as E2B's.
#[tokio::test(flavor = "multi_thread")]
async fn the_hosts_homes_and_password_hashes_stay_out() {
    let marker = unique("host-secret");
    let root_marker = Path::new("/root").join(&marker);
    let other_home = Path::new("/home").join(&marker);
    std::fs::write(&root_marker, "secret").unwrap();
    std::fs::create_dir_all(&other_home).unwrap();
    let server = LocalServer::start();
    let id = Api::new(&server).sandbox().await;
    let seen = exec(
        &server,
        &id,
        Some("root"),
        "ls -A /root /home; stat -c '%U %a' /root /home/user; cut -d: -f2 /etc/shadow | sort -u",
    )
    .await;
    std::fs::remove_file(&root_marker).unwrap();
    std::fs::remove_dir(&other_home).unwrap();
    assert!(
        !seen.stdout.contains(&marker),
        "a host home shows inside: {seen:?}"
    );
    assert!(
        seen.stdout.contains("/home:\nuser\n"),
        "/home holds only user: {seen:?}"
    );
    assert!(seen.stdout.contains("root 700\nuser 755\n"), "{seen:?}");
    let hashes: Vec<&str> = seen
        .stdout
        .lines()
        .skip_while(|l| !l.starts_with("user "))
        .skip(1)
        .collect();
    assert!(
        !hashes.is_empty() && hashes.iter().all(|h| ["*", "!", "!*", ""].contains(h)),
        "every account is locked inside: {hashes:?}"
    );
}

/// No e2b-local state dir is visible inside: not this server's (with its other sandboxes'
/// overlays), not another running instance's — started before the sandbox or after it —, not
/// the default one, not the instance list.
#[tokio::test(flavor = "multi_thread")]
async fn no_state_dir_of_any_instance_is_visible_inside() {
    // On the host root's own filesystem (the system temp dir never shows: /tmp is private).
    let parent = Path::new("/var/tmp");
    let other = LocalServer::start_in(parent, &[]);
    let other_api = Api::new(&other);
    let other_id = other_api.sandbox().await;
    let marker = unique("secret");
    exec(
        &other,
        &other_id,
        None,
        &format!("echo x > /home/user/{marker}"),
    )
    .await;
    let server = LocalServer::start_in(parent, &[]);
    let api = Api::new(&server);
    let (id, sibling) = (api.sandbox().await, api.sandbox().await);
    exec(
        &server,
        &sibling,
        None,
        &format!("echo x > /home/user/{marker}"),
    )
    .await;
    let later = LocalServer::start_in(parent, &[]);
    let later_id = Api::new(&later).sandbox().await;
    exec(
        &later,
        &later_id,
        None,
        &format!("echo x > /home/user/{marker}"),
    )
    .await;
    let mut paths = vec![
        later.state_dir().to_path_buf(),
        later.state_dir().join("sandboxes").join(&later_id),
        server.state_dir().to_path_buf(),
        server.state_dir().join("sandboxes").join(&sibling),
        other.state_dir().to_path_buf(),
        other.state_dir().join("sandboxes").join(&other_id),
        "/run/e2b-local".into(),
    ];
    paths.retain(|p| p.exists());
    assert!(paths.len() >= 6, "the host has the dirs: {paths:?}");
    let list: Vec<String> = paths.iter().map(|p| p.display().to_string()).collect();
    let script = format!(
        "for d in {}; do ls -A $d 2>/dev/null | wc -l; done; find {} -name {marker} 2>/dev/null | wc -l",
        list.join(" "),
        list.join(" ")
    );
    let seen = exec(&server, &id, Some("root"), &script).await;
    let expected = format!("{}0\n", "0\n".repeat(list.len()));
    assert_eq!(seen.stdout, expected, "seen inside, for {list:?}: {seen:?}");
}

/// The sandbox has its own loopback: it works inside, and a listener on the host's loopback
/// is out of reach.
#[tokio::test(flavor = "multi_thread")]
async fn the_hosts_loopback_is_out_of_reach() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let server = LocalServer::start();
    let id = Api::new(&server).sandbox().await;
    let script = format!(
        "sudo -n bash -c 'exec 3<>/dev/tcp/127.0.0.1/{port}' 2>/dev/null && echo host-reached || echo host-unreachable; \
         /usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind((\"127.0.0.1\",0)); s.listen(); socket.create_connection(s.getsockname()); print(\"own-loopback\")'"
    );
    let seen = exec(&server, &id, None, &script).await;
    assert_eq!(seen.stdout, "host-unreachable\nown-loopback\n", "{seen:?}");
}

/// Root inside cannot mount: not over host paths the overlay shows, not a fresh filesystem.
#[tokio::test(flavor = "multi_thread")]
async fn root_inside_cannot_mount() {
    let server = LocalServer::start();
    let id = Api::new(&server).sandbox().await;
    let script = "mount -t tmpfs tmpfs /etc 2>/dev/null; echo tmpfs=$?; \
                  mount --bind /tmp /usr 2>/dev/null; echo bind=$?; \
                  sudo -n mount -t proc proc /mnt 2>/dev/null; echo sudo=$?; test -e /etc/passwd && echo etc-intact";
    let seen = exec(&server, &id, Some("root"), script).await;
    let codes: Vec<&str> = seen.stdout.lines().collect();
    assert_eq!(codes.len(), 4, "{seen:?}");
    for line in &codes[..3] {
        assert!(!line.ends_with("=0"), "a mount succeeded: {seen:?}");
    }
    assert_eq!(codes[3], "etc-intact");
}
